r"""rfl_fast manifolds as pymanopt manifolds: pymanopt's solvers on our kernels.

pymanopt's optimizers (``SteepestDescent``, ``ConjugateGradient``, ``TrustRegions``, ...) need a
``pymanopt.manifolds.manifold.Manifold`` instance. The classes here are such manifolds, with
pymanopt's constructor signatures (``Stiefel(n, p, k=3)``, ``SymmetricPositiveDefinite(n, k=3)``,
``Sphere(m, n)``, ``Euclidean(*shape)``, ``Grassmann(n, p, k=3)``); every operation pymanopt
calls (retraction, projection, inner product, transport, Exp/Log/dist, random points) is the
method of the wrapped :mod:`rfl_fast.manifolds` manifold, so it runs on the compiled kernels the
backend in force chooses (``"auto"``, or ``backend=`` here). The gradient and Hessian conversions
(``euclidean_to_riemannian_gradient`` and ``..._hessian``, the latter for trust regions) are
written out per manifold from our projections.

*Several points at once.* With ``k > 1`` a point is a stack of shape ``(k, *shape)``, pymanopt's
product of ``k`` copies: each map is ONE call of our manifold on the stack (our manifolds work
on stacked arrays), and inner products, norms and distances combine the ``k`` items as
pymanopt's do (sums of inner products, the 2-norm of the distances). An array of another
shape raises ``ValueError`` naming the argument and the expected shape.

.. list-table::
   :header-rows: 1
   :widths: 28 30 42

   * - adapter
     - points
     - options (first: the default)
   * - ``Stiefel(n, p, k=1)``
     - ``(n, p)``, ``X'X = I``
     - retraction polar, qr, cayley, exp
   * - ``Grassmann(n, p, k=1)``
     - ``(n, p)``, a basis of the subspace
     - retraction polar, qr, exp; transport projection, parallel
   * - ``Sphere(*shape)``
     - ``shape``, unit norm
     - retraction projection, exp; transport projection, parallel
   * - ``SPD(n, k=1)`` (``SymmetricPositiveDefinite``)
     - ``(n, n)``, symmetric positive definite
     - retraction exp, second_order; transport projection (the identity), parallel
   * - ``Euclidean(*shape)``
     - ``shape``
     - --
   * - ``Lorentz(d, k=1)``
     - ``(d + 1,)``, hyperboloid
     - transport parallel, projection

*Defaults and pymanopt's.* Where pymanopt's solvers read a default, the adapter has pymanopt's,
so a swapped class gives pymanopt's iterates: the sphere retracts by normalizing ``x + u`` and
transports by projection, SPD transports by the identity on symmetric matrices. Elsewhere it
keeps rfl_fast's, which solve the same problems: Stiefel retracts by the polar factor
(pymanopt: QR; ``retraction="qr"`` gives pymanopt's), SPD by the exponential map (pymanopt: the
second-order retraction, ``retraction="second_order"``), and Grassmann's ``exp`` returns the
geodesic's own basis (pymanopt re-orthonormalizes it by QR: another basis of the same
subspace). ``tools/peers/differences.toml`` lists these. Two additions keep long solver runs
exact: sphere and hyperboloid points are put back on the manifold after every ``exp`` and
retraction (pymanopt's solvers never re-project, and the rounding off the manifold grew
geometrically as the gradient vanished: conjugate gradient on S^127 stopped at ``|grad|``
1e-2 with the exponential retraction), and tangent vectors returned on SPD are exactly
symmetric (so trust regions' ``<r, r>`` never goes negative).

pymanopt has no hyperboloid model (only the Poincare ball, ``pymanopt.manifolds.PoincareBall``);
``Lorentz`` is a plain pymanopt ``Manifold`` with the Minkowski metric, its Hessian conversion
``proj_x(J ehess[u] + <x, J egrad>_L u)`` (``J = diag(-1, 1, ..., 1)``, as Manopt's hyperbolic
factory). ``to_poincare`` / ``from_poincare`` map points between the two models. Products:
pymanopt's own ``pymanopt.manifolds.Product([...])`` takes these adapters as factors (its
points are lists of the factors' arrays).

Example (the Rayleigh quotient of a symmetric matrix on the sphere)::

    import numpy as np, pymanopt
    from rfl_fast.interop.pymanopt import Sphere

    A = np.diag([3.0, 2.0, 1.0])
    manifold = Sphere(3)

    @pymanopt.function.numpy(manifold)
    def cost(x): return -x @ A @ x

    @pymanopt.function.numpy(manifold)
    def egrad(x): return -2 * A @ x

    problem = pymanopt.Problem(manifold, cost, euclidean_gradient=egrad)
    x = pymanopt.optimizers.SteepestDescent(verbosity=0).run(problem).point  # +-e_1

Random points and tangent vectors come from NumPy's global generator (``np.random.seed``
reproduces them, as with pymanopt's own manifolds) unless ``rng=`` is given.
"""

