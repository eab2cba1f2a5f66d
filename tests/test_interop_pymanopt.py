"""pymanopt's solvers on rfl_fast's manifolds through rfl_fast.interop.pymanopt.

Each problem is solved by SteepestDescent, ConjugateGradient and TrustRegions through the
adapter and through pymanopt's own manifold (or against the closed-form optimum where pymanopt
has no such manifold); the optima must agree. Iteration counts are printed (``pytest -s``),
not asserted: they depend on the retraction and on rounding.
"""

import warnings

import numpy as np
import pytest

pymanopt = pytest.importorskip("pymanopt", reason="pymanopt not installed (the interop extra)")
from pymanopt.optimizers import ConjugateGradient, SteepestDescent, TrustRegions  # noqa: E402

import rfl_fast as rf  # noqa: E402
from rfl_fast.interop import pymanopt as rp  # noqa: E402

SOLVERS = {
    "SteepestDescent": lambda: SteepestDescent(verbosity=0, min_gradient_norm=1e-8),
    "ConjugateGradient": lambda: ConjugateGradient(verbosity=0, min_gradient_norm=1e-8),
    "TrustRegions": lambda: TrustRegions(verbosity=0, min_gradient_norm=1e-8),
}


def _solve(manifold, solver, cost, egrad, ehess=None, x0=None, seed=0):
    """Run ``solver`` on ``manifold`` (pymanopt's numpy backend: the hand-written gradients
    and Hessians given); returns pymanopt's result."""
    functions = {"euclidean_gradient": pymanopt.function.numpy(manifold)(egrad)}
    if ehess is not None:
        functions["euclidean_hessian"] = pymanopt.function.numpy(manifold)(ehess)
    problem = pymanopt.Problem(manifold, pymanopt.function.numpy(manifold)(cost), **functions)
    np.random.seed(seed)
    with warnings.catch_warnings():
        if not isinstance(manifold, rp.Adapter):
            # pymanopt's own SPD returns NumPy scalars: near the optimum TrustRegions takes
            # sqrt of a tiny negative r'r (its inner product is not symmetrized) and
            # ConjugateGradient divides 0 by 0 (NumPy warns where Python floats raise the
            # ZeroDivisionError it catches); the adapter's runs stay under "error"
            warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        result = SOLVERS[solver]().run(problem, initial_point=x0)
    print(f"{solver:18s} {str(manifold)[:58]:58s} {result.iterations:4d} iterations, "
          f"cost {result.cost:.12g}: {result.stopping_criterion}")
    return result


def _spread_covariance(n, rng):
    z = rng.standard_normal((4 * n, n)) * np.linspace(3.0, 0.5, n)
    return z.T @ z / (4 * n)


def _separated_spectrum(n, seed):
    """A symmetric matrix with eigenvalues 1, ..., n (steepest descent converges quickly)."""
    q = rf.Stiefel(n, n).random_point(rng=seed)
    return q @ np.diag(np.arange(1.0, n + 1)) @ q.T


# ---------------------------------------------------------------------- Stiefel


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("retraction", ["polar", "qr"])
def test_pca_on_stiefel_matches_pymanopt(solver, retraction):
    n, p = 20, 3
    a = _spread_covariance(n, np.random.default_rng(0))
    top = np.linalg.eigh(a)[1][:, ::-1][:, :p]
    x0 = rf.Stiefel(n, p).random_point(rng=1)

    def cost(x):
        return -np.trace(x.T @ a @ x)

    def egrad(x):
        return -2.0 * a @ x

    def ehess(x, u):
        return -2.0 * a @ u

    ours = _solve(rp.Stiefel(n, p, retraction=retraction), solver, cost, egrad, ehess, x0)
    theirs = _solve(pymanopt.manifolds.Stiefel(n, p, retraction=retraction), solver, cost,
                    egrad, ehess, x0)
    optimum = -np.sum(np.linalg.eigvalsh(a)[-p:])
    assert ours.cost == pytest.approx(optimum, rel=1e-9)
    assert theirs.cost == pytest.approx(optimum, rel=1e-9)
    assert rf.Stiefel(n, p).dist_subspace(ours.point, top) < 1e-4
    assert rf.Stiefel(n, p).is_point(ours.point)


