"""The Stiefel manifold St(n, p) of n x p matrices with orthonormal columns, embedded metric."""

import numpy as np

from .._typing import ArrayLike, FloatArray, RNGLike
from .._validation import as_rng
from ..kernels import call
from .base import Manifold

__all__ = ["Stiefel"]

#: ``_solved``'s (what, name) of a polar or QR retraction without an answer
_RETR_UNSOLVED = ("retr", "u (X + U is rank deficient)")
#: the same of an inverse retraction, by method
_INV_RETR_UNSOLVED = {m: ("inv_retr", f"y (X'Y is too singular for the {m} inverse, or y is not "
                                      "reached by that retraction from x)") for m in ("polar", "qr")}


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


class Stiefel(Manifold):
    r"""Points ``X`` of shape ``(..., n, p)`` with :math:`X^\top X = I_p`; the embedded metric
    :math:`\langle U, V\rangle = \operatorname{tr}(U^\top V)`, tangent vectors
    :math:`X^\top U + U^\top X = 0`, projection :math:`U - X \operatorname{sym}(X^\top U)`.

    Retractions: ``"polar"`` (default, the polar factor of :math:`X + U`), ``"qr"`` (the Q
    factor of :math:`X + U`, R with a positive diagonal), ``"cayley"`` and ``"exp"`` (Edelman's
    geodesic). Exact inverses exist for ``"polar"`` (:math:`(X^\top Y) S + S (Y^\top X) = 2I`,
    :math:`U = YS - X`) and ``"qr"``. Transport: ``"projection"`` (:math:`P_Y V`).
    :class:`Grassmann` reads the same arrays as subspaces.

    Parameters
    ----------
    n, p : int
        ``n >= p >= 1``.
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).
    """

    retractions = ("polar", "qr", "cayley", "exp")
    inverse_retractions = ("polar", "qr")
    transports = ("projection",)
    nonexpanding_transports = ("projection",)
    has_project = True
    has_tangent_gaussian = True
    step_kernels = {"polar": ("stiefel_proj", "stiefel_retr_polar")}
    transport_kernels = {"projection": "stiefel_proj"}
    inverse_kernels = {"polar": "stiefel_inv_retr_polar"}
    project_kernel = "polar"
    stiefel_noise = True
    array_methods = Manifold.array_methods + ("principal_angles", "dist_subspace")
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "stiefel_proj", "retr": "stiefel_retr",
                    "transport": "stiefel_transport",
                    "egrad2rgrad": "stiefel_egrad2rgrad", "exp": "stiefel_exp",
                    "inv_retr": "stiefel_inv_retr",
                    "project": "stiefel_project"}

    def __init__(self, n: int, p: int, *, validate: bool | None = None) -> None:
        n, p = int(n), int(p)
        if not n >= p >= 1:
            raise ValueError(f"Stiefel: need n >= p >= 1; values supplied were n={n}, p={p}")
        super().__init__((n, p), n * p - p * (p + 1) // 2, validate=validate)

    def _check_point(self, x, atol):
        gap = np.max(np.abs(_t(x) @ x - np.eye(self.shape[1])), initial=0.0)
        return gap <= atol, f"|X'X - I|_max = {gap:.3g} > atol {atol:g}"

    def proj(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """``U - X sym(X'U)``; x, u: (..., n, p).

        Parameters
        ----------
        x : array_like, shape (..., n, p)
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape (..., n, p)
            Ambient vector(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape (..., n, p)
            The tangent part of ``u`` at ``x``.
        """
        out = self._compiled("stiefel_proj", backend, x, u)
        if out is not None:
            return out
        x, u = self._point_vector(x, u, tangent=False)
        return call("stiefel_proj", x, u, backend=backend)

    def egrad2rgrad(self, x: ArrayLike, g: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """Riemannian gradient from the Euclidean gradient ``g`` of a function at ``x``.

        Parameters
        ----------
        x : array_like, shape (..., n, p)
            Point(s); leading axes are a batch and broadcast.
        g : array_like, shape (..., n, p)
            Euclidean gradient(s) at ``x``.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape (..., n, p)
            The Riemannian gradient(s).
        """
        return self.proj(x, g, backend=backend)

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        """Retraction ``R_X(U)``; x, u: (..., n, p).

        For a tangent ``U``, ``(X+U)'(X+U) = I + U'U``, so ``X + U`` has full rank for every
        step size and the polar and QR retractions answer huge steps too (the polar factor is
        computed from an SVD-grade factorization, accurate for ``X + U`` of any condition).
        ``X + U`` numerically rank deficient (only for a non-tangent ``U``) raises
        ``NoSolutionError`` for both (the polar factor / the Q factor is then not unique),
        whatever the backend."""
        if method is None or method == "polar":
            out = self._compiled("stiefel_retr_polar", backend, x, u, solved=_RETR_UNSOLVED)
            if out is not None:
                return out
        method = self._option(method, self.retractions, "retraction")
        if method == "exp":
            return self.exp(x, u)
        x, u = self._point_vector(x, u)
        if method == "cayley":
            return self._cayley(x, u).astype(np.result_type(x, u), copy=False)
        out = call(f"stiefel_retr_{method}", x, u, backend=backend)
        if method == "qr":
            out = self._qr_full_rank(x + u, out)
        return self._solved(out, *_RETR_UNSOLVED)

    @staticmethod
    def _qr_full_rank(a, q):
        """``q`` with NaN items where ``a = q r`` has a (numerically) zero diagonal entry of r.

        ``r_jj = q_j . a_j`` (O(np) per item); zero means column j of ``a`` lies in the span of
        the previous ones, where ``qf`` is not unique (backends would disagree).
        """
        rjj = np.abs(np.einsum("...ij,...ij->...j", q, a, dtype=np.float64))
        with np.errstate(over="ignore"):
            scale = np.sqrt(np.einsum("...ij,...ij->...", a, a))[..., None]
        if not np.isfinite(scale).all():  # |a|^2 overflowed: |a| = m |a / m|, m = max|a_ij|
            m = np.max(np.abs(a), axis=(-2, -1), keepdims=True)
            scale = m[..., 0] * np.linalg.norm(a / m, axis=(-2, -1))[..., None]
        bad = (rjj <= scale * (np.finfo(a.dtype).eps * a.shape[-2])).any(-1)
        if bad.any():
            q = np.array(q)
            q[bad] = np.nan
        return q

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        """Exact inverse of the polar (``(X'Y)S + S(Y'X) = 2I``) or QR retraction.

        Near-singular ``X'Y`` (``Y`` almost 90 degrees from ``X`` in some direction) gives
        the exact, huge inverse (relative accuracy ~ ``cond(X'Y) eps``); numerically
        singular ``X'Y`` (no unique solution: a zero eigenvalue, or a vanishing leading
        minor for QR) raises ``NoSolutionError``."""
        method = self._option(method, self.inverse_retractions, "inverse retraction")
        unsolved = _INV_RETR_UNSOLVED[method]
        qr = method == "qr"  # its output goes through _qr_reaches, whichever route computed it
        out = self._compiled(f"stiefel_inv_retr_{method}", backend, x, y,
                             solved=None if qr else unsolved)
        if out is not None and not qr:
            return out  # the lane's answer: every entry checked finite
        if out is None:
            x, y = self._point(x), self._point(y, "y")
            out = call(f"stiefel_inv_retr_{method}", x, y, backend=backend)
        if qr:
            out = self._qr_reaches(x, y, out)
        return self._solved(out, *unsolved)

    @staticmethod
    def _qr_reaches(x, y, u):
        """``u`` with NaN items where ``X + U = Y R`` has a diagonal entry ``r_jj <= 0``: the R
        factor of the QR retraction has a positive diagonal, so no ``U`` retracts to such a
        ``Y`` (a leading minor of ``X'Y`` is negative); ``r_jj`` is ``(Y'(X + U))_jj``."""
        bad = ((np.einsum("...ij,...ij->...j", y, x) + np.einsum("...ij,...ij->...j", y, u))
               <= 0).any(-1)
        if np.any(bad):
            u = np.array(np.broadcast_to(u, np.broadcast_shapes(u.shape, bad.shape + x.shape[-2:])))
            u[bad] = np.nan
        return u

    @staticmethod
    def _cayley(x, u):
        """Cayley retraction (Wen & Yin) in low-rank form: ``X + A (I - B'A/2)^-1 B'X`` with
        ``W = A B'``, ``A = [P U, X]``, ``B = [X, -P U]``, ``P = I - XX'/2``."""
        pu = u - 0.5 * x @ (_t(x) @ u)
        a = np.concatenate([pu, x], axis=-1)
        b = np.concatenate([x, -pu], axis=-1)
        k = a.shape[-1]
        inner = np.eye(k) - 0.5 * (_t(b) @ a)
        return x + a @ np.linalg.solve(inner, _t(b) @ x)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """Edelman's geodesic ``[X U] expm([[A, -S], [I, A]]) [I; 0] expm(-A)``,
        ``A = X'U``, ``S = U'U``. A step so long that the exponentials lose their accuracy
        (``|U|`` of about 1e5 and more; the answer's ``Y'Y`` off ``I`` by more than 1.5e-8
        beyond ten times the point's own ``X'X - I``) raises ``NoSolutionError``."""
        x = self._point(x)
        out = call("stiefel_exp", x, self._vector(x, u), backend=backend)
        return self._solved(out, "exp", "u (a step too long for the exponential's accuracy)")

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        """Projection transport ``P_Y(V)``."""
        self._option(method, self.transports, "transport")
        self._point(x)
        return self.proj(y, v, backend=backend)

    def project(self, z: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """Nearest point ``P_M(Z)``: the polar factor of Z, (..., n, p) of full rank.

        Parameters
        ----------
        z : array_like, shape (..., n, p)
            Ambient point(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape (..., n, p)
            The nearest point(s) on the manifold.
        """
        out = call("polar", self._array(z, "z"), backend=backend)
        return self._solved(out, "project", "z (rank deficient: the polar factor is not unique)")

    def principal_angles(self, x: ArrayLike, y: ArrayLike) -> FloatArray:
        """Principal angles between ``span(X)`` and ``span(Y)``: (..., p), ascending.

        ``atan2(sin, cos)`` from the singular values of ``X'Y`` (cosines) and of
        ``Y - X X'Y`` (sines), accurate for tiny angles where ``arccos`` alone loses them.

        Parameters
        ----------
        x : array_like, shape (..., n, p)
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape (..., n, p)
            Second point(s).

        Returns
        -------
        ndarray, shape (..., p)
            The angles in radians, ascending.
        """
        x, y = self._point(x), self._point(y, "y")
        xty = _t(x) @ y
        cos = np.linalg.svd(xty, compute_uv=False)                 # descending
        sin = np.linalg.svd(y - x @ xty, compute_uv=False)[..., ::-1]  # ascending
        return np.arctan2(np.clip(sin, 0.0, 1.0), np.clip(cos, 0.0, 1.0))

    def dist_subspace(self, x: ArrayLike, y: ArrayLike) -> FloatArray:
        """Grassmann distance ``|principal angles|_2`` between the spans; (...).

        Parameters
        ----------
        x : array_like, shape (..., n, p)
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape (..., n, p)
            Second point(s).

        Returns
        -------
        ndarray, shape (...)
            The norm of the principal angles.
        """
        return np.linalg.norm(self.principal_angles(x, y), axis=-1)

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        """Haar-distributed points: ``(*batch, n, p)``."""
        q, r = np.linalg.qr(as_rng(rng).standard_normal(tuple(batch) + self.shape))
        d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
        return q * np.where(d == 0, 1.0, d)[..., None, :]

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        x, s = self._point(x), self._sigma(sigma)
        fused = self._projected_gaussian(x, s, rng)
        if fused is not None:
            return fused
        g = as_rng(rng).standard_normal(x.shape)
        g = np.multiply(g, s, out=g if np.broadcast_shapes(g.shape, s.shape) == g.shape else None)
        return self.proj(x, g.astype(x.dtype, copy=False))
