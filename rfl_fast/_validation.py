"""Input checks at the public boundary. Kernels never validate; these functions do it once."""

import os

import numpy as np

__all__ = ["as_array", "check_finite", "check_core_shape", "validation_enabled", "broadcast_batch"]

_ENV_VALIDATE = "RFL_FAST_VALIDATE"


def validation_enabled(flag=None):
    """Whether on-manifold checks run: an explicit ``flag`` wins, else ``RFL_FAST_VALIDATE``."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(_ENV_VALIDATE, "0").lower() not in ("", "0", "false", "no")


def as_array(a, name, *, min_ndim=1):
    """Return ``a`` as a finite float ndarray (float32 stays float32, ints become float64).

    Raises ``TypeError`` for complex/object/bool input and ``ValueError`` for NaN/inf or too
    few dimensions, naming ``name``.
    """
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind in "iu":
        arr = arr.astype(np.float64)
    elif kind != "f":
        raise TypeError(f"{name}: expected a real floating-point array, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name}: expected at least {min_ndim} dimensions, got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def check_finite(arr, name):
    """Raise ``ValueError`` naming ``name`` if ``arr`` holds NaN or inf."""
    if not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name}: contains {bad}; expected finite values")


def check_core_shape(arr, name, core_shape):
    """Check the trailing axes of ``arr`` equal ``core_shape`` (``None`` entries match any size)."""
    k = len(core_shape)
    trailing = arr.shape[arr.ndim - k:] if arr.ndim >= k else None
    if trailing is None or any(c is not None and c != t for c, t in zip(core_shape, trailing)):
        want = ", ".join("?" if c is None else str(c) for c in core_shape)
        raise ValueError(f"{name}: expected shape (..., {want}), got {arr.shape}")


def broadcast_batch(arrays, names, core_ndims):
    """Broadcast the leading (batch) axes of ``arrays``; return the batch shape.

    ``core_ndims[i]`` is the number of trailing manifold axes of ``arrays[i]``.
    """
    batches = [a.shape[: a.ndim - k] for a, k in zip(arrays, core_ndims)]
    try:
        return np.broadcast_shapes(*batches)
    except ValueError:
        desc = ", ".join(f"{n} {a.shape}" for n, a in zip(names, arrays))
        raise ValueError(f"batch axes do not broadcast: {desc}") from None
