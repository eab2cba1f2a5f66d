"""The unit sphere S^(d-1) in R^d with the embedded metric."""

import numpy as np

from ..kernels import call
from .base import Manifold, as_rng

__all__ = ["Sphere"]


def _dot(a, b):
    return np.sum(a * b, axis=-1, keepdims=True)


class Sphere(Manifold):
    """Unit vectors ``x`` in R^d, points of shape ``(..., d)``.

    Retractions: ``"exp"`` (geodesic, default) and ``"projection"`` (``(x+u)/|x+u|``, with its
    exact inverse ``y/<x,y> - x``). Transports: ``"parallel"`` (along the geodesic, default)
    and ``"projection"``.
    """

    retractions = ("exp", "projection")
    inverse_retractions = ("exp", "projection")
    transports = ("parallel", "projection")

    def __init__(self, d, *, validate=None):
        if int(d) < 2:
            raise ValueError(f"d: expected d >= 2 (points of S^(d-1) in R^d), got {d}")
        super().__init__((d,), int(d) - 1, validate=validate)

    def _repr_args(self):
        return self.shape

    def _check_point(self, x, atol):
        gap = np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0), initial=0.0)
        return gap <= atol, f"| |x| - 1 | = {gap:.3g} > atol {atol:g}"

    def proj(self, x, u):
        """``u - <x,u> x``; x, u: (..., d)."""
        x = self._point(x)
        u = self._array(u, "u")
        return u - _dot(x, u) * x

    def retr(self, x, u, method=None, *, backend=None):
        method = self._option(method, self.retractions, "retraction")
        if method == "exp":
            return self.exp(x, u, backend=backend)
        return self.project(self._point(x) + self._vector(x, u))

    def inv_retr(self, x, y, method=None, *, backend=None):
        method = self._option(method, self.inverse_retractions, "inverse retraction")
        if method == "exp":
            return self.log(x, y, backend=backend)
        x, y = self._point(x), self._point(y, "y")
        c = _dot(x, y)
        if (c <= 0).any():
            raise ValueError("y: the projection retraction reaches only <x, y> > 0; "
                             "got points at 90 degrees or more from x")
        return y / c - x

    def exp(self, x, u, *, backend=None):
        x = self._point(x)
        return call("sphere_exp", x, self._vector(x, u), backend=backend)

    def log(self, x, y, *, backend=None):
        out = call("sphere_log", self._point(x), self._point(y, "y"), backend=backend)
        return self._solved(out, "log", "y (antipodal to x: the logarithm is not unique)")

    def dist(self, x, y, *, backend=None):
        return call("sphere_dist", self._point(x), self._point(y, "y"), backend=backend)

    def transport(self, x, y, v, method=None, *, backend=None):
        method = self._option(method, self.transports, "transport")
        if method == "projection":
            return self.proj(y, v)
        x, y = self._point(x), self._point(y, "y")
        out = call("sphere_transport", x, y, self._vector(x, v, "v"), backend=backend)
        return self._solved(out, "transport", "y (antipodal to x: no unique geodesic)")

    def project(self, z):
        """``z / |z|``; z: (..., d) nonzero."""
        z = self._array(z, "z")
        n = np.linalg.norm(z, axis=-1, keepdims=True)
        if (n == 0).any():
            raise ValueError("z: cannot project the zero vector onto the sphere")
        return z / n

    def random_point(self, *batch, rng=None):
        """Uniform on the sphere: (*batch, d)."""
        z = as_rng(rng).standard_normal(tuple(batch) + self.shape)
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def tangent_gaussian(self, x, sigma, *, rng=None):
        x = self._point(x)
        return self.proj(x, self._sigma(sigma) * as_rng(rng).standard_normal(x.shape))
