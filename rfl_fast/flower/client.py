"""The client side: one rfl_fast client's part of every exchange, on its own data.

:func:`handle` is the whole client logic on plain Python values (a *content* in, a content
out, a persistent ``store`` dict), so it runs the same behind Flower's ClientApp
(:func:`client_app`) and behind the in-process link of the tests. Per message it

1. reads the node's own configuration (:class:`NodePolicy`), the authority over what this
   node runs: a node whose node config sets any ``dp-*`` key runs only algorithms that apply
   its privacy guard (``client_owns_privacy``: PriRFed) and refuses every other one, naming
   why; ``accept-algorithms`` (comma-separated names) restricts it further;
2. rebuilds the algorithm from the run config and its local problem from the task, both by
   their registered names (:class:`~rfl_fast.flower.spec.AppNames`: nothing named by a run
   config or a message is imported), and refuses an algorithm the node does not accept
   before it loads any data (Flower starts a fresh process for every message, so nothing else
   survives);
3. reads the server's message through its schema (:func:`~rfl_fast.flower.schema.read_request`:
   every field typed and bounded, the arrays the algorithm's, float64, of the node's own
   shapes, finite, points on the manifold) and checks that the server addresses the client id
   this node holds;
4. runs the algorithm's client hook for one client (``k = 1``): ``client_prepare``,
   ``client_update`` or ``client_finalize``, with ``ClientContext`` giving the client's own
   random stream ``(seed, t, i)``. For a private algorithm (PriRFed: ``for_private_client``)
   the client owns its privacy (:mod:`.guard`): the stream's root is its own secret (node
   config ``dp-seed`` or OS entropy, never the server's seed), ``sigma``, ``tau`` and the
   budget come from its node config, and every update is charged to its ledger file first
   (refused when over budget or a repeated round);
5. keeps the client's persistent state (``init_clients`` rows, e.g. RFedProj's correction
   ``c_i``), the within-round ``memo`` and the random stream's position in ``store`` (Flower's
   ``context.state``, which the SuperNode keeps between messages of a run);
6. replies with its upload, packed with its manifold named.

Any refusal raises (``ValueError``/``RuntimeError`` with a bounded reason); the server records
it as this client's failure of the exchange.

The local problem holds one client, so the hooks see ``idx = [0]``; the random stream is the
global client id's, ``ClientRandom(seed, t, [i])``, exactly the row the simulation engine
draws for client ``i``.
"""

import json
import re
import time

import numpy as np

from .._validation import brief
from ..federation.arrival import kinds_of
from ..federation.context import ClientContext, ClientRandom
from . import schema
from .codec import manifold_spec, pack
from .guard import ClientPrivacy, private_keys
from .spec import AppNames, FederationConfig

__all__ = ["handle", "client_app", "client_id_of", "NodePolicy", "PHASES"]

PHASES = ("hello", *schema.PHASES)
_LOCAL = np.zeros(1, dtype=np.int64)


def client_id_of(node_config):
    """The client id of a SuperNode: its ``partition-id`` (or ``client-id``) node config."""
    for key in ("client-id", "partition-id"):
        if key in node_config:
            try:
                cid = int(node_config[key])
            except (TypeError, ValueError):
                raise ValueError(f"node config {key!r}: expected an int >= 0, got "
                                 f"{brief(node_config[key])}") from None
            if not 0 <= cid <= schema.MAX_CLIENTS:
                raise ValueError(f"node config {key!r}: expected an int >= 0, got {cid}")
            return cid
    raise ValueError("the SuperNode has no client id: start it with --node-config "
                     "'partition-id=<i> num-partitions=<n>'")


