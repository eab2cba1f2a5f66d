"""The client side: one rfl_fast client's part of every exchange, on its own data.

:func:`handle` is the whole client logic on plain Python values (a *content* in, a content
out, a persistent ``store`` dict), so it runs the same behind Flower's ClientApp
(:func:`client_app`) and behind the in-process link of the tests. Per message it

1. reads the node's own configuration (:class:`NodePolicy`), the authority over what this
   node runs: a node whose node config sets any ``dp-*`` key runs only algorithms that apply
   its privacy guard (``client_owns_privacy``: PriRFed) and refuses every other one, naming
   why; ``accept-algorithms`` (comma-separated names) restricts it further;
2. rebuilds the algorithm from the run config, by its registered name
   (:class:`~rfl_fast.flower.spec.AppNames`: nothing named by a run config or a message is
   imported), and refuses an algorithm the node does not accept before it loads any data;
3. takes its local problem from :class:`LocalProblems` (below): the task runs once per run,
   at the first message, and later messages reuse what it built;
4. reads the server's message through its schema (:func:`~rfl_fast.flower.schema.read_request`:
   every field typed and bounded, the arrays the algorithm's, float64, of the node's own
   shapes, finite, points on the manifold) and checks that the server addresses the client id
   this node holds;
5. runs the algorithm's client hook for one client (``k = 1``): ``client_prepare``,
   ``client_update`` or ``client_finalize``, with ``ClientContext`` giving the client's own
   random stream ``(seed, t, i)``. For a private algorithm (PriRFed: ``for_private_client``)
   the client owns its privacy (:mod:`.guard`): the stream's root is its own secret (node
   config ``dp-seed`` or OS entropy, never the server's seed), ``sigma``, ``tau`` and the
   budget come from its node config, and every update is charged to its ledger file first
   (refused when over budget or a repeated round);
6. keeps the client's persistent state (``init_clients`` rows, e.g. RFedProj's correction
   ``c_i``), the within-round ``memo`` and the random stream's position in ``store`` (Flower's
   ``context.state``, which the SuperNode keeps between messages of a run);
7. replies with its upload, packed with its manifold named.

Any refusal raises (``ValueError``/``RuntimeError`` with a bounded reason); the server records
it as this client's failure of the exchange.

The local problem holds one client, so the hooks see ``idx = [0]``; the random stream is the
global client id's, ``ClientRandom(seed, t, [i])``, exactly the row the simulation engine
draws for client ``i``.

**The local problem, once per run.** A task may read a large file or fit a preprocessing step;
it runs once per run and client. The problem it returns is kept under a :class:`ProblemKey`:
the run (a random token the first message writes into ``store``, which is per run and node),
the task's name, its arguments, the node config and the task function; a message whose key
differs (another run, changed task arguments or node config) builds anew. Two layers keep it:

* :data:`PROBLEMS`, a :class:`LocalProblems` in this process (bounded: the most recently used
  :data:`LocalProblems.maxsize` problems; a run whose key changes drops its old problem). It
  serves every message of a process that lives across messages: :class:`InProcessLink
  <rfl_fast.flower.server.InProcessLink>`, any runtime that runs several messages in one
  process.
* Flower's ``context.state`` (the ClientApp adapter, :func:`client_app`): Flower's deployment
  runtime starts a fresh ClientApp process for every message, so the problem the task built
  is also written into the run's ``context.state`` (:func:`encode_problem`: its attributes as
  ``.npy`` arrays and a JSON outline; nothing pickled) and a later message's process decodes
  it (:func:`decode_problem`) instead of running the task: each message costs its work plus
  that decoding. A problem that does not encode (an attribute that is not data: a callable,
  an open file, an object of a class that pickles itself its own way) or that is larger than
  :data:`STATE_MAX_BYTES` is not kept there; such a task runs at every message of a fresh
  process, as before.
"""

import hashlib
import json
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, NamedTuple

import numpy as np

from .._validation import brief
from ..federation.arrival import kinds_of
from ..federation.context import ClientContext, ClientRandom
from . import schema
from .codec import manifold_spec, pack
from .guard import ClientPrivacy, private_keys
from .spec import AppNames, FederationConfig

