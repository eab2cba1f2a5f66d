"""Per-sample gradient clipping in the Riemannian metric, and fused clipped sums.

``clip_tau(v) = v min(1, tau / |v|_x)`` (Huang et al. 2024, DP-RSGD line 04) bounds every sample's
contribution to ``|.|_x <= tau``, so a clipped *sum* ``S(D) = sum_j clip_tau(g_j)`` has
sensitivity ``tau`` under add/remove-one (``S(D + z) - S(D) = clip(g_z)``) and ``2 tau`` under
replace-one (``clip(g_z) - clip(g_z')``). A zero gradient is left as is (factor 1); ``tau = inf``
disables clipping (the non-private sum).

Three ways to get ``S``:

* ``clipped_sum_reference(M, x, G, tau)`` from materialized per-sample gradients
  ``G`` ``(m, *shape)``: the test oracle and benchmark baseline;
* ``clipped_sum_pca(Z, X, tau, c)`` for PCA-type losses (sphere PCA ``-(z'x)^2``, kPCA
  ``-|X'z|^2``), whose per-sample Riemannian gradient ``g_j = -c (I - XX') z_j (z_j'X)`` is rank
  one with the closed-form norm ``|c| |(I - XX')z_j| |X'z_j|``; the sum is
  ``-c (I - XX') Z' diag(w) Z X`` and no per-sample matrix is formed (one-pass C++ or Numba
  kernels, or blocked NumPy: ``kernels.fused.clipped_pca_sum``);
* ``clipped_sum_frechet(M, x, Y, tau, weights)`` for Frechet-type losses ``a_j dist^2(x, y_j)``
  (SPD Karcher mean, hyperbolic structured prediction): ``g_j = -2 a_j Log_x(y_j)`` with norm
  ``2 |a_j| dist(x, y_j)`` from the manifold's batched ``log``/``dist`` kernels.

The federated engine's private local step is then
``direction = clipped_sum / b + gaussian_tangent_noise(M, x, sigma)``.
"""

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import Real, as_array, check_real
from ..kernels import fused
from ..manifolds import Manifold

__all__ = ["clip_factors", "clip", "clipped_sum_reference", "pca_sample_rgrads",
           "clipped_sum_pca", "frechet_sample_rgrads", "clipped_sum_frechet"]


#: The clipping threshold: > 0, ``inf`` disables clipping.
_TAU = Real(0, low_open=True, allow_inf=True)


def _expand(a, core_ndim):
    return a[(...,) + (None,) * core_ndim]


def clip_factors(norms: ArrayLike, tau: float) -> FloatArray:
    """``min(1, tau / norms)``, with ``1`` where ``norms == 0``.

    Parameters
    ----------
    norms : ndarray, shape (...)
        Non-negative finite per-sample norms.
    tau : float
        Threshold, > 0 (``inf``: all ones).

    Returns
    -------
    w : ndarray, shape (...)

    Raises
    ------
    ValueError
        Some norm is NaN, inf or negative: a sample whose gradient norm is not a finite number
        cannot be clipped (factor 1 would release it unclipped, factor 0 would hide a bug).
    """
    tau = _TAU(tau, "tau")
    norms = np.asarray(norms, dtype=float)
    bad = ~(np.isfinite(norms) & (norms >= 0))
    if bad.any():
        j = np.argwhere(bad)[0]
        raise ValueError(f"norms: expected finite per-sample gradient norms >= 0, got "
                         f"{norms[tuple(j)]!r} at index {tuple(int(v) for v in j)} (a NaN or "
                         f"inf gradient norm cannot be clipped; check the sample)")
    w = np.ones(norms.shape)
    big = norms > tau
    np.divide(tau, norms, out=w, where=big)
    return w


def clip(M: Manifold, x: ArrayLike, v: ArrayLike, tau: float) -> FloatArray:
    """``v min(1, tau / |v|_x)``: tangent vector(s) clipped to norm ``tau`` in the metric at ``x``.

    Parameters
    ----------
    M : rfl_fast.Manifold
    x : ndarray, shape ``(..., *M.shape)``
    v : ndarray, shape ``(..., *M.shape)``
        Tangent vectors at ``x`` (batch axes broadcast against those of ``x``).
    tau : float, > 0

    Returns
    -------
    ndarray, shape of ``v`` broadcast with ``x``
    """
    w = clip_factors(M.norm(x, v), tau)
    return _expand(w, M.core_ndim) * np.asarray(v)


