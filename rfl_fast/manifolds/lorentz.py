"""The hyperboloid (Lorentz) model of hyperbolic space H^d, points in R^(d+1)."""

import numpy as np

from ..kernels import call
from .base import Manifold, as_rng

__all__ = ["Lorentz"]


def _ldot(a, b):
    """Minkowski product ``-a0 b0 + sum_k ak bk``, keeping the last axis."""
    return np.sum(a * b, axis=-1, keepdims=True) - 2.0 * a[..., :1] * b[..., :1]


class Lorentz(Manifold):
    """Points ``x`` of shape ``(..., d+1)`` with ``<x,x>_L = -1`` and ``x0 > 0``; metric the
    Minkowski product ``<u,v>_L = -u0 v0 + sum_k uk vk`` restricted to tangent spaces.

    Retraction: ``"exp"`` (the geodesic; inverse ``log``). Transports: ``"parallel"``
    (``v + <y,v>_L/(1 - <x,y>_L) (x+y)``, default) and ``"projection"``.
    """

    retractions = ("exp",)
    inverse_retractions = ("exp",)
    transports = ("parallel", "projection")

    def __init__(self, d, *, validate=None):
        d = int(d)
        if d < 1:
            raise ValueError(f"Lorentz: need d >= 1 (H^d in R^(d+1)), got d={d}")
        super().__init__((d + 1,), d, validate=validate)

    def _repr_args(self):
        return (self.dim,)

    @property
    def origin(self):
        """The point ``(1, 0, ..., 0)``."""
        o = np.zeros(self.shape)
        o[0] = 1.0
        return o

    def _check_point(self, x, atol):
        gap = np.max(np.abs(_ldot(x, x) + 1.0) / np.maximum(1.0, x[..., :1] ** 2), initial=0.0)
        if (x[..., 0] <= 0).any():
            return False, "x0 <= 0 (the lower sheet of the hyperboloid)"
        return gap <= atol, f"|<x,x>_L + 1| / x0^2 = {gap:.3g} > atol {atol:g}"

    def inner(self, x, u, v):
        """Minkowski product ``<u, v>_L``; returns (...)."""
        self._point(x)
        return _ldot(self._array(u, "u"), self._array(v, "v"))[..., 0]

    def norm(self, x, u):
        """``|u|_x`` for tangent ``u``, in a cancellation-free form: with ``<x,u>_L = 0``,
        ``|u|^2 = (|u_r|^2 + |x_r|^2 |u_r - (u_r.x^)x^|^2) / x0^2`` (``r``: spatial part,
        ``x^ = x_r/|x_r|``), a sum of non-negative terms; returns (...)."""
        x = self._point(x)
        u = self._array(u, "u")
        xr, ur = x[..., 1:], u[..., 1:]
        nx2 = np.sum(xr * xr, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            along = np.where(nx2 > 0, np.sum(ur * xr, -1, keepdims=True) / nx2, 0.0)
        perp = ur - along * xr
        sq = np.sum(ur * ur, -1) + nx2[..., 0] * np.sum(perp * perp, -1)
        return np.sqrt(sq) / x[..., 0]

    def proj(self, x, u):
        """``u + <x,u>_L x``."""
        x = self._point(x)
        u = self._array(u, "u")
        return u + _ldot(x, u) * x

    def egrad2rgrad(self, x, g):
        """``proj(x, J g)`` with ``J = diag(-1, 1, ..., 1)``."""
        g = self._array(g, "g").copy()
        g[..., 0] = -g[..., 0]
        return self.proj(x, g)

    def retr(self, x, u, method=None, *, backend=None):
        self._option(method, self.retractions, "retraction")
        return self.exp(x, u, backend=backend)

    def inv_retr(self, x, y, method=None, *, backend=None):
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y, backend=backend)

    def exp(self, x, u, *, backend=None):
        x = self._point(x)
        return call("lorentz_exp", x, self._vector(x, u), backend=backend)

    def log(self, x, y, *, backend=None):
        return call("lorentz_log", self._point(x), self._point(y, "y"), backend=backend)

    def dist(self, x, y, *, backend=None):
        return call("lorentz_dist", self._point(x), self._point(y, "y"), backend=backend)

    def transport(self, x, y, v, method=None, *, backend=None):
        method = self._option(method, self.transports, "transport")
        if method == "projection":
            self._point(x)
            return self.proj(y, v)
        x, y = self._point(x), self._point(y, "y")
        return call("lorentz_transport", x, y, self._vector(x, v, "v"), backend=backend)

    def random_point(self, *batch, rng=None):
        """``Exp_o(v)`` at the origin with v standard Gaussian in T_o: (*batch, d+1)."""
        v = np.zeros(tuple(batch) + self.shape)
        v[..., 1:] = as_rng(rng).standard_normal(tuple(batch) + (self.dim,))
        return call("lorentz_exp", np.broadcast_to(self.origin, v.shape), v)

    def tangent_gaussian(self, x, sigma, *, rng=None):
        """Isotropic Gaussian at the origin, parallel-transported to ``x`` (an isometry)."""
        x = self._point(x)
        v = np.zeros(x.shape)
        v[..., 1:] = self._sigma(sigma) * as_rng(rng).standard_normal(x.shape[:-1] + (self.dim,))
        o = np.broadcast_to(self.origin, x.shape)
        return call("lorentz_transport", o, x, v).astype(x.dtype, copy=False)
