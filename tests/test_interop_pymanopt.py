"""pymanopt's solvers on rfl_fast's manifolds through rfl_fast.interop.pymanopt.

Each problem is solved by SteepestDescent, ConjugateGradient and TrustRegions through the
adapter and through pymanopt's own manifold (or against the closed-form optimum where pymanopt
has no such manifold); the optima must agree. Iteration counts are printed (``pytest -s``),
not asserted: they depend on the retraction and on rounding.

Tolerances. A solver stops on its gradient-norm threshold (1e-8 here), on the line search's
minimal step (where cost differences drown in rounding, at a machine-dependent gradient norm)
or on its iteration budget, so no fixed distance to the optimum is guaranteed. Each test
therefore measures the Riemannian gradient norm ``g`` at the returned point and checks the
distance the problem's geometry guarantees for that ``g`` (Kato-Temple and Davis-Kahan for
eigenvector problems, strong convexity for the hyperbolic Frechet mean; each derived where it
is used), plus the rounding of the quantities compared. ``g <= CONVERGED`` is the only fixed
threshold: a run stopped far from the optimum (a broken adapter) fails it, while the stopping
rules above end every correct run orders of magnitude below it.
"""

import warnings

import numpy as np
import pytest

pymanopt = pytest.importorskip("pymanopt", reason="pymanopt not installed (the interop extra)")
from pymanopt.optimizers import ConjugateGradient, SteepestDescent, TrustRegions  # noqa: E402

import rfl_fast as rf  # noqa: E402
from rfl_fast.interop import pymanopt as rp  # noqa: E402

CONVERGED = 1e-4   # see the module docstring
EPS = np.finfo(np.float64).eps

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


def _top_p_bounds(a, x):
    """For ``f(X) = -tr(X'AX)`` on St(n, p), minimized by the top-p eigenvectors: the bounds
    that the residual ``R = (I - XX')AX = -grad f / 2`` gives (Davis-Kahan sin-theta theorem
    with the Ritz values of ``X'AX``, which must lie above ``lambda_{p+1}``):
    ``|sin Theta(X, X*)|_F <= |R|_F / delta``, ``delta = min eig(X'AX) - lambda_{p+1}``, and
    ``0 <= f(X) - f* <= (lambda_1 - lambda_n) |sin Theta|_F^2`` (with ``P = XX'`` in A's
    eigenbasis, ``f - f* = sum_{i<=p} lambda_i (1 - P_ii) - sum_{j>p} lambda_j P_jj`` and both
    sums of weights equal ``|sin Theta|_F^2``). Returns ``(g, sin_bound, cost_bound)``."""
    lam = np.linalg.eigvalsh(a)[::-1]
    p = x.shape[1]
    r = a @ x - x @ (x.T @ a @ x)
    delta = np.linalg.eigvalsh(x.T @ a @ x)[0] - lam[p]
    assert delta > 0, "the Ritz values must lie above lambda_{p+1} for the bound to apply"
    sin_bound = np.linalg.norm(r) / delta
    return 2 * np.linalg.norm(r), sin_bound, (lam[0] - lam[-1]) * sin_bound**2


def _pca_functions(a):
    """Cost, Euclidean gradient and Hessian of ``f(X) = -tr(X'AX)``."""
    return (lambda x: -np.trace(x.T @ a @ x), lambda x: -2.0 * a @ x,
            lambda x, u: -2.0 * a @ u)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("retraction", ["polar", "qr"])
