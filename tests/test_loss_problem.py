"""``LossProblem``: a federated problem from a per-sample loss written in torch, its gradients
by autodiff (``rfl_fast.kernels.autodiff``), batched over the clients."""

import subprocess
import sys

import numpy as np
import pytest
from subprocess_env import same_package

import rfl_fast as rf
from rfl_fast.algorithms import PriRFed, RFedAvg
from rfl_fast.federation import run
from rfl_fast.problems import KPCA, LossProblem
from rfl_fast.problems.base import Problem

try:
    import torch
except ImportError:   # collected and skipped (tests/test_tiers.py: every module collects)
    torch = None
pytestmark = pytest.mark.skipif(torch is None, reason="needs torch (the torch extra)")

EPS = np.finfo(np.float64).eps
D, K, C = 6, 2, 3                     # features, Stiefel columns, classes


def kpca_loss(X, z):
    """KPCA's per-sample convention (``KPCA(data, r)``): ``-|X'z|^2``, no factor 1/2."""
    return -(X.T @ z).pow(2).sum()


def softmax_loss(params, sample):
    """Cross-entropy of a linear head on orthonormal features: ``sample`` = features, one-hot."""
    W, B = params
    z, y = sample[:D], sample[D:]
    logits = (W.T @ z) @ B
    return torch.logsumexp(logits, 0) - (logits * y).sum()


def _classes(rng, sizes):
    out = []
    for m in sizes:
        z = rng.standard_normal((m, D))
        lab = rng.integers(0, C, m)
        z[:, :C] += 2.0 * np.eye(C)[lab]            # learnable: the label shifts the features
        out.append(np.hstack([z, np.eye(C)[lab]]))
    return out


@pytest.fixture(scope="module")
def product_problem():
    rng = np.random.default_rng(0)
    M = rf.Product(rf.Stiefel(D, K), rf.Euclidean(K, C))
    return LossProblem(softmax_loss, _classes(rng, [8, 8, 5, 8, 5]), M)


@pytest.fixture(scope="module")
def kpca_pair():
    rng = np.random.default_rng(1)
    data = [rng.standard_normal((m, D)) for m in (7, 4, 7, 9)]
    return LossProblem(kpca_loss, data, rf.Stiefel(D, K)), KPCA(data, K), data


def _fd_grad(fun, x, h=1e-6):
    """Central differences of a scalar function of an array (O(h^2) + rounding/h)."""
    g = np.empty(x.shape)
    for j in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[j] = h
        g[j] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def test_gradients_match_finite_differences(product_problem):
    """Mean and per-sample Euclidean gradients (autodiff) against central differences of the
    mean loss and of one sample's loss, on the product's flat layout: ``h = 1e-6`` gives an
    error of about ``h^2 |f'''| + eps |f| / h``, ~1e-9 for losses of order one."""
    P = product_problem
    idx = np.array([3, 0, 2])
    x = P.manifold.random_point(idx.size, rng=4)
    g = P.egrad(idx, x)
    for j, i in enumerate(idx):
        fd = _fd_grad(lambda y: P.loss([i], y[None])[0], x[j])
        np.testing.assert_allclose(g[j], fd, rtol=0, atol=1e-7)
    # per sample: a batch of one sample is that sample's gradient; sample_rgrads projects it
    i, s = 2, 4
    one = P.egrad([i], x[2][None], np.array([[s]]))[0]
    row = P._offsets[i] + s
    fd = _fd_grad(lambda y: float(softmax_loss(
        tuple(torch.from_numpy(p) for p in P.manifold.split(y)),
        torch.from_numpy(P._ad._flat[row]))), x[2])
    np.testing.assert_allclose(one, fd, rtol=0, atol=1e-7)
    r = P.sample_rgrads(i, x[2])
    assert r.shape == (P.sizes[i],) + P.shape
    np.testing.assert_allclose(r[s], P.manifold.egrad2rgrad(x[2], one), rtol=0, atol=1e-14)
    # Riemannian: tangent (the Stiefel part), the Euclidean part unchanged
    W, B = P.manifold.split(P.rgrad(idx, x))
    Wx, _ = P.manifold.split(x)
    sym = np.swapaxes(Wx, -1, -2) @ W
    np.testing.assert_allclose(sym + np.swapaxes(sym, -1, -2), 0, atol=1e-13)
    np.testing.assert_allclose(B, P.manifold.split(g)[1], rtol=0, atol=0)


