"""Euclidean space R^shape with the Frobenius metric: the sanity baseline."""

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
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
    has_project = True
    has_tangent_gaussian = True

    def __init__(self, *shape: tuple[int, ...], validate: bool | None = None) -> None:
        if not shape or any(int(s) < 1 for s in shape):
            raise ValueError(f"shape: expected positive sizes, got {shape}")
        super().__init__(shape, int(np.prod(shape)), validate=validate)

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """Identity; u: ``(..., *shape)``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Ambient vector(s).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The tangent part of ``u`` at ``x``.
        """
        self._point(x)
        return self._array(u, "u")

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        """``x + u``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        method : str, optional
            One of ``'exp'``; default ``'exp'``.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The retracted point(s) ``R_x(u)``.
        """
        self._option(method, self.retractions, "retraction")
        return self.exp(x, u)

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        """``y - x``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).
        method : str, optional
            One of ``'exp'``; default ``'exp'``.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The tangent vector(s) ``u`` at ``x`` with ``R_x(u) = y``.
        """
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """Riemannian exponential ``Exp_x(u)``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The point(s) ``Exp_x(u)``.
        """
        x = self._point(x)
        return x + self._vector(x, u)

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """Riemannian logarithm ``Log_x(y)`` (inverse of ``exp`` inside the injectivity radius).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The tangent vector(s) ``Log_x(y)``.
        """
        return self._point(y, "y") - self._point(x)

    def dist(self, x: ArrayLike, y: ArrayLike) -> Real:
        """Geodesic distance; returns shape (...).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).

        Returns
        -------
        float or ndarray, shape (...)
            One value per item.
        """
        return np.sqrt(self._sum_core(self.log(x, y) ** 2))

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        """Identity (parallel transport of flat space).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).
        v : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x`` to transport.
        method : str, optional
            One of ``'parallel'``, ``'projection'``; default ``'parallel'``.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            ``v`` transported to the tangent space at ``y``.
        """
        self._option(method, self.transports, "transport")
        self._point(x)
        self._point(y, "y")
        return np.array(self._array(v, "v"))

    def project(self, z: ArrayLike) -> FloatArray:
        """Nearest point ``P_M(z)`` on the manifold (embedded compact manifolds only).

        Parameters
        ----------
        z : array_like, shape ``(..., *shape)``
            Ambient point(s).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The nearest point(s) on the manifold.
        """
        return np.array(self._array(z, "z"))

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        """A random point, or a stack of shape ``batch + shape``.

        Parameters
        ----------
        *batch : int
            Batch shape; none gives a single point.
        rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
            Random source; ``None`` draws fresh entropy, an int seeds a new generator.

        Returns
        -------
        ndarray, shape ``(*batch, *shape)``
            The point(s).
        """
        return as_rng(rng).standard_normal(tuple(batch) + self.shape)

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        """Gaussian ``N_x(0, sigma^2)`` on the tangent space at ``x``, isotropic in the metric.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        sigma : float or array_like
            Standard deviation (>= 0); broadcasts against the batch axes of ``x``.
        rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
            Random source; ``None`` draws fresh entropy, an int seeds a new generator.

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        """
        x = self._point(x)
        g = self._sigma(sigma) * as_rng(rng).standard_normal(x.shape)
        return g.astype(x.dtype, copy=False)
