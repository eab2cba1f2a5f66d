"""rfl_fast's maps behind geomstats' metric interface.

geomstats' learning tools (``FrechetMean``, ``TangentPCA``, ...) take a space equipped with a
metric and call its ``exp``, ``log``, ``dist``, ``inner_product`` and ``parallel_transport``.
The metrics here are subclasses of geomstats' own whose maps are the methods of rfl_fast's
manifolds (the compiled kernels); whatever they do not override is geomstats' own:

.. list-table::
   :header-rows: 1
   :widths: 30 25 45

   * - geomstats metric
     - rfl_fast
     - maps on our kernels
   * - ``SPDAffineMetric``
     - :class:`~rfl_fast.manifolds.SPD`
     - exp, log, dist, inner product, parallel transport
   * - ``HyperboloidMetric``
     - :class:`~rfl_fast.manifolds.Lorentz`
     - the same
   * - ``HypersphereMetric``
     - :class:`~rfl_fast.manifolds.Sphere`
     - the same
   * - ``GrassmannianCanonicalMetric``
     - :class:`~rfl_fast.manifolds.Grassmann`
     - exp, log, dist, parallel transport (on projectors)
   * - ``StiefelCanonicalMetric``
     - :class:`~rfl_fast.manifolds.Stiefel`
     - QR retraction and its inverse ``lifting``

geomstats' Grassmannian stores a subspace as its projector ``P = XX'`` (n x n) and a tangent
vector as the symmetric ``V = XH' + HX'``; the metric converts (``X`` from the eigenvectors of
``P``, ``H = VX``) and back, and its distance is geomstats' (``sqrt(2)`` times the norm of the
principal angles: the Frobenius norm of ``V``). The canonical metric of the Stiefel manifold
is not rfl_fast's (the embedded one), so its ``exp``/``log`` stay geomstats'; the QR retraction
and its exact inverse are metric-free and run on our kernels. ``spd_matrices(n)``,
``hyperboloid(dim)``, ``hypersphere(dim)``, ``grassmannian(n, p)`` and ``stiefel(n, p)`` return
geomstats spaces equipped with them::

    from rfl_fast.interop.geomstats import spd_matrices   # first: it imports geomstats
    from geomstats.learning.frechet_mean import FrechetMean

    space = spd_matrices(3)
    points = space.random_point(10)
    mean = FrechetMean(space).fit(points).estimate_

Dimensions follow geomstats: ``hypersphere(dim)`` is S^dim in R^(dim+1) (``rf.Sphere(dim + 1)``),
``hyperboloid(dim)`` is H^dim in R^(dim+1) (``rf.Lorentz(dim)``, the same model: ``x0 > 0``,
``-x0^2 + |x_r|^2 = -1``). A metric builds its rfl_fast manifold from the space when it is
first used, so it works whatever order geomstats equips a space in (``SPDMatrices`` sets ``n``
only after equipping its default metric). A hypersphere in intrinsic coordinates (geomstats'
``intrinsic=True``) keeps geomstats' maps. Only geomstats' NumPy backend is supported (the
default; ``GEOMSTATS_BACKEND=numpy``): our kernels take NumPy arrays.

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
        from geomstats.geometry import grassmannian as _gs_grassmannian
        from geomstats.geometry import hyperboloid as _gs_hyperboloid
        from geomstats.geometry import hypersphere as _gs_hypersphere
        from geomstats.geometry import spd_matrices as _gs_spd
        from geomstats.geometry import stiefel as _gs_stiefel
except ImportError as exc:
    raise ImportError(f"rfl_fast.interop.geomstats needs geomstats (tested with 2.8.0): "
                      f"pip install 'rfl_fast[interop]' (or pip install geomstats); importing "
                      f"it failed with: {exc}") from exc
if _BACKEND_NAME != "numpy":
    raise ImportError(f"rfl_fast.interop.geomstats works with geomstats' numpy backend only "
                      f"(our kernels take NumPy arrays); GEOMSTATS_BACKEND is {_BACKEND_NAME!r}")

__all__ = ["GrassmannianCanonicalMetric", "HyperboloidMetric", "HypersphereMetric",
           "SPDAffineMetric", "StiefelCanonicalMetric", "grassmannian", "hyperboloid",
           "hypersphere", "spd_matrices", "stiefel"]


def _t(a):
    return np.swapaxes(a, -1, -2)


class _Lazy:
    """The rfl_fast manifold of the metric's space, built on first use (``_manifold_of(space)``
    of the subclass): geomstats may equip a space before it has set the attributes that
    define it. ``self.backend``: the kernel backend (None: the one in force)."""

    def __init__(self, space, backend=None):
        super().__init__(space)
        self.backend = backend
        self._built = None

    @property
    def _rfl(self):
        if self._built is None:
            self._built = (self._manifold_of(self._space),)
        return self._built[0]

    @_rfl.setter
    def _rfl(self, manifold):   # an instance of the manifold's class, e.g. one that counts
        self._built = (manifold,)


class _Maps(_Lazy):
    """The maps shared by the embedded metrics: geomstats' argument order (tangent vector or
    point first, base point last) mapped to ours (base point first). Where the subclass has
    no rfl_fast manifold for the space (``_manifold_of`` returns None), geomstats' maps."""

    def exp(self, tangent_vec, base_point):
        if self._rfl is None:
            return super().exp(tangent_vec, base_point)
        return self._rfl.exp(base_point, tangent_vec, backend=self.backend)

    def log(self, point, base_point):
        if self._rfl is None:
            return super().log(point, base_point)
        return self._rfl.log(base_point, point, backend=self.backend)

    def dist(self, point_a, point_b):
        if self._rfl is None:
            return super().dist(point_a, point_b)
        return self._rfl.dist(point_a, point_b, backend=self.backend)

    def squared_dist(self, point_a, point_b):
        if self._rfl is None:
            return super().squared_dist(point_a, point_b)
        return self.dist(point_a, point_b) ** 2

    def inner_product(self, tangent_vec_a, tangent_vec_b, base_point=None):
        if base_point is None or self._rfl is None:  # geomstats allows no base point here
            return super().inner_product(tangent_vec_a, tangent_vec_b, base_point)
        return self._rfl.inner(base_point, tangent_vec_a, tangent_vec_b)

    def squared_norm(self, vector, base_point=None):
        if base_point is None or self._rfl is None:
            return super().squared_norm(vector, base_point)
        return self._rfl.norm(base_point, vector) ** 2

    def parallel_transport(self, tangent_vec, base_point, direction=None, end_point=None):
        if self._rfl is None:
            return super().parallel_transport(tangent_vec, base_point, direction, end_point)
        if end_point is None:
            if direction is None:
                raise ValueError("direction, end_point: expected one of them, got neither")
            end_point = self.exp(direction, base_point)
        return self._rfl.transport(base_point, end_point, tangent_vec, "parallel",
                                   backend=self.backend)


