"""Argument checks of the federated layer (private). Every check names the argument."""

import numbers

import numpy as np

from ..manifolds.base import Manifold

__all__ = ["check_int", "check_positive", "check_nonnegative", "check_choice", "has_method",
           "inverse_pair", "check_point_arg"]


def check_int(value, name, *, min_value=None, max_value=None):
    """``value`` as a Python int within ``[min_value, max_value]``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} ({value!r})")
    value = int(value)
    if min_value is not None and value < min_value:
        raise ValueError(f"{name}: expected an int >= {min_value}, got {value}")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name}: expected an int <= {max_value}, got {value}")
    return value


def _real(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} ({value!r})")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value}")
    return value


def check_positive(value, name):
    """``value`` as a finite float > 0."""
    value = _real(value, name)
    if value <= 0:
        raise ValueError(f"{name}: expected a value > 0, got {value:g}")
    return value


def check_nonnegative(value, name):
    """``value`` as a finite float >= 0."""
    value = _real(value, name)
    if value < 0:
        raise ValueError(f"{name}: expected a value >= 0, got {value:g}")
    return value


def check_choice(value, name, choices):
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def has_method(M, name):
    """Whether manifold ``M`` implements ``name`` (overrides the base class's raising stub)."""
    return getattr(type(M), name, None) is not getattr(Manifold, name, None)


def inverse_pair(M, retraction, who):
    """The retraction name to use on ``M``: one that has an exact inverse.

    ``retraction=None`` picks the first of ``M.retractions`` that is also in
    ``M.inverse_retractions`` (Sphere, SPD, Lorentz, Euclidean: ``"exp"``, i.e. Exp/Log;
    Stiefel: ``"polar"``). Raises a ``ValueError`` naming ``who``, the manifold and what is
    missing.
    """
    pairs = tuple(r for r in M.retractions if r in M.inverse_retractions)
    if retraction is None:
        if not pairs:
            raise ValueError(f"{who}: manifold {M!r} has no retraction with an exact inverse "
                             f"(retractions {M.retractions}, inverses {M.inverse_retractions}); "
                             f"{who} needs both")
        return pairs[0]
    if retraction not in M.retractions:
        raise ValueError(f"{who}: manifold {M!r} has no retraction {retraction!r}; "
                         f"available: {M.retractions}")
    if retraction not in M.inverse_retractions:
        raise ValueError(f"{who}: the retraction {retraction!r} of {M!r} has no exact inverse "
                         f"`inv_retr`, which {who} needs; retractions with one: {pairs}")
    return retraction


def check_point_arg(M, x, name):
    """``x`` as one float point of ``M`` (exactly ``M.shape``, finite, on the manifold)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected a real array, got dtype {arr.dtype}")
    arr = np.array(arr, dtype=np.float64)
    if arr.shape != M.shape:
        raise ValueError(f"{name}: expected one point of {M!r} of shape {M.shape}, "
                         f"got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: contains NaN or inf")
    ok, reason = M.check_point(arr)
    if not ok:
        raise ValueError(f"{name}: not a point of {M!r}: {reason}")
    return arr
