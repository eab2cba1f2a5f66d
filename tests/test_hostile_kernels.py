"""Hostile inputs (issue 14, "Robustness"): each case answers correctly or raises a clear error
naming the argument, on every available backend; never a silent wrong answer.

1. polar retraction / polar factor of huge or tiny matrices (rescaled, every p, p = 5 lanes too);
2. sphere Exp with |u|^2 overflowing, ``sym_expm`` overflow, Lorentz Exp far from the origin;
3. the compiled core's argument conversion (core axes beyond int, complex, float indices);
4. dtypes other than float64 / float32 (float16, longdouble).
"""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import linalg
from rfl_fast.errors import NoSolutionError
from rfl_fast.kernels import call
from rfl_fast.kernels import reference as ref

BACKENDS = rf.available_backends()
HAVE_CPP = "cpp" in BACKENDS
needs_cpp = pytest.mark.skipif(not HAVE_CPP, reason="the C++ extension is not built")


def _stiefel_step(rng, n, p, norm, batch=()):
    M = rf.Stiefel(n, p)
    x = M.random_point(*batch, rng=rng)
    u = M.proj(x, rng.standard_normal(x.shape))
    u *= norm / np.linalg.norm(u, axis=(-2, -1), keepdims=True)
    return M, x, u


def _orth_gap(y):
    p = y.shape[-1]
    return np.max(np.abs(np.swapaxes(y, -1, -2) @ y - np.eye(p)))


# ------------------------------------------------------------------ 1. polar of any scale


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", [1, 3, 5, 8, 12])
@pytest.mark.parametrize("norm", [1e78, 1e200, 1e300])
def test_polar_retraction_huge_step(backend, p, norm):
    """Old: p = 5 (C++) and every p (Numba) returned |Y'Y - I| ~ 0.3-0.7 without error; C++ at
    other p raised NoSolutionError. The polar factor of X + U is that of (X + U)/s."""
    rng = np.random.default_rng(p)
    M, x, u = _stiefel_step(rng, 50, p, norm)
    s = norm
    want = ref.polar((x / s + u / s)[None])[0]
    y = M.retr(x, u, backend=backend)
    assert _orth_gap(y) < 1e-13
    np.testing.assert_allclose(y, want, atol=1e-12, rtol=0)
    y2 = call("stiefel_retr_polar", x, u, backend=backend)
    np.testing.assert_allclose(y2, want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", [2, 5, 7])
@pytest.mark.parametrize("scale", [1e-200, 1e-300, 1e150, 1e300])
def test_polar_factor_any_scale(backend, p, scale):
    """polar(a s) = polar(a): tiny and huge full-rank matrices, every backend."""
    rng = np.random.default_rng(7 * p)
    a = rng.standard_normal((3, 40, p))
    want = ref.polar(a)
    got = linalg.polar(a * scale, backend=backend)
    assert _orth_gap(got) < 1e-13
    np.testing.assert_allclose(got, want, atol=1e-12, rtol=0)
    got = rf.Stiefel(40, p).project(a * scale, backend=backend)
    np.testing.assert_allclose(got, want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_polar_zero_still_refused(backend):
    """Rescaling does not invent an answer: a zero matrix has no unique polar factor."""
    with pytest.raises(NoSolutionError, match="rank deficient"):
        linalg.polar(np.zeros((2, 6, 3)), backend=backend)


@needs_cpp
def test_polar_p5_huge_items_batch_equals_single():
    """The p = 5 lockstep path: a huge (rescaled) item among ordinary ones gets exactly the
    answer it gets alone, and so do its neighbours."""
    from rfl_fast import _core as core

    rng = np.random.default_rng(5)
    _, x, u = _stiefel_step(rng, 30, 5, 1.0, batch=(11,))
    u[2] *= 1e78
    u[7] *= 1e250
    u[9] *= 1e-170  # tiny step: an ordinary item
    got = core.stiefel_retr_polar(x, u)
    got_polar = core.polar(x + u)
    assert _orth_gap(got) < 1e-13
    for k in range(11):
        assert np.array_equal(core.stiefel_retr_polar(x[k:k + 1], u[k:k + 1])[0], got[k])
        assert np.array_equal(core.polar(x[k:k + 1] + u[k:k + 1])[0], got_polar[k])
    for k in (2, 7):
        want = ref.polar((x[k] / 1e78 + u[k] / 1e78)[None])[0]
        np.testing.assert_allclose(got[k], want, atol=1e-12, rtol=0)
