"""Tangent Gaussian noise for the Gaussian mechanism on a manifold (Huang et al. 2024)."""

from .._typing import ArrayLike, FloatArray, RNGLike
from ..manifolds import Manifold

__all__ = ["gaussian_tangent_noise"]


def gaussian_tangent_noise(M: Manifold, x: ArrayLike, sigma: float, rng: RNGLike = None
                           ) -> FloatArray:
    """A draw of ``N_x(0, sigma^2)``: Gaussian on the tangent space at ``x``, isotropic in the metric.

    In an orthonormal basis of ``T_x M`` (orthonormal for the Riemannian metric, e.g. the
    affine-invariant one on SPD) the coordinates are i.i.d. ``N(0, sigma^2)``, so
    ``E <e, u>_x <e, v>_x = sigma^2 <u, v>_x`` and ``E |e|_x^2 = dim M * sigma^2``. This is the
    noise of the seed's Riemannian Gaussian mechanism: added to a quantity of sensitivity
    ``D`` (in ``|.|_x``) it gives the same privacy as the Euclidean Gaussian mechanism in
    ``R^dim`` with the same ``sigma`` and ``D``. A thin wrapper over ``M.tangent_gaussian``.

    Parameters
    ----------
    M : rfl_fast.Manifold
    x : ndarray, shape ``(..., *M.shape)``
        Base point(s); a stack gives an independent draw per point.
    sigma : float or ndarray broadcasting against the batch axes of ``x``
        Standard deviation (>= 0; ``0`` gives the zero vector).
    rng : None, int or numpy.random.Generator

    Returns
    -------
    e : ndarray, shape ``(..., *M.shape)``
        Tangent vector(s) at ``x``.
    """
    return M.tangent_gaussian(x, sigma, rng=rng)