def test_pca_on_stiefel_matches_pymanopt(solver, retraction):
    n, p = 20, 3
    a = _spread_covariance(n, np.random.default_rng(0))
    top = np.linalg.eigh(a)[1][:, ::-1][:, :p]
    x0 = rf.Stiefel(n, p).random_point(rng=1)

    cost, egrad, ehess = _pca_functions(a)
    ours = _solve(rp.Stiefel(n, p, retraction=retraction), solver, cost, egrad, ehess, x0)
    theirs = _solve(pymanopt.manifolds.Stiefel(n, p, retraction=retraction), solver, cost,
                    egrad, ehess, x0)
    optimum = -np.sum(np.linalg.eigvalsh(a)[-p:])
    rounding = 4 * n * p * EPS * np.linalg.norm(a, 2)     # of the computed traces
    for result in (ours, theirs):
        g, sin_bound, cost_bound = _top_p_bounds(a, result.point)
        assert g <= CONVERGED
        assert optimum - rounding <= result.cost <= optimum + cost_bound + rounding
        # |angles|_2 <= (pi/2) |sin angles|_2; the angles themselves are accurate to ~eps
        assert rf.Stiefel(n, p).dist_subspace(result.point, top) <= np.pi / 2 * sin_bound \
            + 1e-12
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
    # Near the minimizer f - f* <= g^2 / (2 mu) to second order, mu the smallest eigenvalue of
    # the Riemannian Hessian there: 2 (lambda_j - lambda_i)(N_i - N_j) between columns and
    # 2 (lambda_k - lambda_i) N_i towards the other eigenvectors, >= 2 here (unit gaps in the
    # spectrum 1..12 and in N); a factor 2 covers the third-order remainder at g <= CONVERGED
    mu = 2.0
    rounding = 4 * n * p * EPS * np.linalg.norm(a, 2) * p
    for result in (ours, theirs):
        x = result.point
        g = np.linalg.norm(rf.Stiefel(n, p).proj(x, egrad(x)))
        assert g <= CONVERGED
        assert optimum - rounding <= result.cost <= optimum + g**2 / mu + rounding
        # each column within sin <= |grad| / mu of its eigenvector, to the same order
        np.testing.assert_allclose(np.abs(x), np.abs(v[:, :p]), atol=2 * g / mu + 1e-12)


# ---------------------------------------------------------------------- Sphere


def _rayleigh_bounds(a, x):
    """For ``f(x) = x'Ax`` on the sphere, minimized by the eigenvector of ``lambda_1``: with the
    residual ``r = Ax - f(x) x = grad f / 2`` and ``f(x) < lambda_2``, the Kato-Temple
    inequality ``0 <= f(x) - lambda_1 <= |r|^2 / (lambda_2 - f(x))`` and the Davis-Kahan
    bound ``sin angle(x, v_1) <= |r| / (lambda_2 - f(x))``. Returns ``(g, sin_bound,
    cost_bound)``."""
    lam = np.linalg.eigvalsh(a)
    f = x @ a @ x
    assert f < lam[1], "the Ritz value must lie below lambda_2 for the bounds to apply"
    r = np.linalg.norm(a @ x - f * x)
    return 2 * r, r / (lam[1] - f), r**2 / (lam[1] - f)


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
    rounding = 4 * d * EPS * np.linalg.norm(a, 2)         # of the computed x'Ax
    for result in (ours, theirs):
        g, sin_bound, cost_bound = _rayleigh_bounds(a, result.point)
        assert g <= CONVERGED
        assert w[0] - rounding <= result.cost <= w[0] + cost_bound + rounding
        # |x'v_1| = cos angle >= 1 - sin^2 angle
        assert abs(result.point @ v[:, 0]) >= 1.0 - sin_bound**2 - 1e-15


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
    # f = sum_i d(x, a_i)^2 / 2 is mu-strongly geodesically convex with mu = k (the number of
    # anchors: the Hessian of d(., a)^2 / 2 is >= I where the curvature is <= 0), so a point
    # whose gradient -sum_i Log_x(a_i) has norm g lies within g / mu of the minimizer, with
    # f - f* <= g^2 / (2 mu); g is intrinsic, measured in either model
    mu = len(anchors)
    x_theirs = rp.from_poincare(theirs.point)
    g = [float(lorentz.norm(x, -np.sum(lorentz.log(x, anchors), axis=0)))
         for x in (ours.point, x_theirs)]
    assert max(g) <= CONVERGED
    rounding = 64 * EPS * (1.0 + abs(ours.cost))     # the models' conversions and the costs
    assert lorentz.dist(ours.point, x_theirs) <= (g[0] + g[1]) / mu + 1e-12
    assert abs(ours.cost - theirs.cost) <= (g[0] ** 2 + g[1] ** 2) / (2 * mu) + rounding


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


