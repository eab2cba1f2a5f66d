"""Euclidean space R^shape with the Frobenius metric: the sanity baseline."""

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from .._validation import as_rng
from .base import Manifold

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
    nonexpanding_transports = ("parallel", "projection")
    has_project = True
    has_tangent_gaussian = True
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "euclidean_proj", "retr": "euclidean_retr",
                    "inv_retr": "euclidean_inv_retr", "exp": "euclidean_exp",
                    "log": "euclidean_log", "dist": "euclidean_dist",
                    "transport": "euclidean_transport",
                    "project": "euclidean_project"}

    def __init__(self, *shape: tuple[int, ...], validate: bool | None = None) -> None:
        if not shape or any(int(s) < 1 for s in shape):
            raise ValueError(f"shape: expected positive sizes, got {shape}")
        super().__init__(shape, int(np.prod(shape)), validate=validate)

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """Identity; u: ``(..., *shape)``."""
        self._point(x)
        return self._array(u, "u")

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        """``x + u``."""
        self._option(method, self.retractions, "retraction")
        return self.exp(x, u)

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        """``y - x``."""
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        x = self._point(x)
        return x + self._vector(x, u)

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        return self._point(y, "y") - self._point(x)

    def dist(self, x: ArrayLike, y: ArrayLike) -> Real:
        return np.sqrt(self._sum_core(self.log(x, y) ** 2))

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        """Identity (parallel transport of flat space)."""
        self._option(method, self.transports, "transport")
        self._point(x)
        self._point(y, "y")
        return np.array(self._array(v, "v"))

    def project(self, z: ArrayLike) -> FloatArray:
        return np.array(self._array(z, "z"))

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        return as_rng(rng).standard_normal(tuple(batch) + self.shape)

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        x = self._point(x)
        g = self._sigma(sigma) * as_rng(rng).standard_normal(x.shape)
        return g.astype(x.dtype, copy=False)
