"""Every compiled kernel equals its NumPy reference (float64, 1e-10) on random inputs."""

import zlib

import numpy as np
import pytest

from rfl_fast.kernels import _dispatch
from rfl_fast.kernels import KERNELS, REGISTRY, call
from rfl_fast.kernels import reference as ref

from rfl_fast.kernels.testing import kernel_inputs

COMPILED = [b for b in _dispatch.BACKENDS if b != "numpy"]
EPS = np.finfo(float).eps

# (N, n, p) per kernel family of the registry; p only matters for Stiefel kernels and polar.
# Every p of _core's compile-time specialisations (1..8) and the generic p beyond them; beyond
# the papers' shapes: p = 16, 32 and n = 64, where auto may pick another backend.
SHAPES = {
    "stiefel": [(1, 4, 1), (3, 12, 2), (7, 10, 3), (2, 33, 4), (3, 50, 5), (5, 7, 5), (2, 6, 6),
                (4, 784, 5), (9, 60, 7), (3, 784, 8), (3, 40, 16), (2, 70, 32)],
    "square": [(1, 1, None), (9, 2, None), (20, 9, None), (4, 20, None), (2, 33, None),
               (2, 64, None)],
    "vector": [(1, 2, None), (50, 3, None), (13, 25, None), (3, 784, None), (2, 10_000, None)],
}


def family(name):
    return REGISTRY[name].family


CASES = [(k, s) for k in KERNELS for s in SHAPES[family(k)]]


def assert_matches(got, want, rtol=1e-10):
    assert got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("name,shape", CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_compiled_matches_reference(backend, name, shape):
    rng = np.random.default_rng(zlib.crc32(f"{name}{shape}".encode()))
    args = kernel_inputs(name, rng, *shape)
    want = getattr(ref, name)(*args)
    got = call(name, *args, backend=backend)
    assert_matches(got, want)


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("name", [k for k in KERNELS if family(k) == "square"])
def test_ill_conditioned_spd_matches_reference(backend, name):
    """Condition numbers where the reference itself is accurate to 1e-9: 1e6 for the matrix
    functions, 1e4 for the affine-invariant maps (they compound two ill-conditioned steps)."""
    rng = np.random.default_rng(3)
    args = kernel_inputs(name, rng, 16, 9, cond=1e6 if name.startswith("sym_") else 1e4)
    want = getattr(ref, name)(*args)
    got = call(name, *args, backend=backend)
    assert_matches(got, want, rtol=1e-9)


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
@pytest.mark.parametrize("fun", ["sym_logm", "sym_sqrtm", "sym_invsqrtm", "sym_expm"])
def test_condition_1e10_against_exact_eigendecomposition(backend, fun):
    """At condition number 1e10 no float64 method beats ~eps*cond; every backend must reach
    that accuracy against the exact answer Q f(w) Q' built from the known eigenpairs."""
    rng = np.random.default_rng(4)
    n, cond = 9, 1e10
    q = np.linalg.qr(rng.standard_normal((16, n, n)))[0]
    w = np.exp(rng.uniform(-0.5, 0.5, (16, n)) * np.log(cond))
    w[:, 0], w[:, -1] = cond**-0.5, cond**0.5
    if fun == "sym_expm":
        w = np.log(w)  # eigenvalues in [-11.5, 11.5]: expm spans the same 1e10 range
    a = (q * w[:, None, :]) @ np.swapaxes(q, -1, -2)
    a = 0.5 * (a + np.swapaxes(a, -1, -2))
    f = {"sym_logm": np.log, "sym_sqrtm": np.sqrt, "sym_invsqrtm": lambda v: v**-0.5,
         "sym_expm": np.exp}[fun]
    exact = (q * f(w)[:, None, :]) @ np.swapaxes(q, -1, -2)
    got = call(fun, a, backend=backend)
    err = np.max(np.abs(got - exact), axis=(-2, -1)) / np.max(np.abs(exact), axis=(-2, -1))
    assert err.max() < 100 * np.finfo(float).eps * cond, err.max()


@pytest.mark.parametrize("backend", COMPILED)
def test_backend_is_available_and_complete(backend):
    assert _dispatch.is_available(backend), _dispatch.backend_error(backend)
    assert _dispatch.backend_kernels(backend) == sorted(KERNELS)


REFERENCE_LOSES_ACCURACY = pytest.param(
    "numpy", marks=pytest.mark.xfail(strict=True, reason="the reference's x^-1/2 y x^-1/2 route "
                                     "loses ~1e-3 relative accuracy at condition 1e8; the "
                                     "compiled kernels' Cholesky route does not"))


@pytest.mark.parametrize("backend", [REFERENCE_LOSES_ACCURACY] + COMPILED)
def test_spd_maps_at_condition_1e8_against_commuting_exact_answers(backend):
    """For x = Q diag(a) Q', y = Q diag(b) Q' (commuting), Log_x(y) = Q diag(a log(b/a)) Q',
    dist = |log(b/a)|, Exp_x(Log_x(y)) = y: exact answers at condition number 1e8."""
    rng = np.random.default_rng(5)
    n, cond = 9, 1e8
    q = np.linalg.qr(rng.standard_normal((8, n, n)))[0]
    a = np.exp(rng.uniform(-0.5, 0.5, (8, n)) * np.log(cond))
    b = np.exp(rng.uniform(-0.5, 0.5, (8, n)) * np.log(cond))

    def spd(w):
        m = (q * w[:, None, :]) @ np.swapaxes(q, -1, -2)
        return 0.5 * (m + np.swapaxes(m, -1, -2))

    x, y = spd(a), spd(b)
    log_exact = spd(a * np.log(b / a))
    tol = 100 * np.finfo(float).eps * cond
    got = call("spd_log", x, y, backend=backend)
    assert np.max(np.abs(got - log_exact)) / np.max(np.abs(log_exact)) < tol
    dist = call("spd_dist", x, y, backend=backend)
    np.testing.assert_allclose(dist, np.linalg.norm(np.log(b / a), axis=-1), rtol=tol)
    back = call("spd_exp", x, log_exact, backend=backend)
    assert np.max(np.abs(back - y)) / np.max(np.abs(y)) < tol


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("p", [1, 3, 5, 9])
def test_stiefel_exp_at_every_step_size_and_item_by_item(backend, p):
    """Stiefel Exp over step norms from 1e-9 to 6 (the compiled route's Pade degrees 3 to 13 and
    its squarings): the reference's degree-13 answer within ``1e3 eps`` (both backward-stable
    scaling and squaring of the same exponentials; the squarings at ``|u| = 6`` multiply the
    rounding by at most ``2^s``, s <= 3 here, and the entries are at most 1); it is on the
    manifold and ``Exp_x(0) = x`` exactly; a non-finite item is NaN alone, and an item's bits do
    not depend on its batch."""
    rng = np.random.default_rng(p)
    x = kernel_inputs("stiefel_proj", rng, 40, 30, p)[0]
    u = rng.standard_normal(x.shape)
    u -= x @ (0.5 * (np.swapaxes(x, 1, 2) @ u + np.swapaxes(u, 1, 2) @ x))
    u *= (np.geomspace(1e-9, 6.0, 40) / np.linalg.norm(u, axis=(1, 2)))[:, None, None]
    got = call("stiefel_exp", x, u, backend=backend)
    np.testing.assert_allclose(got, ref.stiefel_exp(x, u), rtol=0, atol=1e3 * EPS)
    gram = np.swapaxes(got, 1, 2) @ got
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(p), gram.shape), atol=1e3 * EPS)
    np.testing.assert_array_equal(call("stiefel_exp", x, 0 * u, backend=backend), x)
    np.testing.assert_array_equal(call("stiefel_exp", x[7:8], u[7:8], backend=backend)[0],
                                  got[7])
    bad = u.copy()
    bad[3, 0, 0] = np.nan
    bad[5, 1, 0] = np.inf
    out = call("stiefel_exp", x, bad, backend=backend)
    assert np.isnan(out[[3, 5]]).all()
    np.testing.assert_array_equal(np.delete(out, [3, 5], 0), np.delete(got, [3, 5], 0))


