"""Shared implementation of the quadratic (PCA-type) problems ``f_i(X) = -c tr(X' A_i X)``.

Two data forms:

* ``"samples"``: client ``i`` holds rows ``z_ij`` (one contiguous array + offsets),
  ``A_i = (1/m_i) Z_i' Z_i`` never formed unless cheaper, ``c = 1``: ``f_ij(X) = -|X' z_ij|^2``.
* ``"covariances"``: client ``i`` holds ``A_i`` (d, d) itself, ``c = 1/2``; one "sample" per
  client.

Internally points are matrices (k, d, r); ``SpherePCA`` maps its vectors (k, d) to r = 1.
"""

import math

import numpy as np

from .._typing import ArrayLike, ClientId, FloatArray
from ..kernels import fused
from ._clients import batch_rows, pack_clients
from ._numerics import extreme_eigh
from .base import Problem, QuadraticRows

__all__ = ["QuadraticProblem"]

#: Auto mode forms per-client Gram matrices only below this many bytes.
GRAM_BYTES_LIMIT = 256 * 2**20

#: Row chunk (bytes) of the weighted copy used to form ``A = sum_i w_i A_i`` from rows.
SYRK_CHUNK_BYTES = 2**25


def _t(a):
    return np.swapaxes(a, -1, -2)


