"""The server side: any rfl_fast algorithm's rounds over a link to the clients.

:func:`run_federation` is :func:`rfl_fast.federation.run` with the clients on other machines:
the same round driver (:class:`~rfl_fast.federation.driver.RoundDriver`), with
:class:`FlowerTransport` sending each exchange to the clients and collecting their replies.
So the same seed draws the same participants, every client draws from its stream
``(seed, t, i)``, the server hooks see the same numbers, and a client that fails, does not
answer within ``timeout`` or whose upload is refused on arrival is left out of the round with
the reason in ``History.meta["rejected"]`` (and the log). With no failures the iterates equal
the simulation's up to rounding; a run whose clients drop out equals the simulation whose
participation returns the clients that answered.

On arrival the transport checks that a reply is labelled with the client, round and phase
asked for and that its arrays travel as declared (:func:`~rfl_fast.flower.codec.check_wire`);
the driver then checks them as the simulation does
(:func:`~rfl_fast.federation.arrival.check_upload`, within the run config's ``atol``).

The server never sees data: it knows each client's id, sample count and manifold from a
``hello`` query at start (:class:`RemoteProblem` stands in for the problem in the server
hooks, which only read ``manifold``, ``sizes`` and ``weights``).

Links: :class:`FlowerLink` (a Flower ``Grid``, used by :func:`server_app`) and
:class:`InProcessLink` (calls :func:`rfl_fast.flower.client.handle` in this process, for
tests and debugging of the protocol without Flower).
"""

import copy
import logging
import os
import time

import numpy as np

from .._files import atomic_write
from ..algorithms._checks import check_point_arg
from ..federation.context import resolve_seed
from ..federation.driver import (Replies, Result, RoundDriver, Transport, initial_point,
                                 specialize)
from ..problems.base import Problem
from .client import SETTINGS_PREFIX, handle
from .codec import check_wire, kinds_of, manifold_from_spec, pack
from .spec import FederationConfig

__all__ = ["run_federation", "RemoteProblem", "Failure", "InProcessLink", "FlowerLink",
           "FlowerTransport", "server_app", "save_result"]

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
                out[node] = Failure(f"client error: {type(exc).__name__}: {exc}")
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


# ---------------------------------------------------------------------------- transport

def _client_extras(alg, i):
    """Client ``i``'s run settings (``alg.client_settings(i)``, e.g. PriRFed's noise and batch
    size) as message config keys ``alg.<name>``; the client hands them to ``for_client``."""
    return {f"{SETTINGS_PREFIX}{k}": v for k, v in alg.client_settings(i).items()}


class FlowerTransport(Transport):
    """The round driver's exchanges as messages over ``link`` to the clients' nodes.

    Parameters
    ----------
    link : FlowerLink or InProcessLink
    clients : dict of int to int
        Client id -> node id (from the ``hello`` query).
    algorithm : FederatedAlgorithm
        The run's algorithm (its ``client_settings`` travel with every message).
    x0 : ndarray
        The initial point, sent with a client's first message.
    M : Manifold
    seed, rounds : int
        Sent to the clients (their random streams ``(seed, t, i)``).
    timeout : float
        Seconds to wait for the replies of one exchange.
    """

    def __init__(self, link, clients, algorithm, x0, M, *, seed, rounds, timeout):
        self.link, self.clients, self.algorithm, self.M = link, clients, algorithm, M
        self.seed, self.rounds, self.timeout = seed, rounds, timeout
        self.kinds = kinds_of(algorithm)
        self.init = pack({"x0": x0}, M, self.kinds)
        self.initialized = set()

    def exchange(self, phase, t, ids, msg, fresh):
        return self._send(phase, t, ids, msg, "fresh" if fresh else "continue")

    def finish(self, t, ids, fmsg):
        if fmsg is None:        # the clients already keep their state
            return Replies(ids.tolist())
        return self._send("finalize", t, ids, fmsg, "continue")

    def _send(self, phase, t, ids, msg, rng):
        packed, meta = pack(msg, self.M, self.kinds)
        memo = phase == "finalize" or (phase == "update" and self.algorithm.has_prepare)
        requests = []
        for i in ids.tolist():
            conf = {"phase": phase, "round": t, "client": i, "seed": self.seed,
                    "rounds": self.rounds, "rng": rng, "memo": "yes" if memo else "no",
                    **_client_extras(self.algorithm, i)}
            content = {"config": conf, "msg": packed, "msg.meta": meta}
            if i not in self.initialized:
                content["init"], content["init.meta"] = self.init
            requests.append((self.clients[i], phase, content))
        replies = self.link.exchange(requests, self.timeout)
        rep = Replies()
        for i in ids.tolist():
            r = replies.get(self.clients[i], Failure("no reply"))
            if not isinstance(r, Failure):
                self.initialized.add(i)
                rep.cpu[i] = float(r.get("config", {}).get("cpu", 0.0))
            why = self._refused(r, phase, t, i)
            if why:
                rep.failed.append((i, why))
            else:
                rep.ids.append(i)
                rep.uploads.append({k: np.asarray(v) for k, v in r.get("up", {}).items()})
        return rep

    def _refused(self, reply, phase, t, i):
        """Why ``reply`` is not client ``i``'s well-formed answer, or ``None``."""
        if isinstance(reply, Failure):
            return str(reply)
        c = reply.get("config", {})
        if (int(c.get("client", -1)), int(c.get("round", -1)), c.get("phase")) != (i, t, phase):
            return (f"reply labelled client {c.get('client')}, round {c.get('round')}, "
                    f"phase {c.get('phase')!r}")
        if phase == "finalize" or not reply.get("up"):    # (an empty upload: the driver's)
            return None
        return check_wire(reply["up"], reply.get("up.meta"), self.M, self.kinds)