__all__ = ["handle", "client_app", "client_id_of", "NodePolicy", "PHASES", "ProblemKey",
           "LocalProblems", "PROBLEMS", "StateProblems", "serve", "encode_problem",
           "decode_problem", "STATE_MAX_BYTES"]

PHASES = ("hello", *schema.PHASES)
_LOCAL = np.zeros(1, dtype=np.int64)
logger = logging.getLogger("rfl_fast.flower")


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


# ---------------------------------------------------------------------------- local problems

class ProblemKey(NamedTuple):
    """What a built local problem depends on; a different key builds anew.

    ``run``: the token of the run's store (per run and node); ``task``: the task's name;
    ``task_kwargs``: its arguments as canonical JSON; ``node_config``: the node config as
    sorted ``(key, repr(value))`` pairs; ``builder``: the task function itself.
    """

    run: str
    task: str
    task_kwargs: str
    node_config: tuple
    builder: Callable[..., Any]

    def digest(self):
        """A hex digest of the key (the task function by its module and qualified name)."""
        b = self.builder
        text = json.dumps([self.run, self.task, self.task_kwargs, list(self.node_config),
                           f"{getattr(b, '__module__', '?')}:{getattr(b, '__qualname__', '?')}"])
        return hashlib.sha256(text.encode()).hexdigest()


class LocalProblems:
    """The local problems built in this process, by :class:`ProblemKey` (least recently used
    dropped beyond ``maxsize``; a run whose key changes drops its old problem). Thread-safe;
    a problem is built outside the lock.

    Parameters
    ----------
    maxsize : int
        Most problems kept (a node serves one run at a time; the default leaves room for a
        few runs of an in-process test).
    """

    def __init__(self, maxsize=4):
        self.maxsize = int(maxsize)
        if self.maxsize < 1:
            raise ValueError(f"maxsize: expected an int >= 1, got {maxsize!r}")
        self._items = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._items)

    def clear(self):
        """Forget every problem (as a fresh process)."""
        with self._lock:
            self._items.clear()

    def get(self, key, build):
        """The problem kept under ``key``, else ``build()``'s, kept."""
        with self._lock:
            problem = self._items.get(key)
            if problem is not None:
                self._items.move_to_end(key)
                return problem
        problem = build()
        with self._lock:
            for old in [k for k in self._items if k.run == key.run and k != key]:
                del self._items[old]                  # the run's task or arguments changed
            self._items[key] = problem
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return problem


#: The local problems of this process (:class:`LocalProblems`).
PROBLEMS = LocalProblems()

#: Largest encoded local problem kept in Flower's ``context.state`` (bytes of its arrays);
#: a larger one is rebuilt by its task at every message of a fresh process.
STATE_MAX_BYTES = 256 << 20

_RUN_TOKEN = "run.token"


def _problem_key(cfg, task, node_config, store):
    status = store.setdefault("status", {})
    token = status.get(_RUN_TOKEN)
    if not (isinstance(token, str) and re.fullmatch(r"[0-9a-f]{32}", token)):
        token = status[_RUN_TOKEN] = secrets.token_hex(16)
    return ProblemKey(token, cfg.task, json.dumps(cfg.task_kwargs, sort_keys=True),
                      tuple(sorted((str(k), repr(v)) for k, v in node_config.items())), task)


def _local_problem(cfg, cid, node_config, app_names, store, problems):
    task = cfg.load_task(app_names)

    def build():
        problem = task(cid, dict(node_config), **cfg.task_kwargs)
        if int(problem.n_clients) != 1:
            raise ValueError(f"task {cfg.task!r} returned a problem with {problem.n_clients} "
                             f"clients; a task builds one client's local problem")
        return problem
    return problems.get(_problem_key(cfg, task, node_config, store), build)


# ------------------------------------------------------------- a local problem as plain data

class _NotData(Exception):
    """A value that :func:`encode_problem` does not write (the problem is not kept)."""


