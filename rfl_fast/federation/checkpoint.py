"""Checkpoints of a federated run (continued by :func:`rfl_fast.federation.resume`).

``run(..., checkpoint=path, checkpoint_every=N)`` writes the full state of the run after every
``N``-th round and after the last one; :func:`resume` continues from it bit-identically (the
same iterates and the same non-timing history columns as the uninterrupted run). An
interrupted run loses at most the rounds since the last checkpoint.

Format: one ``.npz`` file (written to a temporary file in the same directory, flushed and
``os.replace``-d over ``path``, so a crash leaves the previous checkpoint intact), holding

* every array of the state as its own entry (``a0``, ``a1``, ...), and
* ``__json__``: a JSON document (a unicode scalar array) describing the rest: the format
  version, the round index, the root seed, the total rounds, the metric settings, the
  algorithm and the participation model (their dataclass fields), the server state, the
  clients' persistent states, the initial point, the History so far (columns and meta) and
  the bit-generator states of the participation and server streams. The clients' streams are
  rebuilt from ``(seed, round, client)`` and need no state.

Nothing is pickled: objects are stored as dataclasses named by ``module:qualname``. Loading
resolves no module from the file: a name is looked up in a table of the classes a run builds
(:func:`classes`: the registered algorithms and their server states, the participation models,
the schedules, the privacy settings and ledger), plus the dataclasses of the module of an
``algorithm`` passed to :func:`resume` (already imported by its caller); any other name is
refused. Every object is rebuilt through its constructor (``cls(**fields)``), so it passes the
checks a new one passes. Loading uses ``numpy.load(..., allow_pickle=False)``'s format through
the bounded reader below.

Trust: a checkpoint file is untrusted data, read at a cost bounded by a fixed multiple of its
size. Every ``.npy`` member's declared shape and dtype are checked against the member's size in
the zip directory (and that size against deflate's largest expansion of its compressed size),
and the members' declared sizes together against the file's, before anything is inflated
(:func:`rfl_fast._files.read_npz`), so a crafted header or a directory naming one member many
times cannot make the reader allocate more than the file holds; object dtypes are refused.
Each array member is referenced at most once (the writer never shares one) and is used as
read, not copied. The JSON document is decoded to at most :data:`MAX_DEPTH` levels, scalars
only of numeric dtypes, dataclasses only of the table and with exactly their declared fields.
:func:`read_run` then checks the payload's structure (every key present with its type, the
random generators' states restorable), and :func:`check_state` everything a fresh run on the
problem would have built: the algorithm and participation pass ``validate`` and the algorithm
is specialized for the run again (PriRFed rebuilds its privacy ledger and refuses a stored one
that disagrees), the server state is of the type and the shapes ``init_server`` gives, the
client states those of ``init_clients``, the history's columns those the run records (the
base columns, the problem's metrics, the ledger's) with their dtypes and round numbers. Every
failure -- a corrupt zip, a truncated member, bad or deep JSON, a missing entry, an unknown
class, a constructor's refusal, a malformed state, even a ``SystemExit`` raised on the way --
raises :class:`rfl_fast.errors.CheckpointError` naming the file (a missing file stays
``FileNotFoundError``; only ``KeyboardInterrupt`` passes through).

A run's checkpoint also records the problem it ran on (:func:`problem_fingerprint`: its type,
manifold, number of clients, their sample counts and weights); :func:`rfl_fast.federation.resume`
refuses a problem that differs (privacy ledgers, weights and schedules were computed for the
recorded one).
"""

import dataclasses
import functools
import json
import os
import sys

import numpy as np

from .._files import atomic_write, read_npz
from .._validation import brief
from ..errors import CheckpointError
from .history import BASE_COLUMNS, INT_COLUMNS

__all__ = ["save", "load", "read_run", "check_state", "problem_fingerprint",
           "check_problem_matches", "classes",
           "FORMAT_VERSION", "MAX_DEPTH"]

FORMAT_VERSION = 2
#: Deepest nesting of the JSON document decoded.
MAX_DEPTH = 64


# ---------------------------------------------------------------- encoding