@pytest.mark.parametrize("solver", SOLVERS)
def test_brockett_on_stiefel_matches_pymanopt(solver):
    # min tr(X'AXN), N = diag(p, ..., 1): X = eigenvectors of the p smallest eigenvalues,
    # the smallest one weighted most; the columns are determined up to sign
    n, p = 12, 3
    a = _separated_spectrum(n, seed=2)
    weights = np.diag(np.arange(p, 0, -1.0))
    w, v = np.linalg.eigh(a)
    x0 = rf.Stiefel(n, p).random_point(rng=3)

    def cost(x):
        return np.trace(x.T @ a @ x @ weights)

    def egrad(x):
        return 2.0 * a @ x @ weights

    def ehess(x, u):
        return 2.0 * a @ u @ weights

    ours = _solve(rp.Stiefel(n, p), solver, cost, egrad, ehess, x0)
    theirs = _solve(pymanopt.manifolds.Stiefel(n, p, retraction="polar"), solver, cost, egrad,
                    ehess, x0)
    optimum = np.sum(w[:p] * np.diag(weights))
    assert ours.cost == pytest.approx(optimum, rel=1e-8)
    assert theirs.cost == pytest.approx(optimum, rel=1e-8)
    np.testing.assert_allclose(np.abs(ours.point), np.abs(v[:, :p]), atol=1e-4)
    np.testing.assert_allclose(np.abs(ours.point), np.abs(theirs.point), atol=1e-4)


# ---------------------------------------------------------------------- Sphere


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("retraction", ["exp", "projection"])
def test_rayleigh_quotient_on_sphere_matches_pymanopt(solver, retraction):
    d = 15
    a = _separated_spectrum(d, seed=4)
    w, v = np.linalg.eigh(a)
    x0 = rf.Sphere(d).random_point(rng=5)

    def cost(x):
        return x @ a @ x

    def egrad(x):
        return 2.0 * a @ x

    def ehess(x, u):
        return 2.0 * a @ u

    ours = _solve(rp.Sphere(d, retraction=retraction), solver, cost, egrad, ehess, x0)
    theirs = _solve(pymanopt.manifolds.Sphere(d), solver, cost, egrad, ehess, x0)
    assert ours.cost == pytest.approx(w[0], rel=1e-9)
    assert theirs.cost == pytest.approx(w[0], rel=1e-9)
    assert abs(ours.point @ v[:, 0]) == pytest.approx(1.0, abs=1e-6)


