"""The federated problems: gradients against finite differences and each other, per-sample
gradients and norms, mini-batches, optima, batching over clients, bad input."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.data import (ClientData, brockett_matrices, eigengap_clients, hyperbolic_tree,
                           wishart_spd)
from rfl_fast.problems import (KPCA, SPDMean, Brockett, HyperbolicPrediction, Problem,
                               SpherePCA)

SIZES = (5, 7, 5, 7)   # unequal clients; pairs of equal size for full-index mini-batches
D = 6


def _rows(rng, d=D, sizes=SIZES):
    return [rng.standard_normal((m, d)) * (1.0 + 0.3 * i) for i, m in enumerate(sizes)]


def _spd(rng, n=3, sizes=SIZES):
    return [wishart_spd(m, n, df=n + 2, rng=rng) for m in sizes]


def _tree_clients():
    t = hyperbolic_tree(40, n_features=3, rng=3)
    perm = np.random.default_rng(0).permutation(40)
    parts = np.split(perm, np.cumsum(SIZES)[:-1])[: len(SIZES)]
    return [t.features[p] for p in parts], [t.points[p] for p in parts], t


def make(name):
    rng = np.random.default_rng(7)
    if name == "sphere":
        return SpherePCA(_rows(rng))
    if name == "sphere_cov":
        return SpherePCA.from_covariances(np.stack([z.T @ z for z in _rows(rng)]))
    if name == "kpca":
        return KPCA(_rows(rng), 3, gram=False)
    if name == "kpca_gram":
        return KPCA(_rows(rng), 3, gram=True, weighting="samples")
    if name == "kpca_cov":
        return KPCA.from_covariances(np.stack([z.T @ z for z in _rows(rng)]), 2)
    if name == "brockett":
        a = brockett_matrices(1, sum(SIZES), 5, rng=rng)[0]
        return Brockett(np.split(a, np.cumsum(SIZES)[:-1]), 3)
    if name == "spd":
        return SPDMean(_spd(rng))
    if name == "hyperbolic":
        feats, targets, t = _tree_clients()
        return HyperbolicPrediction(feats, targets, t.features[4], gamma=1e-2, bandwidth=0.5,
                                    weighting="samples")
    if name == "hyperbolic_weights":
        _, targets, _ = _tree_clients()
        return HyperbolicPrediction.from_weights(
            targets, [rng.uniform(0.2, 1.0, len(t)) for t in targets])
    raise KeyError(name)


NAMES = ["sphere", "sphere_cov", "kpca", "kpca_gram", "kpca_cov", "brockett", "spd",
         "hyperbolic", "hyperbolic_weights"]
_CACHE = {}


@pytest.fixture(params=NAMES)
def prob(request):
    if request.param not in _CACHE:
        _CACHE[request.param] = make(request.param)
    return _CACHE[request.param]


def _points(prob, k, seed=0):
    """Points near the problem's data scale (SPD / hyperbolic: near the optimum)."""
    M = prob.manifold
    if isinstance(prob, (SPDMean, HyperbolicPrediction)):
        xs = prob.solution()
        rng = np.random.default_rng(seed)
        return np.stack([M.exp(xs, M.tangent_gaussian(xs, 0.3, rng=rng)) for _ in range(k)])
    return M.random_point(k, rng=seed)


def _direction(prob, x, seed=1):
    v = np.random.default_rng(seed).standard_normal(x.shape)
    if isinstance(prob, SPDMean):
        v = 0.5 * (v + np.swapaxes(v, -1, -2))
    return v


def _close(a, b, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * max(1.0, np.max(np.abs(b))))


# ------------------------------------------------------------------ gradients


