"""The server side: a generic driver running any rfl_fast algorithm's exchanges over a link.

:func:`run_federation` is :func:`rfl_fast.federation.run`'s round loop with the client work
sent over the network instead of computed in place. Per round ``t`` it

1. draws the participants ``S_t`` from the participation stream -- the same draw as the
   engine, so the same seed picks the same clients;
2. runs the algorithm's exchanges (:mod:`rfl_fast.algorithms.base`): the optional prepare
   exchange (to ``prepare_recipients(n, S_t)``, e.g. RFedSVRG's full gradient from all n
   clients), the main exchange (``broadcast``/``server_prepare`` message -> ``client_update``
   on every participant -> ``server_update``) and the optional finalize notification
   (RFedProj's ``xhat_{r+1}``, from which the clients update their correction ``c_i``, kept on
   the clients);
3. checks every upload on arrival (:func:`rfl_fast.flower.codec.check_arrays`: manifold
   named, shape, dtype, finiteness, on the manifold / tangent at ``x_t`` within ``atol``) and
   aggregates the accepted ones: a client that fails, does not answer within ``timeout`` or
   whose upload is rejected is left out of the round's aggregation (its weight renormalized
   away, as a non-participant), with the reason logged and kept in the round's ``events``;
   a round where no upload is accepted keeps the server state (as the engine does for an
   empty round);
4. records the round (accounting, privacy columns of ``history_row``, optional metrics) and
   the server's model ``algorithm.point``.

With no failures, the iterates equal the engine's (same participants, same client random
streams ``(seed, t, i)``, the same server hooks on the same numbers) up to rounding; a run
whose clients drop out equals the engine run whose participation returns the clients that
answered.

The server never sees data: it knows each client's id, sample count and manifold from a
``hello`` query at start (:class:`RemoteProblem` stands in for the problem in the server
hooks, which only read ``manifold``, ``sizes`` and ``weights``).

Links: :class:`FlowerLink` (a Flower ``Grid``, used by :func:`server_app`) and
:class:`InProcessLink` (calls :func:`rfl_fast.flower.client.handle` in this process, for
tests and debugging of the protocol without Flower).
"""

import copy
import json
import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .._files import atomic_write
from ..algorithms._checks import check_point_arg
from ..federation.engine import first_message
from ..federation.context import (STREAM_INIT, STREAM_PARTICIPATION, STREAM_SERVER,
                                  ServerContext, resolve_seed, stream)
from ..problems.base import Problem
from .client import SETTINGS_PREFIX, handle
from .codec import check_arrays, kinds_of, manifold_from_spec, pack
from .spec import FederationConfig

__all__ = ["run_federation", "FederationResult", "RemoteProblem", "Failure", "InProcessLink",
           "FlowerLink", "server_app"]

logger = logging.getLogger("rfl_fast.flower")


class Failure(str):
    """A client's failed exchange: the reason (no reply, an error raised on the client)."""


class RemoteProblem(Problem):
    """The server's view of a federated problem whose data lives on the clients: the
    manifold, the clients' sample counts and weights, and no data (``rgrad`` raises)."""

    def __init__(self, manifold, sizes, weighting="uniform"):
        super().__init__(sizes, weighting)
        self.manifold = manifold

    def rgrad(self, idx, x, batch=None):
        raise RuntimeError("RemoteProblem: the data lives on the clients; the server cannot "
                           "evaluate gradients")

    def loss(self, idx, x):
        return self.rgrad(idx, x)


# ---------------------------------------------------------------------------- links

