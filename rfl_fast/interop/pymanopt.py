"""rfl_fast manifolds as pymanopt manifolds: pymanopt's solvers on our kernels.

pymanopt's optimizers (``SteepestDescent``, ``ConjugateGradient``, ``TrustRegions``, ...) need a
``pymanopt.manifolds.manifold.Manifold`` instance. The classes here are such manifolds; every
operation pymanopt calls (retraction, projection, inner product, transport, Exp/Log/dist,
random points) is the method of the wrapped :mod:`rfl_fast.manifolds` manifold, so it runs on
the compiled kernels the backend in force chooses (``"auto"``, or ``backend=`` here). The
gradient and Hessian conversions (``euclidean_to_riemannian_gradient`` and ``..._hessian``, the
latter for trust regions) are written out per manifold from our projections.

========================  ===================================  ====================================
adapter                   points                               options (first is the default)
========================  ===================================  ====================================
``Stiefel(n, p)``         ``(n, p)``, ``X'X = I``              retraction polar, qr, cayley, exp
``Sphere(d)``             ``(d,)``, unit norm                  retraction exp, projection;
                                                               transport parallel, projection
``SPD(n)``                ``(n, n)``, affine-invariant metric  retraction exp, second_order;
                                                               transport parallel, projection
``Euclidean(*shape)``     ``shape``                            --
``Lorentz(d)``            ``(d + 1,)``, hyperboloid model      transport parallel, projection
========================  ===================================  ====================================

pymanopt has no hyperboloid model (only the Poincare ball, ``pymanopt.manifolds.PoincareBall``);
``Lorentz`` is a plain pymanopt ``Manifold`` with the Minkowski metric, its Hessian conversion
``proj_x(J ehess[u] + <x, J egrad>_L u)`` (``J = diag(-1, 1, ..., 1)``, as Manopt's hyperbolic
factory). ``to_poincare`` / ``from_poincare`` map points between the two models.

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

import numpy as np

try:
    from pymanopt.manifolds.manifold import Manifold as _PymanoptManifold
except ImportError as exc:  # tests/test_interop_missing.py
    raise ImportError("rfl_fast.interop.pymanopt needs pymanopt (>= 2.2): "
                      "pip install 'rfl_fast[interop]' (or pip install pymanopt)") from exc

from .. import manifolds as _manifolds
from .._validation import check_choice

__all__ = ["Adapter", "Euclidean", "Lorentz", "SPD", "Sphere", "Stiefel", "from_poincare",
           "to_poincare", "wrap"]


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


class Adapter(_PymanoptManifold):
    """An rfl_fast manifold behind pymanopt's ``Manifold`` interface.

    Parameters
    ----------
    manifold : rfl_fast.manifolds.Manifold
        The manifold whose methods do the work (one point, no batch axes).
    retraction : str, optional
        One of ``manifold.retractions`` (default: its first).
    transport : str, optional
        One of ``manifold.transports`` (default: its first).
    backend : str, optional
        Kernel backend for every call (``"cpp"``, ``"numba"``, ``"numpy"``); default: the one
        in force (``"auto"``, ``rf.backend(...)`` blocks, ``RFL_FAST_BACKEND``).
    typical_dist : float, optional
        Scale used by trust regions for its radii (default: per manifold, as pymanopt's).
    rng : None, int or numpy.random.Generator, optional
        Source of random points and tangent vectors; ``None``: NumPy's global generator.

    Subclasses add the Hessian conversion, which depends on the geometry.
    """

    def __init__(self, manifold, *, retraction=None, transport=None, backend=None,
                 typical_dist=None, rng=None):
        if not isinstance(manifold, _manifolds.Manifold):
            raise TypeError(f"manifold: expected an rfl_fast manifold, got {type(manifold)}")
        self.manifold = manifold
        self.retraction_method = (manifold.retractions[0] if retraction is None else
                                  check_choice(retraction, "retraction", manifold.retractions))
        self.transport_method = (manifold.transports[0] if transport is None else
                                 check_choice(transport, "transport", manifold.transports))
        self.backend = backend
        self._typical_dist = (float(np.sqrt(manifold.dim)) if typical_dist is None
                              else float(typical_dist))
        self._rng = None if rng is None else np.random.default_rng(rng)
        super().__init__(f"rfl_fast {manifold!r} ({self.retraction_method} retraction)",
                         int(manifold.dim))

    @property
    def typical_dist(self):
        return self._typical_dist

    def _generator(self):
        if self._rng is not None:
            return self._rng
        return np.random.default_rng(np.random.randint(2**31))  # follows np.random.seed

    # ------------------------------------------------------------------ metric
    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        return float(self.manifold.inner(point, tangent_vector_a, tangent_vector_b))

    def norm(self, point, tangent_vector):
        return float(self.manifold.norm(point, tangent_vector))

    def dist(self, point_a, point_b):
        return float(self.manifold.dist(point_a, point_b))

    # ------------------------------------------------------------------ tangent vectors
    def projection(self, point, vector):
        return self.manifold.proj(point, vector)

    to_tangent_space = projection

    def euclidean_to_riemannian_gradient(self, point, euclidean_gradient):
        return self.manifold.egrad2rgrad(point, euclidean_gradient)

    def zero_vector(self, point):
        return self.manifold.zero_vector(point)

    # ------------------------------------------------------------------ maps
    def retraction(self, point, tangent_vector):
        return self.manifold.retr(point, tangent_vector, self.retraction_method,
                                  backend=self.backend)

    def exp(self, point, tangent_vector):
        return self.manifold.exp(point, tangent_vector, backend=self.backend)

    def log(self, point_a, point_b):
        return self.manifold.log(point_a, point_b, backend=self.backend)

    def pair_mean(self, point_a, point_b):
        """The geodesic midpoint ``Exp_a(Log_a(b) / 2)`` (where Exp and Log exist)."""
        return self.exp(point_a, 0.5 * self.log(point_a, point_b))

    def transport(self, point_a, point_b, tangent_vector_a):
        return self.manifold.transport(point_a, point_b, tangent_vector_a,
                                       self.transport_method, backend=self.backend)

    # ------------------------------------------------------------------ random
    def random_point(self):
        return self.manifold.random_point(rng=self._generator())

    def random_tangent_vector(self, point):
        return self.manifold.random_tangent(point, rng=self._generator())


class Stiefel(Adapter):
    """St(n, p) (points ``(n, p)``, embedded metric); retraction ``"polar"`` (default),
    ``"qr"``, ``"cayley"`` or ``"exp"``; no Log/dist (ours has none)."""

    def __init__(self, n, p, *, retraction=None, backend=None, rng=None):
        super().__init__(_manifolds.Stiefel(n, p), retraction=retraction, backend=backend,
                         typical_dist=np.sqrt(p), rng=rng)

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        """``P_X(ehess) - U X'N - X sym(U'N)`` with ``N = egrad - P_X(egrad)`` (the
        Weingarten map of the embedded Stiefel manifold)."""
        m, x, u = self.manifold, point, tangent_vector
        normal = euclidean_gradient - m.proj(x, euclidean_gradient, backend=self.backend)
        return (m.proj(x, euclidean_hessian, backend=self.backend)
                - u @ (_t(x) @ normal) - x @ _sym(_t(u) @ normal))


class Sphere(Adapter):
    """The unit sphere S^(d-1) (points ``(d,)``); retraction ``"exp"`` (default) or
    ``"projection"``, transport ``"parallel"`` (default) or ``"projection"``."""

    def __init__(self, d, *, retraction=None, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.Sphere(d), retraction=retraction, transport=transport,
                         backend=backend, typical_dist=np.pi, rng=rng)

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        """``P_x(ehess) - <x, egrad> u``."""
        return (self.manifold.proj(point, euclidean_hessian)
                - np.dot(point, euclidean_gradient) * tangent_vector)


class SPD(Adapter):
    """SPD matrices (points ``(n, n)``) with the affine-invariant metric; retraction ``"exp"``
    (default) or ``"second_order"``, transport ``"parallel"`` (default) or ``"projection"``."""

    def __init__(self, n, *, retraction=None, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.SPD(n), retraction=retraction, transport=transport,
                         backend=backend, rng=rng)

    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        """``tr(X^-1 sym(U) X^-1 sym(V))``: trust regions' residuals near the optimum are
        rounding noise with an antisymmetric part as large as the rest, where the unsymmetrized
        form can give ``<r, r> < 0`` (and a NaN norm)."""
        a = _sym(tangent_vector_a)
        b = a if tangent_vector_b is tangent_vector_a else _sym(tangent_vector_b)
        return super().inner_product(point, a, b)

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        """``X sym(ehess) X + sym(U sym(egrad) X)``."""
        x = point
        return x @ _sym(euclidean_hessian) @ x + _sym(tangent_vector @ _sym(euclidean_gradient)
                                                      @ x)


class Euclidean(Adapter):
    """Flat space of arrays of shape ``shape``."""

    def __init__(self, *shape, rng=None):
        super().__init__(_manifolds.Euclidean(*shape), rng=rng)

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        return euclidean_hessian


class Lorentz(Adapter):
    """Hyperbolic space H^d in the hyperboloid model (points ``(d + 1,)``, ``<x,x>_L = -1``);
    retraction ``"exp"``, transport ``"parallel"`` (default) or ``"projection"``."""

    def __init__(self, d, *, transport=None, backend=None, rng=None):
        super().__init__(_manifolds.Lorentz(d), transport=transport, backend=backend,
                         typical_dist=d / 8, rng=rng)  # pymanopt's PoincareBall uses dim / 8

    def inner_product(self, point, tangent_vector_a, tangent_vector_b):
        """Minkowski product; ``<u, u>`` as ``norm(x, u)^2``, a sum of non-negative terms: the
        Minkowski form of a rounding-noise residual (trust regions, near the optimum) can be
        negative and give a NaN norm."""
        if tangent_vector_a is tangent_vector_b:
            return self.norm(point, tangent_vector_a) ** 2
        return super().inner_product(point, tangent_vector_a, tangent_vector_b)

    def euclidean_to_riemannian_hessian(self, point, euclidean_gradient, euclidean_hessian,
                                        tangent_vector):
        """``proj_x(J ehess + <x, J egrad>_L u)``, ``J = diag(-1, 1, ..., 1)``."""
        j_grad = np.concatenate([-euclidean_gradient[..., :1], euclidean_gradient[..., 1:]], -1)
        j_hess = np.concatenate([-euclidean_hessian[..., :1], euclidean_hessian[..., 1:]], -1)
        x_j_grad = np.dot(point[1:], j_grad[1:]) - point[0] * j_grad[0]
        return self.manifold.proj(point, j_hess + x_j_grad * tangent_vector)


def to_poincare(x):
    """Hyperboloid points ``(..., d + 1)`` to the Poincare ball ``(..., d)``:
    ``x_r / (1 + x_0)``."""
    x = np.asarray(x, dtype=float)
    return x[..., 1:] / (1.0 + x[..., :1])


def from_poincare(b):
    """Poincare-ball points ``(..., d)`` (``|b| < 1``) to the hyperboloid ``(..., d + 1)``:
    ``((1 + |b|^2), 2 b) / (1 - |b|^2)``."""
    b = np.asarray(b, dtype=float)
    sq = np.sum(b * b, axis=-1, keepdims=True)
    if (sq >= 1).any():
        raise ValueError("b: expected points of the open unit ball (|b| < 1)")
    return np.concatenate([1.0 + sq, 2.0 * b], axis=-1) / (1.0 - sq)


_ADAPTERS = {
    _manifolds.Stiefel: lambda m, kw: Stiefel(*m.shape, **kw),
    _manifolds.Sphere: lambda m, kw: Sphere(*m.shape, **kw),
    _manifolds.SPD: lambda m, kw: SPD(m.shape[0], **kw),
    _manifolds.Euclidean: lambda m, kw: Euclidean(*m.shape, **kw),
    _manifolds.Lorentz: lambda m, kw: Lorentz(m.dim, **kw),
}


def wrap(manifold, **options):
    """The pymanopt adapter of an rfl_fast manifold instance, e.g. ``wrap(rf.Stiefel(784, 5),
    retraction="qr")``; ``options`` as for the adapter's class."""
    make = _ADAPTERS.get(type(manifold))
    if make is None:
        raise TypeError(f"manifold: expected one of {[c.__name__ for c in _ADAPTERS]} "
                        f"from rfl_fast.manifolds, got {type(manifold).__name__}")
    adapter = make(manifold, options)
    adapter.manifold = manifold  # the instance itself: keeps its settings (validate=...)
    return adapter
