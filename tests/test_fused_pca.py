"""The fused one-pass PCA gradient sum (``rfl_fast.kernels.fused``, C++ ``_core.pca_grad_sum``)
against its NumPy reference, materialized per-sample gradients and the problems' gradients."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import privacy as P
from rfl_fast.kernels import fused, reference

needs_cpp = pytest.mark.skipif(not fused.compiled_available(),
                               reason="C++ extension without pca_grad_sum")


def _clients(rng, sizes, d):
    Z = rng.standard_normal((sum(sizes), d)) * rng.exponential(1.0, (sum(sizes), 1))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return Z, offsets


def _points(rng, k, d, r):
    return np.linalg.qr(rng.standard_normal((k, d, r)))[0]


def _xt(X):
    return np.ascontiguousarray(np.swapaxes(X, -1, -2))


def _close(got, want, tol=1e-10):
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


SHAPES = [  # (client sizes, d, r)
    ([300, 7, 1, 64], 784, 5),
    ([5, 9, 1], 13, 1),        # sphere, d not a multiple of 4
    ([1], 6, 2),               # m = 1
    ([17, 3, 40], 31, 3),      # d % 8 = 7
    ([12, 33], 10, 8),
    ([20, 21], 23, 10),        # r beyond the compile-time specializations
    ([2100, 5], 19, 4),        # several 512-row chunks in one client
]


@needs_cpp
@pytest.mark.parametrize("sizes,d,r", SHAPES)
@pytest.mark.parametrize("tau", [None, 1e-3, 0.7, 5.0, np.inf])
def test_equals_reference(sizes, d, r, tau):
    rng = np.random.default_rng(len(sizes) * 1000 + d * 10 + r)
    Z, offsets = _clients(rng, sizes, d)
    idx = rng.integers(0, len(sizes), size=len(sizes) + 2).astype(np.int64)
    Xt = _xt(_points(rng, idx.size, d, r))
    clipped = tau is not None
    t = np.inf if tau is None else tau
    want_st, want_q = fused.pca_grad_sum_reference(Z, offsets, idx, Xt, t, 2.0, clipped)
    for threads in (1, 2, 3):
        st, q = fused.pca_grad_sum(Z, offsets, idx, Xt, t, 2.0, clipped, threads=threads,
                                   backend="cpp")
        assert st.shape == (idx.size, r, d) and q.shape == (idx.size,)
        _close(st, want_st)
        _close(q, want_q)


@needs_cpp
@pytest.mark.parametrize("sizes,d,r", SHAPES[:4])
def test_gradient_form_with_scale(sizes, d, r):
    rng = np.random.default_rng(d * 7 + r)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.arange(len(sizes), dtype=np.int64)
    Xt = _xt(_points(rng, idx.size, d, r))
    scale = rng.standard_normal(idx.size)
    st, q = fused.pca_grad_sum(Z, offsets, idx, Xt, backend="cpp")
    for backend in ("cpp", "numpy"):
        g, q2 = fused.pca_grad_sum(Z, offsets, idx, Xt, scale=scale, backend=backend)
        assert g.shape == (idx.size, d, r) and g.flags.c_contiguous
        _close(g, np.swapaxes(st, -1, -2) * scale[:, None, None])
        _close(q2, q)
    with pytest.raises(ValueError, match="scale must have shape"):
        fused.pca_grad_sum(Z, offsets, idx, Xt, scale=scale[:-1], backend="cpp")


@needs_cpp
@pytest.mark.parametrize("sizes,d,r", SHAPES)
@pytest.mark.parametrize("tau", [None, 0.7])
def test_points_layout_gives_the_same_bits(sizes, d, r, tau):
    """``points=True`` (the points X_j (k, d, r), transposed by the thread that takes each
    client, once per run of its units) gives the bits of the transposed stack, in both forms,
    at any thread count, a client listed twice and one split into several chunks included;
    the reference's answer to rounding."""
    rng = np.random.default_rng(d * 11 + r)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.concatenate([np.arange(len(sizes)), [0]]).astype(np.int64)
    X = np.ascontiguousarray(_points(rng, idx.size, d, r))
    clipped = tau is not None
    t = np.inf if tau is None else tau
    scale = rng.standard_normal(idx.size)
    for sc in (None, scale):
        want = fused.pca_grad_sum(Z, offsets, idx, _xt(X), t, 2.0, clipped, sc, backend="cpp")
        ref = fused.pca_grad_sum(Z, offsets, idx, X, t, 2.0, clipped, sc, points=True,
                                 backend="numpy")
        _close(ref[0], want[0])
        for threads in (1, 2, 3):
            got = fused.pca_grad_sum(Z, offsets, idx, X, t, 2.0, clipped, sc, points=True,
                                     threads=threads, backend="cpp")
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(ValueError, match=r"xt .* does not match the row length"):
        fused.pca_grad_sum(Z, offsets, idx, _xt(X) if d != r else X[:, :-1], points=True,
                           backend="cpp")


