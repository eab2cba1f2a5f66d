"""One identity suite that every manifold passes, under every backend.

The instances come from ``CASES`` of ``manifold_cases.py``: one entry per class of the manifold
registry ``rfl_fast.manifolds.MANIFOLDS`` (``test_every_manifold_class_has_cases`` fails for a
class without one).
"""

import numpy as np
import pytest

import rfl_fast as rf
from manifold_cases import CASES, MANIFOLDS, trait
from rfl_fast.errors import MethodNotAvailableError
from tiers import count

BATCH = 3

manifolds = pytest.mark.parametrize("M", MANIFOLDS, ids=repr)


def test_every_manifold_class_has_cases():
    missing = [name for name, cls in rf.manifolds.MANIFOLDS.items() if cls not in CASES]
    assert missing == [], f"add instances of {missing} to CASES of tests/manifold_cases.py"
    exported = [getattr(rf.manifolds, n) for n in rf.manifolds.__all__]
    assert [c for c in exported if isinstance(c, type) and issubclass(c, rf.Manifold)
            and c is not rf.Manifold and c not in rf.manifolds.MANIFOLDS.values()] == []


def absent_where_lacking(what):
    """Every manifold, those lacking ``what`` marked as an explicit expected failure."""
    cases = []
    for M in MANIFOLDS:
        marks = ()
        if what in trait(M, "lacks"):
            marks = pytest.mark.xfail(raises=(MethodNotAvailableError, ValueError), strict=True,
                                      reason=f"{M!r} has no closed-form {what}")
        cases.append(pytest.param(M, marks=marks, id=repr(M)))
    return pytest.mark.parametrize("M", cases)


RETRACTIONS = [(M, m) for M in MANIFOLDS for m in M.retractions]


def points(M, seed=0):
    return M.random_point(BATCH, rng=seed)


def tangent(M, x, scale=0.3, seed=1):
    return scale * M.random_tangent(x, rng=seed)


def close(a, b, atol=1e-10):
    np.testing.assert_allclose(a, b, rtol=0, atol=atol * max(1.0, float(np.max(np.abs(b)))))


def same_point(M, a, b, atol=1e-10):
    """``a`` and ``b`` represent the same point(s) of ``M``."""
    canonical = trait(M, "canonical")
    close(canonical(M, a), canonical(M, b), atol=atol)


@manifolds
def test_random_points_and_tangents_are_valid(M, backend):
    x = points(M)
    assert x.shape == (BATCH,) + M.shape
    assert M.is_point(x)
    u = tangent(M, x)
    assert M.is_tangent(x, u)
    close(M.norm(x, M.random_tangent(x, rng=2)), np.ones(BATCH))


@manifolds
def test_proj_is_idempotent_and_tangent(M, backend):
    x = points(M)
    z = np.random.default_rng(5).standard_normal(x.shape)
    u = M.proj(x, z)
    assert M.is_tangent(x, u)
    close(M.proj(x, u), u)


@pytest.mark.parametrize("M,method", RETRACTIONS, ids=[f"{M!r}-{m}" for M, m in RETRACTIONS])
def test_retraction_identities(M, method, backend):
    x, v = points(M), tangent(M, points(M))
    close(M.retr(x, M.zero_vector(x), method), x)
    y = M.retr(x, v, method)
    assert M.is_point(y)
    h = 1e-5  # central difference: error O(h^2)
    deriv = (M.retr(x, h * v, method) - M.retr(x, -h * v, method)) / (2 * h)
    close(deriv, v, atol=1e-7)
    if method in M.inverse_retractions:
        close(M.inv_retr(x, y, method), v, atol=1e-9)
        close(M.inv_retr(x, x, method), M.zero_vector(x))


@absent_where_lacking("log")
def test_exp_log_dist(M, backend):
    x = points(M)
    v = tangent(M, x, scale=0.8)
    y = M.exp(x, v)
    assert M.is_point(y)
    close(M.log(x, y), v, atol=1e-9)
    close(M.dist(x, y), M.norm(x, v), atol=1e-9)
    z = points(M, seed=7)
    same_point(M, M.exp(x, M.log(x, z)), z, atol=1e-8)
    close(M.dist(x, z), M.dist(z, x), atol=1e-9)
    assert np.all(M.dist(x, z) <= M.dist(x, y) + M.dist(y, z) + 1e-10)
    close(M.dist(x, x), np.zeros(BATCH), atol=1e-7)


@manifolds
def test_transports_land_in_tangent_space(M, backend):
    x, y = points(M), points(M, seed=3)
    if trait(M, "nearby_only"):
        y = M.exp(x, tangent(M, x, scale=1.0, seed=4))  # away from the antipode
    v = tangent(M, x, seed=6)
    for method in M.transports:
        w = M.transport(x, y, v, method)
        assert M.is_tangent(y, w), method


