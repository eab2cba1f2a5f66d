"""Wire format of rfl_fast's Flower federation, and the arrival checks (no Flower import).

A message between the server and a client is a *content*: a dict of named sections.

* ``"config"`` and every section whose name ends in ``".meta"`` hold scalars, strings and
  lists of them (Flower ``ConfigRecord``);
* every other section holds float arrays (Flower ``ArrayRecord`` of ``Array``).

Model arrays travel with their manifold named: :func:`pack` returns the arrays together with
a meta section ``{"manifold": "Stiefel(8, 2)", "<name>.kind": "point", "<name>.shape":
"1x8x2", "<name>.dtype": "float64"}``, and :func:`check_arrays` verifies on arrival that the
manifold is the receiver's, that every array has the declared and the expected shape, is
float64 and the declared kind, then -- as the simulation engine does,
:func:`rfl_fast.federation.arrival.check_upload` -- finiteness, the expected shape and, by
its kind, that a ``"point"`` lies on the manifold and a ``"tangent"`` vector is tangent at
the base point (``M.check_point`` / ``M.check_tangent`` within ``atol``). The reason of a
failed check is a sentence for the round's history.

The kinds are the algorithm's: its class attribute ``array_kinds`` (e.g. RFedSVRG's
``{"x": "point", "grad": "tangent", "g": "tangent"}``) plus the initial point ``x0``, given by
:func:`kinds_of`; unknown names are checked for shape and finiteness only (kind ``"any"``).
Without ``kinds``, :func:`pack` and :func:`check_arrays` use the union over the built-in
algorithms (:func:`rfl_fast.federation.arrival.builtin_kinds`).
"""

import re

import numpy as np

from .. import manifolds as _manifolds
from ..federation.arrival import KINDS, builtin_kinds, check_upload, kinds_of

__all__ = ["KINDS", "manifold_spec", "manifold_from_spec", "pack", "check_arrays", "check_wire",
           "kinds_of", "shape_str", "is_config_section"]

_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*([0-9,\s]*)\)\s*$")
_MANIFOLDS = ("Euclidean", "Sphere", "Stiefel", "SPD", "Lorentz")


def is_config_section(name):
    """Whether a content section is a config (scalars/strings) rather than arrays."""
    return name == "config" or name.endswith(".meta")


def manifold_spec(M):
    """The manifold's name on the wire, e.g. ``"Stiefel(8, 2)"`` (its ``repr``)."""
    return repr(M)


def manifold_from_spec(spec):
    """The manifold named by :func:`manifold_spec` (one of rfl_fast's manifolds).

    Raises ``ValueError`` for an unknown class or malformed arguments.
    """
    m = _SPEC.match(str(spec))
    if m is None or m.group(1) not in _MANIFOLDS:
        raise ValueError(f"manifold: cannot rebuild {spec!r}; expected one of "
                         f"{', '.join(_MANIFOLDS)} with integer arguments, e.g. 'Stiefel(8, 2)'")
    args = [int(a) for a in m.group(2).replace(" ", "").split(",") if a]
    return getattr(_manifolds, m.group(1))(*args)


def shape_str(shape):
    """``(1, 8, 2)`` -> ``"1x8x2"`` (``""`` for a scalar)."""
    return "x".join(str(int(s)) for s in shape)


def _parse_shape(s):
    s = str(s)
    return () if s == "" else tuple(int(v) for v in s.split("x"))


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


def check_arrays(arrays, meta, M, *, rows=None, base=None, kinds=None, expect=None, atol=1e-7):
    """Check arrays on arrival; returns ``(ok, reason)`` (reason ``""`` when ok).

    Parameters
    ----------
    arrays : dict of str to ndarray
    meta : dict
        The meta section sent with them (:func:`pack`).
    M : Manifold
        The receiver's manifold; the sender's must be the same.
    rows : int, optional
        Leading client axis the arrays must have (1 for a client's upload); ``None`` for a
        server message (one point per array).
    base : ndarray, M.shape, optional
        Base point of ``"tangent"`` arrays (the server point ``x_t``); without it tangent
        arrays are checked for shape and finiteness only.
    kinds : dict, optional
        The receiver's kinds (:func:`kinds_of` the algorithm; default
        :func:`~rfl_fast.federation.arrival.builtin_kinds`); a declared kind that differs is
        refused.
    expect : iterable of str, optional
        Names that must be present.
    atol : float
        Tolerance of the manifold and tangent checks.
    """
    kinds = builtin_kinds() if kinds is None else kinds
    why = check_wire(arrays, meta, M, kinds) or \
        check_upload(M, arrays, kinds, base=base, rows=rows, expect=expect, atol=atol)
    return why is None, why or ""


def check_wire(arrays, meta, M, kinds):
    """Why ``arrays`` do not travel as the ``meta`` section sent with them declares (the
    manifold named, each array's kind, dtype and shape), or ``None``.

    Parameters
    ----------
    arrays : dict of str to ndarray
    meta : dict
        The meta section sent with them (:func:`pack`).
    M : Manifold
        The receiver's manifold.
    kinds : dict
        The receiver's kinds (:func:`kinds_of` the algorithm).

    Returns
    -------
    str or None
    """
    meta = meta or {}
    if meta.get("manifold") != manifold_spec(M):
        return (f"manifold mismatch: sent {meta.get('manifold')!r}, expected "
                f"{manifold_spec(M)!r}")
    for name, arr in arrays.items():       # the wire format: as the sender declared it
        arr = np.asarray(arr)
        kind = kinds.get(name, "any")
        sent_kind = meta.get(f"{name}.kind")
        if sent_kind is not None and sent_kind != kind:
            return f"{name}: declared kind {sent_kind!r}, expected {kind!r}"
        if arr.dtype != np.float64 or meta.get(f"{name}.dtype", "float64") != "float64":
            return (f"{name}: dtype {arr.dtype} (declared {meta.get(name + '.dtype')}), "
                    f"expected float64")
        declared = meta.get(f"{name}.shape")
        if declared is None or _parse_shape(declared) != arr.shape:
            return f"{name}: shape {arr.shape} differs from the declared {declared!r}"
    return None