def test_a_full_round_of_equal_clients_reads_the_data_in_place():
    """Clients with equal sample counts, all of them in order, full batch: the problems read
    their flat data in place as (k, m, ...) blocks; the same clients listed in another order
    (selected rows) give the same rows of the answer."""
    rng = np.random.default_rng(11)
    t = hyperbolic_tree(48, n_features=3, rng=3)
    parts = np.split(np.random.default_rng(0).permutation(48), 4)
    hyp = HyperbolicPrediction([t.features[p] for p in parts], [t.points[p] for p in parts],
                               t.features[4], gamma=1e-2, bandwidth=0.5)
    bro = Brockett(brockett_matrices(4, 6, 5, rng=rng), 3)
    for P in (hyp, bro):
        k = P.n_clients
        every, perm = np.arange(k), np.array([2, 0, 3, 1])
        x = _points(P, k, seed=6)
        _close(P.egrad(every, x)[perm], P.egrad(perm, x[perm]), rtol=1e-13)
        _close(P.loss(every, x)[perm], P.loss(perm, x[perm]), rtol=1e-13)
        for tau in (1e-3, np.inf):
            _close(P.clipped_rgrad_sum(every, x, tau)[perm],
                   P.clipped_rgrad_sum(perm, x[perm], tau), rtol=1e-13)


def test_egrad_matches_finite_differences(prob):
    idx = np.arange(prob.n_clients)
    x = _points(prob, idx.size)
    v = _direction(prob, x)
    h = 1e-5
    fd = (prob.loss(idx, x + h * v) - prob.loss(idx, x - h * v)) / (2 * h)
    g = prob.egrad(idx, x)
    an = np.sum((g * v).reshape(idx.size, -1), axis=1)
    np.testing.assert_allclose(fd, an, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(an).max()))


def test_rgrad_is_projected_egrad_and_tangent(prob):
    idx = np.arange(prob.n_clients)
    x = _points(prob, idx.size)
    rg = prob.rgrad(idx, x)
    _close(rg, prob.manifold.egrad2rgrad(x, prob.egrad(idx, x)))
    assert prob.manifold.is_tangent(x, rg, atol=1e-9)


def test_sample_rgrads_mean_norms_and_weighted_sum(prob):
    M = prob.manifold
    x = _points(prob, 1, seed=2)[0]
    for i in range(prob.n_clients):
        g = prob.sample_rgrads(i, x)
        assert g.shape == (prob.sizes[i],) + M.shape
        _close(g.mean(axis=0), prob.rgrad([i], x[None])[0])
        norms = M.norm(np.broadcast_to(x, g.shape), g)
        _close(prob.sample_rgrad_norms(i, x), norms)
        sel = np.array([prob.sizes[i] - 1, 0, 0])
        _close(prob.sample_rgrad_norms(i, x, batch=sel), norms[sel])
        coef = np.random.default_rng(i).uniform(-1, 1, prob.sizes[i])
        _close(prob.weighted_rgrad(i, x, coef), np.tensordot(coef, g, axes=1))
        c3 = np.array([0.5, -1.0, 2.0])
        _close(prob.weighted_rgrad(i, x, c3, batch=sel), np.tensordot(c3, g[sel], axes=1))


def test_minibatch_gradients(prob):
    rng = np.random.default_rng(3)
    for m in np.unique(prob.sizes):
        idx = np.flatnonzero(prob.sizes == m)[::-1]
        x = _points(prob, idx.size, seed=4)
        full = np.stack([rng.permutation(m) for _ in idx])
        _close(prob.egrad(idx, x, batch=full), prob.egrad(idx, x))
        _close(prob.rgrad(idx, x, batch=full), prob.rgrad(idx, x))
        # a random batch with repeats is the mean of those samples' gradients
        b = rng.integers(0, m, size=(idx.size, 4))
        got = prob.rgrad(idx, x, batch=b)
        for j, i in enumerate(idx):
            _close(got[j], prob.sample_rgrads(i, x[j])[b[j]].mean(axis=0))


def test_batched_equals_per_client_loop(prob):
    idx = np.array([3, 0, 3, 1, 2])       # permuted, with a repeat
    x = _points(prob, idx.size, seed=5)
    loss, eg, rg = prob.loss(idx, x), prob.egrad(idx, x), prob.rgrad(idx, x)
    for j, i in enumerate(idx):
        _close(loss[j], prob.loss([i], x[j:j + 1])[0], rtol=1e-12)
        _close(eg[j], prob.egrad(np.array([i]), x[j:j + 1])[0], rtol=1e-12)
        _close(rg[j], prob.rgrad(np.array([i]), x[j:j + 1])[0], rtol=1e-12)
    # the global objective and gradient agree with the weighted client sums
    x0 = x[0]
    all_ = np.arange(prob.n_clients)
    xs = np.broadcast_to(x0, (prob.n_clients,) + prob.shape)
    _close(prob.f(x0), prob.weights @ prob.loss(all_, xs))
    _close(prob.grad(x0), np.tensordot(prob.weights, prob.rgrad(all_, xs), axes=1))