# ---------------------------------------------------------------------- pymanopt's conventions


def test_k_points_are_one_stacked_call_and_combine_as_pymanopts():
    k, n, p = 3, 7, 2
    ours, theirs = rp.Stiefel(n, p, k=k), pymanopt.manifolds.Stiefel(n, p, k=k)
    assert ours.dim == theirs.dim and ours.typical_dist == pytest.approx(theirs.typical_dist)
    np.random.seed(0)
    x = ours.random_point()
    assert x.shape == (k, n, p) and rf.Stiefel(n, p).is_point(x)
    u, v = ours.random_tangent_vector(x), ours.random_tangent_vector(x)
    assert ours.norm(x, u) == pytest.approx(1.0, rel=1e-14)   # all k items together
    assert ours.inner_product(x, u, v) == pytest.approx(theirs.inner_product(x, u, v),
                                                        rel=1e-13)
    calls = []

    class Counting(rf.Stiefel):
        def retr(self, *args, **kw):
            calls.append(np.shape(args[0]))
            return super().retr(*args, **kw)

    ours.manifold = Counting(n, p)
    np.testing.assert_allclose(ours.retraction(x, u),
                               pymanopt.manifolds.Stiefel(n, p, k=k, retraction="polar")
                               .retraction(x, u), atol=1e-14)
    assert calls == [(k, n, p)]                                # one call on the stack
    spd, spd_theirs = rp.SymmetricPositiveDefinite(4, k=k), \
        pymanopt.manifolds.SymmetricPositiveDefinite(4, k=k)
    a, b = spd.random_point(), spd.random_point()
    assert spd.dist(a, b) == pytest.approx(spd_theirs.dist(a, b), rel=1e-12)
    gr, gr_theirs = rp.Grassmann(6, 2, k=k), pymanopt.manifolds.Grassmann(6, 2, k=k)
    a, b = gr.random_point(), gr.random_point()
    assert gr.dist(a, b) == pytest.approx(gr_theirs.dist(a, b), rel=1e-10)
    assert gr.typical_dist == pytest.approx(gr_theirs.typical_dist)


def test_matrix_sphere_is_pymanopts():
    ours, theirs = rp.Sphere(5, 3), pymanopt.manifolds.Sphere(5, 3)
    assert ours.dim == theirs.dim == 14
    np.random.seed(1)
    x = ours.random_point()
    assert x.shape == (5, 3) and np.linalg.norm(x) == pytest.approx(1.0, rel=1e-15)
    u = ours.random_tangent_vector(x)
    y = theirs.random_point()
    for name, args in [("projection", (x, u + x)), ("transport", (x, y, u)),
                       ("retraction", (x, u)), ("exp", (x, u)), ("log", (x, y))]:
        np.testing.assert_allclose(getattr(ours, name)(*args), getattr(theirs, name)(*args),
                                   atol=1e-14, err_msg=name)
    assert ours.dist(x, y) == pytest.approx(theirs.dist(x, y), rel=1e-13)
    g, h = np.random.default_rng(2).standard_normal((2, 5, 3))
    np.testing.assert_allclose(ours.euclidean_to_riemannian_hessian(x, g, h, u),
                               theirs.euclidean_to_riemannian_hessian(x, g, h, u), atol=1e-14)


def test_stacks_and_wrong_shapes_raise_errors_naming_the_argument():
    st = rp.Stiefel(5, 2)
    x = np.stack([np.eye(5, 2)] * 3)
    with pytest.raises(ValueError, match=r"point: expected an array of shape \(5, 2\).*k=3"):
        st.retraction(x, np.zeros_like(x))
    with pytest.raises(ValueError, match=r"tangent_vector: expected an array of shape "
                                         r"\(5, 2\).*got shape \(5, 3\)"):
        st.retraction(np.eye(5, 2), np.zeros((5, 3)))
    multi = rp.Stiefel(5, 2, k=3)
    with pytest.raises(ValueError, match=r"point_a: .*\(3, 5, 2\).*takes 3 points at once"):
        multi.dist(np.eye(5, 2), np.eye(5, 2))
    with pytest.raises(ValueError, match=r"k: expected an int >= 1"):
        rp.Stiefel(5, 2, k=0)
    with pytest.raises(ValueError, match="shape: expected the shape of one point"):
        rp.Sphere()
    with pytest.raises(TypeError, match=r"manifold: .*Product.*pymanopt.manifolds.Product"):
        rp.wrap(rf.Product(rf.Sphere(3), rf.Sphere(3)))


