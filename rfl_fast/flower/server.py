"""The server side: any rfl_fast algorithm's rounds over a link to the clients.

:func:`run_federation` is :func:`rfl_fast.federation.run` with the clients on other machines:
the same round driver (:class:`~rfl_fast.federation.driver.RoundDriver`), with
:class:`MessageLink` sending each exchange to the clients and collecting their replies.
So the same seed draws the same participants, every client draws from its stream
``(seed, t, i)``, the server hooks see the same numbers, and a client that fails, does not
answer within ``timeout`` or whose upload is refused on arrival is left out of the round with
the reason in ``History.meta["rejected"]`` (and the log). With no failures the iterates equal
the simulation's up to rounding; a run whose clients drop out equals the simulation whose
participation returns the clients that answered.

On arrival every reply is read through its schema (:func:`~rfl_fast.flower.schema.read_reply`:
labelled with the client, round and exchange asked for, every field typed and bounded, the
upload exactly the arrays the algorithm declares for the exchange, float64, of the server's
shapes); the driver then checks the arrays as the simulation does
(:func:`~rfl_fast.federation.arrival.check_upload`, within the run config's ``atol``). A reply
that fails -- undecodable, mislabelled, malformed, hostile -- leaves that client out of the
round with the reason; no reply can raise out of the link and stop the run.

The server never sees data: it knows each client's id, sample count and manifold from a
``hello`` query at start, read through :data:`~rfl_fast.flower.schema.HELLO_REPLY`
(:class:`RemoteProblem` stands in for the problem in the server hooks, which only read
``manifold``, ``sizes`` and ``weights``). A node whose hello fails its schema, or that claims
a client id another node claims too, is excluded with the reason logged; the run starts when
every client id ``0..n-1`` is held by exactly one accepted node.

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
from .._validation import brief
from ..federation.arrival import kinds_of
from ..federation.context import resolve_seed
from ..federation.driver import (Link, Replies, Result, RoundDriver, initial_point,
                                 specialize, upload_names)
from ..kernels import warm_up
from ..problems.base import Problem
from . import schema
from .client import handle
from .codec import manifold_from_spec, pack
from .spec import AppNames, FederationConfig

__all__ = ["run_federation", "RemoteProblem", "Failure", "InProcessLink", "FlowerLink",
           "MessageLink", "server_app", "save_result"]

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
    app_names : AppNames, optional
        The clients' extra registered names (``client_app(algorithms=..., tasks=...)``).

    Each node's store is committed only when the client returns (as Flower keeps a node's
    ``context.state`` only from a successful ClientApp call). Every content is copied in both
    directions. ``silence(node)`` makes a node stop answering (a crashed machine).
    """

    def __init__(self, run_config, node_configs, app_names=None):
        self.run_config = dict(run_config)
        self.node_configs = {1000 + j: dict(c) for j, c in enumerate(node_configs)}
        self.stores = {node: {} for node in self.node_configs}
        self.silent = set()
        self.app_names = app_names

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
                               self.run_config, self.app_names)
            except Exception as exc:  # noqa: BLE001 - a client error is a failed exchange
                out[node] = Failure(f"client error: {type(exc).__name__}: {str(exc)[:500]}")
                continue
            self.stores[node] = store
            out[node] = copy.deepcopy(reply)
        for node, _, _ in requests:
            out.setdefault(node, Failure(f"no reply within {timeout:g} s"))
        return out