class SPDAffineMetric(_Maps, _gs_spd.SPDAffineMetric):
    """geomstats' affine-invariant SPD metric computed by :class:`rfl_fast.manifolds.SPD`; points
    ``(..., n, n)``. ``backend``: kernel backend (default: the one in force)."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.SPD(space.n)


class HyperboloidMetric(_Maps, _gs_hyperboloid.HyperboloidMetric):
    """geomstats' hyperboloid metric computed by :class:`rfl_fast.manifolds.Lorentz`; points
    ``(..., dim + 1)``."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.Lorentz(space.dim)


class HypersphereMetric(_Maps, _gs_hypersphere.HypersphereMetric):
    """geomstats' hypersphere metric computed by :class:`rfl_fast.manifolds.Sphere`; points
    ``(..., dim + 1)`` (a sphere in intrinsic coordinates keeps geomstats' maps)."""

    @staticmethod
    def _manifold_of(space):
        if space.shape != (space.dim + 1,):       # intrinsic coordinates (angles)
            return None
        return _manifolds.Sphere(space.dim + 1)


class GrassmannianCanonicalMetric(_Lazy, _gs_grassmannian.GrassmannianCanonicalMetric):
    """geomstats' Grassmannian metric computed by :class:`rfl_fast.manifolds.Grassmann`; points are
    projectors ``(..., n, n)``, tangent vectors symmetric ``(..., n, n)`` (geomstats' layout),
    converted to bases ``X`` and horizontal lifts ``H = V X`` for our maps and back."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.Grassmann(space.n, space.p)

    def _basis(self, projector):
        """An orthonormal basis ``(..., n, p)`` of the range of each projector."""
        return np.linalg.eigh(np.asarray(projector, dtype=np.float64))[1][..., -self._space.p:]

    @staticmethod
    def _vector(x, h):
        """The symmetric ``XH' + HX'`` of geomstats' layout."""
        xh = x @ _t(h)
        return xh + _t(xh)

    def exp(self, tangent_vec, base_point):
        x = self._basis(base_point)
        y = self._rfl.exp(x, np.asarray(tangent_vec) @ x, backend=self.backend)
        return y @ _t(y)

    def log(self, point, base_point):
        x = self._basis(base_point)
        return self._vector(x, self._rfl.log(x, self._basis(point), backend=self.backend))

    def dist(self, point_a, point_b):
        return np.sqrt(2.0) * self._rfl.dist(self._basis(point_a), self._basis(point_b))

    def squared_dist(self, point_a, point_b):
        return self.dist(point_a, point_b) ** 2

    def parallel_transport(self, tangent_vec, base_point, direction=None, end_point=None):
        x = self._basis(base_point)
        if end_point is None:
            if direction is None:
                raise ValueError("direction, end_point: expected one of them, got neither")
            y = self._rfl.exp(x, np.asarray(direction) @ x, backend=self.backend)
        else:
            y = self._basis(end_point)
        h = self._rfl.transport(x, y, np.asarray(tangent_vec) @ x, "parallel",
                                backend=self.backend)
        return self._vector(y, h)


