"""Brockett's batched clipped sum (``Brockett._clipped_blocks``): norms from
``|G|^2 - |sym(X'G)|^2`` where trusted, one projection per client of the trusted terms, the
others projected one by one. Equal to the per-sample default (``Problem.clipped_rgrad_sum``) on
samples of every kind, and one sample moves a client's sum by at most ``tau``. The compiled
pass (``_core.brockett_clipped_sum``, rfl/brockett.hpp) against that NumPy form within a
derived bound, on any thread count, handing untrusted samples back to it."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.manifolds import Stiefel
from rfl_fast.problems import Brockett
from rfl_fast.problems.base import Problem


def _hostile(rng, k, m, d, X):
    """``k`` clients of ``m`` symmetric samples: random, ``X X'`` (gradient normal to the
    manifold: zero Riemannian gradient), ``X X'`` plus 1e-9 and 1e-14 of a random one (almost
    normal), scaled by 1e100, and near the trust threshold."""
    out = np.empty((k, m, d, d))
    for i in range(k):
        P = X[i] @ X[i].T
        for j in range(m):
            e = rng.standard_normal((d, d))
            e = 0.5 * (e + e.T)
            kind = (i + j) % 6
            out[i, j] = (e, P, P + 1e-9 * e, P + 1e-14 * e, 1e100 * e, P + 0.3 * e)[kind]
    return out


@pytest.mark.parametrize("tau", [1e-3, 0.5, np.inf])
@pytest.mark.parametrize("p", [1, 3])
def test_blocked_clipped_sum_equals_the_per_sample_default(tau, p):
    rng = np.random.default_rng(11 + p)
    k, m, d = 4, 7, 6
    P0 = Brockett(list(rng.standard_normal((k, m, d, d))), p)
    X = P0.manifold.random_point(k, rng=rng)
    A = _hostile(rng, k, m, d, X)
    P = Brockett(list(A), p)
    idx = np.arange(k)
    if not np.isfinite(tau):    # the 1e100 samples' unclipped sum: compare relative to it
        A = np.where(np.abs(A) > 1e50, 0.0, A)
        P = Brockett(list(A), p)
    got = P.clipped_rgrad_sum(idx, X, tau)
    want = Problem.clipped_rgrad_sum(P, idx, X, tau)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale)
    # tangent at X
    s = np.swapaxes(X, -1, -2) @ got
    np.testing.assert_allclose(s + np.swapaxes(s, -1, -2), 0.0, atol=1e-12 * scale)
    batch = np.tile(np.arange(m), (k, 1))
    np.testing.assert_allclose(P.clipped_rgrad_sum(idx, X, tau, batch), got, rtol=0,
                               atol=1e-12 * scale)


def test_one_sample_moves_the_sum_by_at_most_tau():
    rng = np.random.default_rng(5)
    k, m, d, p, tau = 3, 12, 6, 3, 0.05
    P0 = Brockett(list(rng.standard_normal((k, m, d, d))), p)
    X = P0.manifold.random_point(k, rng=rng)
    P = Brockett(list(_hostile(rng, k, m, d, X)), p)
    idx = np.arange(k)
    full = np.tile(np.arange(m), (k, 1))
    base = P.clipped_rgrad_sum(idx, X, tau, full)
    for j in range(m):
        # client 0's sample j dropped (replaced by a repeat of another, whose term is known)
        less = full.copy()
        less[0, j] = (j + 1) % m
        other = P.clipped_rgrad_sum(np.array([0]), X[:1], tau, np.array([[(j + 1) % m]]))
        moved = P.clipped_rgrad_sum(idx, X, tau, less)
        assert np.linalg.norm(base[0] - (moved[0] - other[0])) <= tau * (1 + 1e-9)
        np.testing.assert_array_equal(moved[1:], base[1:])


# ---------------------------------------------------------------- the compiled pass

_core = pytest.importorskip("rfl_fast._core")
from rfl_fast.kernels import fused  # noqa: E402
EPS = np.finfo(np.float64).eps


def _trusted(P, X, a):
    """The reference's trust rule per sample ``a`` (k, m, d, d) at ``X`` (k, d, p)."""
    g = 2.0 * np.matmul(a, (X * P.h)[:, None])
    s = np.matmul(np.swapaxes(X, -1, -2)[:, None], g)
    g2 = (g * g).sum(axis=(2, 3))
    n2 = g2 - (0.25 * (s + np.swapaxes(s, -1, -2)) ** 2).sum(axis=(2, 3))
    return n2 >= 0.25 * g2