def check_covariances(A, name="A"):
    """``A`` (n, d, d) symmetric, finite -> float64 C-contiguous symmetrized copy."""
    a = np.asarray(A)
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected a real array, got dtype {a.dtype}")
    if a.ndim == 2:
        raise ValueError(f"{name}: expected stacked client matrices of shape (n, d, d), got "
                         f"{a.shape}; use A[None] for a single client")
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name}: expected shape (n_clients, d, d), got {a.shape}")
    a = np.asarray(a, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: contains NaN or inf")
    asym = np.max(np.abs(a - _t(a)))
    if asym > 1e-10 * max(1.0, np.max(np.abs(a))):
        raise ValueError(f"{name}: client matrices must be symmetric; |A - A'|_max = {asym:.3g}")
    return np.ascontiguousarray(0.5 * (a + _t(a)))



def _check_no_overflow(flat, sizes, name):
    """Refuse samples whose covariance ``z'z`` could overflow float64 (one client's sum of
    squares of an entry bounded by ``rows * max|z|^2``): every product and metric would be
    inf/NaN. flat: (sum of rows, d)."""
    big = max(float(flat.max()), -float(flat.min())) if flat.size else 0.0  # no |flat| copy
    limit = math.sqrt(np.finfo(np.float64).max / max(1, int(np.max(sizes))))
    if not big <= limit:
        raise ValueError(f"{name}: entries up to {big:.3g} make a client's covariance z'z "
                         f"overflow float64 (at most {limit:.3g} for {int(np.max(sizes))} rows); "
                         f"rescale the data (e.g. data.normalize = 'standardize')")

class QuadraticProblem(Problem):
    """Base of ``SpherePCA`` and ``KPCA`` (private): see the module docstring."""

    _c = 1.0

    def _setup_samples(self, data, r, weighting, gram, name="data"):
        flat, offsets = pack_clients(data, 1, name)
        self._form = "samples"
        self._flat, self._offsets = flat, offsets
        self._offsets64 = np.ascontiguousarray(offsets, dtype=np.int64)  # the kernels' layout
        self.d = flat.shape[1]
        self.r = r
        self._c = 1.0
        super().__init__(np.diff(offsets), weighting)
        _check_no_overflow(flat, self.sizes, name)
        n, d = self.n_clients, self.d
        if gram is None:
            gram = d <= self.sizes.mean() and n * d * d * 8 <= GRAM_BYTES_LIMIT
        self._gram = None
        if gram:
            self._gram = np.empty((n, d, d))
            for i in range(n):
                z = flat[offsets[i]:offsets[i + 1]]
                np.matmul(z.T, z, out=self._gram[i])
                self._gram[i] /= z.shape[0]
        self._global = None

    def _setup_covariances(self, A, r, weighting):
        a = check_covariances(A, "A")
        self._form = "covariances"
        self._flat = self._gram = a
        self._offsets = np.arange(a.shape[0] + 1, dtype=np.int64)
        self._offsets64 = self._offsets
        self.d, self.r = a.shape[1], r
        self._c = 0.5
        super().__init__(np.ones(a.shape[0], dtype=np.int64), weighting)
        self._global = None

    @property
    def form(self) -> str:
        """``"samples"`` or ``"covariances"``."""
        return self._form

    # ------------------------------------------------------------------ shape adapters
    # points are (k, d, r) internally; SpherePCA overrides these two for (k, d)

    def _mat(self, x):
        return x

    def _unmat(self, g):
        return g

    # ------------------------------------------------------------------ client matrices

    def _client_rows(self, i):
        return self._flat[self._offsets[i]:self._offsets[i + 1]]

    def _row_sums(self, idx, x, scale=None):
        """``(St, q)`` of ``kernels.fused.pca_grad_sum`` for clients ``idx`` at ``x`` (k, d, r):
        ``St[j] = (Z_i' Z_i X_j)'`` (k, r, d) (with ``scale`` (k,): ``scale[j] Z_i' Z_i X_j``,
        (k, d, r)), ``q[j] = |Z_i X_j|_F^2``; one pass over each client's rows (the C++
        kernel, batched over the clients, when available)."""
        return fused.pca_grad_sum(self._flat, self._offsets64,
                                  np.ascontiguousarray(idx, dtype=np.int64),
                                  np.ascontiguousarray(x, dtype=np.float64), scale=scale,
                                  points=True)

    def quadratic_rows(self) -> QuadraticRows | None:
        """The rows form's data, ``f_i``'s Euclidean gradient being ``-2c/m_i Z_i' Z_i X``;
        with per-client Gram matrices, the matrices' form ``-2c A_i X``."""
        if self._gram is not None:
            n, d = self._gram.shape[:2]
            return QuadraticRows(np.ascontiguousarray(self._gram).reshape(n * d, d),
                                 np.arange(n + 1, dtype=np.int64) * d,
                                 np.full(n, -2.0 * self._c), np.ones(self.r))
        return QuadraticRows(self._flat, self._offsets64, -2.0 * self._c / self.sizes)

    def _ax(self, idx, x, factor=1.0):
        """``factor A_i X_j`` (k, d, r, C order) for clients ``idx`` at matrices ``x`` (k, d, r).

        Rows form: ``(factor/m_i) Z_i'(Z_i X)`` in one streaming pass over the data.
        """
        if self._gram is not None:
            every = idx.size == self.n_clients and (idx == np.arange(idx.size)).all()
            ax = np.matmul(self._gram if every else self._gram[idx], x)
            return ax if factor == 1.0 else factor * ax
        g, _ = self._row_sums(idx, x, scale=factor / self.sizes[idx])
        return g

    def _zx_sq(self, idx, x):
        """``(1/m_i) |Z_i X_j|_F^2`` (k,), rows form."""
        _, q = self._row_sums(idx, x)
        return q / self.sizes[idx]

    def _global_matrix(self):
        """``A = sum_i w_i A_i`` (d, d), formed once."""
        if self._global is None:
            if self._gram is not None:
                self._global = np.tensordot(self.weights, self._gram, axes=1)
            else:
                # sum_j (w_i/m_i) z_j z_j' by symmetric rank-k updates on row chunks of
                # sqrt(w_i/m_i) z_j (half the flops of a GEMM, bounded extra memory)
                from scipy.linalg.blas import dsyrk
                sw = np.sqrt(np.repeat(self.weights / self.sizes, self.sizes))
                d = self.d
                acc = np.zeros((d, d), order="F")
                chunk = max(16, SYRK_CHUNK_BYTES // (8 * d))
                for s in range(0, self._flat.shape[0], chunk):
                    zs = self._flat[s:s + chunk] * sw[s:s + chunk, None]
                    acc = dsyrk(1.0, zs.T, beta=1.0, c=acc, overwrite_c=1)
                self._global = np.triu(acc) + np.triu(acc, 1).T
            self._global = 0.5 * (self._global + self._global.T)
        return self._global

    # ------------------------------------------------------------------ batched

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """``f_i(x_j) = -c tr(X_j' A_i X_j)`` for clients ``idx`` (k,) at ``x`` (k, *shape)
        -> (k,)."""
        idx = self._clients(idx)
        xm = self._mat(self._points(idx, x))
        if self._gram is not None:
            ax = self._ax(idx, xm)
            return -self._c * np.einsum("kdr,kdr->k", xm, ax)
        return -self._c * self._zx_sq(idx, xm)

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``-2c A_i X_j`` (k, *shape); with ``batch`` (k, b) sample indices the mean of
        ``-2 z z' X`` over those samples (rows form)."""
        idx = self._clients(idx)
        xm = self._mat(self._points(idx, x))
        if batch is None:
            return self._unmat(self._ax(idx, xm, -2.0 * self._c))
        batch = self._batch(idx, batch)
        if self._form == "covariances":  # one sample per client: the batch repeats it
            return self._unmat(self._ax(idx, xm, -2.0 * self._c))
        zb = self._flat[batch_rows(self._offsets, idx, batch)]      # (k, b, d)
        y = np.matmul(zb, xm)                                      # (k, b, r)
        g = np.matmul(_t(zb), y)                                   # (k, d, r)
        return self._unmat((-2.0 * self._c / batch.shape[1]) * g)

    # ------------------------------------------------------------------ per sample

    def _rows_at(self, i, x, batch):
        i = self._client(i)
        sel = self._sample_subset(i, batch)
        xm = self._mat(self._point(x)[None])[0]
        z = self._client_rows(i)
        return (z if sel is None else z[sel]), xm

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """Per-sample Riemannian gradients of client ``i`` at ``x`` -> (m_i, *shape).

        Samples form: ``grad f_ij = -2 (I - XX') z_ij z_ij' X``. Covariances form: the
        client's gradient (one "sample", shape (1, *shape))."""
        if self._form == "covariances":
            return self.rgrad(np.array([self._client(i)]), self._point(x)[None])
        z, xm = self._rows_at(i, x, None)
        y = z @ xm                                   # (m, r)  X'z
        p = z - y @ xm.T                             # (m, d)  (I - XX') z
        g = (-2.0 * self._c) * p[:, :, None] * y[:, None, :]
        return self._unmat(g)

    def sample_rgrad_norms(self, i: ClientId, x: ArrayLike, batch: ArrayLike | None = None
                           ) -> FloatArray:
        """Closed form ``2 |(I - XX') z_ij| |X' z_ij|`` (samples form), shape (m_i,) or (b,).

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
        if self._form == "covariances":
            return super().sample_rgrad_norms(i, x, batch)
        z, xm = self._rows_at(i, x, batch)
        y = z @ xm
        p = z - y @ xm.T
        with np.errstate(over="ignore"):    # an overflowing norm is inf: clip_factors refuses it
            return 2.0 * self._c * fused.row_norms(p) * fused.row_norms(y)

    def weighted_rgrad(self, i: ClientId, x: ArrayLike, coef: ArrayLike,
                       batch: ArrayLike | None = None) -> FloatArray:
        """``sum_j coef_j grad f_ij = -2 P' diag(coef) Z X`` with the residuals
        ``P = Z - Z X X'`` formed explicitly (samples form), without per-sample matrices: each
        term is ``coef_j`` times the computed ``p_j y_j'`` whose norm
        :meth:`sample_rgrad_norms` measured, so clipping bounds it in floating point (the
        projection of ``Z' diag(coef) Z X`` instead cancels for ``z`` almost in ``span(X)``).

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
        if self._form == "covariances":
            return super().weighted_rgrad(i, x, coef, batch)
        z, xm = self._rows_at(i, x, batch)
        coef = self._coef(coef, z.shape[0])
        y = z @ xm
        p = z - y @ xm.T
        g = (-2.0 * self._c) * (p.T @ (coef[:, None] * y))
        return self._unmat(g[None])[0]

    def clipped_rgrad_sum(self, idx: ArrayLike, x: ArrayLike, tau: float,
                          batch: ArrayLike | None = None) -> FloatArray:
        """One fused pass over the clients' rows (``kernels.fused.pca_grad_sum``, clipped),
        all clients at once: each sample adds ``min(2c |p| |y|, tau) (p/|p|)(y/|y|)'``, the
        term of :meth:`weighted_rgrad` with the factor of :meth:`sample_rgrad_norms` (``|p|``
        of the residual formed explicitly wherever ``|z|^2 - |y|^2`` could cancel, norms
        scaled against overflow; see :mod:`rfl_fast.kernels.fused`), so one sample moves the
        sum by at most ``tau`` up to rounding. Covariances form, per-client batch sizes
        (a list) and a sample whose norm is not finite go the default way (which names it)."""
        if self._form == "covariances" or not (batch is None or isinstance(batch, np.ndarray)):
            return super().clipped_rgrad_sum(idx, x, tau, batch)
        idx = self._clients(idx)
        xs = np.ascontiguousarray(self._mat(self._points(idx, x)))
        if batch is None:
            rows, offsets, sel = self._flat, self._offsets64, idx
        else:
            batch = self._batch(idx, batch)
            k, b = batch.shape
            rows = self._flat[batch_rows(self._offsets, idx, batch).reshape(-1)]
            offsets, sel = np.arange(0, k * b + 1, b, dtype=np.int64), np.arange(k)
        # the gradient form with scale -1: -St' (k, d, r), C-contiguous, formed in the threads
        G, _ = fused.pca_grad_sum(rows, offsets, sel, xs, tau, 2.0 * self._c, True,
                                  np.full(sel.size, -1.0), points=True)
        # one sum instead of a mask: NaN or inf anywhere (or an overflowing sum, then the
        # default way, which gives the same answer) is not finite
        if not math.isfinite(np.add.reduce(G, axis=None)):
            return super().clipped_rgrad_sum(idx, x, tau, batch)
        return self._unmat(G)

    # ------------------------------------------------------------------ global

    def _pooled(self):
        """Whether global f / grad go through the pooled ``d x d`` matrix (``d^2 r`` per call
        instead of a pass over all data); not for very large ``d``."""
        return self._gram is not None or self.d * self.d * 8 <= GRAM_BYTES_LIMIT

    def has_pooled_grad(self) -> bool:
        """Whether ``grad`` costs less than a pass over the clients' data: the pooled ``d x d``
        matrix exists already (a metric asked for ``f``), or the clients' ``d x d`` matrices
        hold it at ``n d^2`` (covariances, per-client Gram matrices). Forming it from the
        samples costs ``N d^2`` against a pass's ``N d r``, so RFedSVRG's first round does not
        form it: its all-client exchange is then one batched pass, which the participants'
        own ``grad f_i(x_t)`` share. RFedSVRG takes its all-client ``g_t`` from ``grad`` in the
        simulation when this is true."""
        return self._pooled() and (self._global is not None or self._gram is not None)

    def f(self, x: ArrayLike) -> float:
        """``sum_i w_i f_i(x) = -c tr(X' A X)``, ``A = sum_i w_i A_i`` (formed once)."""
        if not self._pooled():
            return super().f(x)
        xm = self._mat(self._point(x)[None])[0]
        return float(-self._c * np.vdot(xm, self._global_matrix() @ xm))

    def grad(self, x: ArrayLike) -> FloatArray:
        """``P_x(-2c A X)``, ``A = sum_i w_i A_i``, at one point -> (*shape)."""
        if not self._pooled():
            return super().grad(x)
        x = self._point(x)
        xm = self._mat(x[None])[0]
        g = self._unmat((-2.0 * self._c * (self._global_matrix() @ xm))[None])[0]
        return self.manifold.egrad2rgrad(x, g)

    def solution(self) -> FloatArray:
        """Top-``r`` eigenvectors of ``A = sum_i w_i A_i``, eigenvalues descending, each
        column signed so that its largest-magnitude entry is positive."""
        if self._solution is None:
            _, v = extreme_eigh(self._global_matrix(), self.r, "largest")
            self._solution = self._unmat(v[None])[0]
        return self._solution.copy()