class FlowerLink:
    """Exchanges over a Flower ``Grid`` (inside a ServerApp).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
    max_bytes : int, optional
        Most ``.npy`` bytes one reply's arrays may hold, checked before they are decoded (set
        by :func:`run_federation` from the model's size).

    A reply is decoded by :func:`~rfl_fast.flower.records.from_recorddict` (bounded); one that
    cannot be, an error reply and a reply from a node not asked are failures with their
    reason (bounded), never an exception.
    """

    def __init__(self, grid, max_bytes=None):
        self.grid, self.max_bytes = grid, max_bytes

    def nodes(self):
        return sorted(int(n) for n in self.grid.get_node_ids())

    def exchange(self, requests, timeout):
        from flwr.app import Message

        from .records import RecordError, from_recorddict, to_recorddict

        msgs = []
        for node, phase, content in requests:
            mtype = "query.rfl_hello" if phase == "hello" else f"train.rfl_{phase}"
            group = str(content.get("config", {}).get("round", "hello"))
            msgs.append(Message(to_recorddict(content), dst_node_id=int(node),
                                message_type=mtype, group_id=group))
        asked = {int(node) for node, _, _ in requests}
        out = {}
        for r in self.grid.send_and_receive(msgs, timeout=timeout):
            node = int(r.metadata.src_node_id)
            if node not in asked or node in out:
                continue                              # not asked, or a second reply
            if r.has_error():
                out[node] = Failure(f"error {r.error.code}: {str(r.error.reason)[:500]}")
                continue
            try:
                out[node] = from_recorddict(r.content, self.max_bytes)
            except RecordError as exc:
                out[node] = Failure(f"undecodable reply: {exc}")
        for node in asked:
            out.setdefault(node, Failure(f"no reply within {timeout:g} s"))
        return out


# ---------------------------------------------------------------------------- driver link

class MessageLink(Link):
    """The round driver's :class:`~rfl_fast.federation.driver.Link` as messages over ``link``
    (a message link) to the clients' nodes.

    Parameters
    ----------
    link : FlowerLink or InProcessLink
    clients : dict of int to int
        Client id -> node id (from the ``hello`` query).
    algorithm : FederatedAlgorithm
        The run's algorithm (its ``array_kinds`` and ``uploads`` declare every reply's arrays).
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
        names = () if phase == "finalize" else upload_names(self.algorithm, phase)
        requests = []
        for i in ids.tolist():
            conf = {"phase": phase, "round": t, "client": i, "seed": self.seed,
                    "rounds": self.rounds, "rng": rng, "memo": "yes" if memo else "no"}
            content = {"config": conf, "msg": packed, "msg.meta": meta}
            if i not in self.initialized:
                content["init"], content["init.meta"] = self.init
            requests.append((self.clients[i], phase, content))
        replies = self.link.exchange(requests, self.timeout)
        rep = Replies()
        for i in ids.tolist():
            r = replies.get(self.clients[i], Failure("no reply"))
            if isinstance(r, Failure):
                rep.failed.append((i, str(r)))
                continue
            self.initialized.add(i)                 # it answered: it holds the initial point
            try:
                rep.cpu[i], up = schema.read_reply(r, phase, t, i, self.M, self.kinds, names)
            except schema.Refused as exc:
                rep.failed.append((i, str(exc)))
                continue
            rep.ids.append(i)
            rep.uploads.append(up if up is not None else {})
        return rep


# ---------------------------------------------------------------------------- run

def _hello(link, cfg, log):
    """Ask every node which client it holds: ``(clients, sizes, M)``. Each reply is read
    through :data:`~rfl_fast.flower.schema.HELLO_REPLY`; a node that fails it, names an
    unknown manifold or a client id outside ``0..n-1``, or claims an id another node claims
    too (both: neither is trusted over the other) is excluded with the reason logged.

    Raises
    ------
    RuntimeError
        Fewer than ``n`` nodes connected, a client id held by no accepted node (the reasons of
        the exclusions listed), or accepted nodes that disagree on the manifold.
    """
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
    claims, excluded = {}, {}
    for node in nodes:
        r = replies.get(node, Failure("no reply"))
        try:
            if isinstance(r, Failure):
                raise schema.Refused(f"failed: {r}")
            c = schema.read_hello(r)
            M = manifold_from_spec(c["manifold"])
            if c["client"] >= n:
                raise schema.Refused(f"holds client {c['client']}, outside [0, {n})")
        except (schema.Refused, ValueError) as exc:
            excluded[node] = str(exc)
            log(f"hello: node {node} excluded: {exc}")
            continue
        claims.setdefault(c["client"], []).append((node, c["n_samples"], M))
    clients, sizes, spaces = {}, {}, {}
    for cid, held in sorted(claims.items()):
        if len(held) > 1:
            nodes_ = [node for node, _, _ in held]
            for node in nodes_:
                excluded[node] = f"claims client {cid}, as do nodes {nodes_}"
                log(f"hello: node {node} excluded: {excluded[node]}")
            continue
        (node, size, M), = held
        clients[cid], sizes[cid], spaces[cid] = node, size, M
    missing = sorted(set(range(n)) - set(clients))
    if missing:
        reasons = "; ".join(f"node {node}: {why}" for node, why in sorted(excluded.items()))
        raise RuntimeError(f"no SuperNode answered for clients {brief(missing)}"
                           + (f" (excluded: {reasons[:2000]})" if reasons else ""))
    specs = {cid: repr(M) for cid, M in spaces.items()}
    if len(set(specs.values())) != 1:
        raise RuntimeError(f"the clients disagree on the manifold: {brief(specs)}")
    return clients, np.array([sizes[i] for i in range(n)]), spaces[0]


def run_federation(link, config, *, x0=None, metrics_problem=None, log=None, callback=None,
                   app_names=None):
    """Run the federation described by ``config`` over ``link``.

    Parameters
    ----------
    link : FlowerLink or InProcessLink
    config : FederationConfig or mapping
        The parsed run config, or Flower's ``run_config`` mapping.
    app_names : AppNames, optional
        Algorithms and tasks the app's code registers besides the built-in ones.
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
    alg = cfg.build_algorithm(app_names)
    for phase in ("prepare", "update") if alg.has_prepare else ("update",):
        upload_names(alg, phase)                     # declared, before any node is asked
    clients, sizes, M = _hello(link, cfg, log)
    if isinstance(link, FlowerLink) and link.max_bytes is None:   # replies decoded bounded
        link.max_bytes = len(alg.array_kinds) * (8 * int(np.prod(M.shape)) + 512)
    stub = RemoteProblem(M, sizes, cfg.weighting)
    alg = specialize(stub, alg, participation, rounds)
    seed = resolve_seed(cfg.seed)
    x0 = initial_point(M, x0, seed)
    driver_link = MessageLink(link, clients, alg, x0, M, seed=seed, rounds=rounds,
                              timeout=cfg.timeout)
    driver = RoundDriver(stub, alg, participation, driver_link, seed=seed, rounds=rounds,
                         metrics=metrics_problem, atol=cfg.atol, log=log)
    driver.start(x0, meta={"clients": {str(i): node for i, node in clients.items()}})
    log(f"rfl_fast federation: {alg!r}, {n} clients on {M!r}, {rounds} rounds, "
        f"{participation!r}, seed {seed}")

    def after_round(t, row):
        log(f"round {t}/{rounds}: {row['n_participants']} participants, {row['n_rejected']} "
            f"left out, {row['wall']:.1f} s")
        return callback is not None and \
            callback(t, alg.point(stub, driver.state), row) is True

    warm_up()  # backends load before the first timed round, not inside it
    history = driver.run(after_round)
    return Result(x=alg.output(stub, driver.state), history=history, algorithm=alg, seed=seed,
                  rounds=driver.done, participation=participation, x0=x0, state=driver.state,
                  client_state={})