# ---------------------------------------------------------------------- SPD


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("retraction", ["exp", "second_order"])
def test_log_det_on_spd_matches_pymanopt(solver, retraction):
    # Gaussian precision estimate: min tr(S X) - log det X, optimum X = S^-1
    n = 5
    s = _spread_covariance(n, np.random.default_rng(6))
    x0 = np.eye(n)

    def cost(x):
        return np.trace(s @ x) - np.linalg.slogdet(x)[1]

    def egrad(x):
        return s - np.linalg.inv(x)

    def ehess(x, u):
        xi = np.linalg.inv(x)
        return xi @ u @ xi

    ours = _solve(rp.SPD(n, retraction=retraction), solver, cost, egrad, ehess, x0)
    theirs = _solve(pymanopt.manifolds.SymmetricPositiveDefinite(n), solver, cost, egrad,
                    ehess, x0)
    np.testing.assert_allclose(ours.point, np.linalg.inv(s), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours.point, theirs.point, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("solver", ["SteepestDescent", "ConjugateGradient"])
def test_karcher_mean_on_spd_matches_pymanopt(solver):
    # f(X) = sum_i dist(X, A_i)^2 / 2, Riemannian gradient -sum_i Log_X(A_i) = X egrad X
    n, spd = 4, rf.SPD(4)
    points = spd.random_point(5, rng=7)

    def cost(x):
        return 0.5 * np.sum(spd.dist(x, points) ** 2)

    def egrad(x):
        xi = np.linalg.inv(x)
        return -xi @ np.sum(spd.log(x, points), axis=0) @ xi

    ours = _solve(rp.SPD(n), solver, cost, egrad, x0=np.eye(n))
    theirs = _solve(pymanopt.manifolds.SymmetricPositiveDefinite(n), solver, cost, egrad,
                    x0=np.eye(n))
    np.testing.assert_allclose(ours.point, theirs.point, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.sum(spd.log(ours.point, points), axis=0), 0.0, atol=1e-6)


# ---------------------------------------------------------------------- Lorentz


@pytest.mark.parametrize("solver", SOLVERS)
def test_lorentz_linear_cost_reaches_the_closed_form(solver):
    # f(x) = -<x, m>_L with m = sum_i a_i (future timelike): the minimizer is m / |m|_L.
    # pymanopt has no hyperboloid model: the closed form is the reference
    d = 3
    anchors = rf.Lorentz(d).random_point(4, rng=8)
    m = anchors.sum(axis=0)
    jm = np.concatenate([-m[:1], m[1:]])

    def cost(x):
        return -(x @ jm)

    def egrad(x):
        return -jm

    def ehess(x, u):
        return np.zeros_like(u)

    result = _solve(rp.Lorentz(d), solver, cost, egrad, ehess, x0=rf.Lorentz(d).origin)
    expected = m / np.sqrt(m[0] ** 2 - m[1:] @ m[1:])
    np.testing.assert_allclose(result.point, expected, rtol=1e-6)
    np.testing.assert_allclose(rp.from_poincare(rp.to_poincare(result.point)), result.point,
                               rtol=1e-12)


def test_hyperbolic_frechet_mean_matches_pymanopt_poincare_ball():
    # the same problem in the two models: min sum_i d(x, a_i)^2 / 2 on our hyperboloid and on
    # pymanopt's Poincare ball; the minimizers must correspond under to_poincare. Steepest
    # descent only: the ball has no transport (ConjugateGradient) and no Hessian conversion
    # of this cost here; both runs stop on the line search's minimal step
    solver = "SteepestDescent"
    d = 2
    anchors = rf.Lorentz(d).random_point(5, rng=13)
    balls = rp.to_poincare(anchors)
    lorentz = rf.Lorentz(d)

    def cost_h(x):
        return 0.5 * np.sum(lorentz.dist(x, anchors) ** 2)

    def egrad_h(x):  # d/dx acosh(-<x, a>_L) = -J a / sinh(d)
        c = anchors[:, 0] * x[0] - anchors[:, 1:] @ x[1:]
        dist = lorentz.dist(x, anchors)
        ja = np.concatenate([-anchors[:, :1], anchors[:, 1:]], axis=1)
        return -np.sum((dist / np.sqrt(c**2 - 1.0))[:, None] * ja, axis=0)

    def cost_b(b):
        return 0.5 * np.sum(_ball_dist(b, balls) ** 2)

    def egrad_b(b):  # d = acosh(1 + delta), delta = 2|b-a|^2 / ((1-|b|^2)(1-|a|^2))
        diff, nb, na = b - balls, 1.0 - b @ b, 1.0 - np.sum(balls**2, axis=1)
        sq = np.sum(diff**2, axis=1)
        z = 1.0 + 2.0 * sq / (nb * na)
        ddelta = (2.0 / na)[:, None] * (2.0 * diff / nb + (2.0 * sq / nb**2)[:, None] * b)
        return np.sum((np.arccosh(z) / np.sqrt(z**2 - 1.0))[:, None] * ddelta, axis=0)

    x0 = lorentz.origin
    ours = _solve(rp.Lorentz(d), solver, cost_h, egrad_h, x0=x0)
    theirs = _solve(pymanopt.manifolds.PoincareBall(d), solver, cost_b, egrad_b,
                    x0=rp.to_poincare(x0))
    np.testing.assert_allclose(rp.to_poincare(ours.point), theirs.point, atol=1e-6)
    assert ours.cost == pytest.approx(theirs.cost, rel=1e-9)
    np.testing.assert_allclose(np.sum(lorentz.log(ours.point, anchors), axis=0), 0.0, atol=1e-4)


def _ball_dist(b, a):
    """Poincare-ball distance between ``b`` (d,) and the rows of ``a`` (k, d)."""
    sq = np.sum((b - a) ** 2, axis=1)
    return np.arccosh(1.0 + 2.0 * sq / ((1.0 - b @ b) * (1.0 - np.sum(a**2, axis=1))))


# ---------------------------------------------------------------------- conversions


def _quadratic_cases():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 6))
    a = a + a.T

    def quad(x):  # works on vectors and matrices: sum of x_j' A x_j plus a linear term
        return np.sum(x * (a[: x.shape[0], : x.shape[0]] @ x)) + np.sum(np.sin(x))

    def quad_grad(x):
        return 2.0 * a[: x.shape[0], : x.shape[0]] @ x + np.cos(x)

    def quad_hess(x, u):
        return 2.0 * a[: x.shape[0], : x.shape[0]] @ u - np.sin(x) * u

    def log_det(x):
        return np.trace(a[:3, :3] @ x) - 2.0 * np.linalg.slogdet(x)[1]

    def log_det_grad(x):
        return a[:3, :3] - 2.0 * np.linalg.inv(x)

    def log_det_hess(x, u):
        xi = np.linalg.inv(x)
        return 2.0 * xi @ u @ xi

    return [
        (rp.Stiefel(6, 2, retraction="exp"), quad, quad_grad, quad_hess),
        (rp.Sphere(6), quad, quad_grad, quad_hess),
        (rp.Euclidean(6, 2), quad, quad_grad, quad_hess),
        (rp.Lorentz(5), quad, quad_grad, quad_hess),
        (rp.SPD(3), log_det, log_det_grad, log_det_hess),
    ]


