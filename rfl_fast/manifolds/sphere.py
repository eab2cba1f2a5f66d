"""The unit sphere S^(d-1) in R^d with the embedded metric."""

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from .._validation import as_rng
from ..kernels import call
from .base import Manifold

__all__ = ["Sphere"]


#: Below this ``1 + <x, y>`` the parallel transport is computed from the logarithm.
_NEAR_ANTIPODAL = 1e-6
#: ``_solved``'s (what, name) of a logarithm without an answer
_LOG_UNSOLVED = ("log", "y (antipodal to x: the logarithm is not unique)")


def _dot(a, b):
    return np.add.reduce(a * b, axis=-1, keepdims=True)   # np.sum's reduction, no wrapper


def _transport_by_log(x, y, v):
    """Parallel transport along the geodesic ``x -> y`` as ``v + <e,v>((cos t - 1) e - sin t x)``
    with ``e`` the unit direction of ``y - <x,y> x`` and ``t = atan2(|y - <x,y> x|, <x,y>)``;
    stable up to the antipode (NaN there: no unique geodesic). Arrays (m, d), float64."""
    x, y, v = (np.asarray(a, dtype=np.float64) for a in (x, y, v))
    c = _dot(x, y)
    w = y - c * x
    nw = np.sqrt(_dot(w, w))
    t = np.arctan2(nw, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.where(nw > 0, w / np.where(nw > 0, nw, 1.0), np.nan)
    return v + _dot(e, v) * ((np.cos(t) - 1.0) * e - np.sin(t) * x)


class Sphere(Manifold):
    r"""Unit vectors ``x`` in :math:`\mathbb{R}^d`, points of shape ``(..., d)``: the sphere
    :math:`S^{d-1}` with the embedded metric.

    Retractions: ``"exp"`` (the geodesic
    :math:`\operatorname{Exp}_x(u) = \cos\lVert u\rVert\, x + \sin\lVert u\rVert\, u/\lVert u\rVert`,
    default) and ``"projection"`` (:math:`(x + u)/\lVert x + u\rVert`, with its exact inverse
    :math:`y/\langle x, y\rangle - x`). Transports: ``"parallel"`` (along the geodesic,
    default) and ``"projection"`` (:math:`(I - yy^\top) v`).

    Parameters
    ----------
    d : int
        Ambient dimension, ``d >= 2`` (the sphere ``S^(d-1)``).
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).
    """

    retractions = ("exp", "projection")
    inverse_retractions = ("exp", "projection")
    transports = ("parallel", "projection")
    nonexpanding_transports = ("parallel", "projection")
    has_project = True
    has_tangent_gaussian = True
    #: the kernels of one step (``Manifold.step_kernels``): the tangent projection
    #: ``u - <x,u> x`` (the Riemannian gradient's) and the retraction, by which the fused local
    #: steps (``kernels.registry.FUSED``: ``sphere_local_steps``,
    #: ``sphere_projection_local_steps``) are found
    step_kernels = {"exp": ("sphere_proj", "sphere_exp"),
                    "projection": ("sphere_proj", "sphere_retr_projection")}
    #: the projection transport ``(I - yy')v`` is the gradient's kernel at ``y``
    #: (``Manifold.transport_kernels``); the parallel transport's kernel ``sphere_transport``
    #: is not (it takes ``x`` as well: not a projection), but the fused local steps
    #: ``sphere_local_steps`` declare it for their offset (``registry.Fused.transports``), so
    #: RFedSVRG's steps under it fuse (RFedAGS's stream, which needs a projection, does not)
    transport_kernels = {"projection": "sphere_proj", "parallel": "sphere_transport"}
    inverse_kernels = {"exp": "sphere_log", "projection": "sphere_inv_retr_projection"}
    project_kernel = "sphere_project"
    stiefel_noise = True
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "sphere_proj", "retr": "sphere_retr", "inv_retr": "sphere_inv_retr",
                    "exp": "sphere_exp", "log": "sphere_log", "dist": "sphere_dist",
                    "transport": "sphere_transport",
                    "project": "sphere_project"}

    def __init__(self, d: int, *, validate: bool | None = None) -> None:
        if int(d) < 2:
            raise ValueError(f"d: expected d >= 2 (points of S^(d-1) in R^d), got {d}")
        super().__init__((d,), int(d) - 1, validate=validate)

    def _repr_args(self):
        return self.shape

    def _check_point(self, x, atol):
        gap = np.max(np.abs(np.linalg.norm(x, axis=-1) - 1.0), initial=0.0)
        return gap <= atol, f"| |x| - 1 | = {gap:.3g} > atol {atol:g}"

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """``u - <x,u> x``; x, u: (..., d)."""
        x = self._point(x)
        u = self._array(u, "u")
        return u - _dot(x, u) * x

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        method = self._option(method, self.retractions, "retraction")
        if method == "exp":
            return self.exp(x, u, backend=backend)
        return self.project(self._point(x) + self._vector(x, u))

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        method = self._option(method, self.inverse_retractions, "inverse retraction")
        if method == "exp":
            return self.log(x, y, backend=backend)
        x, y = self._point(x), self._point(y, "y")
        c = _dot(x, y)
        if (c <= 0).any():
            raise ValueError("y: the projection retraction reaches only <x, y> > 0; "
                             "got points at 90 degrees or more from x")
        return y / c - x

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """``cos|u| x + sin|u| u/|u|``; any step size (huge steps wrap around the circle)."""
        out = self._compiled("sphere_exp", backend, x, u)
        if out is not None:
            return out
        x = self._point(x)
        return call("sphere_exp", x, self._vector(x, u), backend=backend)

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """``Log_x(y)``, of norm ``dist(x, y) <= pi``. Nearly antipodal ``y`` is answered (the
        direction is that of ``y - <x,y> x``, conditioned like ``1/|y - <x,y> x|``); exactly
        antipodal ``y`` raises ``NoSolutionError`` (every direction is a minimizing geodesic)."""
        out = self._compiled("sphere_log", backend, x, y, solved=_LOG_UNSOLVED)
        if out is not None:
            return out
        out = call("sphere_log", self._point(x), self._point(y, "y"), backend=backend)
        return self._solved(out, *_LOG_UNSOLVED)

    def dist(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> Real:
        """Geodesic distance; returns shape (...).

        Parameters
        ----------
        x : array_like, shape (..., d)
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape (..., d)
            Second point(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        float or ndarray, shape (...)
            One value per item.
        """
        return call("sphere_dist", self._point(x), self._point(y, "y"), backend=backend)

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        method = self._option(method, self.transports, "transport")
        if method == "projection":
            return self.proj(y, v)
        x, y = self._point(x), self._point(y, "y")
        v = self._vector(x, v, "v")
        out = call("sphere_transport", x, y, v, backend=backend)
        # The kernel's ``v - <y,v>/(1+<x,y>) (x+y)`` loses accuracy as ``1 + <x,y> -> 0``
        # (error ~ eps/(1+<x,y>), NaN once it rounds to 0) although the geodesic is still
        # unique; there the log-based form (error ~ eps/|y - <x,y>x|, the problem's own
        # conditioning) is used. Only exactly antipodal pairs remain without a solution.
        near = (1.0 + _dot(x, y)[..., 0]) < _NEAR_ANTIPODAL
        if near.any():
            out = np.array(out)
            xb, yb, vb = np.broadcast_arrays(x, y, v)
            out[near] = _transport_by_log(xb[near], yb[near], vb[near]).astype(out.dtype)
        return self._solved(out, "transport", "y (antipodal to x: no unique geodesic)")

    def project(self, z: ArrayLike) -> FloatArray:
        """``z / |z|``; z: (..., d) nonzero."""
        z = self._array(z, "z")
        with np.errstate(over="ignore", under="ignore"):
            n = np.linalg.norm(z, axis=-1, keepdims=True)
        lim = 1e150 if z.dtype == np.float64 else 1e18  # |z|^2 over/underflows beyond
        far = ~((n >= 1 / lim) & (n <= lim))  # z / max|z_k| first there
        if far.any():
            m = np.max(np.abs(z), axis=-1, keepdims=True)
            if (m == 0).any():
                raise ValueError("z: cannot project the zero vector onto the sphere")
            z = np.where(far, z / np.where(far, m, 1.0), z)
            n = np.linalg.norm(z, axis=-1, keepdims=True)
        return z / n

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        """Uniform on the sphere: ``(*batch, d)``."""
        z = as_rng(rng).standard_normal(tuple(batch) + self.shape)
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        x, s = self._point(x), self._sigma(sigma)
        fused = self._projected_gaussian(x, s, rng)
        if fused is not None:
            return fused
        g = as_rng(rng).standard_normal(x.shape)
        return self.proj(x, (s * g).astype(x.dtype, copy=False))
