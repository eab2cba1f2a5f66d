"""The Frechet (Karcher) mean of SPD matrices under the affine-invariant metric."""

import numpy as np

from .._typing import ArrayLike, ClientId, ClientSamples, FloatArray, Weighting
from ..kernels import call
from ..manifolds import SPD
from ..privacy.clipping import clip_factors
from ._clients import pack_clients, spans
from ._numerics import riemannian_descent
from .base import Problem

__all__ = ["SPDMean"]


def _t(a):
    return np.swapaxes(a, -1, -2)


def _check_spectrum(lam):
    """``lam`` (..., n): eigenvalues of ``C = L^-1 Z L^-T``; all must be finite and > 0, else
    ``log`` gives NaN. They are not when a sample's condition number relative to ``X`` is past
    ~1/eps (1e16): then ``dist(X, Z)`` is not computable in double precision."""
    ok = np.isfinite(lam).all(axis=-1) & (lam > 0).all(axis=-1)
    if not ok.all():
        j = int(np.flatnonzero(~ok.reshape(-1))[0])
        raise ValueError(f"SPDMean: sample {j} (of the samples evaluated) is numerically "
                         f"singular relative to the point: the eigenvalues of X^-1/2 Z X^-1/2 "
                         f"reach {float(np.min(lam.reshape(-1, lam.shape[-1])[j])):.3g} "
                         f"(condition number past ~1e16, or not finite), so dist(X, Z) and "
                         f"Log_X(Z) are not computable in double precision; rescale or drop "
                         f"the sample")
    return lam


def _log_congruence(linv, z):
    """``logm(C)`` of ``C = L^-1 Z L^-T`` (batched, by the compiled ``sym_logm`` kernel);
    ``ValueError`` when some ``C`` has an eigenvalue <= 0 or non-finite
    (:func:`_check_spectrum`), which ``sym_logm`` marks with NaN."""
    c = linv @ z @ _t(linv)
    c = 0.5 * (c + _t(c))
    with np.errstate(invalid="ignore", divide="ignore"):
        lg = call("sym_logm", c)
    bad = ~np.isfinite(lg).all(axis=(-2, -1))
    if bad.any():   # name the first such sample and its smallest eigenvalue
        lam = np.ones(c.shape[:-1])
        cb = c[bad]
        lam[bad] = np.linalg.eigvalsh(cb) if np.isfinite(cb).all() else np.nan
        lam[bad, 0] = np.minimum(lam[bad, 0], 0.0)   # sym_logm found it not positive definite
        _check_spectrum(lam)
    return lg


def _norms(lg):
    """``|logm(C)|_F`` (= ``dist(X, Z)``) of the output of :func:`_log_congruence`."""
    return np.sqrt(np.einsum("...ij,...ij->...", lg, lg))