def test_a_kpca_loss_in_torch_is_kpca(kpca_pair):
    """The same per-sample loss as ``KPCA(data, r)``: every quantity agrees to rounding. The
    two sum the same ``m`` terms of size at most ``2|z|^2`` (|X| = 1 columns) in different
    orders, so they differ by at most ``~m eps`` times that (32 m eps of slack)."""
    P, Q, data = kpca_pair
    scale = 2 * max((z * z).sum(axis=1).max() for z in data)
    m = max(len(z) for z in data)
    tol = 32 * m * EPS * scale
    idx = np.array([1, 3, 0, 2])                               # unequal sizes: grouped
    x = Q.manifold.random_point(idx.size, rng=5)
    np.testing.assert_allclose(P.loss(idx, x), Q.loss(idx, x), rtol=0, atol=tol)
    np.testing.assert_allclose(P.egrad(idx, x), Q.egrad(idx, x), rtol=0, atol=tol)
    np.testing.assert_allclose(P.rgrad(idx, x), Q.rgrad(idx, x), rtol=0, atol=tol)
    batch = np.array([[0, 3], [1, 1], [6, 2], [3, 0]])
    np.testing.assert_allclose(P.egrad(idx, x, batch), Q.egrad(idx, x, batch), rtol=0,
                               atol=tol)
    for i in range(4):
        np.testing.assert_allclose(P.sample_rgrads(i, x[0]), Q.sample_rgrads(i, x[0]), rtol=0,
                                   atol=tol)
        np.testing.assert_allclose(P.sample_rgrad_norms(i, x[0]),
                                   Q.sample_rgrad_norms(i, x[0]), rtol=0, atol=tol)
    for tau in (0.3, np.inf):
        for b in (None, batch, [np.array([1]), np.array([0, 2, 8]), np.array([5]),
                                np.array([6, 1, 2])]):
            np.testing.assert_allclose(P.clipped_rgrad_sum(idx, x, tau, b),
                                       Q.clipped_rgrad_sum(idx, x, tau, b), rtol=0,
                                       atol=tol * m)
    np.testing.assert_allclose(P.f(x[0]), Q.f(x[0]), rtol=0, atol=tol)
    # an explicit device (the CPU here; a GPU where one is at hand): the same numbers
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        PD = LossProblem(kpca_loss, data, rf.Stiefel(D, K), device=device)
        np.testing.assert_allclose(PD.egrad(idx, x, batch), Q.egrad(idx, x, batch), rtol=0,
                                   atol=tol)
        np.testing.assert_allclose(PD.clipped_rgrad_sum(idx, x, 0.3), Q.clipped_rgrad_sum(
            idx, x, 0.3), rtol=0, atol=tol * m)
        np.testing.assert_allclose(PD.loss(idx, x), Q.loss(idx, x), rtol=0, atol=tol)
    np.testing.assert_allclose(P.grad(x[0]), Q.grad(x[0]), rtol=0, atol=tol)


def test_clipped_sum_is_the_per_client_default(product_problem):
    """The batched clipped sum against ``Problem.clipped_rgrad_sum`` (client by client through
    ``sample_rgrad_norms`` and ``weighted_rgrad``): the same clipped terms summed in another
    order, so within ``64 m eps sum_p min(|g_p|, tau)`` (tests/test_batched_private.py)."""
    P = product_problem
    idx = np.array([4, 1, 2, 0])
    x = P.manifold.random_point(idx.size, rng=6)
    rng = np.random.default_rng(2)
    batches = {"full": None,
               "(k, b)": np.stack([rng.choice(P.sizes[i], 3, replace=False) for i in idx]),
               "list": [rng.choice(P.sizes[i], b, replace=False) for i, b in
                        zip(idx, (2, 5, 1, 4))]}
    for tau in (0.05, 1.0, np.inf):
        for label, batch in batches.items():
            got = P.clipped_rgrad_sum(idx, x, tau, batch)
            want = Problem.clipped_rgrad_sum(P, idx, x, tau, batch)
            assert got.shape == (idx.size,) + P.shape
            for j, i in enumerate(idx):
                bj = None if batch is None else batch[j]
                norms = P.sample_rgrad_norms(int(i), x[j], bj)
                bound = 64 * norms.size * EPS * np.minimum(norms, tau).sum()
                assert np.linalg.norm(got[j] - want[j]) <= bound, (label, tau, j)


