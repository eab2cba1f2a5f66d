"""Conversion between rfl_fast contents (:mod:`.codec`) and Flower records (imports flwr).

A content section ``name`` becomes the record ``"rfl.<name>"`` of a ``RecordDict``: an
``ArrayRecord`` of ``Array`` (numpy ``.npy`` bytes: float64 bit-exact) for array sections, a
``ConfigRecord`` for ``"config"`` and ``"*.meta"`` sections.
"""

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from .codec import is_config_section

__all__ = ["to_recorddict", "from_recorddict", "load_store", "save_store"]

_PREFIX = "rfl."


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


def from_recorddict(rd):
    """The content held by a ``RecordDict`` made by :func:`to_recorddict` (other records are
    ignored)."""
    out = {}
    for key, rec in rd.items():
        if not key.startswith(_PREFIX):
            continue
        name = key[len(_PREFIX):]
        if isinstance(rec, ArrayRecord):
            out[name] = {k: a.numpy() for k, a in rec.items()}
        else:
            out[name] = dict(rec)
    return out


_STORE = ("cstate", "memo", "status")


def load_store(state):
    """The client store from Flower's ``context.state``."""
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