def test_solution_is_stationary_and_minimal(prob):
    xs = prob.solution()
    assert prob.manifold.is_point(xs, atol=1e-10)
    assert prob.grad_norm(xs) < 1e-8
    fr = [prob.f(x) for x in prob.manifold.random_point(20, rng=9)]
    fr += [prob.f(x) for x in _points(prob, 10, seed=10)]
    assert prob.f(xs) < min(fr)
    m = prob.metrics(xs)
    assert all(isinstance(v, float) for v in m.values())
    assert {"grad_norm", "f_gap", "dist", "feasibility"} <= set(m)
    assert m["grad_norm"] < 1e-8 and abs(m["f_gap"]) < 1e-12 and m["dist"] < 1e-7
    assert m["feasibility"] < 1e-10
    np.testing.assert_array_equal(prob.solution(), xs)   # cached, deterministic
    mr = prob.metrics(_points(prob, 1, seed=11)[0])
    assert mr["f_gap"] > 0 and mr["dist"] > 1e-3 and mr["grad_norm"] > 1e-6


# ------------------------------------------------------------------ problem-specific


def test_pca_optima_are_top_eigenvectors():
    rng = np.random.default_rng(0)
    z = _rows(rng)
    pooled = sum(c.T @ c / len(c) for c in z) / len(z)
    w, v = np.linalg.eigh(pooled)
    p = KPCA(z, 3)
    np.testing.assert_allclose(np.abs(p.solution().T @ v[:, ::-1][:, :3]), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(p.f_star(), -w[::-1][:3].sum(), rtol=1e-12)
    s = SpherePCA(z)
    xs = s.solution()
    np.testing.assert_allclose(abs(xs @ v[:, -1]), 1.0, rtol=1e-12)
    assert xs[np.argmax(np.abs(xs))] > 0        # sign convention
    # covariance form: the same optimum with A_i = 2 Z_i'Z_i / m_i, same f
    a = np.stack([2 * c.T @ c / len(c) for c in z])
    pc = KPCA.from_covariances(a, 3)
    np.testing.assert_allclose(pc.solution(), p.solution(), atol=1e-10)
    x = p.manifold.random_point(rng=1)
    np.testing.assert_allclose(pc.f(x), p.f(x), rtol=1e-12)
    # gram and row paths agree
    pg = KPCA(z, 3, gram=True)
    xs4 = p.manifold.random_point(4, rng=2)
    _close(pg.egrad(np.arange(4), xs4), p.egrad(np.arange(4), xs4), rtol=1e-12)
    _close(pg.loss(np.arange(4), xs4), p.loss(np.arange(4), xs4), rtol=1e-12)


def test_row_blocks_and_chunks(monkeypatch):
    """The cache-blocked Z'(ZX) of the NumPy reference (its row blocks are what the compiled
    route does not have) and the chunked pooled matrix agree with direct products."""
    import rfl_fast.kernels.fused as fused
    import rfl_fast.problems._quadratic as quad

    monkeypatch.setattr(fused, "BLOCK_BYTES", 8 * D * 16)       # 16-row blocks
    monkeypatch.setattr(quad, "SYRK_CHUNK_BYTES", 8 * D * 16)
    z = _rows(np.random.default_rng(0), sizes=(40, 33, 17))
    p = KPCA(z, 2, gram=False)
    x = p.manifold.random_point(3, rng=1)
    want = np.stack([-2 * c.T @ (c @ xi) / len(c) for c, xi in zip(z, x)])
    with rf.backend("numpy"):
        _close(p.egrad(np.arange(3), x), want, rtol=1e-12)
        _close(p.loss(np.arange(3), x),
               [-np.sum((c @ xi) ** 2) / len(c) for c, xi in zip(z, x)], rtol=1e-12)
    _close(p._global_matrix(), sum(c.T @ c / len(c) for c in z) / 3, rtol=1e-12)


def test_kpca_angles_and_clientdata_input():
    z = eigengap_clients(3, 40, 12, nu=0.1, rng=0)
    cd = ClientData(z.reshape(-1, 12), np.arange(4) * 40)
    p, q = KPCA(z, 4), KPCA(cd, 4)
    np.testing.assert_array_equal(p.solution(), q.solution())
    assert p.sizes.tolist() == [40, 40, 40]
    xs = p.solution()
    # a tiny rotation out of the subspace: the sum of principal angles is resolved at 1e-10
    u = p.manifold.proj(xs, np.random.default_rng(1).standard_normal(xs.shape))
    u *= 1e-10 / np.linalg.norm(u)
    y = p.manifold.retr(xs, u)
    ang = p.principal_angles(y)
    assert 1e-11 < ang.sum() < 2e-10
    assert p.metrics(y)["angle"] == pytest.approx(ang.sum())
    # rotations within the subspace are optimal too
    q_, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((4, 4)))
    assert p.metrics(xs @ q_)["dist"] < 1e-7


