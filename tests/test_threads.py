"""Kernels called from several Python threads at once give the single-threaded results."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rfl_fast as rf
from manifold_cases import one_each
from rfl_fast.kernels import _dispatch
from rfl_fast.kernels import KERNELS, call
from rfl_fast.kernels.testing import kernel_inputs

from subprocess_env import same_package

THREADS = 8


def _inputs(name, seed):
    rng = np.random.default_rng(seed)
    n, p = (5, 3) if name.startswith("stiefel") or name == "polar" else (4, None)
    # a batch above the Numba backend's parallel threshold for half of the threads
    return kernel_inputs(name, rng, 64 if seed % 2 else 3, n, p)


@pytest.mark.parametrize("backend_name", _dispatch.available_backends())
def test_every_kernel_from_eight_threads(backend_name):
    names = sorted(KERNELS)
    work = [(name, _inputs(name, seed)) for name in names for seed in range(THREADS)]
    expected = [call(name, *args, backend=backend_name) for name, args in work]

    def job(item):
        name, args = item
        out = None
        for _ in range(3):  # repeat so the threads overlap
            out = call(name, *args, backend=backend_name)
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(job, work))
    for (name, _), e, g in zip(work, expected, got):
        np.testing.assert_array_equal(g, e, err_msg=name)


@pytest.mark.parametrize("backend_name", _dispatch.available_backends())
def test_manifold_methods_and_backend_contexts_per_thread(backend_name):
    """Each thread sets its own backend block; results equal the single-threaded ones."""
    Ms = one_each()

    def work(seed):
        M = Ms[seed % len(Ms)]
        with rf.backend(backend_name if seed % 2 else "numpy"):
            x = M.random_point(16, rng=seed)
            u = 0.5 * M.random_tangent(x, rng=seed + 100)
            y = M.retr(x, u)
            return y, M.inv_retr(x, y), M.transport(x, y, u)

    expected = [work(s) for s in range(2 * THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(work, range(2 * THREADS)))
    for e, g in zip(expected, got):
        for a, b in zip(e, g):
            np.testing.assert_array_equal(b, a)


def _blas_threads():
    from threadpoolctl import threadpool_info
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


@pytest.mark.parametrize("limit", [1, None])
def test_engine_limits_blas_threads_during_the_rounds_and_restores_them(limit):
    from fed_toy import heterogeneous_pca
    from rfl_fast.algorithms import RFedAvg
    from rfl_fast.federation import run

    before = _blas_threads()
    seen = []
    P = heterogeneous_pca(n=4, d=6, m=20, seed=0)
    res = run(P, RFedAvg(0.05, 2), 3, seed=1, blas_threads=limit,
              callback=lambda t, x, row: seen.append(_blas_threads()))
    assert len(seen) == 3 and _blas_threads() == before
    assert all(s == ([1] * len(before) if limit == 1 else before) for s in seen)
    same = run(P, RFedAvg(0.05, 2), 3, seed=1, blas_threads=None if limit else 1)
    np.testing.assert_array_equal(res.x, same.x)  # a thread limit never changes results


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_engine_rejects_bad_blas_threads(bad):
    from fed_toy import heterogeneous_pca
    from rfl_fast.algorithms import RFedAvg
    from rfl_fast.federation import run

    with pytest.raises((ValueError, TypeError), match="blas_threads"):
        run(heterogeneous_pca(n=4, d=6, m=20, seed=0), RFedAvg(0.05, 2), 1, blas_threads=bad)


def _large_inputs(name):
    """A batch of ~2-3 MB per input: several chunks, enough for two compiled threads."""
    rng = np.random.default_rng(7)
    if name.startswith("stiefel") or name == "polar":
        return kernel_inputs(name, rng, 300, 200, 5)
    if name.startswith(("sym_", "spd_")):
        return kernel_inputs(name, rng, 3000, 9)
    return kernel_inputs(name, rng, 30_000, 11)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiled_threads_never_change_a_result(name):
    """The C++ batch loops split the work into fixed chunks, so 1, 2 or 3 threads give the
    same bits (also through the public fast lane)."""
    if "cpp" not in _dispatch.available_backends():
        pytest.skip("C++ extension not built")
    args = _large_inputs(name)
    before = rf.get_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            rf.set_threads(threads)
            assert rf.get_threads() == threads
            results.append(call(name, *args, backend="cpp"))
        for other in results[1:]:
            np.testing.assert_array_equal(other, results[0])
    finally:
        rf.set_threads(before)


def test_compiled_threads_setting():
    before = rf.get_threads()
    try:
        for bad in (0, -1, 1.5, "2", True):
            with pytest.raises(ValueError, match="threads"):
                rf.set_threads(bad)
        assert rf.get_threads() == before  # a refused value changes nothing
        rf.set_threads(None)
        assert rf.get_threads() >= 1
    finally:
        rf.set_threads(before)


def test_compiled_threads_environment_variable():
    code = "import rfl_fast as rf; print(rf.get_threads())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, **same_package(RFL_FAST_THREADS="3")).stdout
    assert out.strip() == "3"
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         **same_package(RFL_FAST_THREADS="many"))
    assert bad.returncode != 0 and "RFL_FAST_THREADS: expected an int >= 1" in bad.stderr