@pytest.mark.parametrize("algorithm", [RFedAvg(0.5, 3),
                                       PriRFed(0.5, 3, sigma=0.05, clip=5.0, batch_size=4)],
                         ids=["RFedAvg", "PriRFed"])
def test_federated_run_on_a_product_decreases_the_loss(product_problem, algorithm):
    P = product_problem
    x0 = P.manifold.random_point(rng=7)
    res = run(P, algorithm, 15, x0=x0, seed=0)
    assert P.feasibility(res.x) == 0.0
    W, _ = P.manifold.split(res.x)
    np.testing.assert_allclose(W.T @ W, np.eye(K), atol=1e-12)      # still on the manifold
    assert P.f(res.x) < P.f(x0) - 0.1, (P.f(x0), P.f(res.x))
    assert np.isfinite(res.history["loss"]).all()


def test_what_a_loss_problem_declares(product_problem):
    P = product_problem
    assert P.dp_unbounded is None                     # a sample's gradient is its own
    with pytest.raises(NotImplementedError, match="no closed-form solution"):
        P.solution()
    assert set(P.metrics(P.manifold.random_point(rng=0))) == {"grad_norm", "loss"}
    assert "LossProblem" in repr(P) and P.n_clients == 5


def test_bad_input_names_the_argument():
    data = [np.ones((3, D)), np.ones((2, D))]
    M = rf.Stiefel(D, K)
    with pytest.raises(ValueError, match=r"loss: expected a scalar \(0-d tensor\).*\(2,\)"):
        LossProblem(lambda X, z: X.T @ z, data, M)
    with pytest.raises(ValueError, match="loss: expected a float64 result"):
        LossProblem(lambda X, z: (X.T @ z).pow(2).sum().float(), data, M)
    with pytest.raises(TypeError, match="loss: expected a torch tensor"):
        LossProblem(lambda X, z: 1.0, data, M)
    with pytest.raises(TypeError, match="loss: expected a callable"):
        LossProblem("not a loss", data, M)
    # samples the loss cannot take: the message names loss and data and both shapes
    with pytest.raises(ValueError, match=r"loss: .*first sample of data \(shape \(4,\)\)"):
        LossProblem(kpca_loss, [np.ones((3, 4))], M)
    with pytest.raises(ValueError, match="data: clients disagree on the sample shape"):
        LossProblem(kpca_loss, [np.ones((3, D)), np.ones((3, D + 1))], M)
    with pytest.raises(ValueError, match="data: .*no data"):
        LossProblem(kpca_loss, [np.ones((3, D)), np.ones((0, D))], M)
    with pytest.raises(ValueError, match="data: a stacked array"):
        LossProblem(kpca_loss, np.ones((3, D)), M)
    with pytest.raises(TypeError, match="manifold: expected an rfl_fast manifold"):
        LossProblem(kpca_loss, data, "stiefel")
    with pytest.raises(ValueError, match="device: not a torch device"):
        LossProblem(kpca_loss, data, M, device="nowhere")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device: cannot keep the samples on 'cuda'"):
            LossProblem(kpca_loss, data, M, device="cuda")
    with pytest.raises(ValueError, match="device: only a torch loss"):
        LossProblem(kpca_loss, data, M, backend="jax", device="cpu")
    with pytest.raises(ValueError, match="backend: expected one of"):
        LossProblem(kpca_loss, data, M, backend="tf")
    P = LossProblem(kpca_loss, data, M)
    with pytest.raises(ValueError, match="batch: expected 2 per-client"):
        P.clipped_rgrad_sum([0, 1], M.random_point(2, rng=0), 1.0, [np.array([0])])
    with pytest.raises(ValueError, match="batch: row 0 holds indices outside"):
        P.egrad([0], M.random_point(1, rng=0), np.array([[5]]))
    with pytest.raises(ValueError, match=r"batch\[1\]: row 0 holds indices outside \[0, 2\)"):
        P.clipped_rgrad_sum([0, 1], M.random_point(2, rng=0), 1.0, [[0], [2]])


