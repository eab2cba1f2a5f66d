"""Answers that must not depend on the machine, the shape or the scale of the input (issue 28).

* the C++ core reports the code path that runs, and CI's baseline build really runs another one;
* ``SPD.random_point`` is well conditioned at every n (its documented bound, up to n = 512), so
  random tangents and a federated run start from it at n = 256;
* every backend answers the same scaled SPD inputs (1e200 X, 1e-200 X) the same way;
* the QR inverse retraction refuses a leading block of X'Y that is singular within its rounding
  on every backend;
* ``Manifold.norm`` does not overflow (or underflow) before the norm does;
* an install without the C++ core says so at import and names the way past pip's wheel cache.
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import rfl_fast as rf
from manifold_cases import one_each
from rfl_fast import kernels
from rfl_fast.errors import NoSolutionError

from subprocess_env import same_package

EPS = np.finfo(np.float64).eps


# ----------------------------------------------------------------------------- code paths

def test_core_reports_the_code_path_that_runs():
    """``build_info`` calls a * b + c in the batch loops' clones on operands whose fused and
    unfused answers differ, so it shows the path that runs. CI's baseline pass builds with
    RFL_FAST_BASELINE=1 (and its scalar pass with RFL_FAST_NO_VECTOR_EXT=1) and tells this test
    by RFL_FAST_EXPECT_PATH: in the baseline build the clones must be gone and the unfused
    baseline code run, in the scalar one the SIMD type must be the plain struct."""
    core = pytest.importorskip("rfl_fast._core")
    info = core.build_info()
    expect = os.environ.get("RFL_FAST_EXPECT_PATH", "")
    if expect == "scalar":
        assert info["simd"] == "scalar"
    elif expect == "baseline":
        assert info["baseline"] and info["clones"] == () and info["simd"] == "gnu-vector"
        assert info["fused_multiply_add"] is False   # x86-64 baseline: no FMA
    elif info["clones"]:
        # the loader picks the x86-64-v3 clone exactly where the CPU has AVX2 and FMA
        with open("/proc/cpuinfo") as fh:
            flags = fh.read().split()
        assert info["fused_multiply_add"] is ("avx2" in flags and "fma" in flags)


# ----------------------------------------------------------------------------- SPD points

@pytest.mark.parametrize("n", [1, 2, 3, 8, 64, 256, 512])
def test_spd_random_point_is_well_conditioned_at_every_n(n):
    """The documented bound of ``SPD.random_point``: cond(X) < exp(4 + 12/sqrt(n)) (except with
    probability < 2e-8 per draw); before, SPD(256) failed its own check_point."""
    M = rf.SPD(n)
    X = M.random_point(2 if n < 256 else 1, rng=n)
    w = np.linalg.eigvalsh(X)
    assert np.all(w[:, -1] / w[:, 0] < math.exp(4 + 12 / math.sqrt(n)))
    assert M.check_point(X)[0]
    if n == 256:  # (before: NaN here)
        u = M.random_tangent(X[0], rng=1)
        # unit norm up to the rounding of |u|_X = |X^-1/2 u X^-1/2|_F: solves with X
        # (n eps cond(X)) and a sum of n^2 squares
        cond = w[0, -1] / w[0, 0]
        assert np.isfinite(u).all() and abs(M.norm(X[0], u) - 1) <= 4 * n * EPS * cond


def test_federated_run_starts_from_the_default_spd_point_at_n_256():
    from rfl_fast.algorithms import RFedAvg
    from rfl_fast.data import wishart_clients
    from rfl_fast.federation import run
    from rfl_fast.problems import SPDMean

    clients = wishart_clients(2, 2, 256, df=300, rng=0)
    res = run(SPDMean(clients), RFedAvg(step=0.1, local_steps=1), rounds=1, seed=0,
              metrics=False)   # (the metrics' exact Frechet mean costs minutes at n = 256)
    assert rf.SPD(256).check_point(res.x)[0]


# ----------------------------------------------------------------------------- scaled SPD inputs

def _spd(n, rng):
    a = rng.standard_normal((n, n))
    return a @ a.T / n + np.eye(n)           # cond about 5 (Marchenko-Pastur: AA'/n <= ~4)


@pytest.mark.parametrize("n", [3, 5, 12, 20, 64])
@pytest.mark.parametrize("c", [1e200, 1e-200])
def test_every_backend_answers_scaled_spd_inputs(backend, n, c):
    """Y = c X: Log_X(Y) = log(c) X and dist(X, Y) = sqrt(n) |log c| exactly, and scaling both
    points changes nothing. The own eigensolvers of C++ (n < 128/256) used to refuse these or
    answer wrong; now every solver works on its matrix scaled by a power of two.

    Tolerance: M = L^-1 Y L^-T (X = L L') is computed with a backward error of a few n eps
    cond(X) relative (two triangular solves; c X itself is rounded by eps), so its eigenvalues
    are c (1 + d) with |d| <= 4 n eps cond(X), and log(c (1 + d)) = log(c) + d, rounded to
    eps |log c|; Log = L diag(logs) L' sums n such terms (n eps |log c| |X|_2). So per
    eigenvalue an absolute error e = 4 n eps (cond(X) + 1 + |log c|); dist adds them in
    2-norm (sqrt(n) e, plus eps dist for the sum), Log moves by at most e |X|_2 entrywise.
    """
    M = rf.SPD(n)
    rng = np.random.default_rng(n)
    X, Z = _spd(n, rng), _spd(n, rng)
    cond = max(np.linalg.cond(X), np.linalg.cond(Z))
    e = 4 * n * EPS * (cond + 1 + abs(math.log(c)))
    exact = math.sqrt(n) * abs(math.log(c))
    assert abs(M.dist(X, c * X) - exact) <= math.sqrt(n) * e + EPS * exact
    np.testing.assert_allclose(M.log(X, c * X), math.log(c) * X, rtol=0,
                               atol=e * np.linalg.norm(X, 2))
    d = M.dist(X, Z)
    assert abs(M.dist(c * X, c * Z) - d) <= 2 * math.sqrt(n) * e + EPS * d


@pytest.mark.parametrize("n", [3, 12, 20, 64])
def test_every_backend_answers_scaled_symmetric_functions(backend, n):
    """logm(c S) = logm(S) + log(c) I and sqrtm(c S) = sqrt(c) sqrtm(S) for c = 1e200, 1e-200,
    a batch of three (the lockstep solvers) and one item; expm(1e200 S) overflows: the same
    NoSolutionError on every backend.

    Tolerance: the eigenvalues of S are found to n eps |S| (backward stable), so each log moves
    by n eps cond(S), plus the rounding of the shift, 2 eps (1 + |log c|); each square root
    relatively by half that; the eigenvectors are common to S and c S. 8 n eps for the products
    V f V'.
    """
    rng = np.random.default_rng(n)
    S = np.stack([_spd(n, rng) for _ in range(3)])
    cond = np.linalg.cond(S).max()
    for batch in (S, S[:1]):
        for c in (1e200, 1e-200):
            logm = rf.linalg.sym_logm(c * batch)
            np.testing.assert_allclose(logm, rf.linalg.sym_logm(batch) + math.log(c) * np.eye(n),
                                       rtol=0, atol=8 * n * EPS * (cond + 1 + abs(math.log(c))))
            sq = rf.linalg.sym_sqrtm(c * batch)
            np.testing.assert_allclose(sq / math.sqrt(c), rf.linalg.sym_sqrtm(batch), rtol=0,
                                       atol=8 * n * EPS * cond * np.abs(batch).max())
        with pytest.raises(NoSolutionError):
            rf.linalg.sym_expm(1e200 * batch)


# ----------------------------------------------------------------------------- QR inverse

@pytest.mark.parametrize("p", [2, 3, 5, 8, 12])
def test_qr_inverse_refuses_a_vanishing_leading_minor(backend, p):
    """y = x with its columns reversed: X'Y is a permutation (cond 1) whose leading 1 x 1 minor
    is x_0'x_{p-1}, rounding noise. Every backend raises NoSolutionError (before: a tangent
    vector of norm 1e16..2e19 that missed y by ~1). A batch with one such item raises too, and a
    large but well-posed step is still inverted."""
    M = rf.Stiefel(40, p)
    x = M.random_point(rng=p)
    y = x[:, ::-1].copy()
    with pytest.raises(NoSolutionError):
        M.inv_retr(x, y, "qr")
    u = M.proj(x, np.random.default_rng(1).standard_normal(x.shape))
    good = M.retr(x, u, "qr")
    with pytest.raises(NoSolutionError):
        M.inv_retr(np.stack([x, x]), np.stack([good, y]), "qr")
    big = 1e4 * u
    v = M.inv_retr(x, M.retr(x, big, "qr"), "qr")
    # relative accuracy cond(X'Y) eps, cond(X'Y) <= |R| |R^-1| ~ |x + big|^2 <= (1 + |big|)^2
    assert np.abs(v - big).max() <= 100 * (1 + np.abs(big).sum()) ** 2 * EPS * np.abs(big).max()


# ----------------------------------------------------------------------------- norms

@pytest.mark.parametrize("M", one_each(), ids=repr)
@pytest.mark.parametrize("c", [1e160, 1e300, 1e-170, 1e-300])
def test_norm_does_not_overflow_before_the_value(M, c):
    """|c u|_x = c |u|_x while the value is representable: each item is scaled by a power of two
    (exact) before its squares are formed; c u itself has one rounding, so 2 eps relative."""
    x = M.random_point(2, rng=0)
    u = M.random_tangent(x, rng=1)
    got = M.norm(x, c * u)
    np.testing.assert_allclose(got, c * M.norm(x, u), rtol=4 * EPS, atol=0)
    if type(M).norm is rf.Manifold.norm:    # the base's norm: sqrt(inner) of the scaled item
        np.testing.assert_array_equal(M.norm(x, u), np.sqrt(np.maximum(M.inner(x, u, u), 0)))


@pytest.mark.parametrize("M", one_each(), ids=repr)
def test_norm_rescales_only_the_items_that_need_it_bit_for_bit(M):
    """In one batch, items scaled by 2^k in range and far out of it: each norm is exactly 2^k
    times the unscaled item's (scaling by a power of two is exact, so the plain items and the
    rescaled ones must agree to the bit, whichever route each took)."""
    k = np.array([0, 3, -7, 900, -900, 1000, -1000, 0])
    x = M.random_point(k.size, rng=0)
    u = M.random_tangent(x, rng=1)
    scaled = np.ldexp(u, k.reshape((-1,) + (1,) * M.core_ndim))
    np.testing.assert_array_equal(M.norm(x, scaled), np.ldexp(M.norm(x, u), k))


# ----------------------------------------------------------------------------- no C++ core

WITHOUT_CORE = """
import sys, warnings
sys.modules["rfl_fast._core"] = None   # as when the extension was not built
warnings.simplefilter("always")
import rfl_fast
"""


def test_an_install_without_the_core_says_so_at_import():
    """Without -v pip hides the build's warning; the import tells, once, with the way past pip's
    wheel cache (which would reinstall the wheel built without the core)."""
    proc = subprocess.run([sys.executable, "-c", WITHOUT_CORE], capture_output=True, text=True,
                          timeout=120, **same_package())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("installed without its C++ core") == 1
    assert "--no-cache-dir" in proc.stderr and "rfl-fast info" in proc.stderr
    assert "--no-cache-dir" in rf._cpp_missing_note()
    if kernels.is_available("cpp"):  # and a package with its core stays silent
        quiet = subprocess.run([sys.executable, "-W", "error", "-c", "import rfl_fast"],
                               capture_output=True, text=True, timeout=120, **same_package())
        assert quiet.returncode == 0 and "C++ core" not in quiet.stderr


# ----------------------------------------------------------------------------- sphere log

@pytest.mark.parametrize("d", [3, 10, 784])
def test_sphere_log_refuses_antipodal_points_on_every_backend(backend, d):
    """Log_p(-p) has no unique answer. The test used to be |v| > 0 for v = y - <x,y> x, which
    is rounding noise there: a CPU without FMA (the baseline build) answered with a vector of
    norm pi along +-p. Now antipodal within the rounding of v on every backend (the
    reference's bound), while points a little off the antipode still get their logarithm."""
    S = rf.Sphere(d)
    p = S.random_point(rng=d)
    with pytest.raises(NoSolutionError):
        S.log(p, -p)
    u = S.random_tangent(p, rng=1)
    y = S.exp(p, (math.pi - 1e-6) * u)      # 1e-6 from the antipode: a unique logarithm
    v = S.log(p, y)
    # |v| = pi - 1e-6 up to the angle's rounding: y is rounded entrywise (eps), v = y - <p,y> p
    # carries (d + 3) eps, and atan2(|v|, <p,y>) passes that on at most once (4x margin)
    assert abs(float(S.norm(p, v)) - (math.pi - 1e-6)) <= 4 * (d + 5) * EPS
