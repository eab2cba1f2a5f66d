"""Property-based identities (hypothesis) over every manifold, size, step scale and backend.

Bounded to stay fast: a derandomized profile (the same examples every run), few examples per
property, no deadline (the first call of a Numba kernel may load its cache).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rfl_fast as rf

settings.register_profile("rfl_props", max_examples=25, deadline=None, derandomize=True,
                          database=None)
PROPS = settings.get_profile("rfl_props")
backends = pytest.mark.parametrize("backend_name", rf.available_backends())


@st.composite
def manifolds(draw, kinds=("euclidean", "sphere", "stiefel", "spd", "lorentz")):
    kind = draw(st.sampled_from(kinds))
    if kind == "euclidean":
        return rf.Euclidean(draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    if kind == "sphere":
        return rf.Sphere(draw(st.integers(2, 9)))
    if kind == "stiefel":
        n = draw(st.integers(1, 6))
        return rf.Stiefel(n, draw(st.integers(1, n)))
    if kind == "spd":
        return rf.SPD(draw(st.integers(1, 4)))
    return rf.Lorentz(draw(st.integers(1, 5)))


seeds = st.integers(0, 2**16)
batches = st.integers(1, 4)


def _sample(M, batch, seed, scale):
    x = M.random_point(batch, rng=seed)
    u = scale * M.random_tangent(x, rng=seed + 1)
    return x, u


def _close(a, b, tol):
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(1.0, float(np.max(np.abs(b)))))


@backends
@PROPS
@given(M=manifolds(), batch=batches, seed=seeds, scale=st.floats(0.0, 3.0))
def test_retractions_land_on_the_manifold(backend_name, M, batch, seed, scale):
    with rf.backend(backend_name):
        x, u = _sample(M, batch, seed, scale)
        for method in M.retractions:
            y = M.retr(x, u, method)
            assert y.shape == x.shape
            assert M.is_point(y, atol=1e-7), (M, method)


@backends
@PROPS
@given(M=manifolds(), batch=batches, seed=seeds, scale=st.floats(0.0, 1.0))
def test_inverse_retractions_invert(backend_name, M, batch, seed, scale):
    with rf.backend(backend_name):
        x, u = _sample(M, batch, seed, scale)
        for method in M.inverse_retractions:
            y = M.retr(x, u, method)
            _close(M.inv_retr(x, y, method), u, 1e-7)


@backends
@PROPS
@given(M=manifolds(("euclidean", "sphere", "spd", "lorentz")), batch=batches, seed=seeds,
       frac=st.floats(0.0, 0.95))
def test_exp_log_invert_within_the_injectivity_radius(backend_name, M, batch, seed, frac):
    scale = frac * (np.pi if isinstance(M, rf.Sphere) else 3.0)
    with rf.backend(backend_name):
        x, u = _sample(M, batch, seed, scale)
        y = M.exp(x, u)
        _close(M.log(x, y), u, 1e-7)
        _close(M.dist(x, y), M.norm(x, u), 1e-7)


@backends
@PROPS
@given(M=manifolds(), batch=batches, seed=seeds, scale=st.floats(0.0, 2.0))
def test_transports_are_tangent(backend_name, M, batch, seed, scale):
    with rf.backend(backend_name):
        x, u = _sample(M, batch, seed, scale)
        y = M.retr(x, u)
        v = M.random_tangent(x, rng=seed + 2)
        for method in M.transports:
            assert M.is_tangent(y, M.transport(x, y, v, method), atol=1e-7), (M, method)


@backends
@PROPS
@given(M=manifolds(), batch=st.integers(2, 4), seed=seeds, scale=st.floats(0.0, 1.0))
def test_batched_equals_per_item(backend_name, M, batch, seed, scale):
    with rf.backend(backend_name):
        x, u = _sample(M, batch, seed, scale)
        for method in M.retractions:
            y = M.retr(x, u, method)
            for i in range(batch):
                _close(M.retr(x[i], u[i], method), y[i], 1e-12)
        y = M.retr(x, u)
        v = M.random_tangent(x, rng=seed + 3)
        w = M.transport(x, y, v)
        for i in range(batch):
            _close(M.transport(x[i], y[i], v[i]), w[i], 1e-12)