@needs_cpp
def test_deterministic_and_independent_of_threads():
    rng = np.random.default_rng(3)
    Z, offsets = _clients(rng, [3000, 300, 300, 1], 784)
    idx = np.array([0, 1, 2, 3, 1], dtype=np.int64)
    Xt = _xt(_points(rng, idx.size, 784, 5))
    first = fused.pca_grad_sum(Z, offsets, idx, Xt, 0.5, 2.0, True, threads=1, backend="cpp")
    for threads in (1, 2, 4, 1, 3):
        st, q = fused.pca_grad_sum(Z, offsets, idx, Xt, 0.5, 2.0, True, threads=threads,
                                   backend="cpp")
        assert np.array_equal(st, first[0]) and np.array_equal(q, first[1])


@needs_cpp
def test_bad_arguments_raise():
    Z = np.ones((5, 4))
    off = np.array([0, 2, 5], dtype=np.int64)
    Xt = np.ones((1, 2, 4))
    f = rf._core.pca_grad_sum
    with pytest.raises(ValueError, match="idx"):
        f(Z, off, np.array([2], dtype=np.int64), Xt, 1.0, 1.0, False, 1)
    with pytest.raises(ValueError, match="offsets"):
        f(Z, np.array([0, 6], dtype=np.int64), np.array([0], dtype=np.int64), Xt, 1.0, 1.0,
          False, 1)
    with pytest.raises(ValueError, match="xt"):
        f(Z, off, np.array([0], dtype=np.int64), np.ones((1, 2, 3)), 1.0, 1.0, False, 1)
    with pytest.raises(ValueError, match="tau"):
        f(Z, off, np.array([0], dtype=np.int64), Xt, 0.0, 1.0, True, 1)


@pytest.mark.parametrize("backend", ["cpp", "numba", "numpy"])
@pytest.mark.parametrize("r", [None, 1, 5])
@pytest.mark.parametrize("m,d", [(1, 7), (150, 17), (700, 784)])
@pytest.mark.parametrize("tau", [1e-3, 0.5, np.inf])
def test_clipped_sum_equals_materialized(backend, r, m, d, tau):
    if backend == "cpp" and not fused.compiled_available():
        pytest.skip("C++ extension without pca_grad_sum")
    rng = np.random.default_rng(m + d)
    M = rf.Sphere(d) if r is None else rf.Stiefel(d, r)
    X = M.random_point(rng=rng)
    Z = rng.standard_normal((m, d)) * rng.exponential(1.0, (m, 1))
    if m > 4:
        Z[3] = 0.0
        Z[4] = X[:, 0] if r else X
    ref = P.clipped_sum_reference(M, X, P.pca_sample_rgrads(Z, X, 2.0), tau)
    got = P.clipped_sum_pca(Z, X, tau, 2.0, backend=backend)
    assert got.shape == M.shape
    _close(got, ref)