def clipped_sum_reference(M: Manifold, x: ArrayLike, per_sample_grads: ArrayLike, tau: float
                          ) -> FloatArray:
    """``sum_j clip_tau(g_j)`` from materialized per-sample gradients (the oracle).

    Parameters
    ----------
    M : rfl_fast.Manifold
    x : ndarray, shape ``(*M.shape)``
        One base point.
    per_sample_grads : ndarray, shape ``(m, *M.shape)``
        Riemannian gradients ``g_j`` at ``x``.
    tau : float, > 0

    Returns
    -------
    ndarray, shape ``(*M.shape)``
    """
    g = as_array(per_sample_grads, "per_sample_grads")
    if g.ndim != M.core_ndim + 1 or g.shape[1:] != M.shape:
        raise ValueError(f"per_sample_grads: expected shape (m, {', '.join(map(str, M.shape))}),"
                         f" got {g.shape}")
    w = clip_factors(M.norm(x, g), tau)
    return np.tensordot(w, g, axes=1)


# ---------------------------------------------------------------------------- PCA-type

def _pca_args(Z, X, check_z=True):
    if check_z:
        Z = as_array(Z, "Z", min_ndim=2)
    else:  # dtype and shape only; the caller checks finiteness from the kernel's output
        Z = np.asarray(Z)
        if Z.dtype.kind not in "iuf":
            Z = as_array(Z, "Z", min_ndim=2)  # raises the explanatory TypeError
        Z = np.ascontiguousarray(Z, dtype=np.float64)
    X = as_array(X, "X")
    if Z.ndim != 2:
        raise ValueError(f"Z: expected shape (m, d), got {Z.shape}")
    if X.ndim not in (1, 2) or X.shape[0] != Z.shape[1]:
        raise ValueError(f"X: expected shape ({Z.shape[1]},) (sphere) or ({Z.shape[1]}, r) "
                         f"(Stiefel) to match Z {Z.shape}, got {X.shape}")
    X2 = X[:, None] if X.ndim == 1 else X
    return Z, X, X2


def pca_sample_rgrads(Z: ArrayLike, X: ArrayLike, c: float = 1.0) -> FloatArray:
    """Materialized per-sample gradients ``g_j = -c (I - XX') z_j (z_j'X)`` (reference only).

    Parameters
    ----------
    Z : ndarray, shape (m, d)
    X : ndarray, shape (d, r) (Stiefel) or (d,) (sphere)
    c : float

    Returns
    -------
    G : ndarray, shape (m, d, r) or (m, d)
    """
    Z, X, X2 = _pca_args(Z, X)
    c = check_real(c, "c")
    P = Z @ X2
    R = Z - P @ X2.T
    G = -c * R[:, :, None] * P[:, None, :]
    return G[..., 0] if X.ndim == 1 else G


def clipped_sum_pca(Z: ArrayLike, X: ArrayLike, tau: float, c: float = 1.0, *,
                    backend: str | None = None) -> FloatArray:
    """Fused ``sum_j clip_tau(g_j)`` for ``g_j = -c (I - XX') z_j (z_j'X)``, never materialized.

    Per sample the residual ``res_j = (I - XX') z_j`` is formed explicitly (``O(dr)``, never as
    ``sqrt(|z|^2 - |X'z|^2)``, which cancels catastrophically for ``z`` almost in ``span(X)``)
    and ``g_j`` is clipped as ``min(|c| |res_j| |y_j|, tau) (res_j/|res_j|)(y_j/|y_j|)'``
    (``y_j = X'z_j``, norms scaled against overflow): one sample moves the sum by at most
    ``tau (1 + O((d + r) eps))`` in floating point, for any finite sample (up to ~1e300) and
    any direction. The sum is ``-sign(c)`` times the sum of those terms, tangent at ``X`` by
    construction. Sphere PCA ``f_j(x) = -(z_j'x)^2`` has ``c = 2``; kPCA
    ``f_j(X) = -|X'z_j|^2`` has ``c = 2`` as well (scale ``c`` by ``1/m`` for a mean loss).
    ``tau = inf`` gives the non-private gradient sum.

    Parameters
    ----------
    Z : ndarray, shape (m, d)
        The client's samples (rows), finite.
    X : ndarray, shape (d, r) or (d,)
        A Stiefel point (orthonormal columns) or a unit vector (sphere).
    tau : float, > 0
    c : float
        Scale of the per-sample gradient.
    backend : {None, "auto", "cpp", "numba", "numpy"}
        ``None`` follows ``rfl_fast.backend`` / ``RFL_FAST_BACKEND``. ``"cpp"``: the one-pass
        C++ kernel; ``"numba"``: the one-pass Numba kernel; ``"numpy"``: blocked NumPy;
        ``"auto"`` takes the first available in the kernel's declared order
        (``kernels.registry.FUSED["clipped_pca_sum"].order``), as does a backend that is
        missing. All three compute the same per-sample terms (``kernels.fused.clipped_pca_sum``).

    Returns
    -------
    ndarray, shape (d, r) or (d,)
        Tangent at ``X``.

    Raises
    ------
    ValueError
        ``Z`` holds NaN or inf (named by the check).
    """
    route = fused.route("clipped_pca_sum", backend)
    # the one-pass kernels read Z once; a separate finiteness pass would double their cost, so
    # Z is checked through the result, non-finite exactly when some z_j is (X finite)
    Z, X, X2 = _pca_args(Z, X, check_z=route == "numpy")
    tau, c = _TAU(tau, "tau"), check_real(c, "c")
    S = fused.clipped_pca_sum(Z, np.ascontiguousarray(X2.T, dtype=np.float64), tau, c, route).T
    if not np.isfinite(S).all():
        as_array(Z, "Z")  # names the NaN / inf
        raise ValueError("Z: the clipped sum is not finite")  # pragma: no cover (defensive)
    G = -np.sign(c) * S
    return G[:, 0] if X.ndim == 1 else G