def test_defaults_are_pymanopts_where_its_solvers_read_them():
    assert rp.Sphere(4).retraction_method == "projection"
    assert rp.Sphere(4).transport_method == "projection"
    assert rp.SPD(3).transport_method == "projection"
    assert rp.Grassmann(5, 2).retraction_method == "polar"
    assert rp.Grassmann(5, 2).transport_method == "projection"


@pytest.mark.parametrize("beta_rule", ["HestenesStiefel", "LiuStorey"])
@pytest.mark.parametrize("retraction", ["projection", "exp"])
def test_conjugate_gradient_on_the_sphere_converges_as_on_pymanopts(beta_rule, retraction):
    # pymanopt's own conjugate-gradient test at n = 128: through the adapter's exp retraction
    # it stopped at |grad| 1e-3..1e-2, because the iterates drifted off the sphere (the
    # adapter now normalizes). A line search accepts a step only while the cost decrease,
    # ~ g^2 / (2L) with L = 2 (lambda_max - lambda_min) the gradient's Lipschitz constant,
    # exceeds the cost's rounding ~ eps |f|, so every run ends by g ~ sqrt(2 L eps |f*|) (or
    # earlier, at pymanopt's 1e-6 threshold); 10x that is the bound, pymanopt's own included
    n = 128
    rng = np.random.default_rng(18)
    m = rng.standard_normal((n, n))
    m = 0.5 * (m + m.T)
    lam = np.linalg.eigvalsh(m)
    floor = np.sqrt(2 * 2 * (lam[-1] - lam[0]) * EPS * abs(lam[-1]))

    def cost(x):
        return -x @ m @ x

    def egrad(x):
        return -2.0 * m @ x

    x0 = rf.Sphere(n).random_point(rng=19)
    for manifold in (rp.Sphere(n, retraction=retraction), pymanopt.manifolds.Sphere(n)):
        functions = {"euclidean_gradient": pymanopt.function.numpy(manifold)(egrad)}
        problem = pymanopt.Problem(manifold, pymanopt.function.numpy(manifold)(cost),
                                   **functions)
        result = ConjugateGradient(beta_rule=beta_rule, verbosity=0).run(problem,
                                                                        initial_point=x0)
        assert result.gradient_norm <= 10 * floor, (str(manifold), result.stopping_criterion)
        assert abs(np.linalg.norm(result.point) - 1.0) <= 4 * EPS


def test_spd_tangent_vectors_are_exactly_symmetric():
    spd = rp.SPD(4, rng=3)
    x = spd.random_point()
    u = spd.random_tangent_vector(x)
    g = np.random.default_rng(4).standard_normal((4, 4))
    for v in (spd.euclidean_to_riemannian_gradient(x, g),
              spd.euclidean_to_riemannian_hessian(x, g, g.T, u),
              spd.transport(x, spd.random_point(), u), spd.log(x, spd.random_point())):
        np.testing.assert_array_equal(v, v.T)
        assert spd.inner_product(x, v, v) >= 0


def test_grassmann_adapter_solves_pca_like_pymanopts():
    n, p = 20, 3
    a = _spread_covariance(n, np.random.default_rng(16))
    top = np.linalg.eigh(a)[1][:, ::-1][:, :p]
    x0 = rf.Grassmann(n, p).random_point(rng=17)

    cost, egrad, ehess = _pca_functions(a)
    for solver in SOLVERS:
        result = _solve(rp.Grassmann(n, p), solver, cost, egrad, ehess, x0)
        g, sin_bound, _ = _top_p_bounds(a, result.point)
        assert g <= CONVERGED
        assert rf.Grassmann(n, p).dist(result.point, top) <= np.pi / 2 * sin_bound + 1e-12