import math

import numpy as np

try:
    from pymanopt.manifolds.manifold import Manifold as _PymanoptManifold
except ImportError as exc:  # tests/test_interop_missing.py
    raise ImportError("rfl_fast.interop.pymanopt needs pymanopt (>= 2.2): "
                      "pip install 'rfl_fast[interop]' (or pip install pymanopt)") from exc

from .. import manifolds as _manifolds
from .._validation import check_choice, check_int

__all__ = ["Adapter", "Euclidean", "Grassmann", "Lorentz", "SPD", "Sphere", "Stiefel",
           "SymmetricPositiveDefinite", "from_poincare", "to_poincare", "wrap"]


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


def _hypot(values):
    """``sqrt(sum values^2)`` of non-negative values without overflow, as a float."""
    return float(np.hypot.reduce(np.ravel(values).astype(np.float64)))


class Adapter(_PymanoptManifold):
    """An rfl_fast manifold behind pymanopt's ``Manifold`` interface.

    Parameters
    ----------
    manifold : rfl_fast.manifolds.Manifold
        The manifold whose methods do the work.
    k : int, optional
        Number of points in one pymanopt point (pymanopt's product of ``k`` copies): points of
        shape ``(k, *shape)`` for ``k > 1``, handled in one call of ``manifold``.
    retraction : str, optional
        One of ``manifold.retractions`` (default: the adapter class's, see the module).
    transport : str, optional
        One of ``manifold.transports`` (default: the adapter class's).
    backend : str, optional
        Kernel backend for every call (``"cpp"``, ``"numba"``, ``"numpy"``); default: the one
        in force (``"auto"``, ``rf.backend(...)`` blocks, ``RFL_FAST_BACKEND``).
    typical_dist : float, optional
        Scale used by trust regions for its radii (default: per manifold, as pymanopt's).
    rng : None, int or numpy.random.Generator, optional
        Source of random points and tangent vectors; ``None``: NumPy's global generator.
    shape : tuple of int, optional
        Shape of one point as pymanopt's users see it, when it differs from ``manifold.shape``
        (``Sphere(m, n)``: ``(m, n)`` arrays on ``rf.Sphere(m * n)``); same size.

    Attributes
    ----------
    manifold : rfl_fast.manifolds.Manifold
    k : int
    point_shape : tuple of int
        Shape of every point and tangent vector the adapter takes and returns.

    Subclasses add the Hessian conversion, which depends on the geometry.
    """

    #: Defaults where pymanopt's differ from the first entries of ``manifold.retractions``,
    #: ``manifold.transports``: subclasses set them (see the module).
    default_retraction = None
    default_transport = None

    def __init__(self, manifold, *, k=1, retraction=None, transport=None, backend=None,
                 typical_dist=None, rng=None, shape=None):
        if not isinstance(manifold, _manifolds.Manifold):
            raise TypeError(f"manifold: expected an rfl_fast manifold, got {type(manifold)}")
        self.manifold = manifold
        self.k = check_int(k, "k", min_value=1)
        self.retraction_method = check_choice(
            retraction or self.default_retraction or manifold.retractions[0], "retraction",
            manifold.retractions)
        self.transport_method = check_choice(
            transport or self.default_transport or manifold.transports[0], "transport",
            manifold.transports)
        self.backend = backend
        one = manifold.shape if shape is None else tuple(int(s) for s in shape)
        if math.prod(one) != math.prod(manifold.shape):
            raise ValueError(f"shape: expected {math.prod(manifold.shape)} entries (the size "
                             f"of {manifold!r}), got shape {one}")
        batch = () if self.k == 1 else (self.k,)
        self.point_shape = batch + one
        self._shape = batch + manifold.shape
        dim = self.k * int(manifold.dim)
        self._typical_dist = (math.sqrt(dim) if typical_dist is None else float(typical_dist))
        self._rng = None if rng is None else np.random.default_rng(rng)
        copies = "" if self.k == 1 else f"^{self.k}"
        super().__init__(f"rfl_fast {manifold!r}{copies} ({self.retraction_method} retraction)",
                         dim)

    @property
    def typical_dist(self):
        return self._typical_dist

    def _generator(self):
        if self._rng is not None:
            return self._rng
        return np.random.default_rng(np.random.randint(2**31))  # follows np.random.seed

    # ------------------------------------------------------------------ layout
    def _in(self, a, name):
        """``a`` as our manifold's stacked array (a view), its shape checked."""
        a = np.asarray(a)
        if a.shape != self.point_shape:
            hint = ""
            if self.k == 1 and a.shape[1:] == self.point_shape:
                hint = (f"; a stack of {a.shape[0]} points needs an adapter made with "
                        f"k={a.shape[0]}")
            elif self.k > 1 and a.shape == self.point_shape[1:]:
                hint = f"; this adapter (k={self.k}) takes {self.k} points at once"
            raise ValueError(f"{name}: expected an array of shape {self.point_shape} (a point "
                             f"or tangent vector of {self}), got shape {a.shape}{hint}")
        return a.reshape(self._shape)

    def _out(self, a):
        return np.reshape(a, self.point_shape)

    # ------------------------------------------------------------------ metric
    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        x = self._in(point, "point")
        a = self._in(tangent_vector_a, "tangent_vector_a")
        b = a if tangent_vector_b is tangent_vector_a else self._in(tangent_vector_b,
                                                                    "tangent_vector_b")
        return float(np.sum(self.manifold.inner(x, a, b)))

    def norm(self, point, tangent_vector):
        return _hypot(self.manifold.norm(self._in(point, "point"),
                                         self._in(tangent_vector, "tangent_vector")))

    def dist(self, point_a, point_b):
        return _hypot(self.manifold.dist(self._in(point_a, "point_a"),
                                         self._in(point_b, "point_b")))

    # ------------------------------------------------------------------ tangent vectors
    def projection(self, point, vector):
        return self._out(self.manifold.proj(self._in(point, "point"), self._in(vector, "vector")))

    to_tangent_space = projection

    def euclidean_to_riemannian_gradient(self, point, euclidean_gradient):
        return self._out(self.manifold.egrad2rgrad(
            self._in(point, "point"), self._in(euclidean_gradient, "euclidean_gradient")))

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        return self._out(self._hessian(
            self._in(point, "point"), self._in(euclidean_gradient, "euclidean_gradient"),
            self._in(euclidean_hessian, "euclidean_hessian"),
            self._in(tangent_vector, "tangent_vector")))

    def _hessian(self, x, egrad, ehess, u):
        """The Riemannian Hessian applied to ``u``, on our stacked arrays (per geometry)."""
        raise NotImplementedError(f"{type(self).__name__} provides no Hessian conversion")

    def zero_vector(self, point):
        return self._out(self.manifold.zero_vector(self._in(point, "point")))

    # ------------------------------------------------------------------ maps
    def retraction(self, point, tangent_vector):
        return self._out(self.manifold.retr(
            self._in(point, "point"), self._in(tangent_vector, "tangent_vector"),
            self.retraction_method, backend=self.backend))

    def exp(self, point, tangent_vector):
        return self._out(self.manifold.exp(
            self._in(point, "point"), self._in(tangent_vector, "tangent_vector"),
            backend=self.backend))

    def log(self, point_a, point_b):
        return self._out(self.manifold.log(self._in(point_a, "point_a"),
                                           self._in(point_b, "point_b"), backend=self.backend))

    def pair_mean(self, point_a, point_b):
        """The geodesic midpoint ``Exp_a(Log_a(b) / 2)`` (where Exp and Log exist).

        Parameters
        ----------
        point_a, point_b : ndarray, shape ``point_shape``
            The two points.

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self.exp(point_a, 0.5 * self.log(point_a, point_b))

    def transport(self, point_a, point_b, tangent_vector_a):
        return self._out(self.manifold.transport(
            self._in(point_a, "point_a"), self._in(point_b, "point_b"),
            self._in(tangent_vector_a, "tangent_vector_a"), self.transport_method,
            backend=self.backend))

    # ------------------------------------------------------------------ random
    def random_point(self):
        return self._out(self.manifold.random_point(*self._shape[:1 if self.k > 1 else 0],
                                                    rng=self._generator()))

    def random_tangent_vector(self, point):
        """A random tangent vector at ``point`` of unit norm (all ``k`` items together, as
        pymanopt's).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        x = self._in(point, "point")
        u = self.manifold.tangent_gaussian(x, 1.0, rng=self._generator())
        return self._out(u / _hypot(self.manifold.norm(x, u)))


class Stiefel(Adapter):
    """St(n, p) (points ``(n, p)``, ``(k, n, p)`` for ``k > 1``; embedded metric); retraction
    ``"polar"`` (default; pymanopt's default is ``"qr"``), ``"qr"``, ``"cayley"`` or
    ``"exp"``; no Log/dist (ours has none)."""

    def __init__(self, n, p, *, k=1, retraction=None, backend=None, rng=None):
        super().__init__(_manifolds.Stiefel(n, p), k=k, retraction=retraction,
                         backend=backend, typical_dist=math.sqrt(p * k), rng=rng)

    def _hessian(self, x, egrad, ehess, u):
        """``P_X(ehess) - U X'N - X sym(U'N)`` with ``N = egrad - P_X(egrad)`` (the
        Weingarten map of the embedded Stiefel manifold)."""
        m = self.manifold
        normal = egrad - m.proj(x, egrad, backend=self.backend)
        return m.proj(x, ehess, backend=self.backend) - u @ (_t(x) @ normal) \
            - x @ _sym(_t(u) @ normal)


class Grassmann(Adapter):
    """Gr(n, p) (bases ``(n, p)``, ``(k, n, p)`` for ``k > 1``); retraction ``"polar"``
    (default, as pymanopt's), ``"qr"`` or ``"exp"``; transport ``"projection"`` (default, as
    pymanopt's after a polar step) or ``"parallel"``. ``exp`` returns the geodesic's basis
    (pymanopt's: its QR factor; the same subspace)."""

    def __init__(self, n, p, *, k=1, retraction=None, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.Grassmann(n, p), k=k, retraction=retraction,
                         transport=transport, backend=backend, typical_dist=math.sqrt(p * k),
                         rng=rng)

    def _hessian(self, x, egrad, ehess, u):
        """``P_X(ehess) - U X'egrad``."""
        return self.manifold.proj(x, ehess) - u @ (_t(x) @ egrad)


class Sphere(Adapter):
    """The unit sphere of arrays of shape ``shape`` (``Sphere(d)``: S^(d-1) in R^d;
    ``Sphere(m, n)``: m x n matrices of unit Frobenius norm, as pymanopt's); retraction
    ``"projection"`` (default, as pymanopt's) or ``"exp"``, transport ``"projection"``
    (default, as pymanopt's) or ``"parallel"``. ``k > 1`` (not in pymanopt's sphere) stacks
    ``k`` points."""

    default_retraction = "projection"
    default_transport = "projection"

    def __init__(self, *shape, k=1, retraction=None, transport=None, backend=None, rng=None):
        if not shape:
            raise ValueError("shape: expected the shape of one point, e.g. Sphere(3) or "
                             "Sphere(4, 2), got none")
        size = math.prod(check_int(s, "shape", min_value=1) for s in shape)
        super().__init__(_manifolds.Sphere(size), k=k, retraction=retraction,
                         transport=transport, backend=backend, typical_dist=np.pi, rng=rng,
                         shape=shape)

    def pair_mean(self, point_a, point_b):
        return self._out(self.manifold.project(self._in(point_a, "point_a")
                                               + self._in(point_b, "point_b")))

    def retraction(self, point, tangent_vector):
        """The retraction, its result normalized: pymanopt's solvers never re-project, and
        rounding off the sphere grows geometrically once the gradient is small against the
        Euclidean one (the projection ``u - <x,u>x`` assumes ``|x| = 1``): 1e-15 to 3e-10 in
        45 steepest-descent steps with ``"exp"`` on S^14. Manopt normalizes its exponential
        map the same way.

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self._out(self.manifold.project(self._in(super().retraction(
            point, tangent_vector), "point")))

    def exp(self, point, tangent_vector):
        """The exponential map, its result normalized (see :meth:`retraction`).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        return self._out(self.manifold.project(self._in(super().exp(point, tangent_vector),
                                                        "point")))

    def _hessian(self, x, egrad, ehess, u):
        """``P_x(ehess) - <x, egrad> u``."""
        return self.manifold.proj(x, ehess) - np.sum(x * egrad, axis=-1, keepdims=True) * u


class SPD(Adapter):
    """SPD matrices (points ``(n, n)``, ``(k, n, n)`` for ``k > 1``) with the affine-invariant
    metric; retraction ``"exp"`` (default; pymanopt's default is ``"second_order"``) or
    ``"second_order"``, transport ``"projection"`` (default: the identity on symmetric
    matrices, as pymanopt's) or ``"parallel"``. Returned tangent vectors are exactly
    symmetric."""

    default_transport = "projection"

    def __init__(self, n, *, k=1, retraction=None, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.SPD(n), k=k, retraction=retraction, transport=transport,
                         backend=backend, rng=rng)

    def euclidean_to_riemannian_gradient(self, point, euclidean_gradient):
        return _sym(super().euclidean_to_riemannian_gradient(point, euclidean_gradient))

    def transport(self, point_a, point_b, tangent_vector_a):
        return _sym(super().transport(point_a, point_b, tangent_vector_a))

    def log(self, point_a, point_b):
        return _sym(super().log(point_a, point_b))

    def _hessian(self, x, egrad, ehess, u):
        """``X sym(ehess) X + sym(U sym(egrad) X)``, symmetrized exactly: trust regions'
        residuals near the optimum are sums of such vectors, and a rounding-level antisymmetric
        part would make ``tr(X^-1 R X^-1 R)`` negative (a NaN norm)."""
        return _sym(x @ _sym(ehess) @ x + u @ _sym(egrad) @ x)


#: pymanopt's name for :class:`SPD`.
SymmetricPositiveDefinite = SPD


class Euclidean(Adapter):
    """Flat space of arrays of shape ``shape``."""

    def __init__(self, *shape, rng=None):
        super().__init__(_manifolds.Euclidean(*shape), rng=rng)

    def _hessian(self, x, egrad, ehess, u):
        return ehess


class Lorentz(Adapter):
    """Hyperbolic space H^d in the hyperboloid model (points ``(d + 1,)``, ``(k, d + 1)`` for
    ``k > 1``, ``<x,x>_L = -1``); retraction ``"exp"``, transport ``"parallel"`` (default) or
    ``"projection"``."""

    def __init__(self, d, *, k=1, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.Lorentz(d), k=k, transport=transport, backend=backend,
                         typical_dist=k * d / 8, rng=rng)  # pymanopt's PoincareBall: dim / 8

    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        """Minkowski product; ``<u, u>`` as ``norm(x, u)^2``, a sum of non-negative terms: the
        Minkowski form of a rounding-noise residual (trust regions, near the optimum) can be
        negative and give a NaN norm.

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector_a, tangent_vector_b : ndarray, shape ``point_shape``

        Returns
        -------
        float
        """
        if tangent_vector_a is tangent_vector_b:
            return self.norm(point, tangent_vector_a) ** 2
        return super().inner_product(point, tangent_vector_a, tangent_vector_b)

    def exp(self, point, tangent_vector):
        """The exponential map, its result put back on the hyperboloid (``x_0 = sqrt(1 +
        |x_r|^2)``): pymanopt's solvers never re-project, and rounding off the hyperboloid
        grows geometrically once the gradient is small (1e-15 to 1.5e-11 in a steepest-descent
        Frechet mean on H^2).

        Parameters
        ----------
        point : ndarray, shape ``point_shape``
        tangent_vector : ndarray, shape ``point_shape``

        Returns
        -------
        ndarray, shape ``point_shape``
        """
        y = super().exp(point, tangent_vector)
        spatial = y[..., 1:]
        return np.concatenate([np.sqrt(1.0 + np.sum(spatial * spatial, axis=-1,
                                                    keepdims=True)), spatial], axis=-1)

    def retraction(self, point, tangent_vector):
        return self.exp(point, tangent_vector)   # the only retraction: "exp"

    def _hessian(self, x, egrad, ehess, u):
        """``proj_x(J ehess + <x, J egrad>_L u)``, ``J = diag(-1, 1, ..., 1)``."""
        j_grad = np.concatenate([-egrad[..., :1], egrad[..., 1:]], -1)
        j_hess = np.concatenate([-ehess[..., :1], ehess[..., 1:]], -1)
        x_j_grad = (np.sum(x[..., 1:] * j_grad[..., 1:], axis=-1, keepdims=True)
                    - x[..., :1] * j_grad[..., :1])
        return self.manifold.proj(x, j_hess + x_j_grad * u)


def to_poincare(x):
    """Hyperboloid points ``(..., d + 1)`` to the Poincare ball ``(..., d)``:
    ``x_r / (1 + x_0)``.

    Parameters
    ----------
    x : array_like, shape (..., d + 1)

    Returns
    -------
    ndarray, shape (..., d)
    """
    x = np.asarray(x, dtype=float)
    return x[..., 1:] / (1.0 + x[..., :1])


def from_poincare(b):
    """Poincare-ball points ``(..., d)`` (``|b| < 1``) to the hyperboloid ``(..., d + 1)``:
    ``((1 + |b|^2), 2 b) / (1 - |b|^2)``.

    Parameters
    ----------
    b : array_like, shape (..., d)

    Returns
    -------
    ndarray, shape (..., d + 1)
    """
    b = np.asarray(b, dtype=float)
    sq = np.sum(b * b, axis=-1, keepdims=True)
    if (sq >= 1).any():
        raise ValueError("b: expected points of the open unit ball (|b| < 1)")
    return np.concatenate([1.0 + sq, 2.0 * b], axis=-1) / (1.0 - sq)


_ADAPTERS = {
    _manifolds.Stiefel: lambda m, kw: Stiefel(*m.shape, **kw),
    _manifolds.Grassmann: lambda m, kw: Grassmann(*m.shape, **kw),
    _manifolds.Sphere: lambda m, kw: Sphere(*m.shape, **kw),
    _manifolds.SPD: lambda m, kw: SPD(m.shape[0], **kw),
    _manifolds.Euclidean: lambda m, kw: Euclidean(*m.shape, **kw),
    _manifolds.Lorentz: lambda m, kw: Lorentz(m.dim, **kw),
}


def wrap(manifold, **options):
    """The pymanopt adapter of an rfl_fast manifold instance, e.g. ``wrap(rf.Stiefel(784, 5),
    retraction="qr")``.

    Parameters
    ----------
    manifold : rfl_fast.manifolds.Manifold
        A :class:`~rfl_fast.manifolds.Stiefel`, :class:`~rfl_fast.manifolds.Grassmann`, :class:`~rfl_fast.manifolds.Sphere`,
        :class:`~rfl_fast.manifolds.SPD`, :class:`~rfl_fast.manifolds.Euclidean` or :class:`~rfl_fast.manifolds.Lorentz`
        (for a :class:`~rfl_fast.manifolds.Product`, wrap its factors and pass them to pymanopt's
        ``Product``).
    **options
        As for the adapter's class (``k``, ``retraction``, ``transport``, ``backend``,
        ``rng``).

    Returns
    -------
    Adapter
    """
    make = _ADAPTERS.get(type(manifold))
    if make is None:
        hint = (" (wrap its factors and pass them to pymanopt.manifolds.Product)"
                if isinstance(manifold, _manifolds.Product) else "")
        raise TypeError(f"manifold: expected one of {[c.__name__ for c in _ADAPTERS]} "
                        f"from rfl_fast.manifolds, got {type(manifold).__name__}{hint}")
    adapter = make(manifold, options)
    adapter.manifold = manifold  # the instance itself: keeps its settings (validate=...)
    return adapter
