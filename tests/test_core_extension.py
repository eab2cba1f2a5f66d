"""The C++ extension ``rfl_fast._core`` as a module: shape checks, threads, version, headers,
edge cases and accuracy against a high-precision oracle where the NumPy reference is itself
inaccurate."""

import os
import subprocess
import threading
from importlib import metadata

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.kernels import KERNELS, REGISTRY
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels.testing import kernel_inputs, spd, stiefel_point, stiefel_tangent

core = pytest.importorskip("rfl_fast._core")

CORE_SHAPE = {"stiefel": (6, 2), "sym": (4, 4), "vec": (5,)}


def family(name):
    if name.startswith("stiefel") or name == "polar":
        return "stiefel"
    if name.startswith(("sym_", "spd_")):
        return "sym"
    return "vec"


def test_exports_every_kernel_with_a_docstring():
    for name in KERNELS:
        fn = getattr(core, name)
        assert fn.__doc__ and name in fn.__doc__.split("\n")[0]


def test_version_matches_the_package():
    try:
        expected = metadata.version("rfl_fast")
    except metadata.PackageNotFoundError:
        import re
        from pathlib import Path

        text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
        expected = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert core.__version__ == expected


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_malformed_arrays_raise_value_error(name):
    core_ndims, _ = KERNELS[name]
    shape = CORE_SHAPE[family(name)]
    good = [np.ones((3,) + shape) for _ in core_ndims]
    with pytest.raises(ValueError):  # missing batch axis
        getattr(core, name)(*[g[0] for g in good])
    with pytest.raises(ValueError):  # one extra axis
        getattr(core, name)(*[g[None] for g in good])
    if len(good) > 1:
        bad = list(good)
        bad[-1] = np.ones((2,) + shape)  # batch sizes differ
        with pytest.raises(ValueError):
            getattr(core, name)(*bad)
        bad[-1] = np.ones((3,) + tuple(s + 1 for s in shape))  # core shapes differ
        with pytest.raises(ValueError):
            getattr(core, name)(*bad)


def test_non_square_and_wide_inputs_raise():
    with pytest.raises(ValueError, match="square"):
        core.sym_expm(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="n >= p"):
        core.polar(np.ones((2, 3, 4)))


def test_non_contiguous_and_float32_inputs_are_converted():
    rng = np.random.default_rng(0)
    (x, u) = kernel_inputs("stiefel_retr_polar", rng, 4, 10, 3)
    want = ref.stiefel_retr_polar(x, u)
    xf = np.asfortranarray(x)
    np.testing.assert_allclose(core.stiefel_retr_polar(xf, u), want, atol=1e-12)
    got32 = core.stiefel_retr_polar(x.astype(np.float32), u.astype(np.float32))
    assert got32.dtype == np.float64
    np.testing.assert_allclose(got32, want, atol=1e-5)


def test_empty_batch():
    assert core.sym_logm(np.empty((0, 3, 3))).shape == (0, 3, 3)
    assert core.sphere_dist(np.empty((0, 4)), np.empty((0, 4))).shape == (0,)


def test_threads_release_the_gil_and_agree():
    rng = np.random.default_rng(1)
    (x, y) = kernel_inputs("stiefel_inv_retr_polar", rng, 64, 50, 5)
    (s,) = kernel_inputs("sym_logm", rng, 256, 9)
    want_st, want_sym = core.stiefel_inv_retr_polar(x, y), core.sym_logm(s)
    results, errors = [], []

    def work(k):
        try:
            for _ in range(5):
                if k % 2:
                    results.append(np.array_equal(core.stiefel_inv_retr_polar(x, y), want_st))
                else:
                    results.append(np.array_equal(core.sym_logm(s), want_sym))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 30 and all(results)


