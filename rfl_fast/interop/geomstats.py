"""rfl_fast's SPD, hyperboloid and sphere maps behind geomstats' metric interface.

geomstats' learning tools (``FrechetMean``, ``TangentPCA``, ...) take a space equipped with a
metric and call its ``exp``, ``log``, ``dist``, ``inner_product`` and ``parallel_transport``.
The metrics here are subclasses of geomstats' own (``SPDAffineMetric``, ``HyperboloidMetric``,
``HypersphereMetric``) whose maps are the methods of :class:`rfl_fast.SPD`,
:class:`rfl_fast.Lorentz` and :class:`rfl_fast.Sphere` (the compiled kernels); whatever they do
not override is geomstats' own. ``spd_matrices(n)``, ``hyperboloid(dim)`` and
``hypersphere(dim)`` return geomstats spaces equipped with them::

    from rfl_fast.interop.geomstats import spd_matrices   # first: it imports geomstats
    from geomstats.learning.frechet_mean import FrechetMean

    space = spd_matrices(3)
    points = space.random_point(10)
    mean = FrechetMean(space).fit(points).estimate_

Dimensions follow geomstats: ``hypersphere(dim)`` is S^dim in R^(dim+1) (``rf.Sphere(dim + 1)``),
``hyperboloid(dim)`` is H^dim in R^(dim+1) (``rf.Lorentz(dim)``, the same model: ``x0 > 0``,
``-x0^2 + |x_r|^2 = -1``). Only geomstats' NumPy backend is supported (the default;
``GEOMSTATS_BACKEND=numpy``): our kernels take NumPy arrays.

Supported versions: geomstats 2.8 imports ``numpy.trapz``, which NumPy 2.4 removed (it is
``numpy.trapezoid`` since NumPy 2.0). When NumPy has no ``trapz``, this module imports geomstats
with ``numpy.trapz = numpy.trapezoid`` set for the duration of that import only (geomstats binds
the function at import) and removes it again: NumPy is left as it was. So on NumPy >= 2.4
import this module before anything from geomstats (a plain ``import geomstats`` fails there).
Tested with geomstats 2.8.0 on NumPy 2.4.
"""

import contextlib
import warnings

import numpy as np

from .. import manifolds as _manifolds


@contextlib.contextmanager
def _importing_geomstats():
    """Inside the block: ``numpy.trapz`` as ``numpy.trapezoid`` if NumPy lacks it, and the
    ImportWarning of geomstats' backend loader (it has no ``exec_module``) silenced; both undone
    on leaving."""
    added = not hasattr(np, "trapz") and hasattr(np, "trapezoid")
    if added:
        np.trapz = np.trapezoid
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"BackendImporter\.exec_module", ImportWarning)
            yield
    finally:
        if added:
            del np.trapz


try:
    with _importing_geomstats():
        import geomstats.backend as _gs  # noqa: F401  (selects and loads the backend)
        from geomstats._backend import BACKEND_NAME as _BACKEND_NAME
        from geomstats.geometry import hyperboloid as _gs_hyperboloid
        from geomstats.geometry import hypersphere as _gs_hypersphere
        from geomstats.geometry import spd_matrices as _gs_spd
except ImportError as exc:
    raise ImportError(f"rfl_fast.interop.geomstats needs geomstats (tested with 2.8.0): "
                      f"pip install 'rfl_fast[interop]' (or pip install geomstats); importing "
                      f"it failed with: {exc}") from exc
if _BACKEND_NAME != "numpy":
    raise ImportError(f"rfl_fast.interop.geomstats works with geomstats' numpy backend only "
                      f"(our kernels take NumPy arrays); GEOMSTATS_BACKEND is {_BACKEND_NAME!r}")

__all__ = ["HyperboloidMetric", "HypersphereMetric", "SPDAffineMetric", "hyperboloid",
           "hypersphere", "spd_matrices"]


class _Maps:
    """The maps shared by the three metrics: geomstats' argument order (tangent vector or
    point first, base point last) mapped to ours (base point first). ``self._rfl`` is the
    rfl_fast manifold (from the subclass's ``_manifold_of(space)``), ``self.backend`` the kernel
    backend (None: the one in force)."""

    def __init__(self, space, backend=None):
        super().__init__(space)
        self._rfl = self._manifold_of(space)
        self.backend = backend

    def exp(self, tangent_vec, base_point):
        return self._rfl.exp(base_point, tangent_vec, backend=self.backend)

    def log(self, point, base_point):
        return self._rfl.log(base_point, point, backend=self.backend)

    def dist(self, point_a, point_b):
        return self._rfl.dist(point_a, point_b, backend=self.backend)

    def squared_dist(self, point_a, point_b):
        return self.dist(point_a, point_b) ** 2

    def inner_product(self, tangent_vec_a, tangent_vec_b, base_point=None):
        if base_point is None:  # geomstats allows it for the embedded metrics
            return super().inner_product(tangent_vec_a, tangent_vec_b, base_point)
        return self._rfl.inner(base_point, tangent_vec_a, tangent_vec_b)

    def squared_norm(self, vector, base_point=None):
        if base_point is None:
            return super().squared_norm(vector, base_point)
        return self._rfl.norm(base_point, vector) ** 2

    def parallel_transport(self, tangent_vec, base_point, direction=None, end_point=None):
        if end_point is None:
            if direction is None:
                raise ValueError("direction, end_point: expected one of them, got neither")
            end_point = self.exp(direction, base_point)
        return self._rfl.transport(base_point, end_point, tangent_vec, "parallel",
                                   backend=self.backend)


class SPDAffineMetric(_Maps, _gs_spd.SPDAffineMetric):
    """geomstats' affine-invariant SPD metric computed by :class:`rfl_fast.SPD`; points
    ``(..., n, n)``. ``backend``: kernel backend (default: the one in force)."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.SPD(space.n)


class HyperboloidMetric(_Maps, _gs_hyperboloid.HyperboloidMetric):
    """geomstats' hyperboloid metric computed by :class:`rfl_fast.Lorentz`; points
    ``(..., dim + 1)``."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.Lorentz(space.dim)


class HypersphereMetric(_Maps, _gs_hypersphere.HypersphereMetric):
    """geomstats' hypersphere metric computed by :class:`rfl_fast.Sphere`; points
    ``(..., dim + 1)``."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.Sphere(space.dim + 1)


def spd_matrices(n, *, backend=None):
    """geomstats' ``SPDMatrices(n)`` equipped with :class:`SPDAffineMetric`."""
    return _gs_spd.SPDMatrices(n, equip=False).equip_with_metric(SPDAffineMetric,
                                                                 backend=backend)


def hyperboloid(dim, *, backend=None):
    """geomstats' ``Hyperboloid(dim)`` (H^dim in R^(dim+1)) equipped with
    :class:`HyperboloidMetric`."""
    return _gs_hyperboloid.Hyperboloid(dim, equip=False).equip_with_metric(HyperboloidMetric,
                                                                           backend=backend)


def hypersphere(dim, *, backend=None):
    """geomstats' ``Hypersphere(dim)`` (S^dim in R^(dim+1)) equipped with
    :class:`HypersphereMetric`."""
    return _gs_hypersphere.Hypersphere(dim, equip=False).equip_with_metric(HypersphereMetric,
                                                                           backend=backend)
