"""geomstats' learning tools on rfl_fast's maps through rfl_fast.interop.geomstats."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.federation import karcher_mean

_HAD_TRAPZ = hasattr(np, "trapz")
try:
    from rfl_fast.interop import geomstats as rg
except ImportError as exc:  # geomstats missing, or a release this adapter cannot import
    pytest.skip(f"rfl_fast.interop.geomstats unavailable: {exc}", allow_module_level=True)

from geomstats.geometry.hyperboloid import Hyperboloid  # noqa: E402
from geomstats.geometry.hypersphere import Hypersphere  # noqa: E402
from geomstats.geometry.spd_matrices import SPDMatrices  # noqa: E402
from geomstats.learning.frechet_mean import FrechetMean  # noqa: E402
from geomstats.learning.pca import TangentPCA  # noqa: E402


def _cases():
    """(ours, geomstats' own space, rfl_fast manifold, points) for each adapted metric."""
    return [
        (rg.spd_matrices(3), SPDMatrices(3), rf.SPD(3), rf.SPD(3).random_point(8, rng=0)),
        (rg.hyperboloid(2), Hyperboloid(2), rf.Lorentz(2), rf.Lorentz(2).random_point(8, rng=1)),
        (rg.hypersphere(3), Hypersphere(3), rf.Sphere(4),
         # a cap around e_0, so the mean is unique
         rf.Sphere(4).exp(np.eye(4)[0], 0.6 * rf.Sphere(4).random_tangent(
             np.broadcast_to(np.eye(4)[0], (8, 4)), rng=2))),
    ]


CASES = _cases()
IDS = ["SPD", "hyperboloid", "hypersphere"]


def test_import_leaves_numpy_as_it_was():
    # the numpy.trapz shim lives only during geomstats' import
    assert hasattr(np, "trapz") == _HAD_TRAPZ


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_maps_agree_with_geomstats_own_metric(case):
    ours, theirs, manifold, points = case
    base = points[0]
    logs = ours.metric.log(points, base)
    np.testing.assert_allclose(logs, theirs.metric.log(points, base), atol=1e-10)
    np.testing.assert_allclose(ours.metric.exp(logs, base), points, atol=1e-10)
    np.testing.assert_allclose(ours.metric.exp(logs, base), theirs.metric.exp(logs, base),
                               atol=1e-10)
    np.testing.assert_allclose(ours.metric.dist(base, points[1:]),
                               theirs.metric.dist(base, points[1:]), atol=1e-10)
    assert ours.metric.dist(base, base) < 1e-14  # geomstats' acosh gives ~1e-8 on H^2
    np.testing.assert_allclose(ours.metric.squared_norm(logs, base),
                               theirs.metric.squared_norm(logs, base), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.metric.inner_product(logs, logs[::-1], base),
                               theirs.metric.inner_product(logs, logs[::-1], base),
                               rtol=1e-10, atol=1e-12)
    moved = ours.metric.parallel_transport(logs[2], base, end_point=points[1])
    np.testing.assert_allclose(moved, theirs.metric.parallel_transport(logs[2], base,
                                                                       end_point=points[1]),
                               atol=1e-9)
    np.testing.assert_allclose(ours.metric.parallel_transport(logs[2], base, direction=logs[1]),
                               moved, atol=1e-9)


def _converged_mean(space, points):
    # geomstats' defaults stop after 32 steps or at |mean of logs|^2 < 1e-4 dim
    return FrechetMean(space).set(max_iter=500, epsilon=1e-20).fit(points).estimate_


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_frechet_mean_matches_geomstats_and_our_karcher_mean(case):
    ours, theirs, manifold, points = case
    calls = []

    class Counting(type(manifold)):  # proves FrechetMean goes through our manifold
        def log(self, x, y, **kw):
            calls.append("log")
            return super().log(x, y, **kw)

    ours.metric._rfl = Counting(*manifold._repr_args())
    mean = _converged_mean(ours, points)
    assert calls
    np.testing.assert_allclose(mean, _converged_mean(theirs, points), atol=1e-7)
    ref = karcher_mean(manifold, points, points[0], tol=1e-12).x
    np.testing.assert_allclose(mean, ref, atol=1e-6)
    assert manifold.is_point(mean)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tangent_pca_runs_on_our_metric(case):
    ours, theirs, manifold, points = case
    mean = FrechetMean(ours).fit(points).estimate_
    pca = TangentPCA(ours, n_components=2).fit(points, base_point=mean)
    ref = TangentPCA(theirs, n_components=2).fit(points, base_point=mean)
    np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=1e-8)
    scores = pca.transform(points)
    assert scores.shape == (len(points), 2)
    back = pca.inverse_transform(scores)
    assert back.shape == points.shape and manifold.is_point(back)