def test_headers_are_found_and_compile_standalone(tmp_path):
    include = rf.get_include()
    for h in ("linalg_small.hpp", "blas.hpp", "stiefel.hpp", "spd.hpp", "sphere.hpp", "lorentz.hpp",
              "rfl.hpp"):
        assert os.path.isfile(os.path.join(include, "rfl", h))
    cxx = os.environ.get("CXX", "g++")
    src = tmp_path / "use.cpp"
    src.write_text(
        "#include <rfl/rfl.hpp>\n#include <vector>\n#include <cstdio>\n"
        "int main() { double s[4] = {2, 0, 0, 8}, o[4];\n"
        "  std::vector<double> w(rfl::spd::sym_work(2));\n"
        "  rfl::spd::sym_sqrtm(s, o, 2, w.data());\n"
        "  std::printf(\"%.12f %.12f\", o[0], o[3]); return 0; }\n")
    try:
        subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", include, str(src),
                        "-o", str(tmp_path / "use")], check=True, capture_output=True)
    except FileNotFoundError:
        pytest.skip(f"no C++ compiler {cxx!r}")
    out = subprocess.run([str(tmp_path / "use")], check=True, capture_output=True, text=True)
    a, b = map(float, out.stdout.split())
    assert abs(a - np.sqrt(2)) < 1e-12 and abs(b - np.sqrt(8)) < 1e-12


# ---------------------------------------------------------------- edge cases


def test_non_spd_items_are_nan_and_others_untouched():
    rng = np.random.default_rng(2)
    s = spd(rng, 10, 5)
    s[3] = -s[3]
    s[9, 0, 0] = np.nan
    for name in ("sym_logm", "sym_sqrtm", "sym_invsqrtm"):
        got = getattr(core, name)(s)
        assert np.isnan(got[3]).all() and np.isnan(got[9]).all()
        ok = [k for k in range(10) if k not in (3, 9)]
        np.testing.assert_allclose(got[ok], getattr(ref, name)(s[ok]), atol=1e-12)
    x = spd(rng, 3, 4)
    y = x.copy()
    y[1] = -y[1]
    assert np.isnan(core.spd_log(x, y)[1]).all() and np.isnan(core.spd_dist(x, y)[1])
    assert np.isnan(core.spd_exp(-x, y)).all()


def test_inverse_retractions_without_solution_are_nan():
    x = stiefel_point(np.random.default_rng(3), 2, 6, 3)
    y = x.copy()
    y[0] = 0.0  # x'y = 0: singular Lyapunov operator, vanishing leading minor
    y[1, :, 1] = -x[1, :, 1]  # eigenvalues 1 and -1 of x'y sum to zero
    assert np.isnan(core.stiefel_inv_retr_polar(x, y)[0]).all()
    assert np.isnan(core.stiefel_inv_retr_polar(x, y)[1]).all()
    assert np.isnan(core.stiefel_inv_retr_qr(x, y)[0]).all()


