"""Wire format of rfl_fast's Flower federation (no Flower import).

A message between the server and a client is a *content*: a dict of named sections.

* ``"config"`` and every section whose name ends in ``".meta"`` hold scalars and strings
  (Flower ``ConfigRecord``);
* every other section holds float arrays (Flower ``ArrayRecord`` of ``Array``).

Model arrays travel with their manifold named: :func:`pack` returns the arrays together with
a meta section ``{"manifold": "Stiefel(8, 2)", "<name>.kind": "point", "<name>.shape":
"1x8x2", "<name>.dtype": "float64"}``. What a receiver accepts is declared once in
:mod:`.schema` (every section, field, array name and shape), against its own manifold and
algorithm.

The kinds are the algorithm's: its class attribute ``array_kinds`` (e.g. RFedSVRG's
``{"x": "point", "grad": "tangent", "g": "tangent"}``) plus the initial point ``x0``, given by
:func:`kinds_of`.

A manifold is named by :func:`manifold_spec` and rebuilt by :func:`manifold_from_spec` from
a closed list of classes with bounded integer arguments (at most :data:`MAX_MODEL_FLOATS`
numbers in one point): a name on the wire never imports anything nor sizes an allocation
beyond that.
"""

import re

import numpy as np

from .. import manifolds as _manifolds
from .._validation import brief
from ..federation.arrival import KINDS, builtin_kinds, kinds_of

__all__ = ["KINDS", "manifold_spec", "manifold_from_spec", "pack", "kinds_of", "shape_str",
           "is_config_section", "MAX_MODEL_FLOATS"]

_SPEC = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(([0-9, ]{0,40})\)")
_MANIFOLDS = ("Euclidean", "Sphere", "Stiefel", "SPD", "Lorentz")
#: Most numbers one model point may hold (512 MB of float64).
MAX_MODEL_FLOATS = 1 << 26


def is_config_section(name):
    """Whether a content section is a config (scalars/strings) rather than arrays."""
    return name == "config" or name.endswith(".meta")


def manifold_spec(M):
    """The manifold's name on the wire, e.g. ``"Stiefel(8, 2)"`` (its ``repr``)."""
    return repr(M)


def manifold_from_spec(spec):
    """The manifold named by :func:`manifold_spec` (one of rfl_fast's manifolds).

    Raises ``ValueError`` for an unknown class, malformed arguments or a point of more than
    :data:`MAX_MODEL_FLOATS` numbers.
    """
    m = _SPEC.fullmatch(spec.strip()) if isinstance(spec, str) and len(spec) <= 64 else None
    if m is None or m.group(1) not in _MANIFOLDS:
        raise ValueError(f"manifold: cannot rebuild {brief(spec)}; expected one of "
                         f"{', '.join(_MANIFOLDS)} with integer arguments, e.g. 'Stiefel(8, 2)'")
    args = [int(a) for a in m.group(2).replace(" ", "").split(",") if a]
    if any(a > MAX_MODEL_FLOATS for a in args):
        raise ValueError(f"manifold: {brief(spec)} is larger than {MAX_MODEL_FLOATS} numbers")
    try:
        M = getattr(_manifolds, m.group(1))(*args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"manifold: cannot rebuild {brief(spec)}: {str(exc)[:200]}") from None
    if int(np.prod(M.shape, dtype=object)) > MAX_MODEL_FLOATS:
        raise ValueError(f"manifold: {brief(spec)} is larger than {MAX_MODEL_FLOATS} numbers")
    return M


def shape_str(shape):
    """``(1, 8, 2)`` -> ``"1x8x2"`` (``""`` for a scalar)."""
    return "x".join(str(int(s)) for s in shape)


def pack(arrays, M, kinds=None):
    """Arrays ready to send, and their meta section.

    Parameters
    ----------
    arrays : dict of str to array_like
        Message or upload (``None`` and empty dicts give empty sections).
    M : Manifold
        The model's manifold (named in the meta section).
    kinds : dict, optional
        Kind of each array name (:func:`kinds_of` the algorithm; default
        :func:`~rfl_fast.federation.arrival.builtin_kinds`).

    Returns
    -------
    (dict of str to ndarray, dict)
        C-contiguous float64 arrays and ``{"manifold", "<name>.kind", "<name>.shape",
        "<name>.dtype"}``.
    """
    kinds = builtin_kinds() if kinds is None else kinds
    out, meta = {}, {"manifold": manifold_spec(M)}
    for name, a in (arrays or {}).items():
        arr = np.array(a, dtype=np.float64, order="C")   # (ascontiguousarray makes 0-d 1-d)
        out[name] = arr
        meta[f"{name}.kind"] = kinds.get(name, "any")
        meta[f"{name}.shape"] = shape_str(arr.shape)
        meta[f"{name}.dtype"] = str(arr.dtype)
    return out, meta
