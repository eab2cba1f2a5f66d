"""Privacy: clipping, fused clipped sums, tangent noise, accounting (seed 002, PriRFed)."""

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import privacy as P

pytest.importorskip("dp_accounting")

PCA_BACKENDS = ["numpy", "numba"]


# ---------------------------------------------------------------------------- closed forms

def test_theorem9_hand_computed_basic_wins():
    # rho = 2/10, eps~ = log(1 + 0.2 (e^{2 * 0.5} - 1)) = 0.29539452912..., basic = 10 eps~
    eps, delta = P.epsilon_seed_composition(0.5, 1e-6, rounds=10, clients_per_round=2,
                                            n_clients=10, delta_hat=1e-5)
    assert eps == pytest.approx(2.9539452912034765, rel=1e-12)
    assert delta == pytest.approx(1e-5 + 10 * 0.2 * 2 * 1e-6, rel=1e-12)


def test_theorem9_hand_computed_advanced_wins():
    # rho = 1/100, s = 1: eps~ = log(1 + 0.01 (e^0.1 - 1)) = 0.0010511565221...
    et = 0.0010511565221128704
    eps, delta = P.epsilon_seed_composition(0.1, 1e-8, rounds=10000, clients_per_round=1,
                                            n_clients=100, delta_hat=1e-5)
    advanced = math.sqrt(2 * 10000 * math.log(1e5)) * et + 10000 * et * math.expm1(et)
    assert advanced < 10000 * et
    assert eps == pytest.approx(advanced, rel=1e-12)
    assert eps == pytest.approx(0.5154552905595928, rel=1e-12)
    assert delta == pytest.approx(1e-5 + 10000 * 0.01 * 1e-8, rel=1e-12)


def test_theorem9_full_participation_and_no_overflow():
    eps, _ = P.epsilon_seed_composition(0.3, 1e-6, rounds=4, clients_per_round=5, n_clients=5,
                                        delta_hat=1e-3)
    assert eps == pytest.approx(4 * 5 * 0.3)  # rho = 1: eps~ = s eps, basic composition
    eps, _ = P.epsilon_seed_composition(900.0, 1e-6, rounds=3, clients_per_round=1,
                                        n_clients=2, delta_hat=1e-3)
    assert eps == pytest.approx(3 * (900.0 + math.log(0.5)), rel=1e-12)


def test_closed_forms_hand_values_and_inverses():
    # sigma^2 = K log(1/delta) tau^2 / (N^2 eps^2) with o = 1
    s = P.dp_rsgd_sigma(0.15, 1e-4, n_samples=70, local_steps=5, tau=1.0)
    assert s == pytest.approx(math.sqrt(5 * math.log(1e4)) / (70 * 0.15), rel=1e-12)
    assert P.gaussian_mechanism_sigma(0.5, 1e-5, 2.0) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) * 2.0 / 0.5, rel=1e-12)
    for eps in (0.05, 0.15, 1.0, 3.0):
        kw = dict(n_samples=100, local_steps=3, tau=0.7)
        assert P.dp_rsgd_epsilon(P.dp_rsgd_sigma(eps, 1e-4, o=2.5, **kw), 1e-4, o=2.5, **kw) \
            == pytest.approx(eps, rel=1e-12)
        kw = dict(n_samples=100, local_steps=3, inner_steps=10, tau=0.7)
        assert P.dp_rsvrg_epsilon(P.dp_rsvrg_sigma(eps, 1e-4, sigma_tilde=0.3, **kw), 1e-4,
                                  sigma_tilde=0.3, **kw) == pytest.approx(eps, rel=1e-12)
        assert P.gaussian_mechanism_epsilon(P.gaussian_mechanism_sigma(eps, 1e-5, 3.0), 1e-5,
                                            3.0) == pytest.approx(eps, rel=1e-12)
    assert P.dp_rsgd_epsilon(0.0, 1e-4, n_samples=10, local_steps=1) == math.inf


# ---------------------------------------------------------------------------- dp-accounting

