"""Hyperbolic structured prediction (Huang et al. 2024): a kernel-weighted Frechet mean on H^d."""

import numbers

import numpy as np

from .._typing import ArrayLike, ClientId, ClientSamples, FloatArray, Self, Weighting
from ..manifolds import Lorentz
from ._clients import pack_clients, spans
from ._numerics import riemannian_descent
from .base import Problem

__all__ = ["HyperbolicPrediction"]


def _ldot(a, b):
    """Minkowski product over the last axis (no keepdims; no temporary of the inputs' size)."""
    return np.einsum("...i,...i->...", a, b) - 2.0 * a[..., 0] * b[..., 0]


#: Rows (all clients' samples) up to which ``_weighted_sum`` takes every client in one span
_ONE_SPAN = 4096


def _theta_ratio(u):
    """``theta = acosh(u)`` and ``theta / sinh(theta)`` (-> 1 as theta -> 0), for u >= 1."""
    th = np.arccosh(np.maximum(u, 1.0))
    small = th < 1e-6
    if not small.any():                  # the common case: the same numbers, 3 calls fewer
        return th, th / np.sinh(th)
    sh = np.sinh(np.where(small, 1.0, th))
    return th, np.where(small, 1.0 - th * th / 6.0, th / sh)


def _tangent_norm(x, v):
    """``|v|_L`` of a tangent vector ``v`` at ``x`` without the cancellation of
    ``-v0^2 + |v_1:|^2``: with ``v0 = <x_1:, v_1:> / x0`` (tangency),
    ``|v|_L^2 = |v_1:|^2 - (<x_1:, v_1:> / x0)^2 >= |v_1:|^2 / x0^2``."""
    vr = v[..., 1:]
    t = np.sum(x[..., 1:] * vr, axis=-1) / x[..., 0]
    n2 = np.sum(vr * vr, axis=-1)
    return np.sqrt(np.maximum(n2 - t * t, n2 / x[..., 0] ** 2))


def gaussian_kernel(a, b, bandwidth):
    """``k(a, b) = exp(-|a - b|^2 / (2 v)^2)`` for rows of ``a`` (p, r) and ``b`` (q, r)."""
    sq = np.sum(a * a, 1)[:, None] + np.sum(b * b, 1)[None, :] - 2.0 * a @ b.T
    return np.exp(-np.maximum(sq, 0.0) / (2.0 * bandwidth) ** 2)


