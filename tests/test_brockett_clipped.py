"""Brockett's batched clipped sum (``Brockett._clipped_blocks``): norms from
``|G|^2 - |sym(X'G)|^2`` where trusted, one projection per client of the trusted terms, the
others projected one by one. Equal to the per-sample default (``Problem.clipped_rgrad_sum``) on
samples of every kind, and one sample moves a client's sum by at most ``tau``."""

import numpy as np
import pytest

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