_ENCODE_DEPTH, _DECODE_NODES = 12, 100_000


def _plain_class(cls):
    """Whether instances of ``cls`` are rebuilt as pickle's default does: ``cls.__new__(cls)``
    and their ``__dict__`` (no slots, no own ``__reduce__``/``__getstate__``/``__setstate__``)."""
    for c in cls.__mro__[:-1]:
        if any(name in vars(c) for name in ("__slots__", "__reduce__", "__reduce_ex__",
                                            "__getstate__", "__setstate__")):
            return False
    return True


def _data_classes():
    """``module:qualname`` -> class: the loaded subclasses of Problem and Manifold (only
    classes already imported; decoding never imports)."""
    from ..manifolds.base import Manifold
    from ..problems.base import Problem
    out, todo = {}, [Problem, Manifold]
    while todo:
        c = todo.pop()
        out[f"{c.__module__}:{c.__qualname__}"] = c
        todo.extend(c.__subclasses__())
    return out


def encode_problem(problem, why=None):
    """A local problem as plain data: ``(arrays, meta)`` (``.npy``-able arrays by name, and a
    section of strings), or ``None`` if it is not plain data (the reason appended to the list
    ``why``, if given).

    Plain data: an object of a Problem or Manifold subclass whose ``__dict__`` holds, at any
    depth (at most 12), ``None``, bools, ints, floats, strings, numpy arrays of a numeric or
    bool dtype, numpy scalars, tuples, lists and str-keyed dicts of those, and such objects.
    An array referenced twice is written once and shared again on decoding. Nothing is
    pickled: :func:`decode_problem` rebuilds the object with ``cls.__new__`` and its
    attributes, as pickle's default for such classes does.
    """
    classes = _data_classes()
    arrays, seen = {}, {}

    def enc(v, path):
        if len(path) > _ENCODE_DEPTH:
            raise _NotData(f"{'.'.join(path)}: nested too deep")
        if v is None or isinstance(v, (bool, str)) or type(v) in (int, float):
            return v
        if type(v) is np.ndarray or isinstance(v, np.generic):
            a = np.asarray(v)
            if a.dtype.kind not in "biufc" or a.dtype.hasobject:
                raise _NotData(f"{'.'.join(path)}: an array of dtype {a.dtype}")
            if id(v) not in seen:
                name = f"a{len(arrays)}"
                arrays[name] = a
                seen[id(v)] = (name, v)       # the object kept alive: its id stays its own
            name = seen[id(v)][0]
            return {"a": name, "s": isinstance(v, np.generic),
                    "f": bool(a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous)}
        if isinstance(v, (tuple, list)):
            return {"t" if isinstance(v, tuple) else "l":
                    [enc(x, (*path, str(i))) for i, x in enumerate(v)]}
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise _NotData(f"{'.'.join(path)}: a dict with keys other than strings")
            return {"d": [[k, enc(x, (*path, k))] for k, x in v.items()]}
        cls = type(v)
        name = f"{cls.__module__}:{cls.__qualname__}"
        if classes.get(name) is not cls or not _plain_class(cls) \
                or not isinstance(getattr(v, "__dict__", None), dict):
            raise _NotData(f"{'.'.join(path) or 'the problem'}: an object of {name}")
        return {"o": name, "v": [[k, enc(x, (*path, k))] for k, x in vars(v).items()]}

    try:
        outline = enc(problem, ())
    except (_NotData, RecursionError) as exc:
        if why is not None:
            why.append(str(exc) if isinstance(exc, _NotData) else "nested too deep")
        return None
    if "o" not in outline:
        return None
    return arrays, {"format": "rfl_fast.problem/1", "outline": json.dumps(outline)}