# ---------------------------------------------------------------------------- Frechet-type

def _frechet_args(M, x, Y, weights):
    Y = as_array(Y, "Y")
    if Y.ndim != M.core_ndim + 1 or Y.shape[1:] != M.shape:
        raise ValueError(f"Y: expected shape (m, {', '.join(map(str, M.shape))}), got {Y.shape}")
    if weights is None:
        a = np.ones(Y.shape[0])
    else:
        a = as_array(weights, "weights")
        if a.shape != (Y.shape[0],):
            raise ValueError(f"weights: expected shape ({Y.shape[0]},), got {a.shape}")
    return Y, a


def frechet_sample_rgrads(M: Manifold, x: ArrayLike, Y: ArrayLike,
                          weights: ArrayLike | None = None) -> FloatArray:
    """Materialized per-sample gradients ``g_j = -2 a_j Log_x(y_j)`` of ``a_j dist^2(x, y_j)``.

    Parameters
    ----------
    M : rfl_fast.Manifold with ``log``
    x : ndarray, shape ``(*M.shape)``
    Y : ndarray, shape ``(m, *M.shape)``
    weights : ndarray, shape (m,), optional
        ``a_j`` (default 1).

    Returns
    -------
    G : ndarray, shape ``(m, *M.shape)``
    """
    Y, a = _frechet_args(M, x, Y, weights)
    return -2.0 * _expand(a, M.core_ndim) * M.log(x, Y)


def clipped_sum_frechet(M: Manifold, x: ArrayLike, Y: ArrayLike, tau: float,
                        weights: ArrayLike | None = None) -> FloatArray:
    """``sum_j clip_tau(g_j)`` for Frechet-type losses ``a_j dist^2(x, y_j)``.

    ``g_j = -2 a_j Log_x(y_j)`` and ``|g_j|_x = 2 |a_j| dist(x, y_j)``: the norms come from the
    batched ``dist`` kernel, not from metric inner products of the logs (which on SPD would
    cost a solve per sample).

    Parameters
    ----------
    M : rfl_fast.Manifold with ``log`` and ``dist`` (SPD, Lorentz, Sphere, Euclidean)
    x : ndarray, shape ``(*M.shape)``
    Y : ndarray, shape ``(m, *M.shape)``
        The client's samples, points of ``M``.
    tau : float, > 0
    weights : ndarray, shape (m,), optional
        ``a_j`` (e.g. the kernel weights ``alpha_ij(w)`` of hyperbolic structured prediction).

    Returns
    -------
    ndarray, shape ``(*M.shape)``
    """
    Y, a = _frechet_args(M, x, Y, weights)
    tau = _TAU(tau, "tau")
    logs = M.log(x, Y)
    w = clip_factors(2.0 * np.abs(a) * M.dist(x, Y), tau)
    return -2.0 * np.tensordot(w * a, logs, axes=1)
