"""What is specific to the Numba backend: compile caching, serial/parallel determinism, calls
from several Python threads, edge cases of the hand-written Jacobi/Gram/Lyapunov code, and
accuracy on ill-conditioned SPD input against a high-precision oracle."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from rfl_fast.kernels import KERNELS
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels.testing import kernel_inputs

numba = pytest.importorskip("numba")
nb = pytest.importorskip("rfl_fast.kernels._numba")
from numba.core.dispatcher import Dispatcher  # noqa: E402

from rfl_fast.kernels._numba import _linalg, _runtime, lorentz, spd, sphere, stiefel  # noqa: E402

MODULES = (_linalg, lorentz, spd, sphere, stiefel)


def dispatchers():
    for mod in MODULES:
        for name, obj in vars(mod).items():
            if isinstance(obj, Dispatcher) and obj.py_func.__module__ == mod.__name__:
                yield f"{mod.__name__}.{name}", obj


def close(got, want, tol=1e-10):
    scale = max(1.0, float(np.nanmax(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


def test_every_kernel_exported():
    assert sorted(k for k in KERNELS if callable(getattr(nb, k, None))) == sorted(KERNELS)


def test_every_jitted_function_is_cached_and_not_fastmath():
    found = list(dispatchers())
    assert len(found) > 40
    for name, disp in found:
        assert disp._cache.__class__.__name__ == "FunctionCache", f"{name} lacks cache=True"
        assert not disp.targetoptions.get("fastmath"), f"{name} uses fastmath"
        assert disp.targetoptions.get("error_model") == "numpy", name


@pytest.mark.full  # a second interpreter loading every family
def test_second_process_loads_from_cache(tmp_path):
    """A fresh process (Flower starts one per message) must not recompile."""
    script = textwrap.dedent("""
        import numpy as np
        import rfl_fast.kernels._numba as nb
        from rfl_fast.kernels._numba import sphere, stiefel, lorentz
        x = np.ones((3, 4)) / 2.0
        nb.sphere_exp(x, np.zeros_like(x))
        nb.lorentz_dist(np.eye(3), np.eye(3))
        a = np.eye(6, 2)[None].copy()
        nb.stiefel_proj(a, a)
        ds = [sphere._exp_serial, lorentz._dist_serial, stiefel._proj_serial]
        print(sum(sum(d.stats.cache_hits.values()) for d in ds),
              sum(sum(d.stats.cache_misses.values()) for d in ds))
    """)
    import rfl_fast

    root = os.path.dirname(os.path.dirname(os.path.abspath(rfl_fast.__file__)))
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=path)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120, check=True, cwd=tmp_path) for _ in range(2)]
    first = [int(t) for t in runs[0].stdout.split()]
    second = [int(t) for t in runs[1].stdout.split()]
    assert first[1] == 3  # compiled (and written to the cache) the first time
    assert second == [3, 0], runs[1].stdout  # loaded, never recompiled
    assert any(tmp_path.rglob("*.nbi"))


@pytest.mark.parametrize("name", ["sphere_log", "lorentz_exp", "sym_logm", "spd_log",
                                  "polar", "stiefel_inv_retr_polar", "stiefel_retr_qr"])
def test_serial_and_parallel_drivers_agree_bitwise(name):
    shape = {"sphere_log": (3000, 100), "lorentz_exp": (60000, 4), "sym_logm": (700, 9),
             "spd_log": (700, 9)}.get(name, (400, 60, 4))
    args = kernel_inputs(name, np.random.default_rng(1), *shape)
    fn = getattr(nb, name)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        serial = fn(*args)
    finally:
        numba.set_num_threads(before)
    parallel = fn(*args)
    np.testing.assert_array_equal(serial, parallel)
    assert np.array_equal(parallel, fn(*args))  # repeatable


def test_one_parallel_task_runs_the_serial_driver():
    """A parallel region with one task (one Stiefel chunk, one SPD lane block, one vector) only
    adds thread start-up, which costs milliseconds on a busy machine."""
    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread: every kernel is serial")
    calls = []

    def serial():
        calls.append("serial")

    def parallel():
        calls.append("parallel")

    big = 10 * _runtime.PARALLEL_MIN_WORK
    for tasks in (1, 2):
        _runtime.run(serial, parallel, big, tasks)
    _runtime.run(serial, parallel, _runtime.PARALLEL_MIN_WORK - 1, 50)
    assert calls[0] == "serial" and calls[2] == "serial"
    assert calls[1] in ("parallel", "serial")  # serial only if another thread holds the lock
    assert stiefel._tasks(np.empty((8, 3, 2))) == 1 and stiefel._tasks(np.empty((9, 3, 2))) == 2
    assert spd._tasks(np.empty((spd.CHUNK_LANES * spd.LANES, 2, 2))) == 1


def test_python_threads_calling_kernels_concurrently():
    rng = np.random.default_rng(2)
    jobs = []
    for name, shape in [("sym_logm", (2000, 9)), ("sphere_exp", (2000, 300)),
                        ("spd_exp", (1000, 6)), ("polar", (300, 100, 5))] * 2:
        args = kernel_inputs(name, rng, *shape)
        assert 4 * np.prod(shape) >= _runtime.PARALLEL_MIN_WORK / 10
        jobs.append((name, args, getattr(ref, name)(*args)))
    errors = []

    def work(name, args, want):
        try:
            for _ in range(3):
                close(getattr(nb, name)(*args), want)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append((name, repr(exc)))

    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---------------------------------------------------------------- edge cases


def test_jacobi_tiny_clustered_and_trivial_spectra():
    rng = np.random.default_rng(4)
    q = np.linalg.qr(rng.standard_normal((9, 9)))[0]
    spectra = [
        np.full(9, 2.0),                                   # identity-like: all equal
        np.array([1, 1, 1 + 1e-13, 1 + 2e-13, 5, 5, 5, 7, 7.0]),  # clusters
        np.geomspace(1e-12, 1.0, 9),                       # tiny eigenvalues
        np.array([1e-300, 1e-200, 1e-100, 1, 2, 3, 4, 5, 6]),
    ]
    s = np.stack([(q * w) @ q.T for w in spectra])
    s = 0.5 * (s + np.swapaxes(s, -1, -2))
    close(nb.sym_expm(s), ref.sym_expm(s))
    # sqrt only where the matrix is PSD beyond rounding: a backward-stable eigensolver finds each
    # eigenvalue to within n eps |s|_2, so an eigenvalue below that (1e-300 here, formed as
    # Q diag(w) Q') has no determined sign: LAPACK and the Jacobi solver may see -5e-16 and
    # +5e-16 under different BLAS kernels (Haswell, Sandybridge), and the square root is NaN in
    # one of them. 4x that bound as the margin.
    w_all = np.linalg.eigvalsh(s)
    psd = w_all.min(axis=-1) >= 4 * 9 * np.finfo(np.float64).eps * np.abs(w_all).max(axis=-1)
    assert psd[:3].all()
    close(nb.sym_sqrtm(s[psd]), ref.sym_sqrtm(s[psd]))
    # eigen-residual of the Jacobi solver itself
    for a in list(s) + [np.zeros((9, 9)), np.diag(np.arange(9.0))]:
        w, v = np.empty(9), np.empty((9, 9))
        _linalg.jacobi_eigh(a.copy(), w, v, True)
        np.testing.assert_allclose(v.T @ v, np.eye(9), atol=1e-14)
        np.testing.assert_allclose((v * w) @ v.T, a, atol=1e-14 * max(1, np.abs(a).max()))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_sym_and_spd_small_n(n):
    rng = np.random.default_rng(n)
    for name in ("sym_expm", "sym_logm", "sym_invsqrtm", "spd_exp", "spd_log", "spd_dist"):
        args = kernel_inputs(name, rng, 37, n)  # 37: not a multiple of the lane count
        close(getattr(nb, name)(*args), getattr(ref, name)(*args))


def test_sym_large_n_uses_lapack_path_and_matches():
    args = kernel_inputs("sym_logm", np.random.default_rng(5), 5, spd.JACOBI_MAX_N + 3)
    close(nb.sym_logm(*args), ref.sym_logm(*args))


def test_non_spd_items_are_nan_and_only_those():
    rng = np.random.default_rng(6)
    (s,) = kernel_inputs("sym_logm", rng, 20, 5)
    s[3, 0, 0] = -50.0
    s[17] = -s[17]
    for name in ("sym_logm", "sym_sqrtm", "sym_invsqrtm"):
        got = getattr(nb, name)(s)
        bad = np.isnan(got).any(axis=(1, 2))
        assert bad.tolist() == [i in (3, 17) for i in range(20)]
        assert np.isnan(got[[3, 17]]).all()
        close(got[~bad], getattr(ref, name)(s)[~bad])
    x, y = kernel_inputs("spd_log", rng, 20, 5)
    x[4] = -x[4]
    y[9] = -y[9]
    for name in ("spd_log", "spd_dist", "spd_exp"):
        got = getattr(nb, name)(x, y)
        bad = np.isnan(got).reshape(20, -1).any(axis=1)
        want_bad = [i in ((4, 9) if name != "spd_exp" else (4,)) for i in range(20)]
        assert bad.tolist() == want_bad, name


def test_expm_overflow_is_nan_item():
    s = np.stack([np.eye(3) * 800.0, np.eye(3)])
    got = nb.sym_expm(s)
    assert np.isnan(got[0]).all() and np.isfinite(got[1]).all()


def test_stiefel_edge_cases():
    rng = np.random.default_rng(7)
    # p = 1 and p = n
    for n, p in [(5, 1), (4, 4), (1, 1)]:
        for name in ("polar", "stiefel_retr_polar", "stiefel_inv_retr_polar", "stiefel_retr_qr",
                     "stiefel_inv_retr_qr", "stiefel_proj"):
            args = kernel_inputs(name, rng, 9, n, p)
            close(getattr(nb, name)(*args), getattr(ref, name)(*args))
    # ill-conditioned and rank-deficient polar factors (the SVD fallback of the Gram route)
    u = np.linalg.qr(rng.standard_normal((30, 4)))[0]
    v = np.linalg.qr(rng.standard_normal((4, 4)))[0]
    a = np.stack([(u * s) @ v.T for s in ([1, 1e-2, 1e-4, 1e-5], [1, 1, 1, 0.0], [2, 1, 1, 1])])
    got = nb.polar(a)
    want = ref.polar(a)
    assert np.isnan(got[1]).all() and np.isnan(want[1]).all()
    close(got[[0, 2]], want[[0, 2]], 1e-9)  # polar factor's own condition: 1/s_min
    # inverse retractions without a unique solution
    x = np.eye(4, 2)[None]
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])  # x'y = rot: eigenvalues +-i sum to zero
    y = (x @ rot).copy()
    assert np.isnan(nb.stiefel_inv_retr_polar(x, y)).all()
    assert np.isnan(ref.stiefel_inv_retr_polar(x, y)).all()
    y = np.ascontiguousarray(np.eye(4)[None, :, 1:3])  # x'y has a zero leading minor
    assert np.isnan(nb.stiefel_inv_retr_qr(x, y)).all()
    assert np.isnan(ref.stiefel_inv_retr_qr(x, y)).all()


def test_sphere_and_lorentz_edge_cases():
    x = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    y = np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0.6, 0.8]])
    assert np.isnan(nb.sphere_log(x, y)[0]).all() and np.isnan(ref.sphere_log(x, y)[0]).all()
    close(nb.sphere_log(x[1:], y[1:]), ref.sphere_log(x[1:], y[1:]))
    close(nb.sphere_exp(x, np.zeros_like(x)), x, 0)
    o = np.zeros((2, 4))
    o[:, 0] = 1.0
    close(nb.lorentz_log(o, o), np.zeros_like(o), 0)
    close(nb.lorentz_exp(o, np.zeros_like(o)), o, 0)
    assert (nb.lorentz_dist(o, o) == 0).all()


# ---------------------------------------------------------------- accuracy at cond 1e10


def test_ill_conditioned_spd_at_least_as_accurate_as_reference():
    """At cond 1e10 the eigenvalues of the stored matrices are determined only to about
    eps*cond relative, so two backward-stable solvers differ by ~1e-7 in logm; compare both
    with a 40-digit oracle instead: the Jacobi kernels must be no less accurate, and must not
    report SPD input as non-SPD (the reference does, through ``x^-½ y x^-½``)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    x, y = kernel_inputs("spd_log", np.random.default_rng(3), 6, 7, cond=1e10)

    def mfun(a, f):
        e, q = mp.eigsy(mp.matrix(a.tolist()))
        return q * mp.diag([f(t) for t in e]) * q.T

    def exact_logm(a):
        return np.array(mfun(a, mp.log).tolist(), dtype=float)

    def exact_spd_log(a, b):
        c, ci = mfun(a, mp.sqrt), mfun(a, lambda t: 1 / mp.sqrt(t))
        m = ci * mp.matrix(b.tolist()) * ci
        return np.array((c * mfun((m + m.T) / 2, mp.log) * c).tolist(), dtype=float)

    want = np.stack([exact_logm(a) for a in x])
    err_nb = np.abs(nb.sym_logm(x) - want).max()
    err_ref = np.abs(ref.sym_logm(x) - want).max()
    assert err_nb <= 2 * err_ref + 1e-12
    want = np.stack([exact_spd_log(a, b) for a, b in zip(x, y)])
    got = nb.spd_log(x, y)
    assert np.isfinite(got).all()
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-6 * scale