def test_rank_deficient_polar_is_nan():
    a = np.random.default_rng(4).standard_normal((2, 7, 3))
    a[0, :, 2] = a[0, :, 0] + a[0, :, 1]
    got = core.polar(a)
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_antipodal_sphere_log_is_nan():
    x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    got = core.sphere_log(x, np.array([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    assert np.isnan(got[0]).all() and np.array_equal(got[1], [0.0, 0.0, 0.0])


@pytest.mark.parametrize("n,p", [(1, 1), (5, 1), (6, 6), (12, 12), (40, 10)])
def test_stiefel_degenerate_shapes(n, p):
    rng = np.random.default_rng(n * 100 + p)
    for name in (k for k, v in REGISTRY.items() if v.family == "stiefel"):
        args = kernel_inputs(name, rng, 3, n, p)
        np.testing.assert_allclose(getattr(core, name)(*args), getattr(ref, name)(*args),
                                   atol=1e-10, rtol=0)


@pytest.mark.parametrize("cond", [1e3, 1e6, 1e9])
def test_ill_conditioned_polar_and_qr(cond):
    rng = np.random.default_rng(5)
    q1 = stiefel_point(rng, 4, 30, 4)
    q2 = stiefel_point(rng, 4, 4, 4)
    a = (q1 * np.geomspace(1.0, 1.0 / cond, 4)) @ np.swapaxes(q2, -1, -2)
    np.testing.assert_allclose(core.polar(a), ref.polar(a), atol=1e-15 * cond * 10, rtol=0)
    q = core.stiefel_retr_qr(a, np.zeros_like(a))
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (4, 4, 4)),
                               atol=1e-13)


def _polar_batch_inputs(rng, N, n):
    """p = 5 polar inputs for batches of N items (the kernel groups 8 items): well-conditioned
    steps plus, when N allows, an ill-conditioned item (the refined Gram route), one with
    cond > 1e5 (the SVD route), a rank-deficient one and non-finite ones."""
    x = stiefel_point(rng, N, n, 5)
    u = stiefel_tangent(rng, x)
    q2 = stiefel_point(rng, 1, 5, 5)[0]
    for k, cond in zip((2, 5, 11), (30.0, 1e7, np.inf)):  # a = x + u = Q diag(s) V'
        if k < N:
            s = np.geomspace(1.0, 1.0 / cond, 5) if np.isfinite(cond) else [1, 1, 1, 1, 0]
            u[k] = (x[k] * np.asarray(s)) @ q2.T - x[k]
    if N > 3:
        u[3, 0, 0] = np.inf
    if N > 9:
        x[9, 4, 2] = np.nan
    return x, u


@pytest.mark.parametrize("N", [1, 2, 7, 8, 9, 13, 16, 17])
@pytest.mark.parametrize("n", [5, 7, 200])
def test_polar_p5_batches_equal_single_items(N, n):
    """Every item of a batch gets exactly the answer it gets alone, whatever its neighbours
    (ill-conditioned, rank-deficient, non-finite) and its position in a group of lanes."""
    rng = np.random.default_rng(100 * N + n)
    x, u = _polar_batch_inputs(rng, N, n)
    got = core.stiefel_retr_polar(x, u)
    got_polar = core.polar(x + u)
    for k in range(N):
        assert np.array_equal(core.stiefel_retr_polar(x[k:k + 1], u[k:k + 1])[0], got[k],
                              equal_nan=True)
        assert np.array_equal(core.polar(x[k:k + 1] + u[k:k + 1])[0], got_polar[k], equal_nan=True)
    bad = ~np.isfinite(x + u).all(axis=(1, 2))
    keep = ~bad[:, None, None]  # LAPACK's SVD may not return on inf input
    want = ref.stiefel_retr_polar(np.where(keep, x, 0.0), np.where(keep, u, 0.0))
    assert np.isnan(got[bad]).all() and np.isnan(got_polar[bad]).all()
    # the rank-deficient item is NaN (as in the reference), the rest match it
    np.testing.assert_array_equal(np.isnan(got[~bad]), np.isnan(want[~bad]))
    np.testing.assert_allclose(got[~bad], want[~bad], atol=1e-9, rtol=0)  # cond 1e7: eps cond
    np.testing.assert_allclose(got_polar[~bad], got[~bad], atol=1e-15, rtol=0)
    ok = ~bad & (np.arange(N) != 5)  # cond <= 30: the reference's own accuracy
    np.testing.assert_allclose(got[ok], want[ok], atol=1e-12, rtol=0)


@pytest.mark.parametrize("N,n", [(3, 5), (4, 7), (9, 200), (2, 784)])
def test_proj_p5_matches_reference(N, n):
    rng = np.random.default_rng(N * n)
    x = stiefel_point(rng, N, n, 5)
    u = rng.standard_normal(x.shape)
    np.testing.assert_allclose(core.stiefel_proj(x, u), ref.stiefel_proj(x, u), atol=1e-12, rtol=0)


@pytest.mark.parametrize("n", [1, 2, 9, 16, 17, 33])
def test_sym_functions_batch_and_single_item(n):
    rng = np.random.default_rng(n)
    s = spd(rng, 11, n)
    for name in ("sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm"):
        want = getattr(ref, name)(s)
        np.testing.assert_allclose(getattr(core, name)(s), want,
                                   atol=1e-12 * max(1, abs(want).max()))
        np.testing.assert_allclose(getattr(core, name)(s[:1]), want[:1],
                                   atol=1e-12 * max(1, abs(want).max()))


@pytest.mark.parametrize("n", [13, 16, 20, 25, 32])
def test_sym_functions_lockstep_ql_groups(n):
    """n > 12 runs Householder + QL in lockstep over groups of 4 matrices: batch sizes with a
    partial last group match the reference, and an item's result does not depend on the other
    items of its group."""
    rng = np.random.default_rng(1000 + n)
    for name in ("sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm"):
        (s,) = kernel_inputs(name, rng, 9, n, cond=1e4)
        want = getattr(ref, name)(s)
        full = getattr(core, name)(s)
        np.testing.assert_allclose(full, want, rtol=0, atol=1e-10 * max(1, abs(want).max()))
        for N in (2, 3, 5, 6):
            assert np.array_equal(getattr(core, name)(s[9 - N:]), full[9 - N:])


def test_sym_functions_lockstep_ql_special_items():
    """n = 20 items next to ordinary ones: not finite (lower triangle: NaN item; upper
    triangle only: ignored, as numpy.linalg.eigh), zero, diagonal, block diagonal, and scaled
    to 1e-150 (out of the unscaled hypot's range: those groups fall back to QL per item)."""
    rng = np.random.default_rng(7)
    n = 20
    s = spd(rng, 11, n)
    s[1, 7, 3] = np.nan
    s[2, 3, 7] = np.inf
    s[4] = 0.0
    s[5] = np.diag(rng.uniform(0.5, 2.0, n))
    s[6, :8, 8:] = s[6, 8:, :8] = 0.0
    s[9] *= 1e-150
    for name in ("sym_expm", "sym_sqrtm", "sym_logm"):
        got = getattr(core, name)(s)
        assert np.isnan(got[1]).all()
        ok = [k for k in range(11) if k != 1 and not (k == 4 and name != "sym_expm")]
        want = getattr(ref, name)(np.tril(s[ok]) + np.swapaxes(np.tril(s[ok], -1), -1, -2))
        for k, w in zip(ok, want):
            np.testing.assert_allclose(got[k], w, rtol=0, atol=1e-12 * np.abs(w).max())
        if name != "sym_expm":
            assert np.isnan(got[4]).all()


def test_clustered_and_tiny_eigenvalues():
    rng = np.random.default_rng(6)
    q = stiefel_point(rng, 9, 9, 9)
    w = np.tile(np.array([1.0, 1.0, 1.0 + 1e-13, 1e-8, 1e-8, 2.0, 2.0, 2.0, 3.0]), (9, 1))
    s = (q * w[:, None, :]) @ np.swapaxes(q, -1, -2)
    s = 0.5 * (s + np.swapaxes(s, -1, -2))
    for name in ("sym_sqrtm", "sym_expm"):
        np.testing.assert_allclose(getattr(core, name)(s), getattr(ref, name)(s), atol=1e-13)


# ---------------------------------------------------------------- high-precision oracle


def _mp_oracle(mp, x, b, f):
    """x^1/2 f(x^-1/2 b x^-1/2) x^1/2 (or f(b) when x is None) in 50-digit arithmetic."""
    def fun(m, g):
        e, q = mp.eigsy(m)
        return q * mp.diag([g(e[i]) for i in range(m.rows)]) * q.T
    bm = mp.matrix(b.tolist())
    if x is None:
        return np.array(fun(bm, f).tolist(), dtype=float)
    xm = mp.matrix(x.tolist())
    c, ci = fun(xm, mp.sqrt), fun(xm, lambda t: 1 / mp.sqrt(t))
    inner = ci * bm * ci
    inner = (inner + inner.T) / 2
    return np.array((c * fun(inner, f) * c).tolist(), dtype=float)


@pytest.mark.full
@pytest.mark.parametrize("name", ["sym_logm", "sym_sqrtm", "sym_invsqrtm", "spd_log"])
def test_cond_1e10_against_high_precision(name):
    """At cond 1e10 the LAPACK-based reference is off by more than 1e-9 itself (a few 1e-7
    relative for logm/invsqrtm; spd_log even returns NaN for SPD pairs), so the compiled kernel
    is checked against 50-digit arithmetic instead, at the accuracy any double-precision
    method can promise there (a small multiple of eps * cond)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    rng = np.random.default_rng(3)
    args = kernel_inputs(name, rng, 3, 6, cond=1e10)
    got = getattr(core, name)(*args)
    f = {"sym_logm": mp.log, "sym_sqrtm": mp.sqrt, "sym_invsqrtm": lambda t: 1 / mp.sqrt(t),
         "spd_log": mp.log}[name]
    for k in range(3):
        want = _mp_oracle(mp, None, args[0][k], f) if name.startswith("sym") else \
            _mp_oracle(mp, args[0][k], args[1][k], f)
        scale = np.abs(want).max()
        assert np.abs(got[k] - want).max() <= 1e-4 * scale  # eps * cond = 2.2e-6
