"""Hostile inputs (issue 15): each test plays an adversary against one privacy or safety claim.

1. a curious Flower server (seed / sigma in its messages) -- ``test_flower.py`` holds the
   loopback deployment; the in-process link is tested here;
2. one extreme sample against the clipped-sum bound (all backends, and PriRFed's problem path);
3. resuming a PriRFed checkpoint past its budget;
4. the accountant against the mechanism actually run (full batch, fixed-size batches);
5. HyperbolicPrediction, whose per-sample terms do not bound one sample's influence;
6. NaN / inf norms and numerically singular SPD samples;
7. crafted CIFAR-10 batches and corrupt checkpoints.
"""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import privacy as P
from rfl_fast.algorithms.pri import PriRFed
from rfl_fast.federation import Uniform, run
from rfl_fast.kernels import fused
from rfl_fast.problems import KPCA, HyperbolicPrediction, SPDMean

BACKENDS = ["numpy", "numba"] + (["cpp"] if fused.compiled_available() else [])


# ------------------------------------------------------------------ 2. one sample, bounded

def _adversarial_samples(rng, X, scales=(1.0, 1e10, 1e100, 1e200, 1e300),
                         offsets=(0.0, 1e-300, 1e-17, 1e-12, 1e-6, 1.0, 1e6)):
    """Samples of every size almost in span(X) (offset: the relative normal component)."""
    d, r = X.shape
    for s in scales:
        for off in offsets:
            u = X @ rng.standard_normal(r)
            v = rng.standard_normal(d)
            v -= X @ (X.T @ v)
            z = u / np.linalg.norm(u) + off * v / np.linalg.norm(v)
            z = z * (s / np.abs(z).max())
            if np.isfinite(z).all():
                yield z


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("r", [1, 3])
def test_clipped_sum_pca_one_sample_moves_the_sum_by_at_most_tau(backend, r):
    rng = np.random.default_rng(r)
    d, tau, c = 24, 0.3, 2.0
    X = rf.Stiefel(d, r).random_point(rng=rng)
    Z = rng.standard_normal((50, d)) * 3.0
    base = P.clipped_sum_pca(Z, X, tau, c, backend=backend)
    worst = 0.0
    for z in _adversarial_samples(rng, X):
        for j in (0, 25, 50):                       # added first, in the middle, last
            S = P.clipped_sum_pca(np.insert(Z, j, z, axis=0), X, tau, c, backend=backend)
            assert np.isfinite(S).all()
            worst = max(worst, np.linalg.norm(S - base))
    # add/remove-one sensitivity tau, up to rounding of the sum of ~50 terms of size <= tau
    assert worst <= tau * (1 + 1e-12)
    assert worst > 0.5 * tau            # the adversary's sample does count (not dropped)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clipped_sum_pca_replace_one_sample_moves_at_most_two_tau(backend):
    rng = np.random.default_rng(7)
    d, r, tau = 16, 2, 1.0
    X = rf.Stiefel(d, r).random_point(rng=rng)
    Z = rng.standard_normal((30, d))
    adv = list(_adversarial_samples(rng, X))
    for a, b in zip(adv, adv[1:] + adv[:1]):
        Za, Zb = Z.copy(), Z.copy()
        Za[5], Zb[5] = a, b
        diff = np.linalg.norm(P.clipped_sum_pca(Za, X, tau, 2.0, backend=backend)
                              - P.clipped_sum_pca(Zb, X, tau, 2.0, backend=backend))
        assert diff <= 2 * tau * (1 + 1e-12)


def test_kpca_problem_path_bounds_one_sample():
    """PriRFed's clipped step for kPCA goes through the problem's sample_rgrad_norms and
    weighted_rgrad: one hostile sample (up to 1e150, almost in span(X)) moves it by <= tau."""
    rng = np.random.default_rng(3)
    d, r, m, tau = 12, 2, 20, 0.5
    X = rf.Stiefel(d, r).random_point(rng=rng)
    Z = rng.standard_normal((m, d))
    worst = 0.0
    for z in _adversarial_samples(rng, X, scales=(1.0, 1e10, 1e50, 1e150)):
        sums = []
        for data in (Z, np.vstack([Z, z])):
            prob = KPCA(data[None], r)
            coef = P.clip_factors(prob.sample_rgrad_norms(0, X), tau)
            sums.append(prob.weighted_rgrad(0, X, coef))
        worst = max(worst, np.linalg.norm(sums[1] - sums[0]))
    assert worst <= tau * (1 + 1e-12)


