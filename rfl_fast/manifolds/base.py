"""The manifold interface shared by every manifold of rfl_fast.

Conventions (the same for every manifold):

* the base point is always the first argument;
* arrays are stacked: the trailing ``core_ndim`` axes hold one point or tangent vector
  (``shape``), leading axes are a batch and broadcast (one point against a stack works);
* float64 is the working precision; float32 input is accepted and gives float32 output
  accurate to float32 tolerance (compiled kernels compute it in float64); integers become
  float64; any other dtype (float16, longdouble, complex, bool, object) raises ``TypeError``
  naming the argument (see ``rfl_fast._validation.check_dtype``);
* inputs are checked for shape, dtype and NaN/inf on every call; whether points lie on the
  manifold is checked only when asked (``validate=True`` at construction, or the environment
  variable ``RFL_FAST_VALIDATE=1``), since it costs as much as the operation itself;
* an operation a manifold does not have raises ``MethodNotAvailableError``; an operation
  without a solution for the given input (``NaN`` from a kernel) raises ``NoSolutionError``;
* the methods named in ``array_methods`` take arrays of any array-API namespace (PyTorch, JAX,
  CuPy, array-api-strict) and return the caller's array type on the caller's device: each is
  wrapped once per class by ``rfl_fast.kernels.arrays.accepts_arrays``, the one seam (a NumPy
  call goes straight through).
"""

import inspect
import math

import numpy as np

from .._docs import inherit_sections
from .._typing import ArrayLike, FloatArray, Real, RNGLike
from ..kernels import fast_lane
from ..kernels import xp_routes
from ..kernels.arrays import accepts_arrays
from ..kernels.streams import ItemStreams
from .._validation import FLOAT64, as_array, check_core_shape, validation_enabled
from ..errors import MethodNotAvailableError, NoSolutionError, NotOnManifoldError

__all__ = ["Manifold"]


def _all_finite(a):
    """Exactly ``np.isfinite(a).all()``, 2-2.5x faster: a finite sum of squares (one BLAS pass,
    no temporary) implies every entry is finite; only an inf/NaN sum (a bad entry, or overflow
    of the squares) takes the exact test. A non-contiguous view is read in memory order, each
    broadcast (stride 0) axis once, instead of being copied (~15x slower at (20, 784, 5))."""
    if not a.flags.c_contiguous:
        a = a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)]
        a = a.ravel(order="K")  # a view when the memory is contiguous in some axis order
    return math.isfinite(np.vdot(a, a)) or bool(np.isfinite(a).all())


def _default_atol(dtype):
    return 1e-4 if dtype == np.float32 else 1e-8