def decode_problem(arrays, meta):
    """The local problem written by :func:`encode_problem`; ``ValueError`` if the data does not
    describe one (an unknown format, a class that is not a loaded Problem or Manifold
    subclass, an array missing, more than 100000 values)."""
    if meta.get("format") != "rfl_fast.problem/1":
        raise ValueError(f"not an encoded problem: format {brief(meta.get('format'))}")
    try:
        outline = json.loads(meta["outline"])
    except (KeyError, TypeError, ValueError, RecursionError):
        raise ValueError("not an encoded problem: no outline") from None
    classes, done, count = _data_classes(), {}, [0]

    def dec(v, depth):
        count[0] += 1
        if depth > _ENCODE_DEPTH + 1 or count[0] > _DECODE_NODES:
            raise ValueError("an encoded problem too deep or too large")
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if not isinstance(v, dict) or len(v) < 1:
            raise ValueError(f"an encoded problem with a value {brief(v)}")
        if "a" in v:
            name = v["a"]
            if name not in done:
                if not isinstance(name, str) or name not in arrays:
                    raise ValueError(f"an encoded problem without its array {brief(name)}")
                a = np.asarray(arrays[name])
                done[name] = np.asfortranarray(a) if v.get("f") else a
                if v.get("s"):
                    done[name] = done[name][()]
            return done[name]
        if isinstance(v.get("t"), list):
            return tuple(dec(x, depth + 1) for x in v["t"])
        if isinstance(v.get("l"), list):
            return [dec(x, depth + 1) for x in v["l"]]
        pairs = v.get("d", v.get("v"))
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2
                                                  and isinstance(p[0], str) for p in pairs):
            raise ValueError(f"an encoded problem with a value {brief(v)}")
        if "d" in v:
            return {k: dec(x, depth + 1) for k, x in pairs}
        cls = classes.get(v.get("o"))
        if cls is None or not _plain_class(cls):
            raise ValueError(f"an encoded problem of {brief(v.get('o'))}: not a loaded Problem "
                             f"or Manifold class")
        obj = cls.__new__(cls)
        obj.__dict__.update({k: dec(x, depth + 1) for k, x in pairs})
        return obj

    from ..problems.base import Problem
    problem = dec(outline, 0)
    if not isinstance(problem, Problem):
        raise ValueError("an encoded problem that is not a Problem")
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


