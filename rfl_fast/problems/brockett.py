"""The Brockett cost on the Stiefel manifold (Huang et al. 2025, MBCFSti)."""

import math

import numpy as np

from .._typing import ArrayLike, ClientId, ClientSamples, FloatArray, Weighting
from ..errors import InvalidParameterError
from ..kernels import fused
from ..manifolds import Stiefel
from ..privacy.clipping import _TAU, clip_factors
from ._clients import batch_rows, pack_clients
from ._numerics import extreme_eigh
from .base import Problem, QuadraticRows

__all__ = ["Brockett"]


def _t(a):
    return np.swapaxes(a, -1, -2)


#: clipped sums: |P_X G|^2 = |G|^2 - |sym(X'G)|^2 is trusted where it keeps a quarter of |G|^2
#: and the squares are in range (no overflow, no underflow)
_TRUST, _LO, _HI = 0.25, 1e-280, 1e280


class Brockett(Problem):
    """Federated Brockett cost ``f_ij(X) = tr(X' A_ij X H)`` on ``St(d, p)`` (Huang et al. 2025).

    Seed Huang et al. 2025 writes ``F(X) = (1/S) sum_{i=1}^S sum_{j=1}^N tr(X' A_ij X H)`` with ``S``
    clients and ``N`` samples per client: a mean over clients of each client's *sum* over its
    samples. ``normalize="sum"`` is that cost (``f_i = sum_j f_ij``); the default
    ``normalize="mean"``, as for every other problem, has ``f_i = (1/m_i) sum_j f_ij``, i.e.
    Huang et al. 2025's cost divided by ``m_i`` (the same minimizers, ``1/m_i`` times the gradients, so
    Huang et al. 2025's step sizes need the ``"sum"`` form). In both, ``f = sum_i w_i f_i``; with
    ``"sum"`` a sample's cost is ``m_i tr(X' A_ij X H)`` so that a mini-batch mean stays an
    unbiased estimate of ``f_i``. ``H = diag(p, p-1, ..., 1)`` by default; the data
    ``A_ij = B + B'`` come from ``rfl_fast.data.brockett_matrices`` (symmetric, not positive
    definite). Non-symmetric ``A_ij`` are replaced by their symmetric part, which leaves the
    cost unchanged (``tr(X'AXH) = tr(X' sym(A) X H)`` for symmetric ``H``).

    With ``Abar = sum_i w_i (1/m_i) sum_j A_ij = V diag(lambda) V'`` (``lambda`` ascending)
    and ``h`` positive, the minimum is ``sum_k h_(k) lambda_k`` pairing the largest ``h``
    with the smallest eigenvalue: ``X*`` holds the eigenvectors of the ``p`` smallest
    eigenvalues, column ``k`` the one matching the rank of ``h_k`` (for the default ``H``,
    column 1 = smallest eigenvalue). Column signs are arbitrary; ``solution()`` makes each
    column's largest-magnitude entry positive and ``dist`` takes the best signs.

    Gradients: ``egrad f_ij = 2 A_ij X H``; ``grad f_ij = P_X(2 A_ij X H)``.

    Parameters
    ----------
    data : list of array_like (m_i, d, d), ndarray (n, m, d, d) or ClientData
        Client matrices ``A_ij``.
    p : int
        Number of columns, ``1 <= p <= d``.
    h : array_like, shape (p,), optional
        Positive diagonal of ``H``; default ``(p, p-1, ..., 1)``.
    weighting : {"uniform", "samples"} or array_like (n,)
    normalize : {"mean", "sum"}
        Client cost: mean (default) or sum (Huang et al. 2025's MBCFSti) of the sample costs.

    Attributes
    ----------
    manifold : Stiefel
    d, p : int
    h : ndarray, shape (p,)
    normalize : str
    """

    def __init__(self, data: ClientSamples, p: int, *, h: ArrayLike | None = None,
                 weighting: Weighting = "uniform", normalize: str = "mean") -> None:
        flat, offsets = pack_clients(data, 2, "data")
        d = flat.shape[1]
        if flat.shape[2] != d:
            raise ValueError(f"data: expected square matrices (d, d), got {flat.shape[1:]}")
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"p: expected an int, got {type(p).__name__}")
        if not 1 <= p <= d:
            raise InvalidParameterError("p", expected=f"1 <= p <= d = {d} (the matrix size)",
                                        got=f"p = {p}")
        p = int(p)
        if h is None:
            h = np.arange(p, 0, -1, dtype=np.float64)
        h = np.asarray(h, dtype=np.float64)
        if h.shape != (p,) or not np.isfinite(h).all() or (h <= 0).any():
            raise ValueError(f"h: expected {p} positive finite entries (the diagonal of H), "
                             f"got {np.asarray(h).tolist()}")
        if normalize not in ("mean", "sum"):
            raise ValueError(f"normalize: expected 'mean' or 'sum', got {normalize!r}")
        super().__init__(np.diff(offsets), weighting)
        if (flat != _t(flat)).any():   # symmetrize (a copy) only when needed
            flat = np.ascontiguousarray(0.5 * (flat + _t(flat)))
        if normalize == "sum":         # sample cost m_i tr(X'A_ij X H) (a scaled copy)
            flat = flat * np.repeat(self.sizes.astype(np.float64), self.sizes)[:, None, None]
        self.normalize = normalize
        self._flat = flat
        self._offsets = offsets
        self.d, self.p, self.h = d, p, h
        self.manifold = Stiefel(d, p)
        # per-client means (n, d, d): the full gradients cost d^2 p, not m d^2 p
        self._mean = np.add.reduceat(self._flat, offsets[:-1], axis=0) / self.sizes[:, None, None]
        self._global = np.tensordot(self.weights, self._mean, axes=1)

    def quadratic_rows(self) -> QuadraticRows:
        """The matrices' form: client ``i``'s gradient is ``2 Abar_i X H`` (its mean matrix),
        declared for the fused local steps (``kernels.registry.FUSED``)."""
        n, d = self.n_clients, self.d
        return QuadraticRows(self._mean.reshape(n * d, d),
                             np.arange(n + 1, dtype=np.int64) * d, np.full(n, 2.0), self.h)

    # ------------------------------------------------------------------ batched

    def _means(self, idx):
        if idx.size == self.n_clients and (idx == np.arange(idx.size)).all():
            return self._mean
        return self._mean[idx]

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """``tr(X' Abar_i X H)`` -> (k,)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        ax = np.matmul(self._means(idx), x)
        return np.einsum("kdp,kdp,p->k", x, ax, self.h)

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """``2 Abar_i X H`` (or the mean of ``2 A_ij X H`` over ``batch`` (k, b))."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        if batch is None:
            a = self._means(idx)
        else:
            batch = self._batch(idx, batch)
            a = self._flat[batch_rows(self._offsets, idx, batch)].mean(axis=1)
        return 2.0 * np.matmul(a, x) * self.h

    def _sample_grads(self, a, x):
        """``P_X(2 A_j X H)`` of samples ``a`` (m, d, d) at ``x`` ((d, p) or (m, d, p))."""
        return self.manifold.proj(x, 2.0 * np.matmul(a, x) * self.h)

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """``P_X(2 A_ij X H)`` for every sample -> (m_i, d, p)."""
        i = self._client(i)
        x = self._point(x)
        a = self._flat[self._offsets[i]:self._offsets[i + 1]]
        return self._sample_grads(a, x)

    def clipped_rgrad_sum(self, idx: ArrayLike, x: ArrayLike, tau: float,
                          batch: ArrayLike | None = None) -> FloatArray:
        """All selected samples at once: ``g = P_X(2 A_ij X H)`` (the terms of
        :meth:`sample_rgrads`), clipped by their norms and summed per client (segment sums).
        Per-client batch sizes (a list) go the default way. Equal batches (every client's
        samples, or ``(k, b)`` picks) with a finite ``tau`` take the fused kernel
        :func:`rfl_fast.kernels.fused.brockett_clipped_sum` (each sample's ``G_j``, norm, clip
        factor and term while it is in cache) where the kernels route it to a compiled pass;
        its rule is :meth:`_clipped_blocks`', whose NumPy form answers the calls with a sample
        that rule does not trust (so a non-finite norm is refused as there, naming the
        sample)."""
        if not (batch is None or isinstance(batch, np.ndarray)):
            return super().clipped_rgrad_sum(idx, x, tau, batch)
        idx = self._clients(idx)
        x = self._points(idx, x)
        blocks = self._blocks(idx, batch)
        if blocks is not None:
            tau = _TAU(tau, "tau")
            if math.isfinite(tau):
                k, b = idx.size, blocks[1]
                rows = (np.arange(k * b) if isinstance(blocks[0], slice) else blocks[0])
                out = fused.brockett_clipped_sum(self._flat, rows.reshape(k, b), x, self.h, tau)
                if out is not None and out[1]:
                    return out[0]
            return self._clipped_blocks(x, tau, self._flat[blocks[0]], blocks[1])
        rows, seg, starts, _ = self._select(idx, batch)
        xs = x[seg]
        g = self._sample_grads(self._flat[rows], xs)
        coef = clip_factors(self.manifold.norm(xs, g), tau)
        return np.add.reduceat(coef[:, None, None] * g, starts, axis=0)

    def _clipped_blocks(self, x, tau, a, b):
        """:meth:`clipped_rgrad_sum` when every client gives ``b`` samples ``a`` (k b, d, d):
        client ``i``'s are one ``(b d, d)`` block times ``2 X_i H`` (one product per client, no
        copy of ``X_i`` per sample; a full-batch round passes the data itself) giving the
        Euclidean ``G_j``. The norms ``|P_X G_j|^2 = |G_j|^2 - |sym(X'G_j)|^2`` (``X'X = I``)
        are trusted where ``|P_X G_j|^2 >= |G_j|^2 / 4`` (no cancellation there): those samples
        are summed as ``P_X(sum_j c_j G_j)``, one projection per client, each term rounded at
        ``O(eps) |c_j G_j| <= O(eps) 2 tau``. The others (gradients almost normal to the
        manifold, norms out of range) are projected one by one, ``G_j - X sym(X'G_j)``, and
        added after the projection, so every sample adds at most ``tau`` up to rounding."""
        k, d, p = x.shape[0], self.d, self.p
        g = np.matmul(a.reshape(k, b * d, d), x * (2.0 * self.h)).reshape(k, b, d, p)
        xb = x[:, None]
        s = np.matmul(_t(xb), g)
        sym = s + _t(s)
        sym *= 0.5
        flat = g.reshape(k, b, d * p)
        # an overflowing sample's squares are inf (and inf - inf NaN): not trusted, and its
        # norm below not finite, which clip_factors refuses naming the sample
        with np.errstate(over="ignore", invalid="ignore"):
            g2 = np.einsum("kbi,kbi->kb", flat, flat)
            n2 = g2 - np.einsum("kbij,kbij->kb", sym, sym)
            trusted = (n2 >= _TRUST * g2) & (g2 > _LO) & (g2 < _HI)
        norms = np.sqrt(np.where(trusted, n2, 0.0))
        slow = None if trusted.all() else np.nonzero(~trusted)
        if slow is not None:    # the explicit projection (and its norm) of the others
            with np.errstate(over="ignore", invalid="ignore"):
                gs = g[slow] - np.matmul(x[slow[0]], sym[slow])
                norms[slow] = np.sqrt(np.einsum("nij,nij->n", gs, gs))
        coef = clip_factors(norms, tau)
        cs = None
        if slow is not None:
            cs = coef[slow]
            coef[slow] = 0.0
        total = np.matmul(coef[:, None, :], flat).reshape(k, d, p)
        st = np.matmul(_t(x), total)
        total -= np.matmul(x, 0.5 * (st + _t(st)))
        if slow is not None:
            np.add.at(total, slow[0], cs[:, None, None] * gs)
        return total

    # ------------------------------------------------------------------ global

    def f(self, x: ArrayLike) -> float:
        """``tr(X' Abar X H)`` with ``Abar = sum_i w_i (1/m_i) sum_j A_ij`` -> float."""
        x = self._point(x)
        return float(np.einsum("dp,dp,p->", x, self._global @ x, self.h))

    def grad(self, x: ArrayLike) -> FloatArray:
        """``P_X(2 Abar X H)`` -> (d, p)."""
        x = self._point(x)
        return self.manifold.proj(x, 2.0 * (self._global @ x) * self.h)

    def solution(self) -> FloatArray:
        """Eigenvectors of the ``p`` smallest eigenvalues of ``Abar``, ordered against ``h``."""
        if self._solution is None:
            _, v = extreme_eigh(self._global, self.p, "smallest")   # ascending eigenvalues
            rank = np.argsort(np.argsort(-self.h, kind="stable"), kind="stable")
            self._solution = v[:, rank]
        return self._solution.copy()

    def dist_to_solution(self, x: ArrayLike) -> float:
        """``min_S |X - X* S|_F`` over column sign flips ``S``."""
        x = self._point(x)
        xs = self.solution()
        s = np.sign(np.sum(x * xs, axis=0))
        s[s == 0] = 1.0
        return float(np.linalg.norm(x - xs * s))

    def feasibility(self, x: ArrayLike) -> float:
        """``|X'X - I|_F``."""
        x = self._point(x)
        return float(np.linalg.norm(x.T @ x - np.eye(self.p)))