class NodePolicy:
    """What a SuperNode accepts to run, from its own node config (never from the server).

    Parameters
    ----------
    node_config : mapping
        The SuperNode's ``--node-config``: its client id (``partition-id``), and optionally
        ``dp-*`` keys (the node is private: :mod:`.guard`) and ``accept-algorithms``
        (comma- or space-separated registered names).
    app_names : AppNames, optional
        The app's registered names.

    Attributes
    ----------
    cid : int
    private : tuple of str
        The ``dp-*`` keys set (empty: not private).
    accept : tuple of type or None
        The algorithm classes the node accepts (``None``: any).
    """

    def __init__(self, node_config, app_names=None):
        self.cid = client_id_of(node_config)
        self.private = private_keys(node_config)    # a dp-like typo is refused
        self.accept, self.names = None, ()
        text = node_config.get("accept-algorithms")
        if text not in (None, ""):
            listed = [a for a in re.split(r"[,\s]+", str(text)) if a]
            self.names = tuple(listed)
            self.accept = tuple((app_names or AppNames()).get("algorithm", a) for a in listed)

    def check(self, name, cls):
        """Refuse (``PermissionError``, naming why) an algorithm this node does not run."""
        if self.private and not getattr(cls, "client_owns_privacy", False):
            raise PermissionError(
                f"client {self.cid}: this node is configured for differential privacy (node "
                f"config {', '.join(self.private)}) and runs only algorithms that apply its "
                f"privacy guard; {name} does not (it would release exact updates): refused")
        if self.accept is not None and cls not in self.accept:
            raise PermissionError(
                f"client {self.cid}: this node accepts only {', '.join(self.names)} (node "
                f"config accept-algorithms); {name} refused")


def _local_problem(cfg, cid, node_config, app_names):
    task = cfg.load_task(app_names)
    problem = task(cid, dict(node_config), **cfg.task_kwargs)
    if int(problem.n_clients) != 1:
        raise ValueError(f"task {cfg.task!r} returned a problem with {problem.n_clients} "
                         f"clients; a task builds one client's local problem")
    return problem


def _rng(seed, t, cid, config, status):
    rng = ClientRandom(seed, t, np.array([cid], dtype=np.int64))
    saved = status.get("rng.state")
    if config["rng"] == "continue" and saved and int(status.get("rng.round", -1)) == t:
        st = json.loads(saved)               # 128-bit integers travel as strings
        rng.restore([{**st, "state": {k: int(v) for k, v in st["state"].items()}}])
    return rng


def _save_rng(rng, t, status):
    st, = rng.state()
    if st is None:
        status.pop("rng.state", None)
        status.pop("rng.round", None)
        return
    st = {**st, "state": {k: str(v) for k, v in st["state"].items()}}
    status["rng.state"] = json.dumps(st)
    status["rng.round"] = t


def _as_arrays(d):
    return {k: np.array(v, dtype=np.float64) for k, v in (d or {}).items()}


def _faulty(cfg, kind, cid, t):
    return (t + 1) in cfg.faults.get((kind, cid), ())


