r"""Products :math:`M_1 \times \dots \times M_k` of rfl_fast manifolds, on one flat array."""

import math

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from .._validation import as_rng
from ..errors import MethodNotAvailableError
from .base import Manifold

__all__ = ["Product"]


def _hypot(parts):
    """``sqrt(sum parts^2)`` of non-negative arrays of the same precision, without overflow or
    underflow (``np.hypot`` folded over the parts)."""
    return np.hypot.reduce(np.broadcast_arrays(*parts), axis=0)[()]


class Product(Manifold):
    r"""The product :math:`M_1 \times \dots \times M_k` with the sum metric.

    **Layout.** A point (and a tangent vector) is one array of shape ``(..., D)``, ``D`` the sum
    of the factors' sizes: the factors' arrays flattened (C order) and concatenated on the last
    axis, leading axes a batch that broadcasts, as for every manifold of rfl_fast. So the
    federated engine, the aggregations, checkpoints and the message accounting, which move one
    array per point, take products unchanged (geoopt's ``ProductManifold`` does the same).
    :meth:`split` gives the factors' views ``(..., *M_i.shape)`` (no copy for a C-contiguous
    array) and :meth:`join` builds the flat array from factor arrays::

        M = rf.Product(rf.Stiefel(10, 2), rf.Sphere(3))             # D = 20 + 3
        x = M.random_point(5, rng=0)                                   # (5, 23)
        frame, direction = M.split(x)                                  # (5, 10, 2), (5, 3)
        M.join(frame, direction)                                       # (5, 23) again

    Every map acts factor by factor: :math:`\langle u, v\rangle = \sum_i \langle u_i,
    v_i\rangle_i`, :math:`d(x, y)^2 = \sum_i d_i(x_i, y_i)^2`, and ``retr``, ``exp``, ``log``,
    ``transport``, ``proj``, ``egrad2rgrad``, ``project`` and ``tangent_gaussian`` (isotropic in
    the sum metric) are the factors' maps on the factors' parts. A map a factor lacks raises
    ``MethodNotAvailableError`` naming it (e.g. ``log`` with a :class:`Stiefel` factor).

    **Options.** ``method="default"`` (the first entry of ``retractions``, ``transports``) takes
    each factor's own default; a name every factor accepts (e.g. ``"exp"``) is listed too and
    applies to all; a tuple of names, one per factor (``method=("qr", "exp")``), chooses per
    factor. ``inverse_retractions`` lists ``"default"`` when every factor's default retraction
    has its exact inverse.

    Parameters
    ----------
    *factors : Manifold
        At least one rfl_fast manifold (products nest).
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).

    Attributes
    ----------
    factors : tuple of Manifold
        The factors, in order.
    """

    array_methods = Manifold.array_methods + ("split", "join")
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call: factor
    #: by factor, each factor's own route
    array_routes = {m: f"product_{m}" for m in ("inner", "norm", "dist", "proj", "egrad2rgrad",
                                                 "retr", "inv_retr", "exp", "log", "transport",
                                                 "project")}

    def __init__(self, *factors: Manifold, validate: bool | None = None) -> None:
        if not factors:
            raise ValueError("factors: expected at least one manifold, got none")
        for i, f in enumerate(factors):
            if not isinstance(f, Manifold):
                raise TypeError(f"factors[{i}]: expected an rfl_fast manifold, got "
                                f"{type(f).__name__}")
        self.factors = tuple(factors)
        sizes = [math.prod(f.shape) for f in factors]
        self._bounds = tuple(zip(np.cumsum([0] + sizes[:-1]).tolist(),
                                 np.cumsum(sizes).tolist()))
        super().__init__((sum(sizes),), sum(f.dim for f in factors), validate=validate)

        def options(attr, default=True):
            common = [n for n in getattr(factors[0], attr)
                      if all(n in getattr(f, attr) for f in factors)]
            return tuple(dict.fromkeys(["default"] * default + common))

        self.retractions = options("retractions")
        self.transports = options("transports")
        # the sum metric: a transport acting factor by factor lengthens nothing when no
        # factor's does ("default": every factor's first)
        self.nonexpanding_transports = tuple(
            t for t in self.transports
            if all(f.transports and (f.transports[0] if t == "default" else t)
                   in f.nonexpanding_transports for f in factors))
        self.inverse_retractions = options(
            "inverse_retractions", all(f.retractions[0] in f.inverse_retractions
                                       for f in factors))
        self.has_project = all(f.has_project for f in factors)
        self.has_tangent_gaussian = all(f.has_tangent_gaussian for f in factors)

    def _repr_args(self):
        return [repr(f) for f in self.factors]

    def __eq__(self, other):
        return type(self) is type(other) and self.factors == other.factors

    def __hash__(self):
        return hash((type(self).__name__, self.factors))

    # ------------------------------------------------------------------ layout

    def split(self, x: ArrayLike) -> tuple[FloatArray, ...]:
        """The factors' parts of a point or tangent vector.

        Parameters
        ----------
        x : array_like, shape (..., D)
            Point(s) or vector(s) of the product.

        Returns
        -------
        tuple of ndarray
            One array of shape ``(..., *M_i.shape)`` per factor (views where the layout
            allows).
        """
        return self._split(self._array(x, "x"))

    def _split(self, x):
        batch = x.shape[:-1]
        return tuple(x[..., a:b].reshape(batch + f.shape)
                     for f, (a, b) in zip(self.factors, self._bounds))

    def join(self, *parts: ArrayLike) -> FloatArray:
        """The flat array of factor parts (the inverse of :meth:`split`).

        Parameters
        ----------
        *parts : array_like
            One array of shape ``(..., *M_i.shape)`` per factor; batch axes broadcast.

        Returns
        -------
        ndarray, shape (..., D)
        """
        if len(parts) != len(self.factors):
            raise ValueError(f"parts: expected {len(self.factors)} arrays (one per factor), "
                             f"got {len(parts)}")
        arrays = [f._array(p, f"parts[{i}]")
                  for i, (f, p) in enumerate(zip(self.factors, parts))]
        batch = np.broadcast_shapes(*(a.shape[:a.ndim - f.core_ndim]
                                      for f, a in zip(self.factors, arrays)))
        dtype = np.result_type(*arrays)
        return np.concatenate([np.broadcast_to(a, batch + f.shape).reshape(batch + (-1,))
                               for f, a in zip(self.factors, arrays)], axis=-1).astype(
                                   dtype, copy=False)

    def _each(self, what, fn, *arrays):
        """``[fn(M_i, *parts_i) for each factor]`` of checked arrays; a factor's missing map is
        reported with the factor named."""
        split = [self._split(a) for a in arrays]
        out = []
        for i, f in enumerate(self.factors):
            try:
                out.append(fn(f, *(s[i] for s in split)))
            except MethodNotAvailableError as exc:
                raise MethodNotAvailableError(
                    f"Manifold {type(self).__name__} provides no `{what}`: factor {i}, {f!r}, "
                    f"has none ({exc})") from None
        return out

    def _methods(self, method, options, kind):
        """One method name (or ``None``: the factor's default) per factor."""
        if isinstance(method, (tuple, list)):
            if len(method) != len(self.factors):
                raise ValueError(f"method: expected one {kind} per factor "
                                 f"({len(self.factors)}), got {len(method)}")
            return [None if m in (None, "default") else m for m in method]
        method = self._option(method, options, kind)
        return [None if method == "default" else method] * len(self.factors)

    # ------------------------------------------------------------------ checks

    def _check_point(self, x, atol):
        for i, (f, part) in enumerate(zip(self.factors, self._split(x))):
            ok, reason = f._check_point(part, atol)
            if not ok:
                return ok, f"factor {i} ({f!r}): {reason}"
        return True, ""

    def _check_tangent(self, x, u, atol):
        for i, (f, xi, ui) in enumerate(zip(self.factors, self._split(x), self._split(u))):
            ok, reason = f._check_tangent(xi, ui, atol)
            if not ok:
                return ok, f"factor {i} ({f!r}): {reason}"
        return True, ""

    # ------------------------------------------------------------------ metric

    def inner(self, x: ArrayLike, u: ArrayLike, v: ArrayLike) -> Real:
        x, u, v = self._point(x), self._array(u, "u"), self._array(v, "v")
        return sum(self._each("inner", lambda f, a, b, c: f.inner(a, b, c), x, u, v))

    def norm(self, x: ArrayLike, u: ArrayLike) -> Real:
        x, u = self._point(x), self._array(u, "u")
        return _hypot(self._each("norm", lambda f, a, b: f.norm(a, b), x, u))

    def dist(self, x: ArrayLike, y: ArrayLike) -> Real:
        x, y = self._point(x), self._point(y, "y")
        return _hypot(self._each("dist", lambda f, a, b: f.dist(a, b), x, y))

    # ------------------------------------------------------------------ tangent vectors

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        x, u = self._point_vector(x, u, tangent=False)
        return self.join(*self._each("proj", lambda f, a, b: f.proj(a, b), x, u))

    def egrad2rgrad(self, x: ArrayLike, g: ArrayLike) -> FloatArray:
        x, g = self._point_vector(x, g, "g", tangent=False)
        return self.join(*self._each("egrad2rgrad", lambda f, a, b: f.egrad2rgrad(a, b), x, g))

    # ------------------------------------------------------------------ maps

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        methods = iter(self._methods(method, self.retractions, "retraction"))
        x = self._point(x)
        u = self._vector(x, u)
        return self.join(*self._each("retr", lambda f, a, b: f.retr(
            a, b, next(methods), backend=backend), x, u))

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        methods = iter(self._methods(method, self.inverse_retractions, "inverse retraction"))
        x, y = self._point(x), self._point(y, "y")
        return self.join(*self._each("inv_retr", lambda f, a, b: f.inv_retr(
            a, b, next(methods), backend=backend), x, y))

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        x = self._point(x)
        u = self._vector(x, u)
        return self.join(*self._each("exp", lambda f, a, b: f.exp(a, b, backend=backend),
                                     x, u))

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        x, y = self._point(x), self._point(y, "y")
        return self.join(*self._each("log", lambda f, a, b: f.log(a, b, backend=backend),
                                     x, y))

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        methods = iter(self._methods(method, self.transports, "transport"))
        x, y = self._point(x), self._point(y, "y")
        v = self._vector(x, v, "v")
        return self.join(*self._each("transport", lambda f, a, b, c: f.transport(
            a, b, c, next(methods), backend=backend), x, y, v))

    def project(self, z: ArrayLike) -> FloatArray:
        if not self.has_project:
            self._missing("project")
        return self.join(*self._each("project", lambda f, a: f.project(a),
                                     self._array(z, "z")))

    # ------------------------------------------------------------------ random

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        rng = as_rng(rng)
        return self.join(*(f.random_point(*batch, rng=rng) for f in self.factors))

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        if not self.has_tangent_gaussian:
            self._missing("tangent_gaussian")
        rng = as_rng(rng)
        x = self._point(x)
        return self.join(*self._each("tangent_gaussian", lambda f, a: f.tangent_gaussian(
            a, sigma, rng=rng), x))