def _encode(obj, arrays):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)) and not isinstance(obj, np.generic):
        return obj
    if isinstance(obj, np.generic):
        return {"__scalar__": obj.item(), "dtype": obj.dtype.str}
    if isinstance(obj, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"__array__": key, "readonly": not obj.flags.writeable}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return {"__frozenset__": [_encode(v, arrays) for v in sorted(obj)]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            return {"__items__": [[_encode(k, arrays), _encode(v, arrays)]
                                  for k, v in obj.items()]}
        return {"__dict__": {k: _encode(v, arrays) for k, v in obj.items()}}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        return {"__dataclass__": f"{cls.__module__}:{cls.__qualname__}",
                "fields": {f.name: _encode(getattr(obj, f.name), arrays)
                           for f in dataclasses.fields(obj)}}
    raise TypeError(f"checkpoint: cannot store a {type(obj).__name__} ({brief(obj)}); "
                    f"states must be arrays, numbers, strings, lists, dicts or dataclasses")


_SCALAR_KINDS = "biuf"


@functools.cache
def _builtin_classes():
    from .. import algorithms
    from ..algorithms import ALGORITHMS, participation, schedules
    from ..privacy import DPSettings, PrivacyLedger

    found = list(ALGORITHMS.values())
    found += [getattr(algorithms, n) for n in algorithms.__all__]  # their server states
    found += [participation.Full, participation.Uniform, participation.Bernoulli,
              schedules.Constant, schedules.Decaying, DPSettings, PrivacyLedger]
    table = {f"{c.__module__}:{c.__qualname__}": c for c in found
             if isinstance(c, type) and dataclasses.is_dataclass(c)}
    # the name checkpoints written before the ledger moved to rfl_fast.privacy give it
    table["rfl_fast.algorithms.pri:PrivacyLedger"] = PrivacyLedger
    return table


def classes(trusted=("rfl_fast",)):
    """The classes a checkpoint may name, ``{"module:qualname": class}``: rfl_fast's (the
    registered algorithms and their server states, participations, schedules, DPSettings,
    PrivacyLedger) and the dataclasses defined in each other module of ``trusted`` that is
    already imported (the module of an algorithm passed to ``resume``). Nothing is imported.

    Parameters
    ----------
    trusted : iterable of str
        ``"rfl_fast"`` and module names.

    Returns
    -------
    dict
    """
    table = dict(_builtin_classes()) if "rfl_fast" in trusted else {}
    for name in trusted:
        module = sys.modules.get(name) if name != "rfl_fast" else None
        for obj in list(vars(module).values()) if module is not None else ():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and \
                    obj.__module__ == name:
                table.setdefault(f"{name}:{obj.__qualname__}", obj)
    return table


class _Arrays:
    """The file's array members, each handed out once (the writer never shares one, so a
    second reference is a crafted file trying to multiply the memory it costs)."""

    def __init__(self, arrays):
        self.arrays, self.used = arrays, set()

    def take(self, key):
        if not isinstance(key, str) or key not in self.arrays:
            raise ValueError(f"no array member {brief(key)}")
        if key in self.used:
            raise ValueError(f"array member {key!r} referenced twice (a checkpoint stores "
                             f"each array once)")
        self.used.add(key)
        return self.arrays[key]


def _decode(obj, arrays, table, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    depth += 1
    if isinstance(obj, list):
        return [_decode(v, arrays, table, depth) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__array__" in obj:
        a = arrays.take(obj["__array__"])       # read once, used as read: no copy
        if obj.get("readonly"):
            a.setflags(write=False)
        return a
    if "__scalar__" in obj:
        dtype = np.dtype(obj["dtype"])
        if dtype.kind not in _SCALAR_KINDS:
            raise ValueError(f"a scalar of dtype {brief(obj['dtype'])} (numbers only)")
        return dtype.type(obj["__scalar__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, arrays, table, depth) for v in _list(obj["__tuple__"]))
    if "__frozenset__" in obj:
        return frozenset(_key(_decode(v, arrays, table, depth))
                         for v in _list(obj["__frozenset__"]))
    if "__items__" in obj:
        return {_key(_decode(k, arrays, table, depth)): _decode(v, arrays, table, depth)
                for k, v in _pairs(obj["__items__"])}
    if "__dict__" in obj:
        d = obj["__dict__"]
        if not isinstance(d, dict):
            raise ValueError(f"malformed entry {brief(obj)}")
        return {k: _decode(v, arrays, table, depth) for k, v in d.items()}
    if "__dataclass__" in obj:
        return _dataclass(obj, arrays, table, depth)
    raise ValueError(f"malformed entry {brief(obj)}")


def _list(v):
    if not isinstance(v, list):
        raise ValueError(f"expected a list, got {brief(v)}")
    return v


def _pairs(v):
    for item in _list(v):
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError(f"expected [key, value] pairs, got {brief(item)}")
        yield item


def _key(k):
    """A decoded dict key or set member: a scalar (never a container, never hashed deeply)."""
    if not isinstance(k, (str, int, float, bool, type(None), np.generic)):
        raise ValueError(f"a dict key or set member of type {type(k).__name__}")
    return k


def _dataclass(obj, arrays, table, depth):
    name = obj["__dataclass__"]
    cls = table.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"refusing to rebuild {brief(name)}: not a class a run builds (known: "
                         f"rfl_fast's algorithms, states, participations, schedules and "
                         f"privacy ledgers; pass the algorithm to resume(..., algorithm=...) "
                         f"for your own classes)")
    fields = dataclasses.fields(cls)
    declared = {f.name for f in fields}
    given = obj.get("fields")
    if not isinstance(given, dict) or set(given) != declared:
        got = sorted(map(str, given)) if isinstance(given, dict) else given
        raise ValueError(f"{cls.__qualname__}: fields {brief(got)}, expected {sorted(declared)}")
    if any(not f.init for f in fields):
        raise ValueError(f"{cls.__qualname__} has fields its constructor does not take")
    kwargs = {k: _decode(v, arrays, table, depth) for k, v in given.items()}
    try:
        return cls(**kwargs)            # the constructor's checks, as for a new object
    except Exception as exc:  # noqa: BLE001 - whatever the constructor refuses with
        raise ValueError(f"{cls.__qualname__}: {type(exc).__name__}: {str(exc)[:300]}") \
            from None


# ---------------------------------------------------------------- files


def save(path, payload):
    """Write ``payload`` (dict) atomically to ``path`` (npz + embedded JSON)."""
    path = os.fspath(path)
    arrays = {}
    doc = json.dumps({"version": FORMAT_VERSION,
                      "payload": {k: _encode(v, arrays) for k, v in payload.items()}})
    arrays["__json__"] = np.array(doc)

    def write(tmp):
        with open(tmp, "wb") as fh:  # a file object: np.savez adds no ".npz" to the name
            np.savez(fh, **arrays)

    atomic_write(path, write, fsync=True)


def load(path, *, trusted=("rfl_fast",)):
    """Read a checkpoint written by :func:`save`: the payload dict.

    Parameters
    ----------
    path : str or os.PathLike
    trusted : iterable of str
        Where the classes it may name come from (:func:`classes`).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    CheckpointError
        Anything wrong with the file (module docstring), naming it; so is any other exception
        but ``KeyboardInterrupt``, ``SystemExit`` included.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path}: no such file")
    try:
        arrays = read_npz(path)
        doc = arrays.pop("__json__", None)
        if doc is None or doc.shape != () or doc.dtype.kind != "U":
            raise CheckpointError(f"checkpoint {path}: no __json__ text entry (not an "
                                  f"rfl_fast checkpoint)")
        doc = json.loads(str(doc))
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise CheckpointError(f"checkpoint {path}: format version {brief(version)}, this "
                                  f"rfl_fast reads version {FORMAT_VERSION}")
        payload = doc.get("payload")
        if not isinstance(payload, dict):
            raise ValueError("no payload")
        table, members = classes(tuple(trusted)), _Arrays(arrays)
        return {k: _decode(v, members, table) for k, v in payload.items()}
    except CheckpointError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure of a foreign file is one error
        raise _corrupt(path, exc) from None


def _corrupt(path, exc):
    return CheckpointError(f"checkpoint {path}: corrupt, truncated or not an rfl_fast "
                           f"checkpoint ({type(exc).__name__}: {str(exc)[:300]})")


# ---------------------------------------------------------------- engine side


def problem_fingerprint(problem):
    """What a run's checkpoint records of its problem: type, manifold, client sample counts
    and weights (JSON-able), so that a resume on another problem is refused."""
    return {"type": type(problem).__name__, "manifold": repr(problem.manifold),
            "sizes": [int(v) for v in np.asarray(problem.sizes)],
            "weights": [float(v) for v in np.asarray(problem.weights, dtype=np.float64)]}


def check_problem_matches(recorded, problem):
    """Raise ``ValueError`` naming the first difference between the recorded
    :func:`problem_fingerprint` and ``problem``'s."""
    now = problem_fingerprint(problem)
    for key, what in (("type", "problem type"), ("manifold", "manifold"),
                      ("sizes", "clients' sample counts N_i"), ("weights", "client weights")):
        if recorded[key] != now[key]:
            were, are = recorded[key], now[key]
            where = ""
            if isinstance(were, list) and len(were) == len(are):
                i = next(j for j, (a, b) in enumerate(zip(were, are)) if a != b)
                where, were, are = f" (client {i})", were[i], are[i]
            elif isinstance(were, list):
                where, were, are = " (number of clients)", len(were), len(are)
            raise ValueError(f"resume: the problem differs from the checkpointed run's: "
                             f"{what}{where} {brief(are)}, the run had {brief(were)}; resume "
                             f"continues a run on the same problem (its privacy ledger, "
                             f"weights and state were computed for it)")


def check_state(payload, problem, path):
    """Probe a read checkpoint against ``problem`` before a run continues from it, rebuilding
    what a fresh run on it would build (module docstring): the participation and the
    algorithm pass their checks for the problem and the algorithm is specialized for the run
    (PriRFed's ledger rebuilt and compared), ``x0`` and the model are points of the manifold,
    the server state has the type and shapes of ``init_server``'s, the client states those of
    ``init_clients`` (a row per client), the history the run's columns. ``CheckpointError``
    naming the file otherwise (a state rebuilt from a crafted file would otherwise fail
    somewhere inside a round, or run with privacy state not computed for it)."""
    from .context import ServerContext
    from .driver import _Metrics, check_point_arg, specialize

    M, n = problem.manifold, int(problem.n_clients)
    try:
        alg, part, rounds = payload["algorithm"], payload["participation"], payload["rounds"]
        part.validate(n)
        fixed = specialize(problem, alg, part, rounds, resumed=True)
        x0 = check_point_arg(M, payload["x0"], "x0")
        ctx = ServerContext(0, rounds, np.random.Generator(np.random.PCG64(0)))
        _like(payload["state"], fixed.init_server(problem, x0, ctx), M, "the server state")
        check_point_arg(M, np.asarray(alg.point(problem, payload["state"]),
                                      dtype=np.float64), "the model")
        fresh = fixed.init_clients(problem, x0)
        saved = payload["client_state"]
        if set(saved) != set(fresh):
            raise ValueError(f"client states {brief(sorted(saved))}, the algorithm keeps "
                             f"{sorted(fresh)}")
        for name, arr in saved.items():
            _like(arr, np.asarray(fresh[name]), M, f"client state {name!r}")
        extra = {}
        if payload["metrics"]:
            extra.update(_Metrics(problem)(x0))
        if fixed.ledger is not None:
            extra.update(fixed.ledger.row(0))
        _check_history(payload["history"], payload["round"],
                       BASE_COLUMNS + tuple(c for c in extra if c not in BASE_COLUMNS))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - every malformed state is one error
        raise _corrupt(path, exc) from None


def _like(saved, fresh, M, what):
    """``saved`` (from the file) has the structure of ``fresh`` (what the run builds): the same
    dataclass, arrays of the same shape and dtype kind (finite floats), scalars of the same
    type; a field None at the start may hold an array of a point's shape."""
    if isinstance(fresh, np.ndarray):
        if not (isinstance(saved, np.ndarray) and saved.shape == fresh.shape
                and saved.dtype.kind == fresh.dtype.kind and saved.dtype.kind in "biuf"):
            raise ValueError(f"{what}: {brief(saved)}, expected an array of shape "
                             f"{fresh.shape} of dtype {fresh.dtype}")
        if saved.dtype.kind == "f" and not np.isfinite(saved).all():
            raise ValueError(f"{what}: not finite")
        return
    if fresh is None:
        if saved is not None:
            _like(saved, np.zeros(M.shape), M, what)
        return
    if dataclasses.is_dataclass(fresh):
        if type(saved) is not type(fresh):
            raise ValueError(f"{what}: a {type(saved).__name__}, the algorithm keeps a "
                             f"{type(fresh).__name__}")
        for f in dataclasses.fields(fresh):
            _like(getattr(saved, f.name), getattr(fresh, f.name), M, f"{what}.{f.name}")
        return
    plain = (bool, int, float)
    kind = next((t for t in plain if isinstance(fresh, t)), None)
    if kind is None or not isinstance(saved, kind) or (kind is not bool and
                                                       isinstance(saved, bool)):
        raise ValueError(f"{what}: {brief(saved)}, expected a {type(fresh).__name__}")


def _check_history(hist, round_, columns):
    """The history of ``round_`` rounds: exactly ``columns`` in order, of their dtypes, the
    round numbers 0..round_, and a JSON-plain ``meta`` whose ``rejected`` lists
    ``[round, client, reason]``."""
    have = list(hist["columns"])
    if have != list(columns):
        missing = [c for c in columns if c not in have]
        unknown = [c for c in have if c not in columns]
        raise ValueError(f"history columns differ from the run's: missing {brief(missing)}, "
                         f"unknown {brief(unknown)}" if missing or unknown else
                         f"history columns in another order than the run's {list(columns)}")
    for name, col in hist["columns"].items():
        want = np.int64 if name in INT_COLUMNS else np.float64
        if col.dtype != want:
            raise ValueError(f"history column {name!r} of dtype {col.dtype}, expected "
                             f"{np.dtype(want)}")
    if not np.array_equal(hist["columns"]["round"], np.arange(round_ + 1)):
        raise ValueError("history column 'round' is not 0, 1, ..., round")
    meta = hist["meta"]
    _plain(meta, "history meta")
    rejected = meta.get("rejected", [])
    if not isinstance(rejected, (list, tuple)) or not all(
            isinstance(r, (list, tuple)) and len(r) == 3 and _is_int(r[0]) and _is_int(r[1])
            and isinstance(r[2], str) for r in rejected):
        raise ValueError(f"history meta 'rejected': {brief(rejected)}, expected "
                         f"[round, client, reason] entries")


def _plain(v, what):
    """JSON values only (what the engine writes into a history's meta)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return
    if isinstance(v, (list, tuple)):
        for item in v:
            _plain(item, what)
        return
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        for item in v.values():
            _plain(item, what)
        return
    raise ValueError(f"{what}: a {type(v).__name__} ({brief(v)}), expected JSON values")


def state_payload(*, round, seed, rounds, metrics, metrics_every, algorithm, participation,
                  x0, state, client_state, history, prng, srng, problem):
    """The dict the engine checkpoints (see the module docstring)."""
    return {"round": int(round), "seed": int(seed), "rounds": int(rounds),
            "metrics": bool(metrics), "metrics_every": int(metrics_every),
            "algorithm": algorithm, "algorithm_repr": repr(algorithm),
            "participation": participation, "x0": x0, "state": state,
            "client_state": dict(client_state),
            "history": {"columns": {c: np.asarray(v) for c, v in history._cols.items()},
                        "meta": history.meta},
            "prng": prng.bit_generator.state, "srng": srng.bit_generator.state,
            "problem": problem_fingerprint(problem)}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_PAYLOAD = {
    "round": _is_int, "seed": _is_int, "rounds": _is_int, "metrics_every": _is_int,
    "metrics": lambda v: isinstance(v, bool), "algorithm_repr": lambda v: isinstance(v, str),
    "x0": lambda v: isinstance(v, np.ndarray) and v.dtype.kind == "f",
    "client_state": lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(a, np.ndarray) for k, a in v.items()),
    "history": lambda v: (isinstance(v, dict) and isinstance(v.get("meta"), dict)
                          and isinstance(v.get("columns"), dict) and all(
                              isinstance(c, str) and isinstance(a, np.ndarray) and a.ndim == 1
                              for c, a in v["columns"].items())),
    "prng": lambda v: isinstance(v, dict), "srng": lambda v: isinstance(v, dict),
    "problem": lambda v: (isinstance(v, dict) and isinstance(v.get("type"), str)
                          and isinstance(v.get("manifold"), str)
                          and isinstance(v.get("sizes"), list)
                          and isinstance(v.get("weights"), list)),
}


def read_run(path, *, trusted=("rfl_fast",)):
    """:func:`load` a run's checkpoint and check its structure: every key of
    :func:`state_payload` with its type, counts that agree (``0 <= round <= rounds``, one
    history row per round played), the algorithm and participation of their base classes and
    the generators' states restorable.

    Returns
    -------
    dict
        The payload.

    Raises
    ------
    FileNotFoundError, CheckpointError
    """
    from ..algorithms.base import FederatedAlgorithm
    from ..algorithms.participation import Participation

    payload = load(path, trusted=trusted)
    path = os.fspath(path)
    try:
        for key, ok in _PAYLOAD.items():
            if key not in payload or not ok(payload[key]):
                raise ValueError(f"entry {key!r} missing or malformed")
        if not isinstance(payload.get("algorithm"), FederatedAlgorithm) or \
                not isinstance(payload.get("participation"), Participation):
            raise ValueError("entry 'algorithm' or 'participation' is not one")
        if not 0 <= payload["round"] <= payload["rounds"] or payload["metrics_every"] < 1:
            raise ValueError(f"round {payload['round']} of {payload['rounds']}")
        lengths = {a.shape[0] for a in payload["history"]["columns"].values()}
        if lengths != {payload["round"] + 1}:
            raise ValueError(f"history columns of {sorted(lengths)} rows after round "
                             f"{payload['round']}")
        for key in ("prng", "srng"):               # restorable (the engine's PCG64 streams)
            np.random.PCG64().state = payload[key]
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - every malformed payload is one error
        raise _corrupt(path, exc) from None
    return payload