def test_a_loss_in_jax_gives_the_same_problem(kpca_pair, product_problem):
    """``backend="jax"``: the same functions (jax.vmap of jax.grad, float64 under
    ``jax.enable_x64``, the caller's global setting untouched) agree with torch's and KPCA's to
    rounding."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x64 = jax.config.jax_enable_x64
    _, Q, data = kpca_pair
    J = LossProblem(lambda X, z: -jnp.sum((X.T @ z) ** 2), data, rf.Stiefel(D, K),
                    backend="jax")
    scale = 2 * max((z * z).sum(axis=1).max() for z in data)
    tol = 32 * max(len(z) for z in data) * EPS * scale
    idx = np.array([1, 3, 0, 2])
    x = Q.manifold.random_point(idx.size, rng=5)
    for name in ("loss", "egrad", "rgrad"):
        np.testing.assert_allclose(getattr(J, name)(idx, x), getattr(Q, name)(idx, x), rtol=0,
                                   atol=tol)
    np.testing.assert_allclose(J.clipped_rgrad_sum(idx, x, 0.3), Q.clipped_rgrad_sum(
        idx, x, 0.3), rtol=0, atol=tol * 16)

    def softmax_jax(params, sample):
        W, B = params
        logits = (W.T @ sample[:D]) @ B
        return jax.nn.logsumexp(logits) - logits @ sample[D:]

    P = product_problem
    PJ = LossProblem(softmax_jax, [P._ad._flat[a:b] for a, b in zip(P._offsets[:-1],
                                                                    P._offsets[1:])],
                     P.manifold, backend="jax")
    idx = np.array([4, 1, 2])
    x = P.manifold.random_point(idx.size, rng=8)
    np.testing.assert_allclose(PJ.egrad(idx, x), P.egrad(idx, x), rtol=0, atol=1e-13)
    np.testing.assert_allclose(PJ.clipped_rgrad_sum(idx, x, 0.5, np.array([[0, 1]] * 3)),
                               P.clipped_rgrad_sum(idx, x, 0.5, np.array([[0, 1]] * 3)),
                               rtol=0, atol=1e-13)
    assert jax.config.jax_enable_x64 == x64
    with pytest.raises(ValueError, match=r"loss: expected a scalar \(0-d array\)"):
        LossProblem(lambda X, z: X.T @ z, data, rf.Stiefel(D, K), backend="jax")
    with pytest.raises(ValueError, match="loss: expected a float64 result"):
        LossProblem(lambda X, z: jnp.sum(X.T @ z).astype(jnp.float32), data, rf.Stiefel(D, K),
                    backend="jax")


def test_read_only_data_and_points_are_used_without_a_warning():
    """Read-only samples (a ClientData's) and points are read, never written: no warning."""
    import warnings

    X = np.random.default_rng(3).standard_normal((4, 10, D))
    X.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = LossProblem(kpca_loss, X, rf.Stiefel(D, K))
        x = P.manifold.random_point(4, rng=0)
        x.setflags(write=False)
        np.testing.assert_allclose(P.egrad(np.arange(4), x), KPCA(X, K).egrad(np.arange(4), x),
                                   rtol=0, atol=1e-12)


def test_torch_and_jax_are_imported_only_when_a_loss_problem_is_built():
    code = ("import sys, numpy as np, rfl_fast as rf\n"
            "from rfl_fast.problems import KPCA, LossProblem\n"
            "import rfl_fast.kernels.autodiff\n"
            "P = KPCA(np.random.default_rng(0).standard_normal((2, 5, 4)), 2)\n"
            "P.rgrad([0, 1], P.manifold.random_point(2, rng=0))\n"
            "print('torch' in sys.modules, 'jax' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, **same_package())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
