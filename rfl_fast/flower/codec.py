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
:func:`~rfl_fast.federation.arrival.kinds_of`.

A manifold is named by :func:`manifold_spec` and rebuilt by :func:`manifold_from_spec` from
the classes of :data:`rfl_fast.manifolds.MANIFOLDS` with bounded integer arguments or, for a
``Product``, nested manifold names (at most :data:`MAX_MODEL_FLOATS` numbers in one point,
:data:`MAX_SPEC_DEPTH` levels of nesting): a name on the wire never imports anything nor sizes
an allocation beyond that.
"""

import re

import numpy as np

from .. import manifolds as _manifolds
from .._validation import brief
from ..federation.arrival import builtin_kinds

__all__ = ["manifold_spec", "manifold_from_spec", "pack", "shape_str",
           "is_config_section", "MAX_MODEL_FLOATS", "MAX_SPEC_DEPTH", "MAX_SPEC_CHARS"]

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|([0-9]{1,12})|([(),]))")
#: Most numbers one model point may hold (512 MB of float64).
MAX_MODEL_FLOATS = 1 << 26
#: Most levels of nested manifold names (``Product(Product(Sphere(3)))`` has 3).
MAX_SPEC_DEPTH = 4
#: Longest manifold name read from the wire.
MAX_SPEC_CHARS = 256


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
    tokens = _tokens(spec)
    M, end = _parse(spec, tokens, 0, 1)
    if end != len(tokens):
        raise _malformed(spec)
    return M


def _malformed(spec):
    return ValueError(f"manifold: cannot rebuild {brief(spec)}; expected one of "
                      f"{', '.join(_manifolds.MANIFOLDS)} with integer arguments (manifold "
                      "names for a Product), e.g. 'Stiefel(8, 2)' or 'Product(SPD(3), Sphere(4))'")


def _tokens(spec):
    """``spec`` as (name, integer, punctuation) tokens; ``ValueError`` for anything else."""
    if not isinstance(spec, str) or len(spec) > MAX_SPEC_CHARS:
        raise _malformed(spec)
    tokens, pos, text = [], 0, spec.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _malformed(spec)
        tokens.append(m.groups())
        pos = m.end()
    return tokens


def _parse(spec, tokens, i, depth):
    """The manifold whose name starts at ``tokens[i]``, and the index after it."""
    if depth > MAX_SPEC_DEPTH or i + 1 >= len(tokens) or tokens[i][0] is None \
            or tokens[i][0] not in _manifolds.MANIFOLDS or tokens[i + 1][2] != "(":
        raise _malformed(spec)
    cls, args, i = _manifolds.MANIFOLDS[tokens[i][0]], [], i + 2
    while i < len(tokens) and tokens[i][2] != ")":
        if args:
            if tokens[i][2] != ",":
                raise _malformed(spec)
            i += 1
        if i < len(tokens) and tokens[i][1] is not None:
            args.append(int(tokens[i][1]))
            if args[-1] > MAX_MODEL_FLOATS:
                raise ValueError(f"manifold: {brief(spec)} is larger than {MAX_MODEL_FLOATS} "
                                 "numbers")
            i += 1
        else:
            M, i = _parse(spec, tokens, i, depth + 1)
            args.append(M)
    if i >= len(tokens):
        raise _malformed(spec)
    try:
        M = cls(*args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"manifold: cannot rebuild {brief(spec)}: {str(exc)[:200]}") from None
    if int(np.prod(M.shape, dtype=object)) > MAX_MODEL_FLOATS:
        raise ValueError(f"manifold: {brief(spec)} is larger than {MAX_MODEL_FLOATS} numbers")
    return M, i + 1


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
        Kind of each array name (:func:`~rfl_fast.federation.arrival.kinds_of` of the
        algorithm; default :func:`~rfl_fast.federation.arrival.builtin_kinds`).

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
