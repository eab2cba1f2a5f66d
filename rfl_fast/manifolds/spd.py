"""Symmetric positive-definite matrices S++(n) with the affine-invariant metric."""

import math

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from .._validation import as_rng
from ..kernels import call
from .base import Manifold

__all__ = ["SPD"]

_NOT_PD = " (not positive definite, or X^-1 Y too ill-conditioned for float64)"
#: ``_solved``'s (what, name) of an exp, log or dist without an answer
_EXP_UNSOLVED = ("exp", "x" + _NOT_PD)
_LOG_UNSOLVED = ("log", "x or y" + _NOT_PD)
_DIST_UNSOLVED = ("dist", "x or y" + _NOT_PD)


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


class SPD(Manifold):
    r"""Points ``X`` of shape ``(..., n, n)``, symmetric positive definite, with the
    affine-invariant metric :math:`\langle U, V\rangle_X = \operatorname{tr}(X^{-1} U X^{-1} V)`;
    tangent vectors are symmetric matrices.

    Retractions: ``"exp"`` (the geodesic
    :math:`X^{1/2} \exp(X^{-1/2} U X^{-1/2}) X^{1/2}`, default, inverse ``log``) and
    ``"second_order"`` (:math:`X + U + \tfrac12 U X^{-1} U`, no closed-form inverse).
    Transports: ``"parallel"`` (:math:`E V E^\top`,
    :math:`E = X^{1/2} (X^{-1/2} Y X^{-1/2})^{1/2} X^{-1/2}`, default) and ``"projection"``
    (:math:`\operatorname{sym}(V)`, the identity on tangent vectors). The distance is
    :math:`\lVert \log(X^{-1/2} Y X^{-1/2}) \rVert_F`.

    Parameters
    ----------
    n : int
        Matrix size, ``n >= 1``.
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).
    """

    retractions = ("exp", "second_order")
    inverse_retractions = ("exp",)
    transports = ("parallel", "projection")
    nonexpanding_transports = ("parallel",)   # projection: the identity, stretched by the metric at y
    has_tangent_gaussian = True
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "spd_proj", "retr": "spd_retr", "inv_retr": "spd_inv_retr",
                    "exp": "spd_exp", "log": "spd_log", "dist": "spd_dist",
                    "transport": "spd_transport", "inner": "spd_inner",
                    "egrad2rgrad": "spd_egrad2rgrad"}

    def __init__(self, n: int, *, validate: bool | None = None) -> None:
        n = int(n)
        if n < 1:
            raise ValueError(f"SPD: need n >= 1, got n={n}")
        super().__init__((n, n), n * (n + 1) // 2, validate=validate)

    def _repr_args(self):
        return self.shape[:1]

    def _check_point(self, x, atol):
        asym = np.max(np.abs(x - _t(x)), initial=0.0)
        scale = max(1.0, np.max(np.abs(x), initial=0.0))
        if asym > atol * scale:
            return False, f"not symmetric: |X - X'|_max = {asym:.3g}"
        w = np.linalg.eigvalsh(x)
        if (w[..., 0] <= 0).any():
            return False, f"not positive definite: smallest eigenvalue {w[..., 0].min():.3g}"
        return True, ""

    def _check_tangent(self, x, u, atol):
        asym = np.max(np.abs(u - _t(u)), initial=0.0)
        return (asym <= atol * max(1.0, np.max(np.abs(u), initial=0.0)),
                f"not symmetric: |U - U'|_max = {asym:.3g}")

    def inner(self, x: ArrayLike, u: ArrayLike, v: ArrayLike) -> Real:
        """``tr(X^-1 U X^-1 V)``; returns (...)."""
        x = self._point(x)
        a = np.linalg.solve(x, self._array(u, "u"))
        b = a if v is u else np.linalg.solve(x, self._array(v, "v"))  # |u|^2: one solve
        return np.sum(a * _t(b), axis=(-2, -1))

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """``sym(U)``; the tangent space is all symmetric matrices."""
        self._point(x)
        return _sym(self._array(u, "u"))

    def egrad2rgrad(self, x: ArrayLike, g: ArrayLike) -> FloatArray:
        """``X sym(G) X``."""
        x = self._point(x)
        return x @ _sym(self._array(g, "g")) @ x

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        method = self._option(method, self.retractions, "retraction")
        if method == "exp":
            return self.exp(x, u, backend=backend)
        x = self._point(x)
        u = self._vector(x, u)
        return _sym(x + u + 0.5 * u @ np.linalg.solve(x, u))

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y, backend=backend)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        out = self._compiled("spd_exp", backend, x, u, solved=_EXP_UNSOLVED)
        if out is not None:
            return out
        x = self._point(x)
        out = call("spd_exp", x, self._vector(x, u), backend=backend)
        return self._solved(out, *_EXP_UNSOLVED)

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        out = self._compiled("spd_log", backend, x, y, solved=_LOG_UNSOLVED)
        if out is not None:
            return out
        out = call("spd_log", self._point(x), self._point(y, "y"), backend=backend)
        return self._solved(out, *_LOG_UNSOLVED)

    def dist(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> Real:
        """Geodesic distance; returns shape (...).

        Parameters
        ----------
        x : array_like, shape (..., n, n)
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape (..., n, n)
            Second point(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        float or ndarray, shape (...)
            One value per item.
        """
        out = self._compiled("spd_dist", backend, x, y, solved=_DIST_UNSOLVED)
        if out is not None:
            return out
        out = call("spd_dist", self._point(x), self._point(y, "y"), backend=backend)
        return self._solved(out[..., None, None], *_DIST_UNSOLVED)[..., 0, 0]

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        method = self._option(method, self.transports, "transport")
        if method == "projection":
            self._point(x)
            return self.proj(y, v)
        x, y = self._point(x), self._point(y, "y")
        v = self._vector(x, v, "v")
        c = call("sym_sqrtm", x, backend=backend)
        ci = call("sym_invsqrtm", x, backend=backend)
        e = c @ call("sym_sqrtm", _sym(ci @ y @ ci), backend=backend) @ ci
        return self._solved(_sym(e @ v @ _t(e)), "transport", "x or y" + _NOT_PD)

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        """``expm(S / sqrt(n))`` with S symmetric Gaussian (``S = (G + G')/2``, G with
        independent standard normal entries): ``(*batch, n, n)``, well conditioned at every n.

        The spectrum of ``S / sqrt(n)`` fills ``[-sqrt 2, sqrt 2]`` as n grows (the
        semicircle law), so ``cond(X) = exp(lmax - lmin)`` is about ``e^(2 sqrt 2) ~ 17``.
        Bound: ``cond(X) <= exp(2 |S|_2 / sqrt(n))``, ``|S|_2 <= |G|_2``,
        ``E |G|_2 <= 2 sqrt(n)``, and ``|G|_2`` is 1-Lipschitz in the entries of G, so
        ``P(cond(X) >= exp(4 + 2t / sqrt(n))) <= exp(-t^2 / 2)``; with ``t = 6``,
        ``cond(X) < exp(4 + 12 / sqrt(n))`` (about 120 at n = 256) except with probability
        below 2e-8. (Without the ``1/sqrt(n)`` the condition grew like ``e^(2 sqrt(2n))``.)"""
        s = as_rng(rng).standard_normal(tuple(batch) + self.shape)
        return call("sym_expm", _sym(s) / math.sqrt(self.shape[-1]))

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        """``X^½ S X^½``, S symmetric with ``S_kk ~ N(0, s^2)``, ``S_kl ~ N(0, s^2/2)``."""
        x = self._point(x)
        g = as_rng(rng).standard_normal(x.shape)
        s = self._sigma(sigma) * _sym(g)  # diagonal variance 1, off-diagonal 1/2
        c = call("sym_sqrtm", x)
        return _sym(c @ s.astype(x.dtype, copy=False) @ c)
