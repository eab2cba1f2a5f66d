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

Nothing is pickled: objects are stored as dataclasses named by ``module:qualname`` and
rebuilt field by field (no ``__init__`` re-run, so specialized algorithms come back exactly);
only classes from ``rfl_fast`` modules, or from the module of an ``algorithm`` passed to
:func:`resume`, are rebuilt. Loading uses ``numpy.load(..., allow_pickle=False)``.

Trust: a checkpoint file is untrusted data, read at a cost bounded by a fixed multiple of its
size. Every ``.npy`` member's declared shape and dtype are checked against the member's size in
the zip directory (and that size against deflate's largest expansion of its compressed size)
before it is inflated (:func:`rfl_fast._files.read_npz`), so a crafted header cannot make the
reader allocate more than the file holds; object dtypes are refused. The JSON document is
decoded to at most :data:`MAX_DEPTH` levels, scalars only of numeric dtypes, dataclasses only
of trusted modules and with exactly their declared fields. :func:`read_run` then checks the
payload's structure (every key present with its type, the random generators' states
restorable). Every failure -- a corrupt zip, a truncated member, bad or deep JSON, a missing
entry, an untrusted class, a malformed state -- raises
:class:`rfl_fast.errors.CheckpointError` naming the file (a missing file stays
``FileNotFoundError``).

A run's checkpoint also records the problem it ran on (:func:`problem_fingerprint`: its type,
manifold, number of clients, their sample counts and weights); :func:`rfl_fast.federation.resume`
refuses a problem that differs (privacy ledgers, weights and schedules were computed for the
recorded one).
"""

import dataclasses
import importlib
import json
import os

import numpy as np

from .._files import atomic_write, read_npz
from .._validation import brief
from ..errors import CheckpointError

__all__ = ["save", "load", "read_run", "check_state", "problem_fingerprint",
           "check_problem_matches",
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


def _decode(obj, arrays, trusted, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    depth += 1
    if isinstance(obj, list):
        return [_decode(v, arrays, trusted, depth) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__array__" in obj:
        a = np.array(arrays[obj["__array__"]])
        if obj.get("readonly"):
            a.setflags(write=False)
        return a
    if "__scalar__" in obj:
        dtype = np.dtype(obj["dtype"])
        if dtype.kind not in _SCALAR_KINDS:
            raise ValueError(f"a scalar of dtype {brief(obj['dtype'])} (numbers only)")
        return dtype.type(obj["__scalar__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, arrays, trusted, depth) for v in obj["__tuple__"])
    if "__frozenset__" in obj:
        return frozenset(_key(_decode(v, arrays, trusted, depth)) for v in obj["__frozenset__"])
    if "__items__" in obj:
        return {_key(_decode(k, arrays, trusted, depth)): _decode(v, arrays, trusted, depth)
                for k, v in obj["__items__"]}
    if "__dict__" in obj:
        return {k: _decode(v, arrays, trusted, depth) for k, v in obj["__dict__"].items()}
    if "__dataclass__" in obj:
        return _dataclass(obj, arrays, trusted, depth)
    raise ValueError(f"malformed entry {brief(obj)}")


def _key(k):
    """A decoded dict key or set member: a scalar (never a container, never hashed deeply)."""
    if not isinstance(k, (str, int, float, bool, type(None), np.generic)):
        raise ValueError(f"a dict key or set member of type {type(k).__name__}")
    return k


def _dataclass(obj, arrays, trusted, depth):
    module, qualname = str(obj["__dataclass__"]).split(":")
    name = f"{module[:80]}:{qualname[:80]}"
    if not any(module == m or module.startswith(m + ".") for m in trusted):
        raise ValueError(f"refusing to rebuild {name} (only "
                         f"classes of {sorted(trusted)} are rebuilt; pass the algorithm "
                         f"to resume(..., algorithm=...) for your own classes)")
    cls = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"{name} is not a dataclass")
    declared = {f.name for f in dataclasses.fields(cls)}
    given = obj["fields"]
    if not isinstance(given, dict) or set(given) != declared:
        raise ValueError(f"{cls.__qualname__}: fields {brief(sorted(map(str, given)))}, "
                         f"expected {sorted(declared)}")
    inst = cls.__new__(cls)
    for name, value in given.items():
        object.__setattr__(inst, name, _decode(value, arrays, trusted, depth))
    return inst


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

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    CheckpointError
        Anything wrong with the file (module docstring), naming it.
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
        return {k: _decode(v, arrays, set(trusted)) for k, v in doc["payload"].items()}
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure of a foreign file is one error
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
    """Probe a read checkpoint against ``problem`` before a run continues from it: ``x0`` and
    the algorithm's model point are points of the problem's manifold and every persistent
    client state has a row per client; ``CheckpointError`` naming the file otherwise (a state
    rebuilt from a crafted file would otherwise fail somewhere inside a round)."""
    from .driver import check_point_arg

    M, n = problem.manifold, int(problem.n_clients)
    try:
        check_point_arg(M, payload["x0"], "x0")
        check_point_arg(M, np.asarray(payload["algorithm"].point(problem, payload["state"]),
                                      dtype=np.float64), "the model")
        for name, arr in payload["client_state"].items():
            if arr.ndim < 1 or arr.shape[0] != n:
                raise ValueError(f"client state {name!r} of shape {arr.shape}, not one row "
                                 f"per client ({n})")
    except Exception as exc:  # noqa: BLE001 - every malformed state is one error
        raise _corrupt(path, exc) from None


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
    except Exception as exc:  # noqa: BLE001 - every malformed payload is one error
        raise _corrupt(path, exc) from None
    return payload