@pytest.mark.parametrize("backend", ["cpp", "numpy"])
@pytest.mark.parametrize("cls", ["KPCA", "SpherePCA"])
def test_problem_gradients_follow_the_backend(backend, cls):
    rng = np.random.default_rng(5)
    data = [rng.standard_normal((m, 29)) for m in (40, 1, 17)]
    Pr = rf.problems.KPCA(data, 3, gram=False) if cls == "KPCA" else \
        rf.problems.SpherePCA(data, gram=False)
    idx = np.array([2, 0, 1, 0])
    x = np.stack([Pr.manifold.random_point(rng=s) for s in range(4)])
    with rf.backend(backend):
        g = Pr.rgrad(idx, x)
        e = Pr.egrad(idx, x)
        f = Pr.loss(idx, x)
    for j, i in enumerate(idx):
        z = data[i]
        xm = x[j] if x.ndim == 3 else x[j][:, None]
        a = z.T @ (z @ xm) / z.shape[0]
        want_e = (-2.0 * a).reshape(e[j].shape)
        _close(e[j], want_e)
        _close(g[j], Pr.manifold.egrad2rgrad(x[j], want_e))
        _close(f[j], -np.vdot(xm, a))


@pytest.mark.parametrize("backend", ["cpp", "numba", "numpy"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_clipped_sum_refuses_non_finite_samples(backend, bad):
    rng = np.random.default_rng(0)
    M = rf.Stiefel(9, 2)
    X = M.random_point(rng=rng)
    X[0] = 0.0  # a zero row of X: inf * 0 must still be caught
    Z = rng.standard_normal((30, 9))
    Z[7, 0] = bad
    with pytest.raises(ValueError, match="Z: contains"):
        P.clipped_sum_pca(Z, X, 0.5, 2.0, backend=backend)


def test_svrg_pooled_exchange_equals_the_gathered_one(monkeypatch):
    """RFedSVRG's all-n exchange from the pooled ``problem.grad`` (kPCA) gives the iterates of
    gathering every client's gradient, with the same accounting."""
    from rfl_fast.algorithms import RFedSVRG
    from rfl_fast.algorithms import svrg
    from rfl_fast.federation import Uniform, run

    Z = np.random.default_rng(0).standard_normal((12, 30, 10))
    Pr = rf.problems.KPCA(Z, 3, gram=False)
    x0 = Pr.manifold.random_point(rng=1)
    assert not Pr.has_pooled_grad()          # forming A costs N d^2: not for the gradient alone
    Pr.f(x0)                                 # a metric formed it: from now on it pays
    assert Pr.has_pooled_grad()
    pooled = run(Pr, RFedSVRG(0.01, 3), 4, participation=Uniform(4), x0=x0, seed=0)
    monkeypatch.setattr(svrg.RFedSVRG, "_pooled_exchange", lambda self, p, i: False)
    gathered = run(Pr, RFedSVRG(0.01, 3), 4, participation=Uniform(4), x0=x0, seed=0)
    assert np.abs(pooled.x - gathered.x).max() <= 1e-12
    for col in ("floats_up", "floats_down", "bytes_up", "bytes_down"):
        assert (pooled.history[col] == gathered.history[col]).all()


def test_every_fused_kernel_has_a_reference_and_a_route():
    from rfl_fast.kernels.registry import FUSED

    for name, k in FUSED.items():
        assert callable(getattr(fused, name + "_reference")), name
        assert k.order[-1] == "numpy", name
    for name in ("pca_grad_sum", "pca_local_steps"):
        with rf.backend("numpy"):
            assert fused.route(name) == "numpy"
        assert fused.route(name) == ("cpp" if fused.compiled_available(name) else "numpy")


@pytest.mark.parametrize("sizes,d,r", SHAPES[:5])
def test_local_steps_equal_the_reference(sizes, d, r):
    """The compiled fused local steps against their NumPy reference (and the reference with
    zero steps is the start)."""
    rng = np.random.default_rng(d * 10 + r)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.array([len(sizes) - 1, 0], dtype=np.int64)
    x0 = _points(rng, 2, d, r)
    scale = -2.0 / np.diff(offsets)[idx]
    want = fused.pca_local_steps_reference(Z, offsets, idx, x0, scale, 0.05, 3)
    assert want.shape == (2, d, r)
    _close(fused.pca_local_steps(Z, offsets, idx, x0, scale, 0.05, 3), want)
    np.testing.assert_array_equal(fused.pca_local_steps_reference(Z, offsets, idx, x0, scale,
                                                                  0.05, 0), x0)


@needs_cpp
def test_local_steps_kernel_checks_its_arguments():
    from rfl_fast import _core

    Z = np.ones((5, 4))
    off = np.array([0, 2, 5], dtype=np.int64)
    x0 = np.zeros((1, 4, 2))
    with pytest.raises(ValueError, match="idx has a value outside"):
        _core.pca_local_steps(Z, off, np.array([2], dtype=np.int64), x0, np.ones(1), 0.1, 1)
    with pytest.raises(ValueError, match="does not match the rows of z"):
        _core.pca_local_steps(Z, off, np.array([0], dtype=np.int64), np.zeros((1, 3, 2)),
                              np.ones(1), 0.1, 1)
    with pytest.raises(ValueError, match="steps must be >= 0"):
        _core.pca_local_steps(Z, off, np.array([0], dtype=np.int64), x0, np.ones(1), 0.1, -1)


@pytest.mark.parametrize("sizes,d,r", SHAPES[:5])
def test_local_steps_with_an_offset_equal_the_reference(sizes, d, r):
    """The fused local steps with a per-client offset of the Euclidean gradient (RFedSVRG's
    steps, ``X <- polar(X - eta P_X(s Z'Z X - offset))``): the compiled kernel against the
    NumPy reference, which is the reference's own step with the offset subtracted; a zero
    offset is no offset, bit for bit, on both routes."""
    rng = np.random.default_rng(d * 10 + r + 1)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.array([len(sizes) - 1, 0], dtype=np.int64)
    x0 = _points(rng, 2, d, r)
    scale = -2.0 / np.diff(offsets)[idx]
    off = rng.standard_normal((2, d, r))
    want = fused.pca_local_steps_reference(Z, offsets, idx, x0, scale, 0.05, 3, off)
    assert not np.allclose(want, fused.pca_local_steps_reference(Z, offsets, idx, x0, scale,
                                                                 0.05, 3))
    x = x0.copy()                    # the reference is the plain step with g - offset
    for _ in range(3):
        g, _ = fused.pca_grad_sum_reference(Z, offsets, idx, _xt(x), scale=scale)
        x = reference.stiefel_retr_polar(x, -0.05 * reference.stiefel_proj(x, g - off))
    np.testing.assert_array_equal(want, x)
    _close(fused.pca_local_steps(Z, offsets, idx, x0, scale, 0.05, 3, off), want)
    zero = np.zeros_like(off)
    for backend in ("numpy", "cpp"):
        np.testing.assert_array_equal(
            fused.pca_local_steps(Z, offsets, idx, x0, scale, 0.05, 3, zero, backend=backend),
            fused.pca_local_steps(Z, offsets, idx, x0, scale, 0.05, 3, backend=backend))


@needs_cpp
def test_local_steps_kernel_checks_its_offset():
    from rfl_fast import _core

    Z = np.ones((5, 4))
    off = np.array([0, 2, 5], dtype=np.int64)
    idx = np.array([0], dtype=np.int64)
    x0 = np.zeros((1, 4, 2))
    with pytest.raises(ValueError, match=r"offset \(1, 4, 1\) must have the shape of x0"):
        _core.pca_local_steps(Z, off, idx, x0, np.ones(1), 0.1, 1, 1, np.zeros((1, 4, 1)))
    with pytest.raises(TypeError, match="argument offset"):
        _core.pca_local_steps(Z, off, idx, x0, np.ones(1), 0.1, 1, 1, np.zeros((1, 4, 2), complex))


@pytest.mark.parametrize("sizes,d,r", SHAPES[:5])
def test_local_steps_with_a_proximal_term_equal_the_reference(sizes, d, r):
    """The fused local steps with RFedProx's proximal term (``anchor``, ``mu``: the direction
    ``P_X(s Z'Z X) - mu R_X^{-1}(anchor)``, the inverse polar retraction): the compiled kernel
    against the NumPy reference, which is the reference's own step with the term subtracted;
    ``mu = 0`` is no term, bit for bit, on both routes; the thread count changes no bit."""
    rng = np.random.default_rng(d * 10 + r + 2)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.array([len(sizes) - 1, 0], dtype=np.int64)
    base = _points(rng, 1, d, r)          # the iterates near the anchor (R^{-1} exists there)
    x0 = reference.stiefel_retr_polar(
        np.repeat(base, 2, axis=0), 0.2 * reference.stiefel_proj(
            np.repeat(base, 2, axis=0), rng.standard_normal((2, d, r))))
    scale = -2.0 / np.diff(offsets)[idx]
    anchor = np.ascontiguousarray(base[0])
    eta = 0.2 / max(abs(s) * np.linalg.norm(Z[offsets[i]:offsets[i + 1]], 2) ** 2
                    for s, i in zip(scale, idx))    # small steps: they stay near the anchor
    args = (Z, offsets, idx, x0, scale, eta, 3)
    want = fused.pca_local_steps_reference(*args, None, anchor, 0.7)
    assert np.isfinite(want).all()
    x = x0.copy()                    # the reference is the plain step with the term
    for _ in range(3):
        g, _ = fused.pca_grad_sum_reference(Z, offsets, idx, _xt(x), scale=scale)
        v = reference.stiefel_inv_retr_polar(x, np.broadcast_to(anchor, x.shape))
        x = reference.stiefel_retr_polar(x, -eta * (reference.stiefel_proj(x, g) - 0.7 * v))
    np.testing.assert_array_equal(want, x)
    assert not np.allclose(want, fused.pca_local_steps_reference(*args))
    _close(fused.pca_local_steps(*args, anchor=anchor, mu=0.7), want)
    for backend in ("numpy", "cpp"):
        np.testing.assert_array_equal(
            fused.pca_local_steps(*args, anchor=anchor, mu=0.0, backend=backend),
            fused.pca_local_steps(*args, backend=backend))
    if fused.compiled_available("pca_local_steps"):
        np.testing.assert_array_equal(
            fused.pca_local_steps(*args, anchor=anchor, mu=0.7, threads=1, backend="cpp"),
            fused.pca_local_steps(*args, anchor=anchor, mu=0.7, threads=2, backend="cpp"))


@pytest.mark.parametrize("sizes,d,r", SHAPES[:5])
def test_local_steps_with_a_second_order_term_equal_the_reference(sizes, d, r):
    """RFedSVRG-2BB's fused steps (``anchor``, ``coef``: the direction
    ``P_X(scale[j] Z_i'Z_i X - offset[j] + coef[j] R_anchor^{-1}(X))``): the reference against
    its steps written out, the compiled kernel against the reference, its refusals."""
    rng = np.random.default_rng(d * 10 + r + 3)
    Z, offsets = _clients(rng, sizes, d)
    idx = np.array([len(sizes) - 1, 0], dtype=np.int64)
    base = _points(rng, 1, d, r)
    x0 = reference.stiefel_retr_polar(
        np.repeat(base, 2, axis=0), 0.2 * reference.stiefel_proj(
            np.repeat(base, 2, axis=0), rng.standard_normal((2, d, r))))
    scale = -2.0 / np.diff(offsets)[idx]
    eta = 0.2 / max(abs(s) * np.linalg.norm(Z[offsets[i]:offsets[i + 1]], 2) ** 2
                    for s, i in zip(scale, idx))
    anchor = np.ascontiguousarray(base[0])
    off = 0.1 * reference.stiefel_proj(np.repeat(base, 2, axis=0), rng.standard_normal((2, d, r)))
    coef = np.array([0.7, -0.3])
    args = (Z, offsets, idx, x0, scale, eta, 3, off)
    want = fused.pca_local_steps_reference(*args, anchor=anchor, coef=coef)
    assert np.isfinite(want).all()
    x = x0.copy()
    for _ in range(3):
        g, _ = fused.pca_grad_sum_reference(Z, offsets, idx, _xt(x), scale=scale)
        xi = reference.stiefel_inv_retr_polar(np.broadcast_to(anchor, x.shape), x)
        x = reference.stiefel_retr_polar(
            x, -eta * reference.stiefel_proj(x, g - off + coef[:, None, None] * xi))
    np.testing.assert_array_equal(want, x)
    if not fused.compiled_available("pca_local_steps"):
        return
    _close(fused.pca_local_steps(*args, anchor=anchor, coef=coef, backend="cpp"), want)
    with pytest.raises(ValueError, match="coef needs an anchor"):
        fused.pca_local_steps(*args, coef=coef, backend="cpp")
    with pytest.raises(ValueError, match=r"coef must have shape \(k,\)"):
        fused.pca_local_steps(*args, anchor=anchor, coef=coef[:1].copy(), backend="cpp")
    with pytest.raises(ValueError, match="coef must be finite"):
        fused.pca_local_steps(*args, anchor=anchor, coef=np.array([np.nan, 1.0]),
                              backend="cpp")


@pytest.mark.parametrize("d,r", [(12, 3), (30, 5), (7, 1)])
def test_local_steps_on_the_matrices_form_equal_the_reference(d, r):
    """``h``: each client's rows are its symmetric d x d matrix ``A_i`` and the gradient is
    ``scale[j] A_i X diag(h)``; the reference against its steps written out, the compiled
    kernel against the reference (groups of clients in lockstep: 11 clients, a partial group),
    one client at a time against the whole call (the same bits), and the refusals."""
    rng = np.random.default_rng(d + r)
    n = 11
    B = rng.standard_normal((n, d, d))
    A = B + np.swapaxes(B, 1, 2)
    Z = np.ascontiguousarray(A.reshape(n * d, d))
    offsets = np.arange(n + 1, dtype=np.int64) * d
    idx = np.array([3, 0, 10, 5, 1, 2, 4, 6, 7, 8, 9], dtype=np.int64)
    h = np.arange(r, 0, -1, dtype=np.float64)
    x0 = _points(rng, n, d, r)
    scale = np.full(n, 2.0)
    eta = 0.1 / max(np.linalg.norm(a, 2) for a in A) / (2 * h.max())
    args = (Z, offsets, idx, x0, scale, eta, 3)
    want = fused.pca_local_steps_reference(*args, h=h)
    x = x0.copy()
    for _ in range(3):
        g = scale[:, None, None] * (np.matmul(A[idx], x) * h)
        x = reference.stiefel_retr_polar(x, -eta * reference.stiefel_proj(x, g))
    np.testing.assert_array_equal(want, x)
    if not fused.compiled_available("pca_local_steps"):
        return
    got = fused.pca_local_steps(*args, h=h, backend="cpp")
    _close(got, want)
    for j in (0, 10):       # a client alone (no group) gives the bits of the grouped call
        np.testing.assert_array_equal(
            fused.pca_local_steps(Z, offsets, idx[j:j + 1], x0[j:j + 1], scale[j:j + 1], eta, 3,
                                  h=h, backend="cpp")[0], got[j])
    with pytest.raises(ValueError, match=r"h must have shape \(r,\)"):
        fused.pca_local_steps(*args, h=np.ones(r + 1), backend="cpp")
    bad = offsets.copy()
    bad[1:] -= 1
    bad[0] = 0
    with pytest.raises(ValueError, match="every selected client must own d"):
        fused.pca_local_steps(Z, bad, idx, x0, scale, eta, 3, h=h, backend="cpp")
