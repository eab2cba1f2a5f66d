"""The Grassmann manifold Gr(n, p) of p-dimensional subspaces of R^n, as a quotient of St(n, p)."""

import functools

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from ..errors import NoSolutionError
from .._validation import validation_enabled
from .base import Manifold
from .stiefel import Stiefel

__all__ = ["Grassmann"]


def _t(a):
    return np.swapaxes(a, -1, -2)


class _Pair:
    """What every two-point map of Gr(n, p) reads from one SVD, for float64 ``x``, ``y``.

    ``X'Y = P diag(c) R'`` (``c`` the cosines of the principal angles, descending) and
    ``N = (I - XX') Y R``, whose columns are orthogonal with norms ``s``, the sines. Then
    ``theta = atan2(s, c)`` are the principal angles (ascending), accurate for tiny and for
    right angles alike, ``Log_X(Y) = N diag(theta / s) P'``, the lift of the inverse retraction
    is ``N diag(1 / c) P'`` and ``P R'`` is the polar factor of ``X'Y`` (the rotation that
    carries lifts at the geodesic's end point to lifts at the representative ``Y``).
    """

    def __init__(self, x, y):
        self._x, self._y = x, y
        self._m = _t(x) @ y
        self.p, self.c, rt = np.linalg.svd(self._m)
        self.r = _t(rt)

    # n, s and theta pass over the n x p data: computed when a map asks (the projection
    # transport needs only the rotation)
    def residual(self):
        """``(I - XX') Y = Y - X (X'Y)`` (a new array)."""
        xm = self._x @ self._m
        return np.subtract(self._y, xm, out=xm)

    @functools.cached_property
    def n(self):
        return self.residual() @ self.r

    @functools.cached_property
    def s(self):
        return np.sqrt(np.einsum("...ij,...ij->...j", self.n, self.n))

    @functools.cached_property
    def theta(self):
        return np.arctan2(self.s, np.clip(self.c, 0.0, None))

    def singular(self):
        """Items whose ``X'Y`` is numerically singular (a principal angle of 90 degrees within
        rounding): there the subspace ``span(Y)`` is not reached by a unique minimizing geodesic
        (nor by the retractions) from ``X``."""
        p = self.c.shape[-1]
        return self.c[..., -1] <= p * np.finfo(np.float64).eps

    def rotation(self):
        """``P R'``: the polar factor of ``X'Y``."""
        return self.p @ _t(self.r)

    def directions(self):
        """``A = N diag(1 / s)`` (unit columns; zero where ``s = 0``, whose terms vanish)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.s[..., None, :] > 0, self.n / self.s[..., None, :], 0.0)


class Grassmann(Manifold):
    r"""The subspaces of dimension ``p`` of :math:`\mathbb{R}^n`, as orthonormal bases.

    A point is stored as a representative ``X`` of shape ``(..., n, p)`` with
    :math:`X^\top X = I_p`; ``X`` and ``XQ`` (``Q`` orthogonal) are the same point. A tangent
    vector at ``X`` is its horizontal lift ``U``, :math:`X^\top U = 0`, and the metric is
    :math:`\langle U, V\rangle = \operatorname{tr}(U^\top V)` (the quotient of the embedded
    metric of :class:`Stiefel`); the lift of the same vector at ``XQ`` is ``UQ``. Every map
    that takes a second point (``inv_retr``, ``log``, ``transport``) returns the lift at the
    representative it is given, so results never depend on the bases chosen.

    * Retractions (``span(X + U)``): ``"polar"`` (default; the polar factor of ``X + U``) and
      ``"qr"`` (its Q factor), computed by the Stiefel kernels, and ``"exp"``. ``"polar"`` and
      ``"qr"`` give the same subspace in different bases and share their exact inverse
      :math:`U = (I - XX^\top) Y (X^\top Y)^{-1}`.
    * ``exp``: with the thin SVD :math:`U = A \Sigma B^\top`,
      :math:`\operatorname{Exp}_X(U) = X B \cos\Sigma\, B^\top + A \sin\Sigma\, B^\top`
      (computed as :math:`X B \cos\Sigma\, B^\top + U B \operatorname{sinc}\Sigma\,
      B^\top` from the eigendecomposition of :math:`U^\top U`);
      ``log`` its inverse inside the injectivity radius (every principal angle below
      :math:`\pi/2`); ``dist`` the 2-norm of the principal angles.
    * Transports: ``"projection"`` (default) :math:`(I - YY^\top) V Q` and ``"parallel"``
      (along the geodesic, [EAS1998]_ Theorem 2.4), both with ``Q`` the polar factor of
      :math:`X^\top Y`, which carries lifts to the representative ``Y`` (``Q = I`` when ``Y``
      came from ``retr(X, .)`` with ``"polar"`` or from ``exp``: then the projection transport
      is pymanopt's :math:`(I - YY^\top) V`).

    Where :math:`X^\top Y` is numerically singular (a principal angle of 90 degrees), the
    inverse retractions, ``log`` and the parallel transport raise ``NoSolutionError``: no unique
    geodesic (and no retraction) joins the two subspaces.

    .. [EAS1998] A. Edelman, T. A. Arias, S. T. Smith, "The geometry of algorithms with
       orthogonality constraints", SIAM J. Matrix Anal. Appl. 20(2), 1998.

    Parameters
    ----------
    n, p : int
        ``n >= p >= 1``.
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).
    """

    retractions = ("polar", "qr", "exp")
    inverse_retractions = ("polar", "qr", "exp")
    transports = ("projection", "parallel")
    nonexpanding_transports = ("projection", "parallel")
    array_methods = Manifold.array_methods + ("principal_angles",)
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "grassmann_proj", "retr": "grassmann_retr",
                    "inv_retr": "grassmann_inv_retr", "exp": "grassmann_exp",
                    "log": "grassmann_log", "dist": "grassmann_dist",
                    "transport": "grassmann_transport",
                    "project": "grassmann_project"}
    has_project = True
    has_tangent_gaussian = True

    def __init__(self, n: int, p: int, *, validate: bool | None = None) -> None:
        n, p = int(n), int(p)
        if not n >= p >= 1:
            raise ValueError(f"Grassmann: need n >= p >= 1; values supplied were n={n}, p={p}")
        super().__init__((n, p), p * (n - p), validate=validate)
        self._stiefel = Stiefel(n, p, validate=validate)   # the representatives and kernels

    def _check_point(self, x, atol):
        return self._stiefel._check_point(x, atol)

    def _pair(self, x, y):
        x, y = self._point(x), self._point(y, "y")
        return x, y, _Pair(x.astype(np.float64, copy=False), y.astype(np.float64, copy=False))

    def _lift(self, pair, what):
        """Raise ``NoSolutionError`` naming ``what`` where ``X'Y`` is singular."""
        bad = pair.singular()
        if np.any(bad):
            where = np.argwhere(np.atleast_1d(bad))[:5].tolist()
            raise NoSolutionError(
                f"Grassmann.{what}: no solution for y (a principal angle between span(X) and "
                f"span(Y) is 90 degrees: X'Y is singular; batch index "
                f"{where if np.ndim(bad) else 'scalar'})")

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        r"""Horizontal projection :math:`U - X (X^\top U)`."""
        x, u = self._point_vector(x, u, tangent=False)
        return u - x @ (_t(x) @ u)

    def dist(self, x: ArrayLike, y: ArrayLike) -> Real:
        x, y, pair = self._pair(x, y)
        return np.linalg.norm(pair.theta, axis=-1).astype(np.result_type(x, y), copy=False)

    def principal_angles(self, x: ArrayLike, y: ArrayLike) -> FloatArray:
        """Principal angles between ``span(X)`` and ``span(Y)``: (..., p), ascending.

        ``atan2(sin, cos)``, accurate for tiny angles and near 90 degrees alike.

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
        return self._pair(x, y)[2].theta

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        method = self._option(method, self.retractions, "retraction")
        if method == "exp":
            return self.exp(x, u, backend=backend)
        if validation_enabled(self.validate):  # horizontal, not only tangent to St(n, p)
            self._vector(self._point(x), u)
        return self._stiefel.retr(x, u, method, backend=backend)

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        method = self._option(method, self.inverse_retractions, "inverse retraction")
        if method == "exp":
            return self.log(x, y, backend=backend)
        x, y, pair = self._pair(x, y)
        self._lift(pair, "inv_retr")
        # (I - XX') Y (X'Y)^-1 with (X'Y)^-1 = R diag(1/c) P' formed first (p x p): one
        # product over the n x p data after the residual, instead of N's, the scaling's and P''s
        out = pair.residual() @ ((pair.r / pair.c[..., None, :]) @ _t(pair.p))
        return out.astype(np.result_type(x, y), copy=False)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        x = self._point(x)
        u = self._vector(x, u)
        x64, u64 = x.astype(np.float64, copy=False), u.astype(np.float64, copy=False)
        # U = A S B' (thin SVD) from the p x p eigendecomposition U'U = B S^2 B': A sin(S) B'
        # = U B sinc(S) B', so Exp_X(U) = X C + U D with C = B cos(S) B', D = B sinc(S) B'.
        # cos and sinc are even and smooth in S, so the eigenvalues' absolute rounding
        # (eps |U|^2, large relative error of a tiny S) moves C and D by rounding only; no
        # n x p factor is formed (the thin SVD of U costs ~4x this at 784 x 5)
        s2, b = np.linalg.eigh(_t(u64) @ u64)
        sigma = np.sqrt(np.maximum(s2, 0.0))
        c = (b * np.cos(sigma)[..., None, :]) @ _t(b)
        d = (b * np.sinc(sigma / np.pi)[..., None, :]) @ _t(b)
        y = x64 @ c
        y += u64 @ d
        # one Newton-Schulz step towards the polar factor, Y (3I - Y'Y) / 2: it squares the
        # rounding of Y'Y = I, which iterating Exp would otherwise let grow (the projection
        # U - X X'U assumes X'X = I); the basis moves by that rounding only. As one product
        # with the p x p factor (not 1.5 Y - 0.5 Y (Y'Y): three passes fewer)
        ns = -0.5 * (_t(y) @ y)
        ns[..., np.arange(ns.shape[-1]), np.arange(ns.shape[-1])] += 1.5
        y = y @ ns
        return y.astype(np.result_type(x, u), copy=False)

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        x, y, pair = self._pair(x, y)
        self._lift(pair, "log")
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(pair.s > 0, pair.theta / pair.s, 1.0)
        out = (pair.n * scale[..., None, :]) @ _t(pair.p)
        return out.astype(np.result_type(x, y), copy=False)

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        method = self._option(method, self.transports, "transport")
        x, y, pair = self._pair(x, y)
        v = self._vector(x, v, "v")
        dtype = np.result_type(x, y, v)
        y64, v64 = y.astype(np.float64, copy=False), v.astype(np.float64, copy=False)
        if method == "projection":
            w = y64 @ (_t(y64) @ v64)
            np.subtract(v64, w, out=w)                    # V - Y (Y'V), in place
        else:
            self._lift(pair, "transport")
            a = pair.directions()
            atv = _t(a) @ v64
            x64 = x.astype(np.float64, copy=False)
            w = (v64 - (x64 @ pair.p) @ (np.sin(pair.theta)[..., :, None] * atv)
                 + a @ ((np.cos(pair.theta) - 1.0)[..., :, None] * atv))
        return (w @ pair.rotation()).astype(dtype, copy=False)

    def corrected_direction(self, transport: str):
        """The projection transport's one-projection direction (:meth:`_corrected_direction`);
        ``None`` for any other transport."""
        return self._corrected_direction if transport == "projection" else None

    def _corrected_direction(self, x, y, g, v, coef=None, method="polar", scratch=None,
                             out=None):
        """``proj_Y(G) - T_{X -> Y}(V - c R^-1_X(Y))`` with the projection transport, in one
        projection (RFedSVRG's and 2BB's local direction, ``svrg.py``; private: float64
        C-contiguous arrays the caller built, no argument checks).

        ``T_{X -> Y} W = (I - YY') W Q``, ``Q`` the polar factor of ``X'Y``, and ``proj_Y`` is
        linear and commutes with the right factor, so the direction is ``proj_Y(G - W Q)``:
        one projection instead of the gradient's and the transport's. For the polar/QR
        inverse ``X + R^-1_X(Y) = Y (X'Y)^-1`` spans ``Y``, so ``proj_Y(R^-1_X(Y) Q) =
        -proj_Y(X Q)`` and ``W = V + c X`` needs no inverse (Exp's inverse, ``log``, is
        computed). ``Q`` from the SVD of ``X'Y`` as :meth:`transport`'s. Equal to the composed
        maps to rounding (``Y'Y = I`` to rounding; tested).

        Parameters
        ----------
        x : ndarray, shape (n, p) or (k, n, p)
            The anchor ``X`` (the server point).
        y : ndarray, shape (k, n, p)
            The points ``Y``.
        g : ndarray, shape (k, n, p)
            Euclidean (or Riemannian) gradients at ``Y``; not written.
        v : ndarray, shape (k, n, p) or (n, p)
            Tangent vectors at ``X``; not written.
        coef : ndarray, shape (k,), optional
            ``c`` (``None``: no inverse-retraction term).
        method : str
            The inverse retraction of the term (``"polar"``, ``"qr"`` or ``"exp"``).
        scratch : ndarray, shape (k, n, p), optional
            A buffer the call may overwrite (saves one allocation per call).
        out : ndarray, shape (k, n, p), optional
            Where to write the result (another buffer than ``scratch``); a new array when
            omitted. A fresh array of this size costs its page faults each time: the local
            steps reuse two buffers.

        Returns
        -------
        ndarray, shape (k, n, p)
            ``out`` or a new array (never ``scratch``).
        """
        pair = _Pair(x, y)
        if coef is not None:
            self._lift(pair, "inv_retr" if method != "exp" else "log")
            c = coef[:, None, None]
            if method == "exp":
                w = v - c * self.log(x, y)
            else:
                w = np.multiply(c, x, out=scratch)
                w += v
        else:
            w = v
        if out is not None and out.shape != y.shape:
            out = None
        out = np.matmul(w, pair.rotation(), out=out)           # W Q
        np.subtract(g, out, out=out)                           # G - W Q
        t = _t(y) @ out
        buf = scratch if scratch is not None and scratch.shape == out.shape else None
        yt = np.matmul(y, t, out=buf)
        return np.subtract(out, yt, out=out)                   # (I - YY')(G - W Q)

    def project(self, z: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """An orthonormal basis of ``span(Z)``: the polar factor of Z, (..., n, p) of full rank.

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
            The representative nearest to ``Z`` of the subspace ``span(Z)``.
        """
        return self._stiefel.project(z, backend=backend)

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        return self._stiefel.random_point(*batch, rng=rng)

    tangent_gaussian = Stiefel.tangent_gaussian  # the same body, on this class's own proj