def test_parallel_transport_needs_a_direction_or_end_point():
    space = rg.spd_matrices(2)
    with pytest.raises(ValueError, match="direction, end_point"):
        space.metric.parallel_transport(np.eye(2), np.eye(2))


def test_metrics_work_whatever_order_geomstats_equips_a_space_in():
    # SPDMatrices equips its default metric before it sets n: a metric that read space.n in
    # __init__ failed there (every geomstats test that builds SPDMatrices(n) with ours)
    class OurDefault(SPDMatrices):
        @staticmethod
        def default_metric():
            return rg.SPDAffineMetric

    space = OurDefault(3)
    points = rf.SPD(3).random_point(2, rng=3)
    np.testing.assert_allclose(space.metric.dist(points[0], points[1]),
                               rf.SPD(3).dist(points[0], points[1]), rtol=1e-14)


def test_grassmannian_metric_agrees_with_geomstats_on_projectors():
    from geomstats.geometry.grassmannian import Grassmannian

    n, p = 6, 2
    ours, theirs, gr = rg.grassmannian(n, p), Grassmannian(n, p), rf.Grassmann(n, p)
    center = gr.random_point(rng=4)   # points near one subspace: a unique mean
    bases = gr.exp(center, 0.5 * gr.random_tangent(np.broadcast_to(center, (5, n, p)), rng=5))
    projectors = bases @ np.swapaxes(bases, -1, -2)
    base = projectors[0]
    logs = ours.metric.log(projectors, base)
    np.testing.assert_allclose(logs, theirs.metric.log(projectors, base), atol=1e-9)
    np.testing.assert_allclose(ours.metric.exp(logs, base), projectors, atol=1e-10)
    np.testing.assert_allclose(ours.metric.exp(logs, base), theirs.metric.exp(logs, base),
                               atol=1e-9)
    # geomstats' metric is the Frobenius norm of V = XH' + HX': sqrt(2) |principal angles|
    np.testing.assert_allclose(ours.metric.dist(base, projectors),
                               np.sqrt(2) * gr.dist(bases[0], bases), atol=1e-12)
    np.testing.assert_allclose(ours.metric.dist(base, projectors[1:]),
                               theirs.metric.dist(base, projectors[1:]), atol=1e-7)
    moved = ours.metric.parallel_transport(logs[2], base, end_point=projectors[1])
    np.testing.assert_allclose(moved, theirs.metric.parallel_transport(
        logs[2], base, end_point=projectors[1]), atol=1e-9)
    np.testing.assert_allclose(ours.metric.parallel_transport(logs[2], base, direction=logs[1]),
                               moved, atol=1e-9)
    mean = _converged_mean(ours, projectors)
    np.testing.assert_allclose(mean, _converged_mean(theirs, projectors), atol=1e-7)


def test_stiefel_metric_retracts_and_lifts_on_our_kernels():
    from geomstats.geometry.stiefel import Stiefel

    ours, theirs, st = rg.stiefel(5, 3), Stiefel(5, 3), rf.Stiefel(5, 3)
    x = st.random_point(4, rng=5)
    u = 0.5 * st.random_tangent(x, rng=6)
    y = ours.metric.retraction(u, x)
    np.testing.assert_array_equal(y, st.retr(x, u, "qr"))
    np.testing.assert_allclose(y, theirs.metric.retraction(u, x), atol=1e-12)
    np.testing.assert_allclose(ours.metric.lifting(y, x), u, atol=1e-12)
    np.testing.assert_allclose(ours.metric.lifting(y, x), theirs.metric.lifting(y, x),
                               atol=1e-10)
    # a point the QR retraction does not reach: a ValueError, as geomstats' own raises
    far = st.random_point(rng=1)
    with pytest.raises(ValueError):
        theirs.metric.lifting(far, st.random_point(rng=0))
    with pytest.raises(rf.errors.NoSolutionError):
        ours.metric.lifting(far, st.random_point(rng=0))
    # exp/log of the canonical metric are geomstats' own
    np.testing.assert_allclose(ours.metric.exp(u, x), theirs.metric.exp(u, x), atol=1e-12)