def _random_case(rng, k, m, d, p):
    """Random symmetric samples; those the trust rule leaves to the reference (small ``d``)
    lose their block ``X'A X`` (then ``sym(X'G) = 0``): every norm is the compiled pass's."""
    a = rng.standard_normal((k, m, d, d))
    a = (a + np.swapaxes(a, -1, -2)) / np.sqrt(d)
    h = rng.uniform(0.5, 2.0, p)
    X = Stiefel(d, p).random_point(k, rng=rng)
    P = Brockett(list(a), p, h=h)
    bad = ~_trusted(P, X, a)
    if bad.any():
        xx = np.matmul(X, np.swapaxes(X, -1, -2))[:, None]
        a = np.where(bad[:, :, None, None], a - xx @ a @ xx, a)
        P = Brockett(list(a), p, h=h)
    assert _trusted(P, X, a).all() and (~bad).any()
    return P, X


def _bound(P, X, tau, rows):
    """What both forms guarantee against the exact sum: each ``G_j = 2 A_j X H`` is a product
    of ``d``-term dot products, so its entries are within ``d eps |A_j|_F |Y|_F`` (``Y = 2 X
    H``); ``|sym(X'G)|`` and the norm add ``p eps`` of the same; the clip factor ``c_j = tau /
    |P_X G_j|`` moves by the norm's relative error, at most 4 times that of ``G_j`` where the
    norm is trusted (``|P_X G|^2 >= |G|^2 / 4``); the sum adds ``b`` terms and the projection
    ``p``, each term scaled by its ``c_j``. Two such computations differ by at most twice the
    sum of these over the samples, with the first-order constants rounded up to 8 (a bound on
    the difference, not a tolerance fitted to it)."""
    d, p = P.d, P.p
    y = np.linalg.norm(2.0 * X * P.h, axis=(1, 2))                          # (k,)
    a = P._flat[rows]
    g = np.stack([P._sample_grads(a[i], X[i]) for i in range(len(X))])     # P_X G_j
    c = np.minimum(1.0, tau / np.linalg.norm(g, axis=(2, 3)))               # clip factors
    an = np.linalg.norm(a, axis=(2, 3))                                     # (k, b)
    b = rows.shape[1]
    return 8 * 2 * (d + p + b) * EPS * float(np.max((c * an * y[:, None]).sum(axis=1)))


@pytest.mark.parametrize("d, p", [(3, 2), (6, 1), (8, 3), (30, 5), (11, 8), (13, 9)])
@pytest.mark.parametrize("tau", [1e-3, 0.3, 1e6])
def test_compiled_pass_equals_the_numpy_reference(d, p, tau):
    """``_core.brockett_clipped_sum`` (rfl/brockett.hpp: ``d < 4``, ``p`` of the
    specialisations 1..8 and above them) against ``Brockett._clipped_blocks`` (NumPy, the
    same clip rule), full batches and picked samples, within :func:`_bound`."""
    rng = np.random.default_rng(d * 100 + p)
    k, m = 5, 7
    P, X = _random_case(rng, k, m, d, p)
    full = np.arange(k * m).reshape(k, m)
    got, trusted = _core.brockett_clipped_sum(P._flat, full, X, P.h, tau)
    assert trusted
    want = P._clipped_blocks(X, tau, P._flat, m)
    assert np.abs(got - want).max() <= _bound(P, X, tau, full)
    assert np.abs(got).max() > 0
    sel = np.sort(rng.choice(m, size=(k, 3)), axis=1) + (np.arange(k) * m)[:, None]
    got, trusted = _core.brockett_clipped_sum(P._flat, sel, X, P.h, tau)
    want = P._clipped_blocks(X, tau, P._flat[sel.ravel()], 3)
    assert trusted
    assert np.abs(got - want).max() <= _bound(P, X, tau, sel)
    # through the problem (the backend in force): the same numbers as the kernel's
    idx = np.arange(k)
    np.testing.assert_array_equal(P.clipped_rgrad_sum(idx, X, tau),
                                  _core.brockett_clipped_sum(P._flat, full, X, P.h, tau)[0])
    with rf.backend("numpy"):
        np.testing.assert_array_equal(P.clipped_rgrad_sum(idx, X, tau), P._clipped_blocks(
            X, tau, P._flat, m))
        assert fused.brockett_clipped_sum(P._flat, full, X, P.h, tau) is None   # the route
    # the registered kernel's oracle: the per-sample sums written out
    want, _ = fused.brockett_clipped_sum_reference(P._flat, full, X, P.h, tau)
    got, trusted = fused.brockett_clipped_sum(P._flat, full, X, P.h, tau, backend="cpp")
    assert trusted and np.abs(got - want).max() <= _bound(P, X, tau, full)