def test_brockett_optimum_pairs_h_with_smallest_eigenvalues():
    a = brockett_matrices(3, 4, 7, rng=1)
    p = Brockett(a, 3)
    w, _ = np.linalg.eigh(a.mean(axis=(0, 1)))
    assert p.f_star() == pytest.approx(3 * w[0] + 2 * w[1] + w[2], rel=1e-12)
    xs = p.solution()
    # swapping two columns (pairing H the other way) is stationary but worse
    assert p.f(xs[:, [1, 0, 2]]) > p.f_star() + 1e-6
    # custom h: ordering follows the ranks of h
    ph = Brockett(a, 3, h=[1.0, 3.0, 2.0])
    assert ph.f_star() == pytest.approx(w[2] + 3 * w[0] + 2 * w[1], rel=1e-12)
    assert ph.grad_norm(ph.solution()) < 1e-10


def test_spd_mean_of_commuting_matrices_is_the_geometric_mean():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    lam = np.exp(rng.standard_normal((2, 6, 3)))
    z = np.einsum("ij,cmj,kj->cmik", q, lam, q)
    p = SPDMean(z)
    want = q @ np.diag(np.exp(np.log(lam).mean(axis=(0, 1)))) @ q.T
    # f = mean of dist^2 is 2-strongly geodesically convex (nonpositive curvature), so the
    # solver's stopping point is within |grad f| / 2 of the mean; want is rounded to ~10 eps
    # (a product of three factors and an exp), dist of close points to ~10 n eps
    assert float(p.manifold.dist(p.solution(), want)) <= (
        p.solver_info["grad_norm"] / 2 + 40 * np.finfo(np.float64).eps)


def test_hyperbolic_mean_of_two_points_is_the_midpoint():
    from rfl_fast.manifolds import Lorentz

    M = Lorentz(2)
    y = M.random_point(2, rng=0)
    p = HyperbolicPrediction.from_weights([y[:1], y[1:]], [np.ones(1), np.ones(1)])
    mid = M.exp(y[0], 0.5 * M.log(y[0], y[1]))
    # f = (dist^2(x, y0) + dist^2(x, y1)) / 2 is 2-strongly geodesically convex on H^2
    # (curvature -1), so the solver's stopping point is within |grad f| / 2 of the midpoint;
    # dist of close points on the hyperboloid is accurate to ~sqrt(eps |x|^2) (arccosh near 1)
    eps = np.finfo(np.float64).eps
    assert float(M.dist(p.solution(), mid)) <= (
        p.solver_info["grad_norm"] / 2 + 10 * np.sqrt(eps) * float(np.abs(mid).max()))
    np.testing.assert_allclose(p.sample_rgrad_norms(0, mid), [M.dist(y[0], y[1])], rtol=1e-9)


def test_hyperbolic_kernel_weights():
    feats, targets, t = _tree_clients()
    w = t.features[4]
    p = HyperbolicPrediction(feats, targets, w, gamma=1e-2, bandwidth=0.5)
    f0 = feats[0]
    k = np.exp(-np.sum((f0[:, None] - f0[None]) ** 2, -1) / (2 * 0.5) ** 2)
    kw = np.exp(-np.sum((f0 - w) ** 2, -1) / (2 * 0.5) ** 2)
    np.testing.assert_allclose(p.alpha[: len(f0)], np.linalg.solve(k + 1e-2 * np.eye(len(f0)), kw),
                               rtol=1e-10)


