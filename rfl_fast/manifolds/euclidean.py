"""Euclidean space R^shape with the Frobenius metric: the sanity baseline."""

import numpy as np

from .base import Manifold, as_rng

__all__ = ["Euclidean"]


class Euclidean(Manifold):
    """Flat space of arrays of shape ``shape``; every map is the obvious one.

    Parameters
    ----------
    *shape : int
        Shape of one point, e.g. ``Euclidean(3)`` or ``Euclidean(4, 2)``.
    """

    retractions = ("exp",)
    inverse_retractions = ("exp",)
    transports = ("parallel", "projection")

    def __init__(self, *shape, validate=None):
        if not shape or any(int(s) < 1 for s in shape):
            raise ValueError(f"shape: expected positive sizes, got {shape}")
        super().__init__(shape, int(np.prod(shape)), validate=validate)

    def proj(self, x, u):
        """Identity; u: (..., *shape)."""
        self._point(x)
        return self._array(u, "u")

    def retr(self, x, u, method=None, *, backend=None):
        """``x + u``."""
        self._option(method, self.retractions, "retraction")
        return self.exp(x, u)

    def inv_retr(self, x, y, method=None, *, backend=None):
        """``y - x``."""
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y)

    def exp(self, x, u, *, backend=None):
        x = self._point(x)
        return x + self._vector(x, u)

    def log(self, x, y, *, backend=None):
        return self._point(y, "y") - self._point(x)

    def dist(self, x, y):
        return np.sqrt(self._sum_core(self.log(x, y) ** 2))

    def transport(self, x, y, v, method=None, *, backend=None):
        """Identity (parallel transport of flat space)."""
        self._option(method, self.transports, "transport")
        self._point(x)
        self._point(y, "y")
        return np.array(self._array(v, "v"))

    def project(self, z):
        return np.array(self._array(z, "z"))

    def random_point(self, *batch, rng=None):
        return as_rng(rng).standard_normal(tuple(batch) + self.shape)

    def tangent_gaussian(self, x, sigma, *, rng=None):
        x = self._point(x)
        g = self._sigma(sigma) * as_rng(rng).standard_normal(x.shape)
        return g.astype(x.dtype, copy=False)