class HyperbolicPrediction(Problem):
    """Federated hyperbolic structured prediction on the Lorentz model ``H^d`` (Huang et al. 2024, 4.3).

    Not differentially private under PriRFed's per-sample clipping (``dp_unbounded``): the
    kernel weights ``alpha_i = (K_i + gamma I)^-1 K_{i,w}`` of every sample of a client depend
    on all its samples, so replacing one sample moves every clipped term (measured: up to 3x the
    ``2 tau`` a replace-one sensitivity allows). PriRFed refuses it unless asked for an
    uncertified run (``PriRFed(..., uncertified=True)``: noise without a guarantee).

    For a test feature ``w``, the prediction is the minimizer of

    ``f(x) = sum_i p_i (1/N_i) sum_j alpha_ij(w) dist^2(x, y_ij)``,

    ``alpha_i(w) = (K_i + gamma I)^-1 K_{i,w}``, ``(K_i)_lj = k(w_il, w_ij)``,
    ``(K_{i,w})_j = k(w_ij, w)``, ``k(w, w') = exp(-|w - w'|^2 / (2 v)^2)`` -- the kernel
    exactly as the slide writes it (``(2 v)^2``, which is the usual ``2 sigma^2`` with
    ``sigma = sqrt(2) v``; the slide gives no value of ``v``). Each client solves its own
    kernel system (kernel ridge regression weights, as in Marconi et al.'s hyperbolic
    manifold regression); the weights are computed once at construction. Seed Huang et al. 2024 weights
    clients by ``p_i = N_i / sum N_j`` (``weighting="samples"``); the default is uniform as in
    every rfl_fast problem.

    Per sample ``f_ij(x) = alpha_ij dist^2(x, y_ij)``, ``grad f_ij = -2 alpha_ij Log_x(y_ij)``
    with norm ``2 |alpha_ij| dist(x, y_ij)``. Euclidean gradient (ambient ``R^(d+1)``):
    ``-2 alpha_ij (theta / sinh theta) J y_ij``, ``theta = acosh(-<x, y>_L)``,
    ``J = diag(-1, 1, ..., 1)``.

    The kernel weights can be negative, so ``f`` need not be geodesically convex; the optimum
    is found by centralized Riemannian gradient descent (BB steps, nonmonotone Armijo,
    exponential map) from the ``|alpha|``-weighted Lorentzian centroid, to ``|grad f| <=
    1e-12`` or the rounding floor. With non-negative weights the minimizer is unique. A total
    weight ``sum_i p_i mean_j alpha_ij <= 0`` makes ``f`` unbounded below and is refused.

    Parameters
    ----------
    features : list of array_like (N_i, r), ndarray (n, N, r) or ClientData
        Features ``w_ij`` of the training samples.
    targets : list of array_like (N_i, d+1), ndarray (n, N, d+1) or ClientData
        Hyperbolic embeddings ``y_ij`` (points of the hyperboloid, ``x0 > 0``), aligned with
        ``features``.
    w : array_like, shape (r,)
        The test feature.
    gamma : float
        Ridge parameter ``gamma > 0``.
    bandwidth : float
        Kernel parameter ``v > 0``.
    weighting : {"uniform", "samples"} or array_like (n,)

    Attributes
    ----------
    manifold : Lorentz
    alpha : ndarray, shape (sum N_i,)
        The kernel weights, client after client (``alpha[offsets[i]:offsets[i+1]]``).
    offsets : ndarray of int64, shape (n+1,)
    """

    def __init__(self, features: ClientSamples, targets: ClientSamples, w: ArrayLike, *,
                 gamma: float = 1e-3, bandwidth: float = 1.0,
                 weighting: Weighting = "uniform") -> None:
        feats, foff = pack_clients(features, 1, "features")
        for name, val in (("gamma", gamma), ("bandwidth", bandwidth)):
            if not isinstance(val, numbers.Real) or not np.isfinite(val) or val <= 0:
                raise ValueError(f"{name}: expected a finite number > 0, got {val!r}")
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (feats.shape[1],) or not np.isfinite(w).all():
            raise ValueError(f"w: expected a finite test feature of shape ({feats.shape[1]},) "
                             f"(the feature dimension), got shape {w.shape}")
        from scipy.linalg import solve

        alpha = np.empty(feats.shape[0])
        for i in range(foff.size - 1):
            fi = feats[foff[i]:foff[i + 1]]
            k = gaussian_kernel(fi, fi, bandwidth)
            k[np.diag_indices_from(k)] += gamma
            kw = gaussian_kernel(fi, w[None], bandwidth)[:, 0]
            alpha[foff[i]:foff[i + 1]] = solve(k, kw, assume_a="pos")
        self._init_targets(targets, alpha, foff, weighting)
        self.features, self.w = feats, w
        self.gamma, self.bandwidth = float(gamma), float(bandwidth)

    @classmethod
    def from_weights(cls, targets: ClientSamples, alpha: ArrayLike, *,
                     weighting: Weighting = "uniform") -> Self:
        """A weighted Frechet mean ``f_ij(x) = alpha_ij dist^2(x, y_ij)`` with given weights.

        Parameters
        ----------
        targets : list of array_like (N_i, d+1), ndarray (n, N, d+1) or ClientData
        alpha : list of array_like (N_i,) or ndarray (n, N)
            Per-sample weights (all ones: the plain Frechet mean).
        weighting : {"uniform", "samples"} or array_like (n,)
        """
        a, aoff = pack_clients([np.asarray(x)[:, None] for x in alpha]
                               if not isinstance(alpha, np.ndarray) or alpha.ndim != 2
                               else alpha[..., None], 1, "alpha")
        self = cls.__new__(cls)
        self._init_targets(targets, a[:, 0].copy(), aoff, weighting)
        return self

    def _init_targets(self, targets, alpha, offsets, weighting):
        y, yoff = pack_clients(targets, 1, "targets")
        if yoff.shape != offsets.shape or (yoff != offsets).any():
            raise ValueError(f"targets: client sizes {np.diff(yoff).tolist()[:10]} do not match "
                             f"those of the features/weights {np.diff(offsets).tolist()[:10]}")
        if y.shape[1] < 2:
            raise ValueError(f"targets: points of H^d have d+1 >= 2 coordinates, got {y.shape[1]}")
        gap = np.abs(_ldot(y, y) + 1.0) / np.maximum(1.0, y[:, 0] ** 2)
        if (y[:, 0] <= 0).any() or (gap > 1e-8).any():
            j = int(np.argmax((y[:, 0] <= 0) | (gap > 1e-8)))
            raise ValueError(f"targets: every y_ij must lie on the hyperboloid <y,y>_L = -1 with "
                             f"y0 > 0; row {j} has <y,y>_L = {_ldot(y[j], y[j]):.6g}, "
                             f"y0 = {y[j, 0]:.6g}")
        super().__init__(np.diff(offsets), weighting)
        self._y, self._offsets, self.alpha = y, offsets, alpha
        sizes = np.asarray(self.sizes)
        self._m = int(sizes[0]) if sizes.size and (sizes == sizes[0]).all() else 0
        self._every = np.arange(sizes.size, dtype=np.int64)
        self.offsets = offsets
        self.manifold = Lorentz(y.shape[1] - 1)
        self._sw = np.repeat(self.weights / self.sizes, self.sizes) * alpha
        total = float(self._sw.sum())
        if total <= 0:
            raise ValueError(f"alpha: the total weight sum_i w_i mean_j alpha_ij = {total:.3g} is "
                             f"not positive, so f is unbounded below; use another gamma, "
                             f"bandwidth or test feature")

    # ------------------------------------------------------------------ batched

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """``(1/N_i) sum_j alpha_ij dist^2(x, y_ij)`` -> (k,)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        rows, seg, starts, counts = self._select(idx, None)
        th, _ = _theta_ratio(-_ldot(x[seg], self._y[rows]))
        return np.add.reduceat(self.alpha[rows] * th * th, starts) / counts

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``-(2/N_i) sum_j alpha_ij (theta/sinh theta) J y_ij`` -> (k, d+1)."""
        s = self._weighted_sum(idx, x, batch)
        s[:, 0] *= -1.0                                        # J y = (-y0, y_1:)
        return s

    def rgrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``proj_x(J egrad)`` (``Lorentz.egrad2rgrad``), with ``J egrad`` the sum
        ``-(2/N_i) sum_j alpha_ij (theta/sinh theta) y_ij`` itself: the time coordinate is not
        flipped twice (the same numbers; C order, as egrad2rgrad's copy has it)."""
        return self.manifold.proj(x, np.ascontiguousarray(self._weighted_sum(idx, x, batch)))

    def _weighted_sum(self, idx, x, batch):
        """``-(2/N_i) sum_j alpha_ij (theta/sinh theta) y_ij`` -> (k, d+1), a new array."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        m = self._m                    # 0: uneven sizes
        if (batch is None and m and idx.size == self.n_clients and idx.size * m <= _ONE_SPAN
                and (idx == self._every).all()):
            # every client in order, m samples each, few enough rows for one span: the
            # blocked branch's arithmetic on the data itself, without its bookkeeping
            y = self._y.reshape(idx.size, m, -1)
            jx = np.array(x)[:, :, None]                      # J x_j, (k, d+1, 1)
            jx[:, 0] *= -1.0
            _, ratio = _theta_ratio(-np.matmul(y, jx)[..., 0])
            c = self.alpha.reshape(idx.size, m) * ratio
            s = np.matmul(c[:, None, :], y)[:, 0]
            s *= -2.0 / m
            return s
        blocks = self._blocks(idx, batch)
        if blocks is not None:  # (k, m, d+1) per client, no per-sample copy of x, in spans
            sel, m = blocks
            k = idx.size
            s = np.empty_like(x)
            jx = np.array(x)[:, :, None]                      # J x_j, (k, d+1, 1)
            jx[:, 0] *= -1.0
            # a span's temporaries: (b - a, m) products and weights, plus its samples' copy
            # when the rows are gathered (a slice of the data is a view)
            per = 8 * m * (1 if isinstance(sel, slice) else x.shape[1] + 2)
            for a, b in spans(k, per):
                rows = slice(a * m, b * m) if isinstance(sel, slice) else sel[a * m:b * m]
                y = self._y[rows].reshape(b - a, m, -1)
                ip = np.matmul(y, jx[a:b])[..., 0]           # <y_ij, x_j>_L = y_ij . J x_j
                _, ratio = _theta_ratio(-ip)
                c = self.alpha[rows].reshape(b - a, m) * ratio
                s[a:b] = np.matmul(c[:, None, :], y)[:, 0]
            s *= -2.0 / m
        else:
            rows, seg, starts, counts = self._select(idx, batch)
            _, ratio = _theta_ratio(-_ldot(x[seg], self._y[rows]))
            c = self.alpha[rows] * ratio
            s = np.add.reduceat(c[:, None] * self._y[rows], starts, axis=0)
            s *= (-2.0 / counts)[:, None]
        return s

    # ------------------------------------------------------------------ per sample

    def _samples(self, i, batch=None):
        i = self._client(i)
        sel = self._sample_subset(i, batch)
        rows = np.arange(self._offsets[i], self._offsets[i + 1])
        return rows if sel is None else rows[sel]

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """``-2 alpha_ij Log_x(y_ij)`` -> (N_i, d+1)."""
        x = self._point(x)
        rows = self._samples(i)
        y = self._y[rows]
        ip = _ldot(x, y)
        _, ratio = _theta_ratio(-ip)
        return (-2.0 * self.alpha[rows] * ratio)[:, None] * (y + ip[:, None] * x)

    dp_unbounded = ("its kernel weights alpha_i = (K_i + gamma I)^-1 K_iw couple all samples of "
                    "a client, so replacing one sample changes every per-sample term and "
                    "clipping does not bound the sensitivity (no valid bound is derived)")

    def sample_rgrad_norms(self, i: ClientId, x: ArrayLike, batch: ArrayLike | None = None
                           ) -> FloatArray:
        """``2 |alpha_ij| dist(x, y_ij)`` -> (N_i,) or (b,).

        Parameters
        ----------
        i : int
            Client id.
        x : ndarray, shape ``(*shape)``
            One point.
        batch : array_like of int, shape (b,), optional
            Local sample indices; all ``m_i`` samples when omitted.

        Returns
        -------
        ndarray, shape (m_i,) or (b,)
        """
        x = self._point(x)
        rows = self._samples(i, batch)
        th, _ = _theta_ratio(-_ldot(x, self._y[rows]))
        return 2.0 * np.abs(self.alpha[rows]) * th

    def weighted_rgrad(self, i: ClientId, x: ArrayLike, coef: ArrayLike,
                       batch: ArrayLike | None = None) -> FloatArray:
        """``-2 sum_j coef_j alpha_ij Log_x(y_ij)`` -> (d+1,).

        Parameters
        ----------
        i : int
            Client id.
        x : ndarray, shape ``(*shape)``
            One point.
        coef : array_like, shape (m_i,) or (b,)
            One weight per sample.
        batch : array_like of int, shape (b,), optional
            Local sample indices; all ``m_i`` samples when omitted.

        Returns
        -------
        ndarray, shape ``(*shape)``
            A tangent vector at ``x``.
        """
        x = self._point(x)
        rows = self._samples(i, batch)
        coef = self._coef(coef, rows.size)
        y = self._y[rows]
        ip = _ldot(x, y)
        _, ratio = _theta_ratio(-ip)
        c = -2.0 * coef * self.alpha[rows] * ratio
        return c @ y + (c @ ip) * x

    # ------------------------------------------------------------------ global

    def f(self, x: ArrayLike) -> float:
        """``sum_i (w_i/N_i) sum_j alpha_ij dist^2(x, y_ij)`` -> float."""
        x = self._point(x)
        th, _ = _theta_ratio(-_ldot(x, self._y))
        return float(self._sw @ (th * th))

    def grad(self, x: ArrayLike) -> FloatArray:
        """``-2 sum_i (w_i/N_i) sum_j alpha_ij Log_x(y_ij)`` -> (d+1,)."""
        x = self._point(x)
        ip = _ldot(x, self._y)
        _, ratio = _theta_ratio(-ip)
        c = -2.0 * self._sw * ratio
        return c @ self._y + (c @ ip) * x

    def solution(self) -> FloatArray:
        """The minimizer by centralized Riemannian gradient descent (cached)."""
        if self._solution is None:
            m = np.abs(self._sw) @ self._y
            x0 = m / np.sqrt(-_ldot(m, m))
            scale = max(1.0, float(np.sqrt(np.abs(self._sw) @ np.arccosh(
                np.maximum(-_ldot(x0, self._y), 1.0)) ** 2)))
            x, info = riemannian_descent(self.manifold, self.f, self.grad, x0,
                                         tol=1e-13 * scale, max_iter=5000,
                                         norm=lambda p, v: float(_tangent_norm(p, v)))
            self.solver_info = info
            self._solution = x / np.sqrt(-_ldot(x, x))   # back onto the hyperboloid
        return self._solution.copy()

    def grad_norm(self, x: ArrayLike) -> float:
        """``|grad f(x)|_L``, computed from the space part (stable for tiny gradients, where
        the Minkowski square ``-g0^2 + |g_1:|^2`` cancels to rounding noise or below 0)."""
        x = self._point(x)
        return float(_tangent_norm(x, self.grad(x)))

    def dist_to_solution(self, x: ArrayLike) -> float:
        """``dist(x, x*) = 2 asinh(|x - x*|_L / 2)``: the chordal form, accurate for nearby
        points where ``acosh(-<x, x*>_L)`` has a floor of ~1e-8."""
        d = self._point(x) - self.solution()
        return float(2.0 * np.arcsinh(np.sqrt(max(float(_ldot(d, d)), 0.0)) / 2.0))

    def feasibility(self, x: ArrayLike) -> float:
        """``|<x, x>_L + 1|``."""
        x = self._point(x)
        return abs(float(_ldot(x, x)) + 1.0)