@pytest.mark.parametrize("case", _quadratic_cases(), ids=lambda c: type(c[0]).__name__)
def test_hessian_conversion_matches_second_derivative_along_geodesics(case):
    # along the geodesic g(t) = Exp_x(t u): f(g(t)) = f + t <grad, u> + t^2/2 <Hess u, u> + O(t^3)
    manifold, f, egrad, ehess = case
    np.random.seed(10)
    x = manifold.random_point()
    u = manifold.random_tangent_vector(x)
    rgrad = manifold.euclidean_to_riemannian_gradient(x, egrad(x))
    rhess_u = manifold.euclidean_to_riemannian_hessian(x, egrad(x), ehess(x, u), u)
    t = 1e-3
    first = (f(manifold.exp(x, t * u)) - f(manifold.exp(x, -t * u))) / (2 * t)
    second = (f(manifold.exp(x, t * u)) - 2 * f(x) + f(manifold.exp(x, -t * u))) / t**2
    assert first == pytest.approx(manifold.inner_product(x, rgrad, u), rel=1e-5, abs=1e-6)
    assert second == pytest.approx(manifold.inner_product(x, rhess_u, u), rel=1e-4, abs=1e-4)
    np.testing.assert_allclose(manifold.projection(x, rhess_u), rhess_u, atol=1e-10)


def test_adapter_maps_are_our_manifolds_methods():
    # the adapter adds nothing: the retraction is the rfl_fast manifold's (compiled) one
    n, p = 40, 4
    ours = rf.Stiefel(n, p)
    x = ours.random_point(rng=11)
    u = ours.proj(x, np.random.default_rng(12).standard_normal((n, p)))
    for retraction in ("polar", "qr", "cayley", "exp"):
        adapter = rp.Stiefel(n, p, retraction=retraction)
        np.testing.assert_array_equal(adapter.retraction(x, u), ours.retr(x, u, retraction))
    adapter = rp.Stiefel(n, p, retraction="qr", backend="numpy")
    with rf.backend("numpy"):
        np.testing.assert_array_equal(adapter.retraction(x, u), ours.retr(x, u, "qr"))
        np.testing.assert_array_equal(adapter.transport(x, x, u), ours.proj(x, u))
    assert adapter.inner_product(x, u, u) == pytest.approx(np.sum(u * u))


def test_pair_mean_is_the_geodesic_midpoint():
    manifold = rp.SPD(3, rng=0)
    a, b = manifold.random_point(), manifold.random_point()
    mid = manifold.pair_mean(a, b)
    assert manifold.dist(a, mid) == pytest.approx(manifold.dist(a, b) / 2, rel=1e-10)
    assert manifold.dist(mid, b) == pytest.approx(manifold.dist(a, b) / 2, rel=1e-10)


def test_random_points_follow_numpy_seed_or_rng():
    manifold = rp.SPD(3)
    np.random.seed(0)
    a = manifold.random_point()
    np.random.seed(0)
    np.testing.assert_array_equal(manifold.random_point(), a)
    seeded = rp.Sphere(4, rng=5)
    assert rf.Sphere(4).is_point(seeded.random_point())
    np.testing.assert_array_equal(rp.Sphere(4, rng=5).random_point(),
                                  rp.Sphere(4, rng=5).random_point())
    x = seeded.random_point()
    assert seeded.norm(x, seeded.random_tangent_vector(x)) == pytest.approx(1.0)


def test_wrap_and_bad_arguments_are_named():
    wrapped = rp.wrap(rf.Stiefel(5, 2), retraction="qr")
    assert isinstance(wrapped, rp.Stiefel) and wrapped.retraction_method == "qr"
    checked = rp.wrap(rf.Sphere(3, validate=True))
    with pytest.raises(rf.errors.NotOnManifoldError, match="x: not a point"):
        checked.retraction(np.array([2.0, 0.0, 0.0]), np.zeros(3))
    assert isinstance(rp.wrap(rf.Lorentz(2)), rp.Lorentz)
    assert rp.wrap(rf.Lorentz(2)).dim == 2
    with pytest.raises(ValueError, match="retraction"):
        rp.Stiefel(5, 2, retraction="householder")
    with pytest.raises(ValueError, match="transport"):
        rp.SPD(3, transport="schild")
    with pytest.raises(TypeError, match="manifold"):
        rp.wrap(pymanopt.manifolds.Stiefel(5, 2))
    with pytest.raises(TypeError, match="manifold"):
        rp.Adapter("not a manifold")
    with pytest.raises(ValueError, match="b: "):
        rp.from_poincare(np.array([0.6, 0.8]))
    with pytest.raises(NotImplementedError, match="log"):
        rp.Stiefel(5, 2).log(np.eye(5, 2), np.eye(5, 2))