class StiefelCanonicalMetric(_Lazy, _gs_stiefel.StiefelCanonicalMetric):
    """geomstats' canonical Stiefel metric whose QR retraction and its inverse (``lifting``)
    are :class:`rfl_fast.manifolds.Stiefel`'s (``retr``/``inv_retr`` with ``"qr"``); points
    ``(..., n, p)``. ``exp``/``log`` of the canonical metric stay geomstats' (rfl_fast's
    Stiefel has the embedded metric). ``lifting`` raises ``NoSolutionError`` (a
    ``ValueError``, as geomstats' own) where ``X'Y`` has a vanishing leading minor."""

    @staticmethod
    def _manifold_of(space):
        return _manifolds.Stiefel(space.n, space.p)

    def retraction(self, tangent_vec, base_point):
        return self._rfl.retr(base_point, tangent_vec, "qr", backend=self.backend)

    def lifting(self, point, base_point):
        return self._rfl.inv_retr(base_point, point, "qr", backend=self.backend)


def spd_matrices(n, *, backend=None):
    """geomstats' ``SPDMatrices(n)`` equipped with :class:`SPDAffineMetric`.

    Parameters
    ----------
    n : int
    backend : str, optional
        Kernel backend of every map (default: the one in force).

    Returns
    -------
    geomstats.geometry.spd_matrices.SPDMatrices
    """
    return _gs_spd.SPDMatrices(n, equip=False).equip_with_metric(SPDAffineMetric,
                                                                 backend=backend)


def hyperboloid(dim, *, backend=None):
    """geomstats' ``Hyperboloid(dim)`` (H^dim in R^(dim+1)) equipped with
    :class:`HyperboloidMetric`.

    Parameters
    ----------
    dim : int
    backend : str, optional

    Returns
    -------
    geomstats.geometry.hyperboloid.Hyperboloid
    """
    return _gs_hyperboloid.Hyperboloid(dim, equip=False).equip_with_metric(HyperboloidMetric,
                                                                           backend=backend)


def hypersphere(dim, *, backend=None):
    """geomstats' ``Hypersphere(dim)`` (S^dim in R^(dim+1)) equipped with
    :class:`HypersphereMetric`.

    Parameters
    ----------
    dim : int
    backend : str, optional

    Returns
    -------
    geomstats.geometry.hypersphere.Hypersphere
    """
    return _gs_hypersphere.Hypersphere(dim, equip=False).equip_with_metric(HypersphereMetric,
                                                                           backend=backend)


def grassmannian(n, p, *, backend=None):
    """geomstats' ``Grassmannian(n, p)`` (projectors ``(n, n)``) equipped with
    :class:`GrassmannianCanonicalMetric`.

    Parameters
    ----------
    n, p : int
    backend : str, optional

    Returns
    -------
    geomstats.geometry.grassmannian.Grassmannian
    """
    return _gs_grassmannian.Grassmannian(n, p, equip=False).equip_with_metric(
        GrassmannianCanonicalMetric, backend=backend)


def stiefel(n, p, *, backend=None):
    """geomstats' ``Stiefel(n, p)`` equipped with :class:`StiefelCanonicalMetric`.

    Parameters
    ----------
    n, p : int
    backend : str, optional

    Returns
    -------
    geomstats.geometry.stiefel.Stiefel
    """
    return _gs_stiefel.Stiefel(n, p, equip=False).equip_with_metric(StiefelCanonicalMetric,
                                                                    backend=backend)