def test_dp_accounting_known_values():
    # Facts seen on this machine (dp-accounting 0.6.0): Poisson q = 0.1, noise multiplier 1,
    # 100 steps, delta = 1e-5: RDP 7.90, PLD 7.05.
    rdp = P.epsilon_subsampled_gaussian(1.0, 0.1, 100, 1e-5, accountant="rdp")
    pld = P.epsilon_subsampled_gaussian(1.0, 0.1, 100, 1e-5, accountant="pld")
    assert rdp == pytest.approx(7.90, abs=0.01)
    assert pld == pytest.approx(7.05, abs=0.01)


def test_prirfed_accountants_reduce_to_the_known_values():
    # one client always taking part, K = 1, b/N = 0.1: noise multiplier b sigma / tau = 1
    st = P.DPSettings(n_samples=100, batch_size=10, local_steps=1, rounds=100, tau=2.0)
    sigma = 2.0 / 10
    assert P.epsilon_rdp(sigma, 1e-5, st, sampling="poisson") == pytest.approx(7.90, abs=0.01)
    assert P.epsilon_pld(sigma, 1e-5, st, sampling="poisson") == pytest.approx(7.05, abs=0.01)
    # same rounds split as 50 rounds x 2 local steps: the same composition
    st2 = P.DPSettings(n_samples=100, batch_size=10, local_steps=2, rounds=50, tau=2.0)
    assert P.epsilon_pld(sigma, 1e-5, st2, sampling="poisson") == pytest.approx(7.05, abs=0.01)
    # (issue 15) the fixed-size batches DP-RSGD draws are not Poisson: PLD refuses them
    with pytest.raises(ValueError, match="full batch only.*RDP"):
        P.epsilon_pld(sigma, 1e-5, st)


def test_client_sampling_and_relations_order():
    base = dict(n_samples=70, batch_size=35, local_steps=3, rounds=30, tau=1.0)
    every = P.DPSettings(clients_per_round=4, n_clients=4, **base)
    some = P.DPSettings(clients_per_round=1, n_clients=4, **base)
    sigma = 0.1
    assert (P.epsilon_pld(sigma, 1e-5, some, sampling="poisson")
            < P.epsilon_pld(sigma, 1e-5, every, sampling="poisson"))
    assert P.epsilon_rdp(sigma, 1e-5, some) < P.epsilon_rdp(sigma, 1e-5, every)
    rep = P.privacy_report(sigma, 1e-5, some)
    # PLD is the tightest of the add/remove accountants; replace-one costs more than add/remove
    assert rep.eps_pld_poisson <= rep.eps_rdp_poisson
    assert rep.eps_rdp_poisson < rep.eps_rdp
    assert "PLD" in str(rep) and set(rep.as_dict()) >= {"eps_seed", "eps_rdp", "eps_pld_poisson"}
    assert P.epsilon_rdp(0.0, 1e-5, some) == math.inf


def test_dp_rsvrg_rdp_accounting():
    st = P.DPSettings(n_samples=100, trainer="dp-rsvrg", local_steps=2, inner_steps=10,
                      rounds=10, clients_per_round=1, n_clients=16)
    e1 = P.epsilon_rdp(8.0, 1e-4, st)
    e2 = P.epsilon_rdp(16.0, 1e-4, st)
    assert 0 < e2 < e1 < math.inf
    rep = P.privacy_report(8.0, 1e-4, st)
    assert rep.eps_pld_poisson is None and rep.eps_rdp == pytest.approx(e1)
    sigma = P.calibrate_sigma(e1, 1e-4, st, accountant="rdp", rtol=0.3)
    assert 8.0 * (1 - 1e-9) <= sigma <= 8.0 * 1.3
    with pytest.raises(ValueError, match="trainer"):
        P.epsilon_pld(8.0, 1e-4, st)
    with pytest.raises(ValueError, match="sampling"):
        P.epsilon_rdp(8.0, 1e-4, st, sampling="poisson")