class SPDMean(Problem):
    """Federated Frechet mean on ``S++(n)``: ``f_ij(X) = dist^2(X, Z_ij)``.

    Follows Huang et al. 2024 (eq. 4.2), Huang et al. 2025 (CFMSPD) and Xiao et al. 2024 (eq. 2): ``f_ij(X) =
    |logm(X^-1/2 Z_ij X^-1/2)|_F^2`` without a factor 1/2, ``f_i = (1/m_i) sum_j f_ij`` and
    ``f = sum_i w_i f_i`` (Huang et al. 2024 weights clients by ``p_i = N_i / sum N_j``: pass
    ``weighting="samples"``; Huang et al. 2025 and Xiao et al. 2024 use ``1/N``, the default). Then
    ``grad f_ij(X) = -2 Log_X(Z_ij)`` and ``|grad f_ij| = 2 dist(X, Z_ij)``.

    All samples of the selected clients are processed as one batch: with ``X = L L'``
    (Cholesky), ``C = L^-1 Z L^-T = Q diag(lam) Q'`` has the eigenvalues of
    ``X^-1/2 Z X^-1/2``, ``dist^2 = sum log^2 lam`` and ``Log_X(Z) = L logm(C) L'``; the
    Euclidean gradient is ``-2 L^-T logm(C) L^-1``; per-client sums are segment sums.

    The optimum comes from a centralized Riemannian gradient descent (BB steps, nonmonotone
    Armijo, exponential map) started at the log-Euclidean mean, run to ``|grad f| <= 1e-12``
    relative to the data scale (or the rounding floor). ``f`` is geodesically strongly
    convex, so the minimizer is unique.

    Parameters
    ----------
    data : list of array_like (m_i, n, n), ndarray (N, m, n, n) or ClientData
        Symmetric positive-definite client matrices ``Z_ij``.
    weighting : {"uniform", "samples"} or array_like (N,)

    Attributes
    ----------
    manifold : SPD
    n : int
    """

    def __init__(self, data: ClientSamples, *, weighting: Weighting = "uniform") -> None:
        flat, offsets = pack_clients(data, 2, "data")
        n = flat.shape[1]
        if flat.shape[2] != n:
            raise ValueError(f"data: expected square matrices (n, n), got {flat.shape[1:]}")
        # checked in chunks (no full-size temporary); exactly symmetric data is used in place,
        # data within the tolerance is replaced by a symmetrized copy
        chunks = spans(flat.shape[0], 8 * n * n)
        big = max((float(np.max(np.abs(flat[a:b]))) for a, b in chunks), default=0.0)
        asym = max((float(np.max(np.abs(flat[a:b] - _t(flat[a:b])))) for a, b in chunks),
                   default=0.0)
        if asym > 1e-10 * max(1.0, big):
            raise ValueError(f"data: SPD matrices must be symmetric; |Z - Z'|_max = {asym:.3g}")
        if asym > 0 or not flat.flags.c_contiguous:
            flat = np.ascontiguousarray(0.5 * (flat + _t(flat)))
        low = np.concatenate([np.linalg.eigvalsh(flat[a:b])[:, 0] for a, b in chunks] or
                             [np.empty(0)])
        bad = np.flatnonzero(low <= 0)
        if bad.size:
            client = int(np.searchsorted(offsets, bad[0], side="right") - 1)
            raise ValueError(f"data: matrices must be positive definite; sample "
                             f"{int(bad[0] - offsets[client])} of client {client} has smallest "
                             f"eigenvalue {low[bad[0]]:.3g}")
        super().__init__(np.diff(offsets), weighting)
        self._flat, self._offsets = flat, offsets
        self.n = n
        self.manifold = SPD(n)
        # global per-sample weights w_i / m_i, for f and grad at one point
        self._sw = np.repeat(self.weights / self.sizes, self.sizes)

    # ------------------------------------------------------------------ kernels

    def _factors(self, x):
        """``L`` and ``L^-1`` of ``x`` (k, n, n)."""
        try:
            lo = np.linalg.cholesky(x)
        except np.linalg.LinAlgError:
            raise ValueError("x: not positive definite") from None
        eye = np.broadcast_to(np.eye(self.n), lo.shape)
        return lo, np.linalg.solve(lo, eye)

    # ------------------------------------------------------------------ batched

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """``(1/m_i) sum_j dist^2(X_j, Z_ij)`` -> (k,)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        rows, seg, starts, counts = self._select(idx, None)
        _, linv = self._factors(x)
        c = linv[seg] @ self._flat[rows] @ _t(linv[seg])
        lam = np.linalg.eigvalsh(0.5 * (c + _t(c)))
        return np.add.reduceat(np.sum(np.log(lam) ** 2, axis=-1), starts) / counts

    def _log_sums(self, idx, linv, batch, tau=None):
        """``sum_j c_j logm(C_ij)`` per client of ``idx`` (k, n, n) and the sample counts:
        ``c_j = 1``, or the clip factors ``min(1, tau / (2 |logm(C_ij)|_F))``. Clients with
        equal counts go as ``(k, m)`` blocks (``L_i^-1`` broadcast over its samples, the data
        read in place on a full batch) in the chunks of :func:`spans` (temporaries a
        sixteenth of the samples, not several copies of them)."""
        blocks = self._blocks(idx, batch)
        if blocks is None:                     # unequal counts: one pass over the rows
            rows, seg, starts, counts = self._select(idx, batch)
            lg = _log_congruence(linv[seg], self._flat[rows])
            if tau is not None:
                lg *= clip_factors(2.0 * _norms(lg), tau)[:, None, None]
            return np.add.reduceat(lg, starts, axis=0), counts
        sel, m = blocks
        k, n = idx.size, self.n
        out = np.empty((k, n, n))
        for a, b in spans(k, 8 * m * n * n):
            z = (self._flat.reshape(k, m, n, n)[a:b] if isinstance(sel, slice)
                 else self._flat[sel[a * m:b * m]].reshape(b - a, m, n, n))
            lg = _log_congruence(linv[a:b, None], z)
            if tau is not None:
                lg *= clip_factors(2.0 * _norms(lg), tau)[..., None, None]
            lg.sum(axis=1, out=out[a:b])
        return out, np.full(k, m)

    def _grads(self, idx, x, batch):
        idx = self._clients(idx)
        x = self._points(idx, x)
        lo, linv = self._factors(x)
        lg, counts = self._log_sums(idx, linv, batch)
        return lg / counts[:, None, None], lo, linv

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``X^-1 rgrad X^-1 = -(2/m) L^-T (sum_j logm(C_j)) L^-1`` -> (k, n, n)."""
        lg, _, linv = self._grads(idx, x, batch)
        g = -2.0 * _t(linv) @ lg @ linv
        return 0.5 * (g + _t(g))

    def rgrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``-(2/m) sum_j Log_X(Z_ij) = -(2/m) L (sum_j logm(C_j)) L'``."""
        lg, lo, _ = self._grads(idx, x, batch)
        g = -2.0 * lo @ lg @ _t(lo)
        return 0.5 * (g + _t(g))

    # ------------------------------------------------------------------ per sample

    def _client_samples(self, i, x, batch=None):
        """``L``, ``L^-1`` (1, n, n) of ``x`` and client ``i``'s samples (or ``batch`` of them)."""
        i = self._client(i)
        sel = self._sample_subset(i, batch)
        x = self._point(x)
        lo, linv = self._factors(x[None])
        z = self._flat[self._offsets[i]:self._offsets[i + 1]]
        return lo, linv, (z if sel is None else z[sel])

    def _sample_logs(self, i, x, batch=None):
        lo, linv, z = self._client_samples(i, x, batch)
        return _log_congruence(linv, z), lo[0]

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """``-2 Log_X(Z_ij)`` for every sample -> (m_i, n, n)."""
        lg, lo = self._sample_logs(i, x)
        g = -2.0 * lo @ lg @ lo.T
        return 0.5 * (g + _t(g))

    def sample_rgrad_norms(self, i: ClientId, x: ArrayLike, batch: ArrayLike | None = None
                           ) -> FloatArray:
        """``2 dist(X, Z_ij)`` -> (m_i,) or (b,), as ``2 |logm(C_j)|_F`` of the very ``logm``
        that :meth:`weighted_rgrad` scales, so the clip factor measures the term it scales
        (``eigvalsh`` can return other small eigenvalues for a sample of large condition
        relative to ``X``: 6e-7 relative overshoot of ``tau`` at condition 1e12).

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
        lg, _ = self._sample_logs(i, x, batch)
        return 2.0 * _norms(lg)

    def weighted_rgrad(self, i: ClientId, x: ArrayLike, coef: ArrayLike,
                       batch: ArrayLike | None = None) -> FloatArray:
        """``-2 sum_j coef_j Log_X(Z_ij) = -2 L (sum_j coef_j logm(C_j)) L'``.

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
        lg, lo = self._sample_logs(i, x, batch)
        coef = self._coef(coef, lg.shape[0])
        g = -2.0 * lo @ np.tensordot(coef, lg, axes=1) @ lo.T
        return 0.5 * (g + g.T)

    def clipped_rgrad_sum(self, idx: ArrayLike, x: ArrayLike, tau: float,
                          batch: ArrayLike | None = None) -> FloatArray:
        """All clients' samples as one batch: ``-2 L (sum_j c_j logm(C_j)) L'`` with
        ``c_j = min(1, tau / (2 |logm(C_j)|_F))``, per-client segment sums (the terms of
        :meth:`weighted_rgrad` with the factors of :meth:`sample_rgrad_norms`). Per-client
        batch sizes (a list) go the default way."""
        if not (batch is None or isinstance(batch, np.ndarray)):
            return super().clipped_rgrad_sum(idx, x, tau, batch)
        idx = self._clients(idx)
        x = self._points(idx, x)
        lo, linv = self._factors(x)
        g = -2.0 * lo @ self._log_sums(idx, linv, batch, tau)[0] @ _t(lo)
        return 0.5 * (g + _t(g))

    # ------------------------------------------------------------------ global

    def f(self, x: ArrayLike) -> float:
        """``sum_i (w_i/m_i) sum_j dist^2(X, Z_ij)``, the samples in the chunks of ``spans``."""
        x = self._point(x)
        _, linv = self._factors(x[None])
        total = 0.0
        for a, b in spans(self._flat.shape[0], 8 * self.n * self.n):
            c = linv @ self._flat[a:b] @ _t(linv)
            lam = np.linalg.eigvalsh(0.5 * (c + _t(c)))
            total += float(self._sw[a:b] @ np.sum(np.log(lam) ** 2, axis=-1))
        return total

    def grad(self, x: ArrayLike) -> FloatArray:
        """``-2 sum_i (w_i/m_i) sum_j Log_X(Z_ij)`` -> (n, n)."""
        x = self._point(x)
        lo, linv = self._factors(x[None])
        s = np.zeros((self.n, self.n))
        for a, b in spans(self._flat.shape[0], 8 * self.n * self.n):
            s += np.tensordot(self._sw[a:b], _log_congruence(linv, self._flat[a:b]), axes=1)
        g = -2.0 * lo[0] @ s @ lo[0].T
        return 0.5 * (g + g.T)

    def solution(self) -> FloatArray:
        """The Frechet mean, by centralized Riemannian gradient descent (cached)."""
        if self._solution is None:
            lam, q = np.linalg.eigh(self._flat)
            logs = (q * np.log(lam)[..., None, :]) @ _t(q)
            s = np.tensordot(self._sw, logs, axes=1)
            w, v = np.linalg.eigh(0.5 * (s + s.T))
            x0 = (v * np.exp(w)) @ v.T
            scale = max(1.0, float(np.sqrt(self._sw @ np.sum(np.log(lam) ** 2, axis=-1))))
            x, info = riemannian_descent(self.manifold, self.f, self.grad, x0,
                                         tol=1e-13 * scale, max_iter=2000)
            self.solver_info = info
            self._solution = 0.5 * (x + x.T)
        return self._solution.copy()