class InProcessLink:
    """Clients served in this process by :func:`~rfl_fast.flower.client.handle`.

    Parameters
    ----------
    run_config : mapping
        The run config every client sees.
    node_configs : list of mapping
        One node config per client node (``{"partition-id": i}``); node ids are
        ``1000 + position``.

    Each node's store is committed only when the client returns (as Flower keeps a node's
    ``context.state`` only from a successful ClientApp call). Every content is copied in both
    directions. ``silence(node)`` makes a node stop answering (a crashed machine).
    """

    def __init__(self, run_config, node_configs):
        self.run_config = dict(run_config)
        self.node_configs = {1000 + j: dict(c) for j, c in enumerate(node_configs)}
        self.stores = {node: {} for node in self.node_configs}
        self.silent = set()

    def nodes(self):
        return sorted(self.node_configs)

    def silence(self, node):
        self.silent.add(node)

    def exchange(self, requests, timeout):
        out = {}
        for node, phase, content in requests:
            if node in self.silent:
                continue
            store = copy.deepcopy(self.stores[node])
            try:
                reply = handle(copy.deepcopy(content), store, self.node_configs[node],
                               self.run_config)
            except Exception as exc:  # noqa: BLE001 - a client error is a failed exchange
                out[node] = Failure(f"{type(exc).__name__}: {exc}")
                continue
            self.stores[node] = store
            out[node] = copy.deepcopy(reply)
        for node, _, _ in requests:
            out.setdefault(node, Failure(f"no reply within {timeout:g} s"))
        return out


class FlowerLink:
    """Exchanges over a Flower ``Grid`` (inside a ServerApp)."""

    def __init__(self, grid):
        self.grid = grid

    def nodes(self):
        return sorted(int(n) for n in self.grid.get_node_ids())

    def exchange(self, requests, timeout):
        from flwr.app import Message

        from .records import from_recorddict, to_recorddict

        msgs = []
        for node, phase, content in requests:
            mtype = "query.rfl_hello" if phase == "hello" else f"train.rfl_{phase}"
            group = str(content.get("config", {}).get("round", "hello"))
            msgs.append(Message(to_recorddict(content), dst_node_id=int(node),
                                message_type=mtype, group_id=group))
        out = {}
        for r in self.grid.send_and_receive(msgs, timeout=timeout):
            node = int(r.metadata.src_node_id)
            if r.has_error():
                out[node] = Failure(f"error {r.error.code}: {r.error.reason}")
            else:
                out[node] = from_recorddict(r.content)
        for node, _, _ in requests:
            out.setdefault(int(node), Failure(f"no reply within {timeout:g} s"))
        return out


# ---------------------------------------------------------------------------- driver

@dataclass
class FederationResult:
    """Outcome of :func:`run_federation`.

    Attributes
    ----------
    x : ndarray
        The algorithm's output (``algorithm.output``).
    iterates : ndarray, shape (rounds + 1, *M.shape)
        ``algorithm.point`` at the start and after every round.
    history : list of dict
        One row per round (row 0: the initial point): ``round``, ``n_participants`` (drawn),
        ``n_answered`` (accepted uploads of the main exchange), ``n_rejected``, ``n_failed``,
        ``floats_up``/``floats_down``/``bytes_up``/``bytes_down`` (algorithm messages only),
        ``cpu_server``, ``cpu_clients_max`` (the largest CPU time a client reported),
        ``wall``, ``events`` (reasons of failures and rejections), metrics and the
        algorithm's extra columns (PriRFed: privacy spent).
    events : list of str
        Every failure and rejection, ``"round t: client i: ..."``.
    algorithm, seed, rounds, x0, state
        As in :class:`rfl_fast.federation.Result`.
    clients : dict of int to int
        Client id -> Flower node id.
    participants : list of ndarray
        Per round, the clients whose main upload was aggregated.
    """

    x: np.ndarray
    iterates: np.ndarray
    history: list
    events: list
    algorithm: object
    seed: int
    rounds: int
    x0: np.ndarray
    state: object
    clients: dict
    participants: list = field(default_factory=list)

    def save(self, directory):
        """Write ``result.npz`` (x, x0, iterates) and ``history.json`` to ``directory``."""
        os.makedirs(directory, exist_ok=True)
        np.savez(os.path.join(directory, "result.npz"), x=self.x, x0=self.x0,
                 iterates=self.iterates)
        meta = {"algorithm": repr(self.algorithm), "seed": self.seed, "rounds": self.rounds,
                "clients": {str(k): str(v) for k, v in self.clients.items()},
                "participants": [p.tolist() for p in self.participants],
                "events": self.events}

        def write(tmp):
            with open(tmp, "w") as f:
                json.dump({"meta": meta, "history": self.history}, f, indent=1, default=float)

        atomic_write(os.path.join(directory, "history.json"), write)