def handle(content, store, node_config, run_config, app_names=None, *, problems=None):
    """One message of the server to this client; returns the reply content.

    Parameters
    ----------
    content : dict
        Sections ``"config"`` (phase, round, client id, ...), ``"msg"``/``"msg.meta"`` (the
        algorithm's message) and, at first contact, ``"init"``/``"init.meta"`` (``x0``);
        read through :mod:`.schema`.
    store : dict
        The client's persistent state across messages of one run (mutated): ``"cstate"``,
        ``"memo"`` (arrays) and ``"status"`` (config; its ``"run.token"`` names the run in the
        local problem's key).
    node_config, run_config : mapping
        The SuperNode's node config (the authority: :class:`NodePolicy`) and the run config.
    app_names : AppNames, optional
        Algorithms and tasks the app's code registers besides the built-in ones.
    problems : LocalProblems, optional
        Where the local problem is kept between messages (default :data:`PROBLEMS`); anything
        with its ``get(key, build)``.

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
    problems = PROBLEMS if problems is None else problems
    if schema.is_hello(content):
        schema.read_hello_request(content)
        problem = _local_problem(cfg, cid, node_config, app_names, store, problems)
        from .. import __version__
        return {"config": {"client": cid, "n_samples": int(problem.sizes[0]),
                           "manifold": manifold_spec(problem.manifold),
                           "problem": type(problem).__name__, "rfl_fast": __version__}}
    problem = _local_problem(cfg, cid, node_config, app_names, store, problems)
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

#: The records of ``context.state`` holding the run's local problem (not under ``rfl.``: the
#: store's records, which :func:`~rfl_fast.flower.records.load_store` decodes at every message).
STATE_PROBLEM, STATE_PROBLEM_META = "rfl_fast.problem", "rfl_fast.problem.meta"


class StateProblems:
    """:class:`LocalProblems` backed by a run's Flower ``context.state``: a problem missing
    from ``memory`` is decoded from the state when the state holds the same key's, else built
    and written there (if it encodes, :func:`encode_problem`, within :data:`STATE_MAX_BYTES`).

    Parameters
    ----------
    state : flwr.app.RecordDict
        The run's ``context.state`` (mutated).
    memory : LocalProblems, optional
        Default :data:`PROBLEMS`.

    Attributes
    ----------
    source : str or None
        Where the last problem came from: ``"memory"``, ``"state"`` or ``"built"``.
    note : str or None
        Why a built problem was not written (also logged as a warning), else ``None``.
    """

    def __init__(self, state, memory=None):
        self.state, self.memory, self.source = state, PROBLEMS if memory is None else memory, None
        self.note = None

    def get(self, key, build):
        self.source = "memory"

        def restore_or_build():
            problem = self._read(key)
            if problem is not None:
                self.source = "state"
                return problem
            problem = build()
            self.source = "built"
            self._write(key, problem)
            return problem
        return self.memory.get(key, restore_or_build)

    def _read(self, key):
        from flwr.app import ArrayRecord, ConfigRecord, RecordDict

        from .records import RecordError, from_recorddict
        rec, meta = self.state.get(STATE_PROBLEM), self.state.get(STATE_PROBLEM_META)
        if not isinstance(rec, ArrayRecord) or not isinstance(meta, ConfigRecord):
            return None
        meta = dict(meta)
        if meta.get("key") != key.digest():
            return None                               # another run, task, arguments or node
        try:
            arrays = from_recorddict(RecordDict({"rfl.problem": rec}),
                                     max_bytes=STATE_MAX_BYTES)["problem"]
            return decode_problem(arrays, meta)
        except (RecordError, ValueError, KeyError):
            return None                               # not readable: the task builds it

    def _write(self, key, problem):
        from flwr.app import Array, ArrayRecord, ConfigRecord
        for name in (STATE_PROBLEM, STATE_PROBLEM_META):
            if name in self.state:
                del self.state[name]
        why = []
        enc = encode_problem(problem, why)
        if enc is not None and sum(a.nbytes for a in enc[0].values()) > STATE_MAX_BYTES:
            why.append(f"its arrays hold more than STATE_MAX_BYTES = {STATE_MAX_BYTES} bytes")
        if why:
            self.note = (f"the local problem ({type(problem).__name__}) is not kept in "
                         f"context.state ({brief(why[0])}): its task runs at every message "
                         f"of a fresh ClientApp process")
            logger.warning("rfl_fast: %s", self.note)
            return False
        if enc is None:
            return False
        arrays, meta = enc
        self.state[STATE_PROBLEM] = ArrayRecord({k: Array(np.asarray(a))
                                                 for k, a in arrays.items()})
        self.state[STATE_PROBLEM_META] = ConfigRecord({**meta, "key": key.digest()})
        return True


def serve(content, state, node_config, run_config, app_names=None, *, problems=None):
    """:func:`handle` on a Flower ``context.state`` (a ``RecordDict``, mutated): the store read
    from it and written back after a reply, the local problem kept in it
    (``problems``: default ``StateProblems(state)``). Returns the reply content."""
    from .records import load_store, save_store
    store = load_store(state)
    reply = handle(content, store, node_config, run_config, app_names,
                   problems=StateProblems(state) if problems is None else problems)
    save_store(state, store)
    return reply


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
    ``rfl.status.meta``), and so does its local problem (``rfl_fast.problem``,
    ``rfl_fast.problem.meta``: :func:`serve`).

    Flower API used (flwr 1.41 and 1.42): ``flwr.clientapp.ClientApp`` with its ``query`` and
    ``train`` decorators taking an action name, ``flwr.app.Message``/``Context`` (its
    ``state``, ``node_config``, ``run_config``) and the records of :mod:`.records`.
    """
    from flwr.app import Context, Message
    from flwr.clientapp import ClientApp

    from .records import from_recorddict, to_recorddict

    app = ClientApp()
    app_names = AppNames(algorithms, tasks)

    def _serve(msg: Message, context: Context) -> Message:
        reply = serve(from_recorddict(msg.content), context.state, context.node_config,
                      context.run_config, app_names)
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