def test_weighting():
    z = _rows(np.random.default_rng(0))
    np.testing.assert_allclose(KPCA(z, 2).weights, 0.25)
    np.testing.assert_allclose(KPCA(z, 2, weighting="samples").weights, np.array(SIZES) / 24)
    np.testing.assert_allclose(KPCA(z, 2, weighting=[1, 1, 2, 0]).weights, [.25, .25, .5, 0])


# ------------------------------------------------------------------ bad input


def test_bad_input_raises_naming_the_argument():
    rng = np.random.default_rng(0)
    z = _rows(rng)
    with pytest.raises(ValueError, match="data: client"):
        KPCA(z[:2] + [np.zeros((0, D))], 2)
    with pytest.raises(ValueError, match="data: no clients"):
        SpherePCA([])
    with pytest.raises(ValueError, match="data: clients disagree"):
        KPCA([z[0], z[1][:, :4]], 2)
    with pytest.raises(ValueError, match="r: expected 1 <= r <= d"):
        KPCA(z, D + 1)
    with pytest.raises(ValueError, match="A: .*symmetric"):
        KPCA.from_covariances(rng.standard_normal((2, 4, 4)), 2)
    with pytest.raises(ValueError, match="A: expected"):
        SpherePCA.from_covariances(np.eye(4))
    with pytest.raises(ValueError, match="data: .*NaN"):
        SpherePCA([np.full((3, 4), np.nan)])
    with pytest.raises(ValueError, match="p: expected"):
        Brockett(brockett_matrices(2, 3, 4, rng=0), 5)
    with pytest.raises(ValueError, match="data: expected square"):
        Brockett([rng.standard_normal((3, 4, 5))], 2)
    with pytest.raises(ValueError, match="h: expected"):
        Brockett(brockett_matrices(2, 3, 4, rng=0), 2, h=[1.0, -1.0])
    bad = _spd(rng)
    bad[2] = bad[2].copy()
    bad[2][1] = -bad[2][1]
    with pytest.raises(ValueError, match="data: matrices must be positive definite; sample 1 of "
                                         "client 2"):
        SPDMean(bad)
    with pytest.raises(ValueError, match="data: SPD matrices must be symmetric"):
        SPDMean([rng.standard_normal((2, 3, 3)) + 5 * np.eye(3)])
    feats, targets, t = _tree_clients()
    with pytest.raises(ValueError, match="targets: client sizes"):
        HyperbolicPrediction(feats, targets[::-1], t.features[0])
    with pytest.raises(ValueError, match="targets: every y_ij must lie on the hyperboloid"):
        HyperbolicPrediction(feats, [2 * y for y in targets], t.features[0])
    with pytest.raises(ValueError, match="w: expected"):
        HyperbolicPrediction(feats, targets, np.zeros(5))
    with pytest.raises(ValueError, match="gamma"):
        HyperbolicPrediction(feats, targets, t.features[0], gamma=0.0)
    with pytest.raises(ValueError, match="alpha: the total weight"):
        HyperbolicPrediction.from_weights(targets, [-np.ones(len(y)) for y in targets])
    with pytest.raises(ValueError, match="weighting"):
        KPCA(z, 2, weighting="bogus")


def test_bad_call_arguments():
    p = make("kpca")
    x = p.manifold.random_point(2, rng=0)
    with pytest.raises(ValueError, match="idx"):
        p.loss([0, 9], x)
    with pytest.raises(ValueError, match="x: expected shape"):
        p.egrad([0, 1, 2], x)
    with pytest.raises(ValueError, match="batch: row 1"):
        p.egrad([0, 1], x, batch=np.array([[0, 1], [0, 7]]))
    with pytest.raises(ValueError, match="batch: expected shape"):
        p.egrad([0, 1], x, batch=np.array([0, 1]))
    with pytest.raises(ValueError, match="i: expected a client id"):
        p.sample_rgrads(4, x[0])
    with pytest.raises(ValueError, match="coef: expected shape"):
        p.weighted_rgrad(0, x[0], np.ones(3))
    with pytest.raises(NotImplementedError):
        Problem([1, 2]).loss([0], np.zeros((1, 1)))