def _size(arrays):
    arrs = [np.asarray(a) for a in (arrays or {}).values()]
    return sum(a.size for a in arrs), sum(a.nbytes for a in arrs)


def _hello(link, cfg, log):
    n = cfg.num_clients
    deadline = time.monotonic() + cfg.node_wait
    nodes = link.nodes()
    while len(nodes) < n and time.monotonic() < deadline:
        time.sleep(0.5)
        nodes = link.nodes()
    if len(nodes) < n:
        raise RuntimeError(f"only {len(nodes)} SuperNodes connected after {cfg.node_wait:g} s; "
                           f"the run needs num-clients = {n}")
    replies = link.exchange([(node, "hello", {"config": {"phase": "hello"}}) for node in nodes],
                            cfg.timeout)
    clients, sizes, specs = {}, {}, {}
    for node in nodes:
        r = replies[node]
        if isinstance(r, Failure):
            log(f"hello: node {node} failed: {r}")
            continue
        c = r["config"]
        cid = int(c["client"])
        if not 0 <= cid < n:
            log(f"hello: node {node} holds client {cid}, outside [0, {n}); ignored")
        elif cid in clients:
            log(f"hello: node {node} also claims client {cid} (node {clients[cid]}); ignored")
        else:
            clients[cid], sizes[cid], specs[cid] = node, int(c["n_samples"]), c["manifold"]
    missing = sorted(set(range(n)) - set(clients))
    if missing:
        raise RuntimeError(f"no SuperNode answered for clients {missing}")
    if len(set(specs.values())) != 1:
        raise RuntimeError(f"the clients disagree on the manifold: {specs}")
    M = manifold_from_spec(specs[0])
    return clients, np.array([sizes[i] for i in range(n)]), M


def _client_extras(alg, i):
    """Client ``i``'s run settings (``alg.client_settings(i)``, e.g. PriRFed's noise and batch
    size) as message config keys ``alg.<name>``; the client hands them to ``for_client``."""
    settings = getattr(alg, "client_settings", None)
    return {} if settings is None else {f"{SETTINGS_PREFIX}{k}": v
                                        for k, v in settings(i).items()}


