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

Trust: a checkpoint file is untrusted data. Before anything is read, every ``.npy`` member's
declared shape and dtype are checked against the member's size in the zip directory (and
that size against deflate's largest expansion of its compressed size), so a crafted header
cannot make the reader allocate more than the file holds; object dtypes are refused. Every
failure -- a corrupt zip, a truncated member, bad JSON, a missing entry, an untrusted class --
raises :class:`rfl_fast.errors.CheckpointError` naming the file (a missing file stays
``FileNotFoundError``).
"""

import dataclasses
import importlib
import json
import os
import zipfile
import zlib

import numpy as np

from .._files import atomic_write
from ..errors import CheckpointError

__all__ = ["save", "load", "FORMAT_VERSION", "CheckpointError"]

FORMAT_VERSION = 1


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
    raise TypeError(f"checkpoint: cannot store a {type(obj).__name__} ({obj!r:.80}); "
                    f"states must be arrays, numbers, strings, lists, dicts or dataclasses")


def _decode(obj, arrays, trusted):
    if isinstance(obj, list):
        return [_decode(v, arrays, trusted) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__array__" in obj:
        a = np.array(arrays[obj["__array__"]])
        if obj.get("readonly"):
            a.setflags(write=False)
        return a
    if "__scalar__" in obj:
        return np.dtype(obj["dtype"]).type(obj["__scalar__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, arrays, trusted) for v in obj["__tuple__"])
    if "__frozenset__" in obj:
        return frozenset(_decode(v, arrays, trusted) for v in obj["__frozenset__"])
    if "__items__" in obj:
        return {_decode(k, arrays, trusted): _decode(v, arrays, trusted)
                for k, v in obj["__items__"]}
    if "__dict__" in obj:
        return {k: _decode(v, arrays, trusted) for k, v in obj["__dict__"].items()}
    if "__dataclass__" in obj:
        module, qualname = obj["__dataclass__"].split(":")
        if not any(module == m or module.startswith(m + ".") for m in trusted):
            raise ValueError(f"checkpoint: refusing to rebuild {module}:{qualname} (only "
                             f"classes of {sorted(trusted)} are rebuilt; pass the algorithm "
                             f"to resume(..., algorithm=...) for your own classes)")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"checkpoint: {module}:{qualname} is not a dataclass")
        inst = cls.__new__(cls)
        for name, value in obj["fields"].items():
            object.__setattr__(inst, name, _decode(value, arrays, trusted))
        return inst
    raise ValueError(f"checkpoint: malformed entry {obj!r:.80}")


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


#: Deflate's largest expansion ratio (a member cannot inflate to more than this times its
#: compressed size).
_DEFLATE_MAX_RATIO = 1032


def _check_members(path):
    """Declared sizes of every ``.npy`` member against the zip directory (no allocation)."""
    from numpy.lib import format as npy

    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise CheckpointError(f"checkpoint {path}: unexpected member "
                                      f"{info.filename!r}")
            if info.compress_type != zipfile.ZIP_STORED and \
                    info.file_size > _DEFLATE_MAX_RATIO * max(info.compress_size, 1):
                raise CheckpointError(f"checkpoint {path}: member {info.filename!r} declares "
                                      f"{info.file_size} bytes from {info.compress_size}")
            with zf.open(info) as fh:
                version = npy.read_magic(fh)
                if version == (1, 0):
                    shape, fortran, dtype = npy.read_array_header_1_0(fh)
                else:
                    shape, fortran, dtype = npy.read_array_header_2_0(fh)
                header = fh.tell()
            if dtype.hasobject:
                raise CheckpointError(f"checkpoint {path}: member {info.filename!r} has an "
                                      f"object dtype")
            count = 1
            for v in shape:
                count *= int(v)
            if header + count * dtype.itemsize != info.file_size:
                raise CheckpointError(
                    f"checkpoint {path}: member {info.filename!r} declares shape {shape} of "
                    f"{dtype} ({count * dtype.itemsize} bytes), the file holds "
                    f"{info.file_size - header}")


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
        _check_members(path)
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        if "__json__" not in arrays:
            raise CheckpointError(f"checkpoint {path}: no __json__ entry (not an rfl_fast "
                                  f"checkpoint)")
        doc = json.loads(str(arrays.pop("__json__")))
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else None
            raise CheckpointError(f"checkpoint {path}: format version {version}, this "
                                  f"rfl_fast reads version {FORMAT_VERSION}")
        return {k: _decode(v, arrays, set(trusted)) for k, v in doc["payload"].items()}
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, KeyError, IndexError,
            ValueError, TypeError, AttributeError, ImportError, MemoryError,
            json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path}: corrupt, truncated or not an rfl_fast "
                              f"checkpoint ({type(exc).__name__}: {exc})") from exc


# ---------------------------------------------------------------- engine side


def state_payload(*, round, seed, rounds, metrics, metrics_every, algorithm, participation,
                  x0, state, client_state, history, prng, srng):
    """The dict the engine checkpoints (see the module docstring)."""
    return {"round": int(round), "seed": int(seed), "rounds": int(rounds),
            "metrics": bool(metrics), "metrics_every": int(metrics_every),
            "algorithm": algorithm, "algorithm_repr": repr(algorithm),
            "participation": participation, "x0": x0, "state": state,
            "client_state": dict(client_state),
            "history": {"columns": {c: np.asarray(v) for c, v in history._cols.items()},
                        "meta": history.meta},
            "prng": prng.bit_generator.state, "srng": srng.bit_generator.state}