# ---------------------------------------------------------------------------- run

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


def run_federation(link, config, *, x0=None, metrics_problem=None, log=None, callback=None):
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
        ``log(str)`` for progress and the clients left out (default: the ``rfl_fast.flower``
        logger).
    callback : callable, optional
        ``callback(t, x, row)`` after round ``t`` with the server's model ``x``, as in
        :func:`rfl_fast.federation.run`; returning ``True`` stops the run.

    Returns
    -------
    rfl_fast.federation.Result
        Its ``history`` as the simulation's (``meta["clients"]``: client id -> node id); no
        ``client_state`` (it lives on the clients).
    """
    cfg = config if isinstance(config, FederationConfig) else \
        FederationConfig.from_run_config(config)
    log = log or logger.info
    n, rounds, participation = cfg.num_clients, int(cfg.rounds), cfg.participation
    participation.validate(n)
    clients, sizes, M = _hello(link, cfg, log)
    stub = RemoteProblem(M, sizes, cfg.weighting)
    alg = specialize(stub, cfg.build_algorithm(), participation, rounds)
    seed = resolve_seed(cfg.seed)
    x0 = check_point_arg(M, initial_point(M, x0, seed), "x0")
    transport = FlowerTransport(link, clients, alg, x0, M, seed=seed, rounds=rounds,
                                timeout=cfg.timeout)
    driver = RoundDriver(stub, alg, participation, transport, seed=seed, rounds=rounds,
                         metrics=metrics_problem, atol=cfg.atol, log=log)
    driver.start(x0, meta={"clients": {str(i): node for i, node in clients.items()}})
    log(f"rfl_fast federation: {alg!r}, {n} clients on {M!r}, {rounds} rounds, "
        f"{participation!r}, seed {seed}")

    def after_round(t, row):
        log(f"round {t}/{rounds}: {row['n_participants']} participants, {row['n_rejected']} "
            f"left out, {row['wall']:.1f} s")
        return callback is not None and \
            callback(t, alg.point(stub, driver.state), row) is True

    history = driver.run(after_round)
    return Result(x=alg.output(stub, driver.state), history=history, algorithm=alg, seed=seed,
                  rounds=driver.done, participation=participation, x0=x0, state=driver.state,
                  client_state={})


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
            iterates = []
            result = run_federation(FlowerLink(grid), cfg, metrics_problem=metrics_problem,
                                    log=log, callback=lambda t, x, row: iterates.append(x))
            if cfg.output_dir:
                save_result(result, iterates, cfg.output_dir)
                log(f"wrote {cfg.output_dir}/result.npz and history.json")
        except Exception as exc:
            if cfg.output_dir:
                os.makedirs(cfg.output_dir, exist_ok=True)
                with open(os.path.join(cfg.output_dir, "error.txt"), "w") as f:
                    f.write(f"{type(exc).__name__}: {exc}\n")
            raise

    return app


def save_result(result, iterates, directory):
    """Write ``result.npz`` (``x``, ``x0``, ``iterates``: ``x0`` and the model after every
    round) and ``history.json`` (:meth:`History.to_json <rfl_fast.federation.History.to_json>`)
    to ``directory``.

    Parameters
    ----------
    result : rfl_fast.federation.Result
        What :func:`run_federation` returned.
    iterates : list of ndarray
        The server's model after each round (its ``callback``'s ``x``).
    directory : str or os.PathLike
        Created if needed.
    """
    os.makedirs(directory, exist_ok=True)
    np.savez(os.path.join(directory, "result.npz"), x=result.x, x0=result.x0,
             iterates=np.stack([result.x0, *iterates]))
    atomic_write(os.path.join(directory, "history.json"), result.history.to_json)