def run_federation(link, config, *, x0=None, metrics_problem=None, log=None):
    """Run the federation described by ``config`` over ``link``.

    Parameters
    ----------
    link : FlowerLink or InProcessLink
    config : FederationConfig or mapping
        The parsed run config, or Flower's ``run_config`` mapping.
    x0 : ndarray, optional
        Initial point; default the seed's init stream (as :func:`rfl_fast.federation.run`).
    metrics_problem : Problem, optional
        A problem with all clients' data for ``problem.metrics`` rows (tests and demos).
    log : callable, optional
        ``log(str)`` for progress, failures and rejections (default: the
        ``rfl_fast.flower`` logger at INFO/WARNING).

    Returns
    -------
    FederationResult
    """
    cfg = config if isinstance(config, FederationConfig) else \
        FederationConfig.from_run_config(config)
    log = log or logger.info
    alg = cfg.build_algorithm()
    n, rounds = cfg.num_clients, int(cfg.rounds)
    participation = cfg.participation
    participation.validate(n)
    clients, sizes, M = _hello(link, cfg, log)
    stub = RemoteProblem(M, sizes, cfg.weighting)
    specialize = getattr(alg, "for_participation", None)
    if specialize is not None:
        alg = specialize(participation, n)
    alg.validate(stub)
    start = getattr(alg, "for_run", None)
    if start is not None:
        alg = start(stub, participation, rounds)
    kinds = kinds_of(alg)
    seed = resolve_seed(cfg.seed)
    if x0 is None:
        x0 = M.random_point(rng=stream(seed, STREAM_INIT))
    x0 = check_point_arg(M, x0, "x0")
    prng, srng = stream(seed, STREAM_PARTICIPATION), stream(seed, STREAM_SERVER)
    state = alg.init_server(stub, x0, ServerContext(0, rounds, srng))
    prepare_recipients = getattr(alg, "prepare_recipients", None)
    history_row = getattr(alg, "history_row", None)
    init_packed = pack({"x0": x0}, M, kinds)
    initialized = set()
    events, history, participants = [], [], []
    iterates = [np.array(alg.point(stub, state))]

    def extra_row(t, st):
        row = {} if history_row is None else {k: float(v) for k, v in
                                              history_row(stub, st, t).items()}
        if metrics_problem is not None:
            row.update({k: float(v) for k, v in
                        metrics_problem.metrics(alg.point(stub, st)).items()})
        return row

    history.append({"round": 0, "n_participants": 0, "n_answered": 0, "n_rejected": 0,
                    "n_failed": 0, "floats_up": 0, "floats_down": 0, "bytes_up": 0,
                    "bytes_down": 0, "cpu_server": 0.0, "cpu_clients_max": 0.0, "wall": 0.0,
                    "events": [], **extra_row(0, state)})
    log(f"rfl_fast federation: {alg!r}, {n} clients on {M!r}, {rounds} rounds, "
        f"{participation!r}, seed {seed}")

    for t in range(rounds):
        w0 = time.perf_counter()
        idx = participation.sample(prng, n)
        k = int(idx.size)
        sctx = ServerContext(t, rounds, srng)
        acc = {"round": t + 1, "n_participants": k, "n_answered": 0, "n_rejected": 0,
               "n_failed": 0, "floats_up": 0, "floats_down": 0, "bytes_up": 0,
               "bytes_down": 0, "cpu_server": 0.0, "cpu_clients_max": 0.0}
        round_events = []
        cpu_clients = {}

        def note(text):
            round_events.append(text)
            events.append(f"round {t + 1}: {text}")
            log(f"round {t + 1}: {text}")

        def exchange(phase, ids, msg, rng_mode, memo):
            """Send ``msg`` to clients ``ids``; returns accepted (ids, stacked uploads)."""
            packed, meta = pack(msg, M, kinds)
            fl, by = _size(packed)
            requests = []
            for i in ids:
                i = int(i)
                conf = {"phase": phase, "round": t, "client": i, "seed": seed,
                        "rounds": rounds, "rng": rng_mode, "memo": "yes" if memo else "no",
                        **_client_extras(alg, i)}
                content = {"config": conf, "msg": packed, "msg.meta": meta}
                if i not in initialized:
                    content["init"], content["init.meta"] = init_packed
                requests.append((clients[i], phase, content))
            acc["floats_down"] += fl * len(requests)
            acc["bytes_down"] += by * len(requests)
            replies = link.exchange(requests, cfg.timeout)
            base = msg.get("x") if msg else None
            cands = []
            for i in ids:
                i = int(i)
                r = replies.get(clients[i], Failure("no reply"))
                if isinstance(r, Failure):
                    acc["n_failed"] += 1
                    note(f"client {i}: {phase} failed: {r}")
                    continue
                initialized.add(i)
                c = r.get("config", {})
                cpu_clients[i] = cpu_clients.get(i, 0.0) + float(c.get("cpu", 0.0))
                if phase == "finalize":
                    cands.append((i, None))
                    continue
                up = {k_: np.asarray(v) for k_, v in r.get("up", {}).items()}
                ufl, uby = _size(up)
                acc["floats_up"] += ufl
                acc["bytes_up"] += uby
                if (int(c.get("client", -1)), int(c.get("round", -1)), c.get("phase")) != \
                        (i, t, phase):
                    ok, why = False, (f"reply labelled client {c.get('client')}, round "
                                      f"{c.get('round')}, phase {c.get('phase')!r}")
                elif not up:
                    ok, why = False, "empty upload"
                else:
                    ok, why = check_arrays(up, r.get("up.meta"), M, rows=1, base=base,
                                           kinds=kinds, atol=cfg.atol)
                if not ok:
                    acc["n_rejected"] += 1
                    note(f"client {i}: {phase} upload rejected: {why}")
                    continue
                cands.append((i, up))
            if phase == "finalize":
                return np.array([i for i, _ in cands], dtype=np.int64), None
            if cands:   # the uploads must agree on their arrays (the most common set wins)
                sets = [frozenset(u) for _, u in cands]
                common = max(set(sets), key=lambda s: (sets.count(s), -sets.index(s)))
                for i, u in cands:
                    if frozenset(u) != common:
                        acc["n_rejected"] += 1
                        note(f"client {i}: {phase} upload rejected: arrays {sorted(u)} differ "
                             f"from the others' {sorted(common)}")
                cands = [(i, u) for i, u in cands if frozenset(u) == common]
            good = np.array([i for i, _ in cands], dtype=np.int64)
            if not cands:
                return good, None
            stacked_up = {name: np.concatenate([u[name] for _, u in cands])
                          for name in cands[0][1]}
            return good, stacked_up

        answered = np.zeros(0, dtype=np.int64)
        pidx, msg, cpu_s = first_message(alg, stub, state, sctx, n, idx, prepare_recipients)
        if k > 0:
            go = True
            ids = idx
            if alg.has_prepare:
                good_p, up_p = exchange("prepare", pidx, msg, "fresh", False)
                if good_p.size == 0:
                    note("no prepare upload accepted: the round keeps the server state")
                    go = False
                else:
                    c0 = time.process_time()
                    state, msg = alg.server_prepare(stub, state, good_p, up_p, sctx)
                    cpu_s += time.process_time() - c0
                    ids = idx[np.isin(idx, good_p)]
                    go = ids.size > 0
            if go:
                rng_mode = "continue" if (alg.has_prepare and pidx.size == k) else "fresh"
                answered, up = exchange("update", ids, msg, rng_mode, alg.has_prepare)
                if answered.size == 0:
                    note("no upload accepted: the round keeps the server state")
                else:
                    c0 = time.process_time()
                    state, fmsg = alg.server_update(stub, state, answered, up, sctx)
                    cpu_s += time.process_time() - c0
                    if alg.has_finalize and fmsg is not None:
                        exchange("finalize", answered, fmsg, "continue", True)
        acc["n_answered"] = int(answered.size)
        acc["cpu_server"] = cpu_s
        acc["cpu_clients_max"] = max(cpu_clients.values(), default=0.0)
        acc["wall"] = time.perf_counter() - w0
        participants.append(answered)
        history.append({**acc, "events": round_events, **extra_row(t + 1, state)})
        iterates.append(np.array(alg.point(stub, state)))
        log(f"round {t + 1}/{rounds}: {acc['n_answered']} of {k} clients aggregated "
            f"({acc['n_rejected']} rejected, {acc['n_failed']} failed), "
            f"{acc['wall']:.1f} s")

    return FederationResult(x=alg.output(stub, state), iterates=np.stack(iterates),
                            history=history, events=events, algorithm=alg, seed=seed,
                            rounds=rounds, x0=x0, state=state, clients=dict(clients),
                            participants=participants)


# ---------------------------------------------------------------------------- ServerApp

def server_app():
    """A Flower ``ServerApp`` running :func:`run_federation` with the run config.

    With ``output-dir`` set, it writes ``result.npz`` and ``history.json`` there (and
    ``error.txt`` if the run fails).
    """
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = FederationConfig.from_run_config(context.run_config)

        def log(text):
            logger.info(text)
            print(f"[rfl_fast] {text}", flush=True)

        try:
            metrics_problem = None
            if cfg.server_metrics:
                full = getattr(cfg.load_task(), "full", None)
                if full is None:
                    log("server-metrics: the task has no `full` problem; no metrics")
                else:
                    metrics_problem = full(**cfg.task_kwargs)
            result = run_federation(FlowerLink(grid), cfg, metrics_problem=metrics_problem,
                                    log=log)
        except Exception as exc:
            if cfg.output_dir:
                os.makedirs(cfg.output_dir, exist_ok=True)
                with open(os.path.join(cfg.output_dir, "error.txt"), "w") as f:
                    f.write(f"{type(exc).__name__}: {exc}\n")
            raise
        if cfg.output_dir:
            result.save(cfg.output_dir)
            log(f"wrote {cfg.output_dir}/result.npz and history.json")

    return app
