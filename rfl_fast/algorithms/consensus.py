"""Server consensus steps: the tangent-space mean (Li & Ma 2022, eq. 8) and the Karcher mean (eq. 7).

Both work on any manifold with a retraction and its exact inverse. Where Exp/Log exist they
are used (Sphere, SPD, Lorentz, Euclidean: the retraction named ``"exp"``); on Stiefel, which
has no closed-form Log, the polar retraction and its exact inverse stand in for Exp/Log, as
Li & Ma do in their experiments (Li & Ma 2022, section 5).
"""

from dataclasses import dataclass

import numpy as np

from .._validation import check_int, check_positive
from ..errors import NoSolutionError
from ._checks import inverse_pair

__all__ = ["tangent_mean", "karcher_mean", "KarcherResult", "normalized_weights"]


def normalized_weights(weights, k, name="weights"):
    """``weights`` (k,) checked (finite, >= 0, positive sum) and divided by their sum;
    ``None`` gives ``1/k``."""
    if weights is None:
        return np.full(k, 1.0 / k)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (k,):
        raise ValueError(f"{name}: expected shape ({k},) (one weight per point), got {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"{name}: expected finite non-negative weights with a positive sum")
    return w / w.sum()


def _stack(M, points):
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != M.core_ndim + 1 or p.shape[1:] != M.shape or p.shape[0] < 1:
        raise ValueError(f"points: expected a stack of shape (k, {', '.join(map(str, M.shape))}) "
                         f"with k >= 1, got {p.shape}")
    return p


def tangent_mean(M, x, points, weights=None, beta=1.0, retraction=None):
    """Tangent-space consensus ``R_x(beta * sum_i w_i R_x^{-1}(x_i))`` (Li & Ma 2022, eq. 8).

    With ``beta = 1`` on Euclidean space this is the weighted average; ``beta < 1`` is the
    moving average ``(1 - beta) x + beta * mean`` of the paper's remark.

    Parameters
    ----------
    M : Manifold
    x : ndarray, shape M.shape
        The server point ``x_t`` whose tangent space holds the average.
    points : ndarray, shape ``(k, *M.shape)``
        The clients' points.
    weights : array_like, shape (k,), optional
        Non-negative weights, normalized to sum to one (default ``1/k``).
    beta : float
        Server step on the averaged tangent vector (> 0).
    retraction : str, optional
        A retraction of ``M`` with an exact inverse; default the first such (Exp/Log where
        they exist, Stiefel's polar retraction).

    Returns
    -------
    ndarray, shape M.shape
    """
    method = inverse_pair(M, retraction, "tangent_mean")
    beta = check_positive(beta, "beta")
    pts = _stack(M, points)
    w = normalized_weights(weights, pts.shape[0])
    return _tangent_step(M, x, pts, w, beta, method)


def _tangent_step(M, x, pts, w, beta, method):
    """:func:`tangent_mean`'s arithmetic on checked arguments: ``pts`` a float64 stack
    ``(k, *M.shape)``, ``w`` (k,) normalized, ``beta > 0``, ``method`` an inverse pair of
    ``M``."""
    try:
        u = M.inv_retr(x, pts, method)
    except NoSolutionError as exc:
        raise NoSolutionError(
            f"tangent_mean: a point is not reached from the server point by {M!r}'s "
            f"{method!r} retraction, so it has no tangent vector to average ({exc}). The "
            f"clients moved too far from the server point in one round: lower the step or the "
            f"local steps (or the privacy noise), or aggregate by projection (RFedProj)"
        ) from None
    xi = np.tensordot(w, u, axes=1)
    return M.retr(x, beta * xi, method)


@dataclass(frozen=True)
class KarcherResult:
    """Result of :func:`karcher_mean`.

    Parameters
    ----------
    x : ndarray, shape M.shape
        The mean.
    grad_norm : float
        ``|grad h(x)|`` at the returned point.
    h : float
        ``h(x) = sum_i w_i d^2(x, x_i)``.
    iterations : int
        Gradient steps taken.
    converged : bool
        Whether ``grad_norm < tol`` was reached within ``max_iter`` steps.
    """

    x: np.ndarray
    grad_norm: float
    h: float
    iterations: int
    converged: bool


def karcher_mean(M, points, x0, weights=None, tol=1e-6, max_iter=10000, step=0.5,
                 retraction=None):
    """Karcher (Frechet) mean by Riemannian gradient descent (Li & Ma 2022, eq. 7).

    Minimizes ``h(x) = sum_i w_i d^2(x, x_i)`` (``w_i = 1/k`` by default, giving the paper's
    ``(1/k) sum d^2``) from ``x0``: ``x <- R_x(-step * grad h(x))`` with
    ``grad h(x) = -2 sum_i w_i R_x^{-1}(x_i)``, until ``|grad h| < tol``. With the default
    ``step = 1/2`` each step is ``R_x(sum_i w_i R_x^{-1}(x_i))``, the classical fixed-point
    iteration. Where Log is not available (Stiefel) ``d(x, y)`` is taken as
    ``|R_x^{-1}(y)|`` of the retraction's exact inverse.

    Parameters
    ----------
    M : Manifold
    points : ndarray, shape ``(k, *M.shape)``
    x0 : ndarray, shape M.shape
        Starting point (the server's current point in the federated consensus).
    weights : array_like, shape (k,), optional
    tol : float
        Stop when the Riemannian gradient norm is below ``tol``.
    max_iter : int
        Maximum number of gradient steps; ``converged`` says whether ``tol`` was met.
    step : float
        Gradient step size (> 0).
    retraction : str, optional
        As in :func:`tangent_mean`.

    Returns
    -------
    KarcherResult
    """
    method = inverse_pair(M, retraction, "karcher_mean")
    tol = check_positive(tol, "tol")
    step = check_positive(step, "step")
    max_iter = check_int(max_iter, "max_iter", min_value=0)
    pts = _stack(M, points)
    w = normalized_weights(weights, pts.shape[0])
    x = np.array(x0, dtype=np.float64)
    if x.shape != M.shape:
        raise ValueError(f"x0: expected shape {M.shape}, got {x.shape}")
    it = 0
    while True:
        logs = M.inv_retr(x, pts, method)
        grad = -2.0 * np.tensordot(w, logs, axes=1)
        gnorm = float(M.norm(x, grad))
        if gnorm < tol or it >= max_iter:
            break
        x = M.retr(x, -step * grad, method)
        it += 1
    h = float(w @ np.asarray(M.inner(x, logs, logs)))
    return KarcherResult(x=x, grad_norm=gnorm, h=h, iterations=it, converged=gnorm < tol)