# ------------------------------------------------------------------ 5. hyperbolic refused

def _hyperbolic(rng, n=2, m=12):
    tree = rf.data.hyperbolic_tree(n * m + 1, n_features=3, rng=rng)
    feats = tree.features[1:].reshape(n, m, -1)
    return HyperbolicPrediction(feats, tree.points[1:].reshape(n, m, 3), tree.features[0])


def test_hyperbolic_one_sample_moves_every_term():
    """Why PriRFed refuses it: replacing one sample (its feature moved next to the test
    feature) changes the kernel weights of all the client's samples, so the clipped terms of
    the 7 samples that did NOT change move by more than the 2 tau replace-one allows."""
    tree = rf.data.hyperbolic_tree(9, n_features=2, rng=0)
    targets, x = tree.points[1:].reshape(1, 8, 3), tree.points[0]
    rng = np.random.default_rng(121)        # a seeded draw of features (adversary's choice)
    feats, w = rng.standard_normal((1, 8, 2)) * 0.5, rng.standard_normal(2) * 0.5
    feats2 = feats.copy()
    feats2[0, 0] = w + rng.standard_normal(2) * 0.05
    pa = HyperbolicPrediction(feats, targets, w, gamma=1e-3)
    pb = HyperbolicPrediction(feats2, targets, w, gamma=1e-3)
    assert pa.dp_unbounded
    tau, others = 1e-2, np.arange(1, 8)
    sums = []
    for p in (pa, pb):
        coef = P.clip_factors(p.sample_rgrad_norms(0, x, others), tau)
        sums.append(p.weighted_rgrad(0, x, coef, others))
    assert rf.Lorentz(2).norm(x, sums[1] - sums[0]) > 2 * tau


def test_prirfed_refuses_hyperbolic_unless_uncertified():
    prob = _hyperbolic(np.random.default_rng(1))
    alg = PriRFed(0.05, 1, sigma=0.5, clip=1.0)
    with pytest.raises(ValueError, match="HyperbolicPrediction is not covered.*couple all"):
        run(prob, alg, 2, Uniform(1), seed=0)
    with pytest.raises(ValueError, match="uncertified"):
        PriRFed(0.05, 1, target=(1.0, 1e-5), clip=1.0, uncertified=True)
    res = run(prob, PriRFed(0.05, 1, sigma=0.5, clip=1.0, uncertified=True), 2, Uniform(1),
              seed=0)
    assert np.isnan(res.history["eps_rdp"][1:]).all()


# ------------------------------------------------------------------ 6. NaN is no "unclipped"

@pytest.mark.parametrize("bad", [np.nan, np.inf, -1.0])
def test_clip_factors_refuses_non_finite_norms(bad):
    with pytest.raises(ValueError, match="norms: expected finite"):
        P.clip_factors(np.array([1.0, bad, 0.5]), 1.0)


def test_spd_sample_of_condition_1e100_is_an_error_not_nan():
    good = np.stack([np.eye(2) * 1.5, np.diag([2.0, 0.7])])
    prob = SPDMean(np.stack([good, np.stack([good[0], np.diag([1e100, 1.0])])]))
    x = np.array([[2.0, 0.9], [0.9, 1.0]])
    with pytest.raises(ValueError, match="numerically singular"):
        prob.sample_rgrad_norms(1, x)
    with pytest.raises(ValueError, match="numerically singular"):
        prob.rgrad(np.array([1]), x[None])
    with pytest.raises(ValueError, match="numerically singular"):
        run(prob, PriRFed(0.05, 1, sigma=0.1, clip=1.0), 1, Uniform(2), seed=0, x0=x)