@pytest.mark.parametrize("accountant", ["pld", "rdp", "seed"])
def test_calibrate_sigma_is_the_smallest(accountant):
    st = P.DPSettings(n_samples=70, batch_size=70 if accountant == "pld" else 35,
                      local_steps=2, rounds=20, clients_per_round=1, n_clients=4)
    target, delta = 1.0, 1e-4
    rtol = 1e-3 if accountant == "seed" else 2e-2
    sigma = P.calibrate_sigma(target, delta, st, accountant=accountant, rtol=rtol)
    eps_of = {"pld": P.epsilon_pld, "rdp": P.epsilon_rdp, "seed": P.epsilon_seed}[accountant]
    assert eps_of(sigma, delta, st) <= target
    assert eps_of(sigma * (1 - 3 * rtol), delta, st) > target


# ---------------------------------------------------------------------------- impossible budgets

@pytest.mark.parametrize("delta", [1.0, 1.5, 0.0, -1e-5, float("nan")])
def test_bad_delta_raises(delta):
    st = P.DPSettings(n_samples=10)
    for call in (lambda: P.epsilon_seed_composition(1.0, delta, rounds=1, clients_per_round=1,
                                                    n_clients=1, delta_hat=1e-5),
                 lambda: P.calibrate_sigma(1.0, delta, st),
                 lambda: P.epsilon_pld(1.0, delta, st),
                 lambda: P.dp_rsgd_sigma(1.0, delta, n_samples=10, local_steps=1),
                 lambda: P.gaussian_mechanism_sigma(1.0, delta)):
        with pytest.raises(ValueError, match="delta"):
            call()
    with pytest.raises(ValueError, match="delta_hat"):
        P.epsilon_seed_composition(1.0, 1e-5, rounds=1, clients_per_round=1, n_clients=1,
                                   delta_hat=delta)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("inf")])
def test_bad_eps_raises(eps):
    st = P.DPSettings(n_samples=10)
    with pytest.raises(ValueError, match="target_eps"):
        P.calibrate_sigma(eps, 1e-5, st)
    with pytest.raises(ValueError, match="eps"):
        P.dp_rsgd_sigma(eps, 1e-5, n_samples=10, local_steps=1)
    with pytest.raises(ValueError, match="eps"):
        P.epsilon_seed_composition(eps, 1e-5, rounds=1, clients_per_round=1, n_clients=1,
                                   delta_hat=1e-5)


@pytest.mark.parametrize("q", [0.0, -0.1, 1.01])
def test_bad_sample_rate_raises(q):
    with pytest.raises(ValueError, match="sample_rate"):
        P.epsilon_subsampled_gaussian(1.0, q, 10, 1e-5)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="sigma"):
        P.epsilon_rdp(-1.0, 1e-5, P.DPSettings(n_samples=10))
    with pytest.raises(ValueError, match="sigma"):
        P.gaussian_tangent_noise(rf.Sphere(3), np.array([1.0, 0, 0]), -0.5)
    with pytest.raises(ValueError, match="batch_size"):
        P.DPSettings(n_samples=10, batch_size=11)
    with pytest.raises(ValueError, match="clients_per_round"):
        P.DPSettings(n_samples=10, clients_per_round=5, n_clients=4)
    with pytest.raises(ValueError, match="trainer"):
        P.DPSettings(n_samples=10, trainer="dp-adam")
    with pytest.raises(ValueError, match="accountant"):
        P.calibrate_sigma(1.0, 1e-5, P.DPSettings(n_samples=10), accountant="moments")
    with pytest.raises(ValueError, match="accountant"):
        P.epsilon_subsampled_gaussian(1.0, 0.1, 10, 1e-5, accountant="pld",
                                      sampling="without_replacement", dataset_size=100)
    with pytest.raises(ValueError, match="tau"):
        P.DPSettings(n_samples=10, tau=0.0)