def test_compiled_pass_is_the_same_on_any_thread_count():
    rng = np.random.default_rng(2)
    P, X = _random_case(rng, 300, 10, 30, 5)
    rows = np.arange(3000).reshape(300, 10)
    one = _core.brockett_clipped_sum(P._flat, rows, X, P.h, 0.05, 1)[0]
    for t in (2, 3, 8):
        np.testing.assert_array_equal(_core.brockett_clipped_sum(P._flat, rows, X, P.h, 0.05,
                                                                 t)[0], one)


def test_compiled_pass_hands_untrusted_samples_to_the_reference():
    """Gradients (almost) normal to the manifold, zero and huge ones are not trusted by the
    compiled pass (``trusted`` false); the problem then answers as the NumPy form, whose
    sums the tests above check against the per-sample default."""
    rng = np.random.default_rng(4)
    k, m, d, p = 4, 6, 6, 2
    P0 = Brockett(list(rng.standard_normal((k, m, d, d))), p)
    X = P0.manifold.random_point(k, rng=rng)
    P = Brockett(list(_hostile(rng, k, m, d, X)), p)
    rows = np.arange(k * m).reshape(k, m)
    assert not _core.brockett_clipped_sum(P._flat, rows, X, P.h, 0.1)[1]
    with rf.backend("numpy"):
        want = P.clipped_rgrad_sum(np.arange(k), X, 0.1)
    np.testing.assert_array_equal(P.clipped_rgrad_sum(np.arange(k), X, 0.1), want)


@pytest.mark.parametrize("big", [1e300, 1e160])
def test_overflowing_sample_is_named_as_by_the_reference(big):
    """A sample whose gradient norm overflows raises the reference's error naming the client
    and sample, whichever backend is in force."""
    rng = np.random.default_rng(6)
    k, m, d, p = 5, 4, 7, 3
    a = rng.standard_normal((k, m, d, d))
    a = a + np.swapaxes(a, -1, -2)
    a[3, 2, 1, 5] = a[3, 2, 5, 1] = big
    P = Brockett(list(a), p)
    X = P.manifold.random_point(k, rng=rng)
    msgs = []
    for be in ("numpy", "auto"):
        with rf.backend(be), pytest.raises(ValueError, match=r"at index \(3, 2\)") as err:
            P.clipped_rgrad_sum(np.arange(k), X, 0.1)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_compiled_pass_refuses_bad_arguments():
    rng = np.random.default_rng(1)
    P, X = _random_case(rng, 2, 3, 5, 2)
    rows = np.arange(6).reshape(2, 3)
    f = _core.brockett_clipped_sum
    with pytest.raises(ValueError, match="sample index"):
        f(P._flat, rows + 1, X, P.h, 0.1)
    with pytest.raises(ValueError, match="sample index"):
        f(P._flat, rows - 1, X, P.h, 0.1)
    with pytest.raises(ValueError, match="rows"):
        f(P._flat, rows[:1], X, P.h, 0.1)
    with pytest.raises(ValueError, match="tau"):
        f(P._flat, rows, X, P.h, 0.0)
    with pytest.raises(ValueError, match="does not match"):
        f(P._flat, rows, X[:, :4], P.h, 0.1)
    with pytest.raises(ValueError, match="does not match"):
        f(P._flat, rows, X, P.h[:1], 0.1)
