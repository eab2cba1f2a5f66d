"""Matrix functions on stacks of small matrices: thin checked wrappers over the kernels.

Each takes ``(..., n, n)`` (or ``(..., n, p)`` for ``polar``) and an optional ``backend``
("auto", "cpp", "numba", "numpy"); float32 input gives float32 output. Each takes arrays of
any array-API namespace (PyTorch, JAX, CuPy, array-api-strict) and answers in the caller's
array type on the caller's device, through the manifolds' seam
(:func:`rfl_fast.kernels.arrays.accepts_arrays`; a NumPy call goes straight through).
"""

import numpy as np

from ._typing import ArrayLike, FloatArray
from ._validation import as_array, check_core_shape
from .errors import NoSolutionError
from .kernels import call, xp_routes
from .kernels.arrays import accepts_arrays

__all__ = ["sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm", "polar"]


def _symmetric(s, name="s"):
    s = as_array(s, name, min_ndim=2)
    check_core_shape(s, name, (s.shape[-1], s.shape[-1]))
    asym = np.max(np.abs(s - np.swapaxes(s, -1, -2)), initial=0.0)
    tol = (1e-5 if s.dtype == np.float32 else 1e-10) * max(1.0, np.max(np.abs(s), initial=0.0))
    if asym > tol:
        raise ValueError(f"{name}: expected symmetric matrices, |s - s'|_max = {asym:.3g}")
    return s


def _positive(out, name, what):
    if not np.isfinite(out).all():
        raise NoSolutionError(f"{name}: expected symmetric positive-definite matrices "
                              f"for {what} (an eigenvalue is <= 0)")
    return out


def sym_expm(s: ArrayLike, *, backend: str | None = None) -> FloatArray:
    """``expm(s)`` of symmetric ``s``: (..., n, n) -> (..., n, n).

    Raises ``NoSolutionError`` naming ``s`` when ``expm(s)`` overflows the dtype (an eigenvalue
    of ``s`` above ~709.78 for float64, ~88.72 for float32) instead of returning inf/NaN.

    Parameters
    ----------
    s : array_like, shape (..., n, n)
        Symmetric matrices (symmetric to 1e-10 relative, 1e-5 for float32, else ``ValueError``).
    backend : str, optional
        ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
        (:func:`rfl_fast.backend`).

    Returns
    -------
    ndarray, shape (..., n, n)
        ``expm(s)``, symmetric.

    Raises
    ------
    rfl_fast.errors.NoSolutionError
        ``expm(s)`` overflows the dtype.
    """
    s = _symmetric(s)
    with np.errstate(over="ignore", invalid="ignore"):
        out = call("sym_expm", s, backend=backend)
    if not np.isfinite(out).all():
        raise NoSolutionError(f"s: expm(s) overflows {out.dtype} (an eigenvalue of s is above "
                              f"log of the largest {out.dtype}, "
                              f"{np.log(np.finfo(out.dtype).max):.2f})")
    return out


def sym_logm(s: ArrayLike, *, backend: str | None = None) -> FloatArray:
    """``logm(s)`` of SPD ``s``: (..., n, n) -> (..., n, n).

    Parameters
    ----------
    s : array_like, shape (..., n, n)
        SPD matrices (symmetric to 1e-10 relative, 1e-5 for float32, else ``ValueError``).
    backend : str, optional
        ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
        (:func:`rfl_fast.backend`).

    Returns
    -------
    ndarray, shape (..., n, n)
        ``logm(s)``, symmetric.

    Raises
    ------
    rfl_fast.errors.NoSolutionError
        An eigenvalue of ``s`` is <= 0 (not positive definite).
    """
    return _positive(call("sym_logm", _symmetric(s), backend=backend), "s", "sym_logm")


def sym_sqrtm(s: ArrayLike, *, backend: str | None = None) -> FloatArray:
    """Symmetric square root of SPD ``s``: (..., n, n) -> (..., n, n).

    Parameters
    ----------
    s : array_like, shape (..., n, n)
        SPD matrices (symmetric to 1e-10 relative, 1e-5 for float32, else ``ValueError``).
    backend : str, optional
        ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
        (:func:`rfl_fast.backend`).

    Returns
    -------
    ndarray, shape (..., n, n)
        ``s^(1/2)``, SPD.

    Raises
    ------
    rfl_fast.errors.NoSolutionError
        An eigenvalue of ``s`` is <= 0 (not positive definite).
    """
    return _positive(call("sym_sqrtm", _symmetric(s), backend=backend), "s", "sym_sqrtm")


def sym_invsqrtm(s: ArrayLike, *, backend: str | None = None) -> FloatArray:
    """``s^(-1/2)`` of SPD ``s``: (..., n, n) -> (..., n, n).

    Parameters
    ----------
    s : array_like, shape (..., n, n)
        SPD matrices (symmetric to 1e-10 relative, 1e-5 for float32, else ``ValueError``).
    backend : str, optional
        ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
        (:func:`rfl_fast.backend`).

    Returns
    -------
    ndarray, shape (..., n, n)
        ``s^(-1/2)``, SPD.

    Raises
    ------
    rfl_fast.errors.NoSolutionError
        An eigenvalue of ``s`` is <= 0 (not positive definite).
    """
    return _positive(call("sym_invsqrtm", _symmetric(s), backend=backend), "s", "sym_invsqrtm")


def polar(a: ArrayLike, *, backend: str | None = None) -> FloatArray:
    """Orthonormal polar factor ``a (a'a)^(-1/2)`` of full-rank ``a``: (..., n, p), n >= p.

    Parameters
    ----------
    a : array_like, shape (..., n, p)
        Full-rank matrices, ``n >= p``.
    backend : str, optional
        ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
        (:func:`rfl_fast.backend`).

    Returns
    -------
    ndarray, shape (..., n, p)
        The nearest matrices with orthonormal columns.

    Raises
    ------
    rfl_fast.errors.NoSolutionError
        ``a`` is rank deficient (the polar factor is not unique).
    """
    a = as_array(a, "a", min_ndim=2)
    if a.shape[-2] < a.shape[-1]:
        raise ValueError(f"a: expected shape (..., n, p) with n >= p, got {a.shape}")
    out = call("polar", a, backend=backend)
    if not np.isfinite(out).all():
        raise NoSolutionError("a: rank deficient; the polar factor is not unique")
    return out


# arrays of any array-API namespace in, the caller's type out (one seam: kernels.arrays); a
# gradient-carrying argument takes the function's differentiable route (kernels.xp_routes)
sym_expm, sym_logm, sym_sqrtm, sym_invsqrtm, polar = (
    accepts_arrays(f, xp_routes.ROUTES[f"linalg_{f.__name__}"], method=False)
    for f in (sym_expm, sym_logm, sym_sqrtm, sym_invsqrtm, polar))