@absent_where_lacking("parallel transport")
def test_parallel_transport_is_isometric(M, backend):
    x = points(M)
    u, v = tangent(M, x, seed=8), tangent(M, x, seed=9)
    y = M.retr(x, tangent(M, x, scale=1.0, seed=4))
    tu, tv = M.transport(x, y, u, "parallel"), M.transport(x, y, v, "parallel")
    close(M.inner(y, tu, tv), M.inner(x, u, v), atol=1e-10)
    # transporting along the geodesic from x to y and back is the identity
    close(M.transport(y, x, tu, "parallel"), u, atol=1e-9)


@manifolds
def test_egrad2rgrad_matches_directional_derivative(M, backend):
    rng = np.random.default_rng(11)
    x = points(M)
    c = rng.standard_normal(M.shape)
    d = rng.standard_normal(M.shape)

    def f(p):  # a smooth ambient function: <c, p> + <p, d * p> / 2
        return np.sum(c * p + 0.5 * d * p * p, axis=tuple(range(-M.core_ndim, 0)))

    egrad = c + d * x
    rgrad = M.egrad2rgrad(x, egrad)
    assert M.is_tangent(x, rgrad)
    v = tangent(M, x)
    h = 1e-6
    fd = (f(M.retr(x, h * v)) - f(M.retr(x, -h * v))) / (2 * h)
    close(M.inner(x, rgrad, v), fd, atol=1e-7)


@manifolds
def test_tangent_gaussian_covariance(M, backend):
    """E <u, w_k> <u, w_l> = sigma^2 <w_k, w_l> and E |u|^2 = sigma^2 dim, in the metric."""
    assert M.has_tangent_gaussian                              # the declared capability
    x = points(M)[:1]
    # the full tier's 20000 samples, 4000 in the fast tier; the tolerances below are standard
    # errors' multiples, so they scale with 1/sqrt(n_samples)
    n_samples, sigma = count(4000, 20000), 0.7
    scale = np.sqrt(20000 / n_samples)
    xs = np.broadcast_to(x, (n_samples,) + M.shape)
    u = M.tangent_gaussian(xs, sigma, rng=123)
    assert M.is_tangent(xs, u)
    w = np.stack([tangent(M, x, scale=1.0, seed=s)[0] for s in (20, 21, 22)])
    proj = np.stack([M.inner(xs, u, np.broadcast_to(wk, u.shape)) for wk in w], axis=-1)
    emp = proj.T @ proj / n_samples
    want = sigma**2 * np.array([[M.inner(x[0], a, b) for b in w] for a in w])
    np.testing.assert_allclose(emp, want, atol=0.05 * scale * sigma**2)  # ~5 standard errors
    np.testing.assert_allclose(np.mean(M.inner(xs, u, u)) / (sigma**2 * M.dim), 1.0,
                               atol=0.03 * scale)
    np.testing.assert_allclose(proj.mean(axis=0), 0.0, atol=0.03 * scale * sigma)


@manifolds
def test_batched_equals_per_item_loop_and_broadcasts(M, backend):
    x = points(M)
    v = tangent(M, x)
    y = M.retr(x, v)
    for i in range(BATCH):
        close(M.retr(x[i], v[i]), y[i], atol=1e-13)
        close(M.inv_retr(x[i], y[i]), M.inv_retr(x, y)[i], atol=1e-12)
    # one point against a stack of tangent vectors
    vs = M.proj(x[0], tangent(M, x))
    close(M.retr(x[0], vs), M.retr(np.broadcast_to(x[0], vs.shape), vs), atol=1e-13)
    # a (2, 3)-batch
    x2 = M.random_point(2, 3, rng=4)
    assert M.retr(x2, M.zero_vector(x2)).shape == (2, 3) + M.shape


@manifolds
def test_float32_works_to_float32_tolerance(M, backend):
    x = points(M)
    v = tangent(M, x)
    y64 = M.retr(x, v)
    y32 = M.retr(x.astype(np.float32), v.astype(np.float32))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, atol=1e-4 * max(1.0, np.abs(y64).max()))


@manifolds
def test_project_or_explicit_absence(M, backend):
    assert M.has_project == trait(M, "project")                 # the declared capability
    if not M.has_project:
        with pytest.raises(MethodNotAvailableError, match="provides no `project`"):
            M.project(points(M))
        return
    z = np.random.default_rng(2).standard_normal((BATCH,) + M.shape)
    p = M.project(z)
    assert M.is_point(p)
    close(M.project(p), p)


def test_stiefel_has_no_log_or_dist():
    M = rf.Stiefel(5, 2)
    x = M.random_point(rng=0)
    with pytest.raises(MethodNotAvailableError, match="Stiefel provides no `log`"):
        M.log(x, x)
    with pytest.raises(MethodNotAvailableError, match="provides no `dist`"):
        M.dist(x, x)
