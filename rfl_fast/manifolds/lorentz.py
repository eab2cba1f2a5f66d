"""The hyperboloid (Lorentz) model of hyperbolic space H^d, points in R^(d+1)."""

import functools
import math

import numpy as np

from .._typing import ArrayLike, FloatArray, Real, RNGLike
from .._validation import as_rng
from .._validation import FLOAT64, validation_enabled
from ..kernels import call, resolve
from .base import Manifold, _all_finite

__all__ = ["Lorentz"]


#: Distances below this use the cancellation-free forms in ``dist`` and ``log``.
_NEAR = 1e-2
#: ``_solved``'s name of a step without an answer, for the dtype of the result
_EXP_UNSOLVED = ("u (|u| too large: the point overflows {}, or cosh|u| x0 > 1e8 z0: too "
                 "ill-conditioned, < 8 correct digits)")
_EXP_UNSOLVED64 = ("exp", _EXP_UNSOLVED.format(np.dtype(np.float64)))  # the fast lane's


def _half_gap(x, y):
    """``(d, h)`` with ``d = y - x`` and ``h = <d,d>_L / 2 = -<x,y>_L - 1`` (clamped >= 0),
    computed from the difference, so exact 0 at ``y = x``; float64 arrays (m, d+1)."""
    d = np.asarray(y, dtype=np.float64) - np.asarray(x, dtype=np.float64)
    h = np.maximum(0.5 * _ldot(d, d), 0.0)
    return d, h


def _one_batch(*arrays):
    """``arrays`` (points and vectors, each ``(d+1,)`` or ``(..., d+1)``), with every single one
    (1-d) copied to the shape of the batch of the others when those all have that one shape
    (the server's point against the clients' batch): a copy per item costs less than the
    kernel glue's general broadcasting, and the kernels compute item by item, so the numbers
    are the same."""
    shape = arrays[0].shape
    big = arrays[0]
    same = True
    for a in arrays:
        if a.shape != shape:
            same = False
        if a.ndim > big.ndim:
            big = a
    if same or big.ndim == 1:
        return arrays
    for a in arrays:
        if a.ndim != 1 and a.shape != big.shape:
            return arrays
    out = []
    for a in arrays:
        if a.shape != big.shape:
            b = np.empty(big.shape, dtype=a.dtype)     # the row repeated, C order
            b[...] = a
            a = b
        out.append(a)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _signs(n, char):
    """``J = diag(-1, 1, ..., 1)``'s diagonal, length ``n``, dtype ``char`` (read-only)."""
    j = np.ones(n, dtype=char)
    j[0] = -1.0
    j.flags.writeable = False
    return j


def _direct(kernel, backend, *arrays):
    """``kernel`` of the backend in force on ``arrays`` as they are, when they are checked
    float64 C-contiguous stacks ``(k, d+1)`` of one shape (the batched common case, what
    :func:`rfl_fast.kernels.call` would hand the kernel unchanged): skips its flattening and
    broadcasting glue; ``None`` otherwise (the caller takes ``call``)."""
    a = arrays[0]
    if a.ndim != 2:
        return None
    for b in arrays:
        if b.dtype is not FLOAT64 or b.shape != a.shape or not b.flags.c_contiguous:
            return None
    return resolve(kernel, backend, a.shape)[1](*arrays)


def _ldot(a, b):
    """Minkowski product ``-a0 b0 + sum_k ak bk``, keeping the last axis: the products'
    signed sum as one product with ``J``'s diagonal (2 NumPy calls instead of 5; the same
    value to rounding)."""
    p = a * b
    return (p @ _signs(p.shape[-1], p.dtype.char))[..., None]