# ---------------------------------------------------------------------------- ServerApp

def server_app(*, algorithms=None, tasks=None):
    """A Flower ``ServerApp`` running :func:`run_federation` with the run config.

    Parameters
    ----------
    algorithms, tasks : dict, optional
        Algorithm classes and tasks by name, besides rfl_fast's registry (as
        :func:`~rfl_fast.flower.client.client_app`'s; the server builds the algorithm and,
        for ``server-metrics``, the task's ``full`` problem).

    With ``output-dir`` set, it writes ``result.npz`` and ``history.json`` there (and
    ``error.txt`` if the run fails).
    """
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp

    app = ServerApp()
    app_names = AppNames(algorithms, tasks)

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        cfg = FederationConfig.from_run_config(context.run_config)

        def log(text):
            logger.info(text)
            print(f"[rfl_fast] {text}", flush=True)

        try:
            metrics_problem = None
            if cfg.server_metrics:
                full = getattr(cfg.load_task(app_names), "full", None)
                if full is None:
                    log("server-metrics: the task has no `full` problem; no metrics")
                else:
                    metrics_problem = full(**cfg.task_kwargs)
            iterates = []
            result = run_federation(FlowerLink(grid), cfg, metrics_problem=metrics_problem,
                                    log=log, callback=lambda t, x, row: iterates.append(x),
                                    app_names=app_names)
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