class Manifold:
    """Base class: subclasses set ``shape``, ``dim``, the option tuples and implement methods.

    Parameters
    ----------
    shape : tuple of int
        Shape of one point.
    dim : int
        Intrinsic dimension.
    validate : bool, optional
        Check that point arguments lie on the manifold (costs as much as the operation);
        ``None``: the ``RFL_FAST_VALIDATE`` environment variable decides (off by default).

    Attributes
    ----------
    shape : tuple of int
        Shape of one point (the trailing axes of every array argument).
    dim : int
        Intrinsic dimension.
    retractions : tuple of str
        Names accepted by ``retr``; the first is the default.
    inverse_retractions : tuple of str
        Names accepted by ``inv_retr`` (exact inverses of the retraction of the same name).
    transports : tuple of str
        Names accepted by ``transport``; the first is the default.
    nonexpanding_transports : tuple of str
        The transports declared never to lengthen a vector, ``|T_{x->y} v|_y <= |v|_x`` for
        every tangent ``v`` (isometric parallel transports, orthogonal projections in the
        metric); PriRFed's DP-RSVRG accepts only these (a clipped term must stay clipped).
        Empty here: a transport is stretching until declared otherwise.
    has_project, has_tangent_gaussian : bool
        Whether ``project`` (the nearest point) and ``tangent_gaussian`` are implemented
        (class attributes, ``False`` here).
    """

    retractions = ()
    inverse_retractions = ()
    transports = ()
    nonexpanding_transports = ()
    has_project = False
    has_tangent_gaussian = False
    #: Retraction name -> the kernels that compute one point's ``egrad2rgrad`` and ``retr``
    #: with it, a declared capability by which the kernels layer finds fused routes
    #: (``kernels.fused.local_stepper``); empty here. Here and in the three declarations
    #: below a name is a kernel of ``kernels.REGISTRY`` where the operation has one (Stiefel's),
    #: else the operation's name as a fused kernel (``registry.FUSED``) declares it (the
    #: sphere's projection, whose one-line maps have no kernel of their own).
    step_kernels = {}
    #: Transport name -> the kernel that computes ``transport(x, y, v)``, a declared
    #: capability: where it is the gradient's kernel of ``step_kernels`` (a transport that
    #: forgets ``x``, linear in ``v``: the projection onto the tangent space at ``y``),
    #: RFedSVRG's corrected direction ``grad f_i(y) - T(v)`` is that kernel of
    #: ``egrad f_i(y) - v``; where a fused kernel of local steps declares it
    #: (``registry.Fused.transports``: the sphere's parallel transport), that kernel applies
    #: it to the correction; either way RFedSVRG's local steps fuse as RFedAvg's do; empty here.
    transport_kernels = {}
    #: Inverse retraction name -> the kernel that computes
    #: ``inv_retr(x, y)`` with it, a declared capability: where a fused kernel of local steps
    #: has it (``registry.Fused.inverse``), RFedProx's direction
    #: ``grad f_i(x) - mu R_x^{-1}(x_t)`` fuses as RFedAvg's does; empty here.
    inverse_kernels = {}
    #: The kernel that computes ``project(z)``, the nearest point, a
    #: declared capability: where a fused kernel of local steps has it
    #: (``registry.Fused.projection``), RFedProj's ambient steps fuse; ``None`` here.
    project_kernel = None
    #: Whether ``tangent_gaussian`` is ``P_x(sigma N)`` with ``P_x(v) = v - x sym(x'v)`` (the
    #: Stiefel projection; the sphere's at p = 1), a declared capability: its compiled one-pass
    #: route (:meth:`_projected_gaussian`) serves only such a manifold (not Grassmann's
    #: horizontal projection, which shares Stiefel's body).
    stiefel_noise = False
    #: The public methods that take or return arrays: each one a class defines is wrapped once
    #: (``__init_subclass__``) to take arrays of any array-API namespace and give the caller's
    #: array type back (``rfl_fast.kernels.arrays``). A subclass with more such methods extends
    #: the tuple.
    array_methods = ("check_point", "check_tangent", "is_point", "is_tangent", "assert_point",
                     "assert_tangent", "inner", "norm", "dist", "proj", "egrad2rgrad",
                     "zero_vector", "retr", "inv_retr", "exp", "log", "transport", "project",
                     "random_tangent", "tangent_gaussian")
    #: Method name -> its differentiable route (a key of ``rfl_fast.kernels.xp_routes.ROUTES``),
    #: run in the caller's namespace when an argument carries a gradient (a torch tensor with
    #: ``requires_grad``, a JAX tracer); declared by the class that defines the method (not
    #: inherited: a subclass that overrides a method declares its own, or refuses). Here the
    #: generic methods' (the embedded metric; ``norm`` and ``egrad2rgrad`` by the subclass's
    #: ``inner`` and ``proj``, and their routes).
    array_routes = {"inner": "manifold_inner", "norm": "manifold_norm",
                    "egrad2rgrad": "manifold_egrad2rgrad", "zero_vector": "manifold_zero_vector"}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "proj" in vars(cls) and "stiefel_noise" not in vars(cls):
            cls.stiefel_noise = False   # its own projection: not the compiled noise's
        inherit_sections(cls)
        _accept_arrays(cls)

    def __init__(self, shape: tuple[int, ...], dim: int, *, validate: bool | None = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dim = int(dim)
        self.validate = validate

    @property
    def core_ndim(self) -> int:
        """Number of trailing axes that hold one point."""
        return len(self.shape)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(str, self._repr_args()))})"

    def _repr_args(self):
        return self.shape

    def __eq__(self, other):
        return type(self) is type(other) and self.shape == other.shape

    def __hash__(self):
        return hash((type(self).__name__, self.shape))

    # ------------------------------------------------------------------ argument handling

    def _missing(self, method):
        raise MethodNotAvailableError(f"Manifold {type(self).__name__} provides no `{method}`")

    def _array(self, a, name):
        # fast path for the common case, the same checks (float ndarray, core shape, finite):
        # saves ~4 us per argument on one 784x5 matrix; anything else takes the full checks,
        # which raise the explanatory errors
        k = len(self.shape)
        if (type(a) is np.ndarray and a.dtype.char in "fd" and a.ndim >= k
                and a.shape[a.ndim - k:] == self.shape and _all_finite(a)):
            return a
        arr = as_array(a, name)
        check_core_shape(arr, name, self.shape)
        return arr

    def _point(self, x, name="x"):
        """Checked point array (shape, dtype, finite; on the manifold if validation is on)."""
        arr = self._array(x, name)
        if validation_enabled(self.validate):
            self.assert_point(arr, name)
        return arr

    def _vector(self, x, u, name="u"):
        """Checked tangent-vector array at the (already checked) point ``x``."""
        arr = self._array(u, name)
        if validation_enabled(self.validate):
            self.assert_tangent(x, arr, name)
        return arr

    def _point_vector(self, x, u, name="u", tangent=True):
        """``(_point(x), _vector(x, u, name))`` (``_array(u, name)`` when not ``tangent``: any
        ambient array), with one finiteness test for both when they are float arrays of the
        same shape: a NaN or inf entry makes its product with anything NaN or inf, so a finite
        ``x . u`` means every entry of both is finite (an overflowing product or sum only sends
        the pair to the separate, exact checks). Saves ~1 us per call on one 784x5 matrix."""
        if (type(x) is np.ndarray and type(u) is np.ndarray and x.shape == u.shape
                and x.shape[-len(self.shape):] == self.shape and x.dtype is FLOAT64
                and u.dtype is FLOAT64 and x.flags.c_contiguous and u.flags.c_contiguous
                and not validation_enabled(self.validate) and math.isfinite(np.vdot(x, u))):
            return x, u
        x = self._point(x)
        return x, (self._vector(x, u, name) if tangent else self._array(u, name))

    def _compiled(self, kernel, backend, *arrays, solved=None):
        """The fast lane for small inputs: ``kernel``'s result from the C++ backend's checked form
        (``_core.<kernel>_checked``, one compiled call that also checks every input and output
        entry for NaN/inf), or ``None`` when that form does not take these arrays as they are
        (not all float64 C-contiguous ndarrays of one shape ``(..., *shape)``, a NaN or inf
        input entry), when C++ is not the backend in force, or when on-manifold validation is
        on. On ``None`` the caller takes its general route, which gives the same result or
        raises the named error. ~0.7 us instead of ~5 us of Python checks and glue on one 784x5
        Stiefel matrix. An item without a finite answer ends as the general route ends on the
        same kernel's output, without computing it again: with ``solved``, the ``(what, name)``
        of :meth:`_solved`, it raises that ``NoSolutionError``; without, the output is returned
        (the caller's own checks follow, or the general route returns it as it is)."""
        if validation_enabled(self.validate) or type(arrays[0]) is not np.ndarray:
            return None  # a list, a tensor: the general route converts it
        fn = fast_lane(kernel, backend, arrays[0].shape)
        if fn is None:
            return None
        out = fn(*arrays, self.shape)
        if type(out) is not tuple:
            return out
        out = out[0]  # (out,): every input taken, some output entry NaN or inf
        if solved is not None:  # a distance has no core axes: checked as (..., 1, 1)
            self._no_solution(out[(...,) + (None,) * (arrays[0].ndim - out.ndim)], *solved)
        return out

    @staticmethod
    def _option(method, options, kind):
        if method is None:
            return options[0]
        if method not in options:
            raise ValueError(f"method: unknown {kind} {method!r}; expected one of {options}")
        return method

    def _solved(self, out, what, name):
        """Raise ``NoSolutionError`` if the kernel left NaN in ``out`` (no solution)."""
        if not _all_finite(out):
            self._no_solution(out, what, name)
        return out

    def _no_solution(self, out, what, name):
        """Raise ``_solved``'s ``NoSolutionError`` for ``out``, which has a NaN or inf entry."""
        bad = ~np.isfinite(out.reshape(out.shape[: out.ndim - self.core_ndim] + (-1,))).all(-1)
        where = np.argwhere(np.atleast_1d(bad))[:5].tolist()
        raise NoSolutionError(f"{type(self).__name__}.{what}: no solution for {name} "
                              f"(batch index {where if bad.ndim else 'scalar'})")

    def _sum_core(self, a):
        return np.sum(a, axis=tuple(range(-self.core_ndim, 0)))

    # ------------------------------------------------------------------ checks

    def check_point(self, x: ArrayLike, *,
                    atol: float | None = None) -> tuple[bool | np.bool_, str]:
        """Return ``(ok, reason)``: whether every item of ``x`` lies on the manifold.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Returns
        -------
        ok : bool
            Whether the check passed.
        reason : str
            What was measured against ``atol``.
        """
        arr = self._array(x, "x")
        atol = _default_atol(arr.dtype) if atol is None else atol
        return self._check_point(arr, atol)

    def check_tangent(self, x: ArrayLike, u: ArrayLike, *,
                      atol: float | None = None) -> tuple[bool | np.bool_, str]:
        """Return ``(ok, reason)``: whether every item of ``u`` is tangent at ``x``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Returns
        -------
        ok : bool
            Whether the check passed.
        reason : str
            What was measured against ``atol``.
        """
        xa, ua = self._array(x, "x"), self._array(u, "u")
        atol = _default_atol(np.result_type(xa, ua)) if atol is None else atol
        ok, reason = self._check_point(xa, atol)
        if not ok:
            return ok, reason
        return self._check_tangent(xa, ua, atol)

    def is_point(self, x: ArrayLike, *, atol: float | None = None) -> bool | np.bool_:
        """Whether every item of ``x`` lies on the manifold (within ``atol``).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Returns
        -------
        bool
        """
        return self.check_point(x, atol=atol)[0]

    def is_tangent(self, x: ArrayLike, u: ArrayLike, *,
                   atol: float | None = None) -> bool | np.bool_:
        """Whether every item of ``u`` lies in the tangent space at ``x`` (within ``atol``).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Returns
        -------
        bool
        """
        return self.check_tangent(x, u, atol=atol)[0]

    def assert_point(self, x: ArrayLike, name: str = 'x', *, atol: float | None = None) -> None:
        """Raise ``NotOnManifoldError`` naming ``name`` with the reason if ``x`` is off.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        name : str
            Argument name for the error message.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Raises
        ------
        rfl_fast.errors.NotOnManifoldError
            If the check fails.
        """
        ok, reason = self.check_point(x, atol=atol)
        if not ok:
            raise NotOnManifoldError(f"{name}: not a point of {self!r}: {reason}")

    def assert_tangent(self, x: ArrayLike, u: ArrayLike, name: str = 'u', *,
                       atol: float | None = None) -> None:
        """Raise ``NotOnManifoldError`` naming ``name`` if ``u`` is not tangent at ``x``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        name : str
            Argument name for the error message.
        atol : float, optional
            Tolerance; default 1e-8 (1e-4 for float32).

        Raises
        ------
        rfl_fast.errors.NotOnManifoldError
            If the check fails.
        """
        ok, reason = self.check_tangent(x, u, atol=atol)
        if not ok:
            raise NotOnManifoldError(f"{name}: not a tangent vector of {self!r}: {reason}")

    def _check_point(self, x, atol):
        return True, ""

    def _check_tangent(self, x, u, atol):
        gap = np.max(np.abs(u - self.proj(x, u)), initial=0.0)
        return (gap <= atol * max(1.0, np.max(np.abs(u), initial=0.0)),
                f"distance to the tangent space {gap:.3g} > atol {atol:g}")

    # ------------------------------------------------------------------ metric

    def inner(self, x: ArrayLike, u: ArrayLike, v: ArrayLike) -> Real:
        """Riemannian inner product ``<u, v>_x``; returns shape (...).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        v : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        float or ndarray, shape (...)
            One value per item.
        """
        x = self._point(x)
        return self._sum_core(self._array(u, "u") * self._array(v, "v"))

    def norm(self, x: ArrayLike, u: ArrayLike) -> Real:
        """Riemannian norm ``|u|_x``; returns shape (...).

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.

        Returns
        -------
        float or ndarray, shape (...)
            One value per item; finite wherever the norm is representable (each item is
            scaled by a power of two before it is squared, see ``_unit_scaled``).
        """
        return self._norm_in_range(lambda v: np.sqrt(np.maximum(self.inner(x, v, v), 0.0)),
                                   self._array(u, "u"))

    def _norm_in_range(self, norm_of, u):
        """``norm_of(u)``, a norm of each item (homogeneous of degree 1 in ``u``), without
        overflow or underflow of its squares: the items whose result is not finite or outside
        [sqrt(tiny) 2^30, sqrt(max) 2^-30] of its precision (float64: about [2^-481, 2^482])
        are computed again from ``u`` scaled by ``_unit_scaled``; the others keep the plain
        result (the scaled one's bits: scaling by a power of two is exact), so the rescaling
        costs only where an item needs it."""
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # redone below
            r = norm_of(u)
        fi = np.finfo(np.result_type(r, np.float32))
        redo = ~((r > np.sqrt(fi.tiny) * 2.0 ** 30) & (r < np.sqrt(fi.max) * 2.0 ** -30))
        if np.any(redo):
            v, e = self._unit_scaled(u)
            r = np.where(redo, np.ldexp(norm_of(v), e), r)[()]
        return r

    def _unit_scaled(self, u):
        """``(u 2^-e, e)``: each item of ``u`` (the core axes) scaled by the power of two that
        brings its largest entry into [0.5, 1), ``e`` of shape (...) (int32, clamped to
        [-1000, 1000] so that 2^-e is a normal number; 0 for a zero item). A norm of the
        scaled item times ``2^e`` (``np.ldexp``) neither overflows nor underflows before the
        norm itself does, and is the same bits as the unscaled one wherever its squares stay
        in range: scaling by a power of two is exact."""
        axes = tuple(range(-self.core_ndim, 0))
        _, e = np.frexp(np.max(np.abs(u), axis=axes, keepdims=True))
        e = np.clip(e, -1000, 1000)
        return np.ldexp(u, -e), e.reshape(e.shape[:e.ndim - self.core_ndim])

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
        self._missing("dist")

    # ------------------------------------------------------------------ tangent vectors

    def proj(self, x: ArrayLike, u: ArrayLike) -> FloatArray:
        """Orthogonal projection of an ambient ``u`` onto the tangent space at ``x``.

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
        self._missing("proj")

    def egrad2rgrad(self, x: ArrayLike, g: ArrayLike) -> FloatArray:
        """Riemannian gradient from the Euclidean gradient ``g`` of a function at ``x``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        g : array_like, shape ``(..., *shape)``
            Euclidean gradient(s) at ``x``.

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The Riemannian gradient(s).
        """
        return self.proj(x, g)

    def zero_vector(self, x: ArrayLike) -> FloatArray:
        """The zero tangent vector at ``x``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            Zeros shaped like ``x``.
        """
        return np.zeros_like(self._point(x))

    # ------------------------------------------------------------------ maps

    def retr(self, x: ArrayLike, u: ArrayLike, method: str | None = None, *,
             backend: str | None = None) -> FloatArray:
        """Retraction ``R_x(u)``; ``method`` one of ``retractions``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        u : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x``.
        method : str, optional
            A name the subclass accepts; default: its first.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The retracted point(s) ``R_x(u)``.
        """
        self._missing("retr")

    def inv_retr(self, x: ArrayLike, y: ArrayLike, method: str | None = None, *,
                 backend: str | None = None) -> FloatArray:
        """Exact inverse of the retraction ``method``: the ``u`` with ``R_x(u) = y``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).
        method : str, optional
            A name the subclass accepts; default: its first.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            The tangent vector(s) ``u`` at ``x`` with ``R_x(u) = y``.
        """
        self._missing("inv_retr")

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
        self._missing("exp")

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
        self._missing("log")

    def transport(self, x: ArrayLike, y: ArrayLike, v: ArrayLike, method: str | None = None, *,
                  backend: str | None = None) -> FloatArray:
        """Vector transport of ``v`` (tangent at ``x``) to the tangent space at ``y``.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        y : array_like, shape ``(..., *shape)``
            Second point(s).
        v : array_like, shape ``(..., *shape)``
            Tangent vector(s) at ``x`` to transport.
        method : str, optional
            A name the subclass accepts; default: its first.
        backend : str, optional
            ``'cpp'``, ``'numba'``, ``'numpy'`` or ``'auto'``; default: the active setting
            (:func:`rfl_fast.backend`).

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            ``v`` transported to the tangent space at ``y``.
        """
        self._missing("transport")

    def corrected_direction(self, transport: str):
        """RFedSVRG's and 2BB's local direction ``g - T_{x_t -> x}(v - c R^-1_{x_t}(x))`` as one
        map, where the manifold has one for ``transport``: ``direction(x_t, x, g, v, coef,
        method, scratch, out)`` on float64 C-contiguous arrays the caller built (no checks;
        ``g`` tangent at ``x``, ``v`` at ``x_t``, ``coef`` (k,) or ``None``, ``method`` the
        inverse retraction, ``scratch`` and ``out`` buffers it may write); ``None`` here
        (the algorithm composes ``transport`` and ``inv_retr``).

        Parameters
        ----------
        transport : str
            The transport in use.

        Returns
        -------
        callable or None
            The one-map direction, or ``None``.
        """
        return None

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
        self._missing("project")

    # ------------------------------------------------------------------ random

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
        self._missing("random_point")

    def random_tangent(self, x: ArrayLike, *, rng: RNGLike = None) -> FloatArray:
        """A random tangent vector at each point of ``x``, of unit norm.

        Parameters
        ----------
        x : array_like, shape ``(..., *shape)``
            Point(s); leading axes are a batch and broadcast.
        rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
            Random source; ``None`` draws fresh entropy, an int seeds a new generator.

        Returns
        -------
        ndarray, shape ``(..., *shape)``
            Unit tangent vector(s) at ``x``.
        """
        u = self.tangent_gaussian(x, 1.0, rng=rng)
        n = self.norm(x, u)
        return u / np.where(n > 0, n, 1.0)[(...,) + (None,) * self.core_ndim]

    def tangent_gaussian(self, x: ArrayLike, sigma: ArrayLike, *,
                         rng: RNGLike = None) -> FloatArray:
        """Gaussian ``N_x(0, sigma^2)`` on the tangent space at ``x``, isotropic in the metric.

        ``sigma`` is a scalar or broadcasts against the batch axes of ``x``.

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
        self._missing("tangent_gaussian")

    def _projected_gaussian(self, x, s, rng):
        """``tangent_gaussian`` in one compiled pass per item (:meth:`ItemStreams.projected_normal
        <rfl_fast.kernels.streams.ItemStreams.projected_normal>`: the same normals, scaled and
        projected by ``v - x sym(x'v)`` while in cache) where ``rng`` is a stack's
        ``ItemStreams`` served by the compiled fill and ``x`` a float64 stack, one point per
        stream; ``None`` elsewhere (nothing drawn). For the manifolds whose tangent Gaussian is
        that projection of ``sigma`` times a standard normal (Stiefel, the sphere); ``s`` is
        :meth:`_sigma`'s."""
        if (not self.stiefel_noise or type(rng) is not ItemStreams or x.dtype != np.float64
                or x.ndim != self.core_ndim + 1):
            return None
        k = x.shape[0]
        if k == 0:
            return None
        if s.size == 1:
            sig = np.full(k, float(s.reshape(())))
        elif s.shape == (k,) + (1,) * self.core_ndim:
            sig = np.ascontiguousarray(s.reshape(k), dtype=np.float64)
        else:
            return None
        out = rng.projected_normal(np.ascontiguousarray(x.reshape(k, x.shape[1], -1)), sig)
        return None if out is None else out.reshape(x.shape)

    def _sigma(self, sigma):
        """``sigma`` checked (finite, >= 0) and shaped to broadcast against tangent vectors."""
        s = np.asarray(sigma, dtype=float)
        if not np.isfinite(s).all() or (s < 0).any():
            raise ValueError(f"sigma: expected finite values >= 0, got {sigma!r}")
        return s[(...,) + (None,) * self.core_ndim]


def _accept_arrays(cls):
    """Wrap the methods of ``cls.array_methods`` that ``cls`` itself defines (once per class),
    with the differentiable routes ``cls`` itself declares in ``array_routes``."""
    routes = vars(cls).get("array_routes", {})
    for name in cls.array_methods:
        fn = vars(cls).get(name)
        if inspect.isfunction(fn) and not hasattr(fn, "__wrapped__"):
            route = xp_routes.ROUTES[routes[name]] if name in routes else None
            setattr(cls, name, accepts_arrays(fn, route))


_accept_arrays(Manifold)