class Lorentz(Manifold):
    r"""Hyperbolic space in the hyperboloid model: points ``x`` of shape ``(..., d+1)`` with
    :math:`\langle x, x\rangle_L = -1` and :math:`x_0 > 0`; the metric is the Minkowski product
    :math:`\langle u, v\rangle_L = -u_0 v_0 + \sum_{k \ge 1} u_k v_k` restricted to tangent
    spaces.

    Retraction: ``"exp"`` (the geodesic; inverse ``log``). Transports: ``"parallel"``
    (:math:`v + \frac{\langle y, v\rangle_L}{1 - \langle x, y\rangle_L}(x + y)`, default) and
    ``"projection"``.

    Parameters
    ----------
    d : int
        Dimension of the hyperbolic space, ``d >= 1`` (points in R^(d+1)).
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).
    """

    retractions = ("exp",)
    inverse_retractions = ("exp",)
    transports = ("parallel", "projection")
    nonexpanding_transports = ("parallel",)   # projection: stretches (the ambient metric is indefinite)
    has_tangent_gaussian = True
    #: differentiable routes (rfl_fast.kernels.xp_routes) of a gradient-carrying call
    array_routes = {"proj": "lorentz_proj", "retr": "lorentz_retr", "inv_retr": "lorentz_inv_retr",
                    "exp": "lorentz_exp", "log": "lorentz_log", "dist": "lorentz_dist",
                    "transport": "lorentz_transport", "inner": "lorentz_inner",
                    "norm": "lorentz_norm", "egrad2rgrad": "lorentz_egrad2rgrad"}

    def __init__(self, d: int, *, validate: bool | None = None) -> None:
        d = int(d)
        if d < 1:
            raise ValueError(f"Lorentz: need d >= 1 (H^d in R^(d+1)), got d={d}")
        super().__init__((d + 1,), d, validate=validate)

    def _repr_args(self):
        return (self.dim,)

    @property
    def origin(self) -> FloatArray:
        """The point ``(1, 0, ..., 0)``."""
        o = np.zeros(self.shape)
        o[0] = 1.0
        return o

    def _check_point(self, x, atol):
        gap = np.max(np.abs(_ldot(x, x) + 1.0) / np.maximum(1.0, x[..., :1] ** 2), initial=0.0)
        if (x[..., 0] <= 0).any():
            return False, "x0 <= 0 (the lower sheet of the hyperboloid)"
        return gap <= atol, f"|<x,x>_L + 1| / x0^2 = {gap:.3g} > atol {atol:g}"

    def inner(self, x: ArrayLike, u: ArrayLike, v: ArrayLike) -> Real:
        """Minkowski product ``<u, v>_L``; returns (...)."""
        self._point(x)
        return _ldot(self._array(u, "u"), self._array(v, "v"))[..., 0]

    def norm(self, x: ArrayLike, u: ArrayLike) -> Real:
        """``|u|_x`` for tangent ``u``, in a cancellation-free form: with ``<x,u>_L = 0``,
        ``|u|^2 = (|u_r|^2 + |x_r|^2 |u_r - (u_r.x^)x^|^2) / x0^2`` (``r``: spatial part,
        ``x^ = x_r/|x_r|``), a sum of non-negative terms; returns (...)."""
        x = self._point(x)
        xr = x[..., 1:]
        nx2 = np.sum(xr * xr, axis=-1, keepdims=True)

        def norm_of(u):
            ur = u[..., 1:]
            with np.errstate(invalid="ignore", divide="ignore"):
                along = np.where(nx2 > 0, np.sum(ur * xr, -1, keepdims=True) / nx2, 0.0)
            perp = ur - along * xr
            sq = np.sum(ur * ur, -1) + nx2[..., 0] * np.sum(perp * perp, -1)
            return np.sqrt(sq) / x[..., 0]

        return self._norm_in_range(norm_of, self._array(u, "u"))

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """``u + <x,u>_L x``."""
        x, u = self._point_vector(x, u, tangent=False)
        return u + _ldot(x, u) * x

    def egrad2rgrad(self, x: ArrayLike, g: ArrayLike) -> FloatArray:
        """``proj(x, J g)`` with ``J = diag(-1, 1, ..., 1)``."""
        g = self._array(g, "g").copy()
        g[..., 0] = -g[..., 0]
        return self.proj(x, g)

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        self._option(method, self.retractions, "retraction")
        return self.exp(x, u, backend=backend)

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        self._option(method, self.inverse_retractions, "inverse retraction")
        return self.log(x, y, backend=backend)

    def exp(self, x: ArrayLike, u: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """``cosh|u| x + sinh|u| u/|u|``.

        The coordinates grow like ``e^|u|``: a step whose result overflows the dtype (float64:
        ``|u| + log x0`` beyond about 709; float32: about 88) raises ``NoSolutionError``
        instead of returning inf/NaN. A point that large is unusable anyway (``<x,x>_L``
        overflows). Where ``z0`` cancels it is recomputed as ``sqrt(1 + |z_r|^2)`` (on the
        hyperboloid). The rounding errors are ~ ``eps cosh|u| x0`` (a step back towards the
        origin from a far point cancels): where that exceeds ``1e8 eps z0`` (fewer than ~8
        correct digits) it raises ``NoSolutionError`` too, instead of a silently wrong point."""
        out = self._compiled("lorentz_exp", backend, x, u, solved=_EXP_UNSOLVED64)
        if out is not None:
            return out
        x = self._point(x)
        u = self._vector(x, u)
        with np.errstate(over="ignore", invalid="ignore"):
            out = call("lorentz_exp", x, u, backend=backend)
        if not _all_finite(out):       # _solved's test; the message is formatted only here
            self._no_solution(out, "exp", _EXP_UNSOLVED.format(out.dtype))
        return out

    def log(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> FloatArray:
        """``Log_x(y)``; exactly 0 at ``y = x`` and accurate for nearby points (see
        :meth:`dist`)."""
        x, y = self._points(x, y)
        xb, yb = _one_batch(x, y)
        out = _direct("lorentz_log", backend, xb, yb)
        if out is None:
            out = call("lorentz_log", xb, yb, backend=backend)
            near = self._near(x, y)
            if near.any():
                out = np.array(out)
                xb, yb = np.broadcast_arrays(x, y)
        else:    # float64 stacks (k, d+1), out a new array: _near's test without its casts
            p = xb * yb
            near = p @ _signs(p.shape[-1], "d") > -1.0 - 0.5 * _NEAR**2
        if near.any():
            every = near.all()                    # all near (steps around x): no gathers
            xn, yn = (xb, yb) if every else (xb[near], yb[near])
            d, h = _half_gap(xn, yn)
            # acosh(1+h)/sqrt(h(h+2)) = 2 asinh(sqrt(h/2))/sqrt(h(h+2)) -> 1 as h -> 0
            r = np.sqrt(h / 2.0)
            if (h > 0).all():
                scale = 2.0 * np.arcsinh(r) / np.sqrt(h * (h + 2.0))
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    scale = np.where(h > 0, 2.0 * np.arcsinh(r) / np.sqrt(h * (h + 2.0)), 1.0)
            val = scale * (d - h * xn)
            if every and out.shape == val.shape:
                return val.astype(out.dtype, copy=False)
            out[near] = val.astype(out.dtype)
        return out

    def dist(self, x: ArrayLike, y: ArrayLike, *, backend: str | None = None) -> Real:
        """``acosh(-<x,y>_L)``; for nearby points (distance below ~1e-2) the cancellation-free
        ``2 asinh(|x - y|_L / 2)`` (``acosh`` near 1 loses half the digits: ``dist(x, x)``
        would be ~``sqrt(eps) x0`` instead of 0).

        Parameters
        ----------
        x : array_like, shape (..., d + 1)
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape (..., d + 1)
            Second point(s).
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        float or ndarray, shape (...)
            One value per item.
        """
        x, y = self._point(x), self._point(y, "y")
        out = call("lorentz_dist", x, y, backend=backend)
        near = out < _NEAR
        if np.any(near):
            out = np.array(out)
            xb, yb = np.broadcast_arrays(x, y)
            _, h = _half_gap(xb[near], yb[near])
            out[near] = (2.0 * np.arcsinh(np.sqrt(h[..., 0] / 2.0))).astype(out.dtype)
        return out

    def _points(self, x, y):
        """``(_point(x), _point(y, "y"))``, with one finiteness test for both when they are
        float64 C-contiguous ndarrays of one shape and validation is off (a finite ``x . y``
        means every entry of both is finite, as ``Manifold._point_vector``)."""
        if (type(x) is np.ndarray and type(y) is np.ndarray and x.dtype is FLOAT64
                and y.dtype is FLOAT64 and x.shape == y.shape and x.ndim >= 1
                and x.shape[-1] == self.shape[0] and x.flags.c_contiguous
                and y.flags.c_contiguous and not validation_enabled(self.validate)
                and math.isfinite(np.vdot(x, y))):
            return x, y
        return self._point(x), self._point(y, "y")

    def _near(self, x, y):
        """Items where ``x`` and ``y`` are close enough for the cancellation-free formulas."""
        a = -_ldot(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))[..., 0]
        return a - 1.0 < 0.5 * _NEAR**2

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        method = self._option(method, self.transports, "transport")
        if method == "projection":
            self._point(x)
            return self.proj(y, v)
        x, y = self._points(x, y)
        arrays = _one_batch(x, y, self._vector(x, v, "v"))
        out = _direct("lorentz_transport", backend, *arrays)
        return call("lorentz_transport", *arrays, backend=backend) if out is None else out

    def random_point(self, *batch: int, rng: RNGLike = None) -> FloatArray:
        """``Exp_o(v)`` at the origin with v standard Gaussian in T_o: ``(*batch, d+1)``."""
        v = np.zeros(tuple(batch) + self.shape)
        v[..., 1:] = as_rng(rng).standard_normal(tuple(batch) + (self.dim,))
        return call("lorentz_exp", np.broadcast_to(self.origin, v.shape), v)

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        """Isotropic Gaussian at the origin, parallel-transported to ``x`` (an isometry)."""
        x = self._point(x)
        v = np.zeros(x.shape)
        v[..., 1:] = self._sigma(sigma) * as_rng(rng).standard_normal(x.shape[:-1] + (self.dim,))
        o = np.broadcast_to(self.origin, x.shape)
        return call("lorentz_transport", o, x, v).astype(x.dtype, copy=False)
