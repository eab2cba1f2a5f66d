"""Kernels called from several Python threads at once give the single-threaded results."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast import _dispatch
from rfl_fast.kernels import KERNELS, call
from rfl_fast.kernels.testing import kernel_inputs

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
    Ms = [rf.Sphere(6), rf.Stiefel(6, 2), rf.SPD(3), rf.Lorentz(4)]

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