def handle(content, store, node_config, run_config, app_names=None):
    """One message of the server to this client; returns the reply content.

    Parameters
    ----------
    content : dict
        Sections ``"config"`` (phase, round, client id, ...), ``"msg"``/``"msg.meta"`` (the
        algorithm's message) and, at first contact, ``"init"``/``"init.meta"`` (``x0``);
        read through :mod:`.schema`.
    store : dict
        The client's persistent state across messages of one run (mutated): ``"cstate"``,
        ``"memo"`` (arrays) and ``"status"`` (config).
    node_config, run_config : mapping
        The SuperNode's node config (the authority: :class:`NodePolicy`) and the run config.
    app_names : AppNames, optional
        Algorithms and tasks the app's code registers besides the built-in ones.

    Raises
    ------
    ValueError, RuntimeError, PermissionError
        On a refused message (the server records the reason as this client's failure).
    """
    t0 = time.process_time()
    node = NodePolicy(node_config, app_names)
    cfg = FederationConfig.from_run_config(run_config)
    node.check(cfg.algorithm, cfg.algorithm_class(app_names))   # before any data is loaded
    cid = node.cid
    if schema.is_hello(content):
        schema.read_hello_request(content)
        problem = _local_problem(cfg, cid, node_config, app_names)
        from .. import __version__
        return {"config": {"client": cid, "n_samples": int(problem.sizes[0]),
                           "manifold": manifold_spec(problem.manifold),
                           "problem": type(problem).__name__, "rfl_fast": __version__}}
    problem = _local_problem(cfg, cid, node_config, app_names)
    M = problem.manifold
    alg = cfg.build_algorithm(app_names)
    guard = None
    if alg.client_owns_privacy:      # the client owns its privacy (.guard)
        guard = ClientPrivacy(node_config, cid)
        alg, dp_round = alg.for_private_client(problem, guard.sigma, guard.clip)
    kinds = kinds_of(alg)
    config, msg, init = schema.read_request(content, M, kinds, cfg.atol)
    phase, t = config["phase"], config["round"]
    if config["client"] != cid:
        raise ValueError(f"the server addressed client {config['client']} but this SuperNode "
                         f"holds client {cid}")
    status = store.setdefault("status", {})
    if init is not None and not status.get("initialized"):
        store["cstate"] = _as_arrays(alg.init_clients(problem, init["x0"]))
        status["initialized"] = True
    if not status.get("initialized"):
        raise RuntimeError("no client state: this node has not received the run's initial "
                           "point (a restarted SuperNode loses its state)")
    if phase == "update" and _faulty(cfg, "drop", cid, t):
        raise RuntimeError(f"fault injection: client {cid} drops out in round {t + 1}")
    if guard is None:
        rng = _rng(config["seed"], t, cid, config, status)
    else:                                       # never the server's seed, never continued
        rng = ClientRandom(guard.secret(), t, np.array([cid], dtype=np.int64))
        if phase == "update":
            guard.charge(dp_round, t)           # written to the ledger before any release
    ctx = ClientContext(t, _LOCAL, rng)
    cstate = dict(store.get("cstate", {}))
    memo = None
    if phase in ("update", "finalize") and config["memo"] == "yes":
        if int(status.get("memo.round", -1)) != t:
            raise RuntimeError(f"no memo of round {t} (missed the round's earlier exchange)")
        memo = None if status.get("memo.none") else dict(store.get("memo", {}))
    up = None
    if phase == "prepare":
        up, cstate, memo = alg.client_prepare(problem, _LOCAL, msg, cstate, ctx)
    elif phase == "update":
        up, cstate, memo = alg.client_update(problem, _LOCAL, msg, cstate, memo, ctx)
    else:
        cstate = alg.client_finalize(problem, _LOCAL, msg, cstate, memo, ctx)
    if guard is not None and up is not None and phase != "update":
        raise RuntimeError(f"a private client releases only through 'update'; {phase!r} "
                           f"produced an upload")
    store["cstate"] = _as_arrays(cstate)
    if phase != "finalize":
        store["memo"] = {} if memo is None else _as_arrays(memo)
        status["memo.none"] = memo is None
        status["memo.round"] = t
    if guard is None:
        _save_rng(ctx.rng, t, status)
    reply = {"config": {"client": cid, "round": t, "phase": phase,
                        "cpu": time.process_time() - t0}}
    if up is not None:
        up = dict(up)
        if phase == "update" and _faulty(cfg, "corrupt", cid, t):
            up = {k: np.full(np.shape(v), np.nan) for k, v in up.items()}
        if phase == "update" and _faulty(cfg, "offmanifold", cid, t):
            # points scaled off the manifold, tangent vectors given a normal component
            off = {"point": lambda v: 2.0 * v,
                   "tangent": lambda v: v + msg.get("x", np.zeros(M.shape))}
            up = {k: off.get(kinds.get(k), lambda v: v)(np.asarray(v)) for k, v in up.items()}
        reply["up"], reply["up.meta"] = pack(up, M, kinds)
    return reply


# ---------------------------------------------------------------------------- Flower adapter

def client_app(*, algorithms=None, tasks=None):
    """A Flower ``ClientApp`` running :func:`handle` for the message types
    ``query.rfl_hello`` and ``train.rfl_prepare|rfl_update|rfl_finalize``.

    Parameters
    ----------
    algorithms, tasks : dict, optional
        Algorithm classes and tasks by name, besides rfl_fast's registry
        (:class:`~rfl_fast.flower.spec.AppNames`): the app module registers its own in code,
        the run config names them.

    The client's store lives in ``context.state`` (records ``rfl.cstate``, ``rfl.memo``,
    ``rfl.status``).
    """
    from flwr.app import Context, Message
    from flwr.clientapp import ClientApp

    from .records import from_recorddict, load_store, save_store, to_recorddict

    app = ClientApp()
    app_names = AppNames(algorithms, tasks)

    def _serve(msg: Message, context: Context) -> Message:
        store = load_store(context.state)
        reply = handle(from_recorddict(msg.content), store, context.node_config,
                       context.run_config, app_names)
        save_store(context.state, store)
        return Message(to_recorddict(reply), reply_to=msg)

    @app.query("rfl_hello")
    def hello(msg: Message, context: Context) -> Message:
        return _serve(msg, context)

    @app.train("rfl_prepare")
    def prepare(msg: Message, context: Context) -> Message:
        return _serve(msg, context)

    @app.train("rfl_update")
    def update(msg: Message, context: Context) -> Message:
        return _serve(msg, context)

    @app.train("rfl_finalize")
    def finalize(msg: Message, context: Context) -> Message:
        return _serve(msg, context)

    return app
