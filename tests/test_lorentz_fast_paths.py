"""Lorentz's batched fast paths (float64 C-contiguous stacks go to the kernel directly, one
finiteness test for two points, the near-point log without gathers when every item is near)
against the general route (the same arrays in Fortran order: ``kernels.call``'s glue and the
gathered near branch), and the hyperbolic problem's gradient against its per-sample sum."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.problems import HyperbolicPrediction

EPS = np.finfo(np.float64).eps


def _general(a):
    """The same values in a layout the fast path refuses (not C-contiguous)."""
    return np.asfortranarray(a) if a.ndim == 2 else a


def _points(M, k, seed, near_scale=None):
    rng = np.random.default_rng(seed)
    x = M.random_point(k, rng=rng)
    if near_scale is None:
        return x, M.random_point(k, rng=rng)
    u = M.proj(x, near_scale * rng.standard_normal(x.shape))
    return x, M.exp(x, u)


@pytest.mark.parametrize("case", ["far", "near", "mixed", "equal", "server-batch",
                                  "batch-server"])
def test_log_fast_path_is_the_general_route(case):
    """The same numbers to rounding (the near test's Minkowski product is summed in another
    order: the branch taken is the same away from its threshold; both branches agree to
    ~1e-12 there): the fast path's ``log`` within 8 eps of the general route's, relative to
    the points' size, and exactly 0 where ``y = x``."""
    M = rf.Lorentz(6)
    if case == "far":
        x, y = _points(M, 9, 0)
    elif case == "near":
        x, y = _points(M, 9, 1, near_scale=1e-4)
    elif case == "equal":
        x, _ = _points(M, 9, 2)
        y = x.copy()
    elif case == "mixed":
        x, y = _points(M, 9, 3)
        _, yn = _points(M, 9, 3, near_scale=1e-5)
        y[::2] = yn[::2]
    else:
        x, y = _points(M, 9, 4, near_scale=1e-3)
        x = np.ascontiguousarray(x[0]) if case == "server-batch" else x
        y = np.ascontiguousarray(y[0]) if case == "batch-server" else y
    got = M.log(x, y)
    want = M.log(_general(x), _general(y))
    scale = np.max(np.abs(x)) * np.max(np.abs(y))
    assert got.shape == want.shape and got.dtype == np.float64
    assert np.max(np.abs(got - want)) <= 8 * EPS * scale
    if case == "equal":
        assert np.array_equal(got, np.zeros_like(got))
    # Exp undoes it (the near forms are accurate, not only consistent)
    back = M.exp(np.broadcast_to(x, got.shape), got)
    assert np.max(np.abs(back - np.broadcast_to(y, got.shape))) <= 1e-13 * scale


def test_transport_proj_inner_fast_paths_are_the_general_route():
    M = rf.Lorentz(5)
    x, y = _points(M, 7, 5)
    rng = np.random.default_rng(6)
    v = M.proj(x, rng.standard_normal(x.shape))
    # products of up to three factors: 64 eps of their magnitude
    scale = (np.max(np.abs(x)) + np.max(np.abs(y))) ** 2 * np.max(np.abs(v))
    for got, want in [
            (M.transport(x, y, v), M.transport(_general(x), _general(y), _general(v))),
            (M.transport(x[0].copy(), y, v[0].copy()),
             M.transport(x[0], _general(y), v[0])),
            (M.proj(y, v), M.proj(_general(y), _general(v))),
            (M.inner(x, v, v), M.inner(_general(x), _general(v), _general(v)))]:
        assert np.max(np.abs(got - want)) <= 64 * EPS * scale


def test_fast_paths_still_refuse_non_finite_points():
    M = rf.Lorentz(3)
    x, y = _points(M, 4, 7)
    y[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        M.log(x, y)
    with pytest.raises(ValueError, match="NaN|finite"):
        M.transport(x, y, M.proj(x, np.ones(x.shape)))


def test_hyperbolic_rgrad_is_the_sum_of_sample_gradients():
    """``rgrad`` (the blocked kernel-weight sum, the ratio's common case without the
    small-angle branch) against the per-sample ``-2 alpha Log_x(y)`` mean, including a
    client whose point sits on one of its targets (``theta = 0``: the small-angle branch)."""
    rng = np.random.default_rng(8)
    M = rf.Lorentz(4)
    y = M.random_point(3, 12, rng=rng)
    alpha = rng.uniform(0.5, 1.5, (3, 12))
    P = HyperbolicPrediction.from_weights(y, alpha)
    x = M.random_point(3, rng=rng)
    x[1] = y[1, 5]                                            # on a target: theta = 0
    g = P.rgrad(np.arange(3), x)
    # the one-span branch (every client in order) is the blocked branch's arithmetic
    assert np.array_equal(P.rgrad(np.array([1, 2]), x[1:]), g[1:])
    assert np.array_equal(P.rgrad(np.array([2, 0]), x[[2, 0]]), g[[2, 0]])
    for i in range(3):
        want = P.sample_rgrads(i, x[i]).mean(axis=0)
        assert np.max(np.abs(g[i] - want)) <= 1e-13 * max(1.0, np.max(np.abs(want)))


def test_one_point_against_a_stack_is_the_stack_of_its_rows():
    """RFedSVRG's composed steps hand vector manifolds the server point's rows as a stack
    (the kernels take it as it is) where they passed the one point: bit for bit the same
    ``log`` and ``transport``, near and far."""
    M = rf.Lorentz(5)
    for scale in (1e-4, 0.5):
        x, y = _points(M, 6, 9, near_scale=scale)
        x1 = np.ascontiguousarray(x[0])
        xs = np.ascontiguousarray(np.broadcast_to(x1, y.shape))
        v = M.proj(xs, np.random.default_rng(10).standard_normal(y.shape))
        assert np.array_equal(M.log(x1, y), M.log(xs, y))
        assert np.array_equal(M.transport(x1, y, v), M.transport(xs, y, v))
