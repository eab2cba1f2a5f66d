"""Conversion between rfl_fast contents (:mod:`.codec`) and Flower records (imports flwr).

A content section ``name`` becomes the record ``"rfl.<name>"`` of a ``RecordDict``: an
``ArrayRecord`` of ``Array`` (numpy ``.npy`` bytes: float64 bit-exact) for array sections, a
``ConfigRecord`` for ``"config"`` and ``"*.meta"`` sections.

Decoding a record from elsewhere is bounded: an array's ``.npy`` header is checked against the
bytes it came with before anything is allocated (:func:`rfl_fast._files.npy_from_bytes`;
Flower's own ``Array.numpy()`` allocates the declared shape first), object arrays are refused,
an array section larger than the caller's ``max_bytes`` is refused before decoding, and every
failure is one :class:`RecordError` (what follows -- which sections, fields and arrays the
content may hold -- is :mod:`.schema`'s).
"""

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from .._files import npy_from_bytes
from .._validation import brief
from .codec import is_config_section

__all__ = ["to_recorddict", "from_recorddict", "load_store", "save_store", "RecordError"]

_PREFIX = "rfl."
_NUMPY = "numpy.ndarray"


class RecordError(ValueError):
    """A record that cannot be decoded into a content (bounded reason)."""


def _config_value(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (list, tuple)):
        return [_config_value(a) for a in v]
    return str(v)


def to_recorddict(content):
    """A Flower ``RecordDict`` holding ``content`` (dict of sections)."""
    rd = RecordDict()
    for name, section in content.items():
        if is_config_section(name):
            rd[_PREFIX + name] = ConfigRecord({k: _config_value(v) for k, v in section.items()})
        else:
            rd[_PREFIX + name] = ArrayRecord(
                {k: Array(np.array(v, order="C")) for k, v in section.items()})
    return rd


def _array(name, key, a):
    if not isinstance(a, Array) or a.stype != _NUMPY:
        raise RecordError(f"{name}.{brief(key)}: not a numpy array record "
                          f"({brief(getattr(a, 'stype', type(a).__name__))})")
    try:
        return npy_from_bytes(a.data)
    except ValueError as exc:
        raise RecordError(f"{name}.{brief(key)}: {exc}") from None


def from_recorddict(rd, max_bytes=None):
    """The content held by a ``RecordDict`` made by :func:`to_recorddict` (other records are
    ignored).

    Parameters
    ----------
    rd : RecordDict
    max_bytes : int, optional
        Most ``.npy`` bytes all array sections together may hold (checked before decoding).

    Raises
    ------
    RecordError
        A record of the wrong type for its section, an array that is not ``.npy`` bytes of a
        plain dtype, a header the bytes do not hold, or more than ``max_bytes``.
    """
    out, total = {}, 0
    for key, rec in rd.items():
        if not isinstance(key, str) or not key.startswith(_PREFIX):
            continue
        name = key[len(_PREFIX):]
        if is_config_section(name):
            if not isinstance(rec, ConfigRecord):
                raise RecordError(f"section {brief(name)}: expected a ConfigRecord, got "
                                  f"{type(rec).__name__}")
            out[name] = dict(rec)
            continue
        if not isinstance(rec, ArrayRecord):
            raise RecordError(f"section {brief(name)}: expected an ArrayRecord, got "
                              f"{type(rec).__name__}")
        for k, a in rec.items():
            total += len(getattr(a, "data", b"") or b"")
        if max_bytes is not None and total > max_bytes:
            raise RecordError(f"arrays of {total} bytes, more than the {max_bytes} expected")
        out[name] = {k: _array(name, k, a) for k, a in rec.items()}
    return out


_STORE = ("cstate", "memo", "status")


def load_store(state):
    """The client store from Flower's ``context.state`` (the node's own records)."""
    c = from_recorddict(state)
    store = {"cstate": c.get("cstate", {}), "memo": c.get("memo", {})}
    store["status"] = c.get("status.meta", {})
    return store


def save_store(state, store):
    """Write the client store into Flower's ``context.state``."""
    content = {"cstate": store.get("cstate", {}), "memo": store.get("memo", {}),
               "status.meta": {k: v for k, v in store.get("status", {}).items()
                               if v is not None}}
    for key, rec in to_recorddict(content).items():
        state[key] = rec