@pytest.mark.parametrize("backend", ["numpy"] + COMPILED)
def test_stiefel_exp_refuses_a_step_too_long_for_its_accuracy(backend):
    """A step so long that the scaled and squared exponentials lose their accuracy (|u| = 1e10:
    the answer came back as zeros, finite and far off the manifold) is NaN on every backend,
    and ``Stiefel.exp`` raises naming ``u``; steps up to |u| = 1e3 are answered on the
    manifold (``Y'Y = I`` within 1e-10)."""
    import rfl_fast as rf
    from rfl_fast.errors import NoSolutionError

    rng = np.random.default_rng(0)
    x = kernel_inputs("stiefel_proj", rng, 4, 30, 3)[0]
    u = rng.standard_normal(x.shape)
    u -= x @ (0.5 * (np.swapaxes(x, 1, 2) @ u + np.swapaxes(u, 1, 2) @ x))
    u *= (np.array([1.0, 1e3, 1e10, 2.0]) / np.linalg.norm(u, axis=(1, 2)))[:, None, None]
    got = call("stiefel_exp", x, u, backend=backend)
    assert np.isnan(got[2]).all() and np.isfinite(got[[0, 1, 3]]).all()
    gram = np.swapaxes(got[[0, 1, 3]], 1, 2) @ got[[0, 1, 3]]
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(3), gram.shape), atol=1e-10)
    with rf.backend(backend), pytest.raises(NoSolutionError, match=r"Stiefel.exp: .* u \(a step"):
        rf.Stiefel(30, 3).exp(x[2], u[2])