def test_unreachable_target_raises():
    # a cap on sigma below what the target needs, for each accountant
    st = P.DPSettings(n_samples=100, batch_size=100, local_steps=1, rounds=1)
    for accountant in ("pld", "rdp"):
        with pytest.raises(ValueError, match="no sigma"):
            P.calibrate_sigma(0.05, 1e-5, st, accountant=accountant, sigma_max=0.1)


# ---------------------------------------------------------------------------- clipping

def test_clip_basics():
    M = rf.Sphere(4)
    x = np.array([1.0, 0, 0, 0])
    v = np.array([[0, 3.0, 4.0, 0], [0, 0.3, 0.4, 0], [0, 0, 0, 0]])
    out = P.clip(M, x, v, 1.0)
    np.testing.assert_allclose(out, [[0, 0.6, 0.8, 0], [0, 0.3, 0.4, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(P.clip(M, x, v, np.inf), v)
    with pytest.raises(ValueError, match="tau"):
        P.clip(M, x, v, 0.0)


def test_clip_uses_the_metric_spd():
    M = rf.SPD(2)
    x = np.diag([4.0, 1.0])
    u = np.diag([4.0, 0.0])  # |u|_x = |x^-1/2 u x^-1/2|_F = 1, Frobenius 4
    np.testing.assert_allclose(P.clip(M, x, u, 2.0), u)
    np.testing.assert_allclose(P.clip(M, x, u, 0.5), u / 2)


def _pca_data(rng, m, d):
    # heavy-tailed scales so that some samples are clipped and some are not
    return rng.standard_normal((m, d)) * rng.exponential(1.0, (m, 1))


@pytest.mark.parametrize("backend", PCA_BACKENDS)
@pytest.mark.parametrize("r", [None, 1, 4])
@pytest.mark.parametrize("tau", [1e-3, 0.5, 3.0, np.inf])
def test_fused_pca_equals_materialized(backend, r, tau):
    rng = np.random.default_rng(11)
    d = 17
    M = rf.Sphere(d) if r is None else rf.Stiefel(d, r)
    X = M.random_point(rng=rng)
    Z = _pca_data(rng, 150, d)
    Z[3] = 0.0  # a zero sample
    Z[4] = X[:, 0] if r else X  # a sample in span(X): zero gradient
    c = 2.0
    ref = P.clipped_sum_reference(M, X, P.pca_sample_rgrads(Z, X, c), tau)
    got = P.clipped_sum_pca(Z, X, tau, c, backend=backend)
    assert got.shape == M.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10 * max(1.0, np.abs(ref).max()))
    assert M.is_tangent(X, got, atol=1e-9 * max(1.0, np.abs(got).max()))


def test_fused_pca_unclipped_is_the_full_gradient():
    rng = np.random.default_rng(2)
    M = rf.Stiefel(12, 3)
    X = M.random_point(rng=rng)
    Z = rng.standard_normal((40, 12))
    full = -2.0 * M.proj(X, Z.T @ (Z @ X))
    for backend in PCA_BACKENDS:
        np.testing.assert_allclose(P.clipped_sum_pca(Z, X, np.inf, 2.0, backend=backend), full,
                                   atol=1e-12)


def test_fused_pca_bad_shapes():
    with pytest.raises(ValueError, match="X"):
        P.clipped_sum_pca(np.ones((5, 4)), np.ones((3, 2)), 1.0)
    with pytest.raises(ValueError, match="Z"):
        P.clipped_sum_pca(np.ones((5, 4, 1)), np.ones((4, 2)), 1.0)


def _frechet_case(name, rng):
    if name == "spd":
        M = rf.SPD(3)
    else:
        M = rf.Lorentz(3)
    x = M.random_point(rng=rng)
    Y = M.random_point(60, rng=rng)
    return M, x, Y


@pytest.mark.parametrize("name", ["spd", "lorentz"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("tau", [0.3, 2.0, np.inf])
def test_fused_frechet_equals_materialized(name, weighted, tau):
    rng = np.random.default_rng(5)
    M, x, Y = _frechet_case(name, rng)
    Y[0] = x  # zero gradient
    w = rng.uniform(-1.0, 2.0, Y.shape[0]) if weighted else None
    ref = P.clipped_sum_reference(M, x, P.frechet_sample_rgrads(M, x, Y, w), tau)
    got = P.clipped_sum_frechet(M, x, Y, tau, w)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10 * max(1.0, np.abs(ref).max()))


# ---------------------------------------------------------------------------- sensitivity

def _worst_pca_samples(M, X, c, tau, rng, d):
    """Replacement samples: huge, zero, in span(X), and exactly at the threshold."""
    Xm = X[:, None] if X.ndim == 1 else X
    z = rng.standard_normal(d)
    n = float(M.norm(X, P.pca_sample_rgrads(z[None], X, c)[0]))
    at = z * math.sqrt(tau / n)  # the gradient is quadratic in z
    assert float(M.norm(X, P.pca_sample_rgrads(at[None], X, c)[0])) == pytest.approx(tau)
    return [1e8 * rng.standard_normal(d), np.zeros(d), Xm[:, 0].copy(), at,
            -1e6 * at, rng.standard_normal(d)]


@pytest.mark.parametrize("backend", PCA_BACKENDS)
@pytest.mark.parametrize("r", [None, 3])
def test_pca_clipped_sum_sensitivity(backend, r):
    rng = np.random.default_rng(7)
    d, m, tau, c = 10, 30, 0.8, 2.0
    M = rf.Sphere(d) if r is None else rf.Stiefel(d, r)
    X = M.random_point(rng=rng)
    Z = _pca_data(rng, m, d)
    Z[0] = 1e7 * Z[0]
    worst = _worst_pca_samples(M, X, c, tau, rng, d)
    S = lambda D: P.clipped_sum_pca(D, X, tau, c, backend=backend)  # noqa: E731
    base = S(Z)
    slack = 1 + 1e-9
    for z in worst:
        for j in (0, 1, 5):  # replace-one: |S(D) - S(D')|_x <= 2 tau
            D2 = Z.copy()
            D2[j] = z
            assert M.norm(X, S(D2) - base) <= 2 * tau * slack
        # add/remove-one: |S(D + z) - S(D)|_x <= tau
        assert M.norm(X, S(np.vstack([Z, z])) - base) <= tau * slack
    # the bound is attained: two opposite threshold-size gradients are 2 tau apart
    at = worst[3]
    D1, D2 = Z.copy(), Z.copy()
    D1[1], D2[1] = at, 0.0
    assert M.norm(X, S(D1) - S(D2)) == pytest.approx(tau, rel=1e-9)


@pytest.mark.parametrize("name", ["spd", "lorentz"])
def test_frechet_clipped_sum_sensitivity(name):
    rng = np.random.default_rng(9)
    M, x, Y = _frechet_case(name, rng)
    tau = 0.5
    u = M.random_tangent(x, rng=rng)  # unit norm
    worst = [M.exp(x, 8.0 * u),           # far away: |grad| = 16 >> tau
             x.copy(),                      # zero gradient
             M.exp(x, (tau / 2) * u),       # |grad| = 2 dist = tau exactly
             M.exp(x, -(tau / 2) * u)]
    assert 2 * float(M.dist(x, worst[2])) == pytest.approx(tau, rel=1e-9)
    S = lambda D: P.clipped_sum_frechet(M, x, D, tau)  # noqa: E731
    base = S(Y)
    for yz in worst:
        for j in (0, 7):
            D2 = Y.copy()
            D2[j] = yz
            assert M.norm(x, S(D2) - base) <= 2 * tau * (1 + 1e-9)
        assert M.norm(x, S(np.concatenate([Y, yz[None]])) - base) <= tau * (1 + 1e-9)
    D1, D2 = Y.copy(), Y.copy()
    D1[3], D2[3] = worst[2], worst[3]  # opposite threshold gradients: exactly 2 tau apart
    assert M.norm(x, S(D1) - S(D2)) == pytest.approx(2 * tau, rel=1e-7)


# ---------------------------------------------------------------------------- noise

def _spanning_tangents(M, x, rng, k):
    return np.stack([M.random_tangent(x, rng=rng) for _ in range(k)])


@pytest.mark.parametrize("name", ["spd", "lorentz"])
def test_tangent_noise_covariance_is_isotropic_in_the_metric(name):
    """E <e,u>_x <e,v>_x = sigma^2 <u,v>_x for tangent u, v (covariance sigma^2 I in an
    orthonormal basis of the metric), at a point far from the identity/origin."""
    rng = np.random.default_rng(1234)
    M = rf.SPD(3) if name == "spd" else rf.Lorentz(3)
    if name == "spd":
        x = np.array([[4.0, 1.0, 0.5], [1.0, 2.0, 0.3], [0.5, 0.3, 0.5]])
    else:
        x = M.exp(M.origin, np.array([0.0, 1.5, -0.7, 0.4]))
    sigma, n = 0.7, 40_000
    e = P.gaussian_tangent_noise(M, np.broadcast_to(x, (n,) + M.shape), sigma, rng=rng)
    assert e.shape == (n,) + M.shape
    assert M.is_tangent(np.broadcast_to(x, e.shape), e, atol=1e-8)
    U = _spanning_tangents(M, x, rng, M.dim + 2)
    coords = np.stack([M.inner(x, e, u) for u in U], axis=1)  # (n, k)
    emp = coords.T @ coords / n
    gram = np.array([[M.inner(x, a, b) for b in U] for a in U])
    # sample second moments: sd ~ sigma^2 sqrt(2/n) ~ 0.004 for unit vectors
    np.testing.assert_allclose(emp, sigma ** 2 * gram, atol=0.03 * sigma ** 2)
    np.testing.assert_allclose(np.mean(coords, axis=0), 0.0, atol=0.03 * sigma)
    sq = M.inner(x, e, e)
    assert np.mean(sq) == pytest.approx(M.dim * sigma ** 2, rel=0.02)


def test_tangent_noise_is_reproducible_and_zero_at_sigma_zero():
    M = rf.SPD(2)
    x = np.diag([2.0, 0.5])
    a = P.gaussian_tangent_noise(M, x, 0.3, rng=5)
    b = P.gaussian_tangent_noise(M, x, 0.3, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(P.gaussian_tangent_noise(M, x, 0.0, rng=1), 0.0)


def test_public_surface():
    for name in P.__all__:
        assert hasattr(P, name), name


def test_fused_pca_parallel_driver_matches_serial():
    numba = pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    M = rf.Stiefel(60, 3)
    X = M.random_point(rng=rng)
    Z = _pca_data(rng, 2000, 60)  # above the kernels' parallel threshold
    ref = P.clipped_sum_reference(M, X, P.pca_sample_rgrads(Z, X, 2.0), 0.5)
    par = P.clipped_sum_pca(Z, X, 0.5, 2.0, backend="numba")
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        ser = P.clipped_sum_pca(Z, X, 0.5, 2.0, backend="numba")
    finally:
        numba.set_num_threads(threads)
    scale = max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(par, ref, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(ser, ref, rtol=0, atol=1e-10 * scale)


# ---------------------------------------------------------------------------- exact and bounded
# (issue 29) PLD against an independent closed form, bounded cost, extreme noise.

def _gdp_epsilon(mu, delta):
    """Exact epsilon of mu-Gaussian DP at ``delta`` (Dong, Roth & Su 2019, Corollary 2.13):
    the root of ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (decreasing
    in eps; the second term in log space, so no overflow); 0 when ``delta(0) <= delta``."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    def gap(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2)) \
            - delta
    if gap(0.0) <= 0:
        return 0.0
    return brentq(gap, 0.0, mu * mu + 40 * mu + 10, xtol=1e-12, rtol=1e-12)


# N, K, T, sigma, tau: full batch, every round. One DP-RSGD step releases the mean of N
# clipped gradients plus N(0, sigma^2): replacing one sample moves the mean by <= 2 tau / N,
# so K T steps are mu-GDP with mu = sqrt(K T) (2 tau / N) / sigma.
GDP_CASES = [(30, 20, 1, 0.2, 1.0), (30, 1, 20, 0.2, 1.0), (100, 2, 10, 0.05, 3.0),
             (12, 3, 4, 1.5, 0.5), (30, 5, 40, 0.3, 1.0)]


@pytest.mark.parametrize("n, K, T, sigma, tau", GDP_CASES)
def test_full_batch_pld_is_the_exact_gaussian_dp_epsilon(n, K, T, sigma, tau):
    """Before issue 29 the PLD counted the replace-one sensitivity twice (dp-accounting's
    REPLACE_ONE Gaussian already places the neighbours 2 deviations apart): N = 30, 20 steps,
    sigma = 0.2 gave 16.5 where the exact value is 7.00. Now it equals the closed form up to
    its documented discretization (pessimistic: never below), and RDP stays above both."""
    delta = 1e-5
    st = P.DPSettings(n_samples=n, local_steps=K, rounds=T, tau=tau)
    exact = _gdp_epsilon(math.sqrt(K * T) * (2 * tau / n) / sigma, delta)
    got = P.epsilon_pld(sigma, delta, st)
    vdi = P.pld_discretization(sigma, st)
    assert exact - 1e-9 <= got <= exact + K * T * vdi + 1e-9
    assert P.epsilon_rdp(sigma, delta, st) >= exact - 1e-9
    if (n, K, T, sigma) == (30, 20, 1, 0.2):
        assert exact == pytest.approx(7.00, abs=5e-3)


def test_calibrate_sigma_pld_is_the_exact_gaussian_dp_noise():
    """The noise calibrated with PLD for eps = 3 (N = 30, 20 steps) is the exact mu-GDP one
    (0.415; it was 0.83 with the double count), below RDP's (0.446)."""
    from scipy.optimize import brentq

    st = P.DPSettings(n_samples=30, local_steps=20, rounds=1, tau=1.0)
    target, delta, rtol = 3.0, 1e-5, 1e-3
    exact = brentq(lambda s: _gdp_epsilon(math.sqrt(20) * 2 / (30 * s), delta) - target,
                   0.05, 5.0, xtol=1e-10)
    pld = P.calibrate_sigma(target, delta, st, accountant="pld", rtol=rtol)
    rdp = P.calibrate_sigma(target, delta, st, accountant="rdp", rtol=rtol)
    # returned: the upper end of a bracket of relative width rtol around the PLD's root,
    # which lies within the discretization of the exact root (above it: pessimistic)
    assert exact * (1 - 1e-9) <= pld <= exact * (1 + 3 * rtol)
    assert pld < rdp


PLD_MEMORY = textwrap.dedent(r'''
    import resource, sys
    from rfl_fast.privacy import accounting as A
    A.epsilon_pld(0.5, 1e-5, A.DPSettings(n_samples=30, local_steps=2, rounds=2))   # warm-up
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sigma, K, T, s, n = float(sys.argv[1]), *map(int, sys.argv[2:])
    st = A.DPSettings(n_samples=30, local_steps=K, rounds=T, clients_per_round=s, n_clients=n)
    eps = A.epsilon_pld(sigma, 1e-5, st)
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base      # KiB (Linux)
    print(eps, grew * 1024)
''')


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
@pytest.mark.parametrize("sigma, K, T, s, n", [
    (0.01, 20, 1, 1, 1), pytest.param(1e-3, 20, 1, 1, 1, marks=pytest.mark.full),
    pytest.param(3e-3, 5, 200, 1, 4, marks=pytest.mark.full)])    # the fast tier: one case
def test_pld_memory_is_bounded_for_small_sigma(sigma, K, T, s, n):
    """The PLD's discretization is widened for small sigma so that it holds at most
    PLD_MAX_POINTS values (pld_discretization): before issue 29 sigma = 0.01 took 1.8 GB and
    0.003 passed 24 GB; now each case grows the process by a few hundred MB at most (the
    bound is PLD_MAX_POINTS = 2^20 values times the few arrays and FFT buffers dp-accounting
    keeps)."""
    from subprocess_env import same_package

    out = subprocess.run([sys.executable, "-c", PLD_MEMORY, str(sigma), str(K), str(T), str(s),
                          str(n)], capture_output=True, text=True, timeout=300,
                         **same_package())
    assert out.returncode == 0, out.stderr[-2000:]
    eps, grew = map(float, out.stdout.split())
    assert math.isfinite(eps) and eps > 0
    assert grew < 768 * 2**20, f"the PLD grew the process by {grew / 2**20:.0f} MB"


@pytest.mark.parametrize("sigma, want", [(1e-300, math.inf), (1e-10, math.inf),
                                         (1e200, 0.0), (1e300, 0.0)])
def test_extreme_sigmas_give_inf_or_zero_never_an_overflow(sigma, want):
    """Before issue 29 sigma >= 1e200 raised OverflowError (RDP, PLD) or 'math domain error'
    (RDP with client sampling), and sigma = 1e-10 made the PLD allocate without bound. Tiny
    noise publishes the data (eps = inf, a valid bound); huge noise makes the whole mechanism,
    unsampled, (0, delta)-DP (eps = 0, exact)."""
    full = P.DPSettings(n_samples=30, local_steps=2, rounds=3, tau=1.0)
    sampled = P.DPSettings(n_samples=30, batch_size=10, local_steps=2, rounds=3, tau=1.0,
                           clients_per_round=1, n_clients=3)
    rsvrg = P.DPSettings(n_samples=30, trainer="dp-rsvrg", local_steps=2, inner_steps=5,
                         rounds=3)
    got = [P.epsilon_rdp(sigma, 1e-5, full), P.epsilon_rdp(sigma, 1e-5, sampled),
           P.epsilon_rdp(sigma, 1e-5, sampled, sampling="poisson"),
           P.epsilon_rdp(sigma, 1e-5, rsvrg), P.epsilon_pld(sigma, 1e-5, full),
           P.epsilon_pld(sigma, 1e-5, full, sampling="poisson")]
    assert got == [want] * len(got)
    report = P.privacy_report(sigma, 1e-5, full)
    assert report.eps_rdp == want and report.eps_pld_poisson == want
    # the ledger of a run agrees (its columns use the same shortcut)
    prob = rf.problems.KPCA(np.random.default_rng(0).standard_normal((2, 30, 4)), 2)
    alg = rf.algorithms.PriRFed(0.1, 2, sigma=sigma, clip=1.0, accountant=("rdp", "pld"))
    cols = alg.for_run(prob, rf.federation.Full(), 3).ledger.columns
    assert cols["eps_rdp"][1:].tolist() == [want] * 3
    assert cols["eps_pld"][1:].tolist() == [want] * 3


def test_zero_epsilon_only_where_the_mechanism_is_zero_delta_private():
    """eps = 0 is returned exactly where the closed form says so: delta >= erf(mu/(2 sqrt 2)),
    and just below that noise the accountants give a positive epsilon."""
    st = P.DPSettings(n_samples=30, local_steps=2, rounds=3, tau=1.0)
    delta = 1e-5
    from scipy.special import erfinv

    mu_of = lambda sigma: math.sqrt(6) * (2 / 30) / sigma              # noqa: E731
    edge = math.sqrt(6) * (2 / 30) / (2 * math.sqrt(2) * erfinv(delta))
    assert math.erf(mu_of(edge * 1.01) / (2 * math.sqrt(2))) <= delta
    assert _gdp_epsilon(mu_of(edge * 1.01), delta) == 0.0
    assert P.epsilon_rdp(edge * 1.01, delta, st) == 0.0
    assert P.epsilon_pld(edge * 1.01, delta, st) == 0.0
    assert P.epsilon_pld(edge * 0.5, delta, st) > 0.0
    assert P.epsilon_rdp(edge * 0.5, delta, st) > 0.0
