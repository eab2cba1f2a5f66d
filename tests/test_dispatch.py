"""Backend choice per call, per block, per environment variable; and the public surface."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.kernels import _dispatch
from rfl_fast.errors import BackendUnavailableError
from rfl_fast.kernels import KERNELS

from subprocess_env import same_package


def test_numpy_reference_has_every_kernel():
    assert _dispatch.backend_kernels("numpy") == sorted(KERNELS)


def test_compiled_backends_are_the_default():
    assert _dispatch.is_available("cpp"), _dispatch.backend_error("cpp")
    name, _ = _dispatch.resolve("stiefel_retr_polar", "auto")
    assert name in ("cpp", "numba")


def test_backend_per_call_and_per_block(monkeypatch):
    s = np.diag([1.0, 2.0, 3.0])
    want = np.diag(np.exp([1.0, 2.0, 3.0]))
    seen = []
    orig = _dispatch.resolve

    def spy(kernel, choice=None, size=None):
        name, fn = orig(kernel, choice, size)
        seen.append(name)
        return name, fn

    monkeypatch.setattr(_dispatch, "resolve", spy)
    np.testing.assert_allclose(rf.linalg.sym_expm(s, backend="numpy"), want)
    assert seen[-1] == "numpy"
    with rf.backend("numpy"):
        assert rf.get_backend() == "numpy"
        rf.linalg.sym_expm(s)
        assert seen[-1] == "numpy"
        for b in rf.available_backends():
            np.testing.assert_allclose(rf.linalg.sym_expm(s, backend=b), want, rtol=1e-12)
            assert seen[-1] == b
    assert rf.get_backend() == "auto"


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("RFL_FAST_BACKEND", "numpy")
    assert rf.get_backend() == "numpy"
    assert _dispatch.resolve("sym_expm")[0] == "numpy"
    monkeypatch.setenv("RFL_FAST_BACKEND", "fortran")
    with pytest.raises(ValueError, match="RFL_FAST_BACKEND: unknown backend 'fortran'"):
        rf.get_backend()


def test_environment_variable_in_a_new_process():
    code = "import rfl_fast.kernels._dispatch as d; print(d.resolve('polar')[0])"
    run_in = same_package(RFL_FAST_BACKEND="numpy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, **run_in)
    assert out.stdout.strip() == "numpy"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        with rf.backend("gpu"):
            pass
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        rf.linalg.sym_expm(np.eye(2), backend="gpu")


def test_missing_kernel_is_an_error_not_a_fallback():
    with pytest.raises(BackendUnavailableError, match="has no kernel 'no_such_kernel'"):
        _dispatch.resolve("no_such_kernel", "numpy")


def test_block_setting_is_per_thread():
    results = {}

    def worker():
        results["other"] = rf.get_backend()

    with rf.backend("numpy"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        results["here"] = rf.get_backend()
    assert results == {"here": "numpy", "other": "auto"}


def test_show_config_lists_backends(capsys):
    rf.show_config()
    out = capsys.readouterr().out
    for name in ("cpp", "numba", "numpy", "rfl_fast", "threads"):
        assert name in out


def test_public_surface():
    for name in rf.__all__:
        assert hasattr(rf, name), name
    assert os.path.isfile(os.path.join(rf.get_include(), "rfl", "stiefel.hpp"))
    import rfl_fast._core as core

    assert core.__version__ == rf.__version__


@pytest.mark.parametrize("query", ["is_available", "backend_error", "backend_kernels"])
def test_backend_queries_refuse_auto_and_unknown_names(query):
    """``auto`` is a choice among the backends, not one of them: a clear error, not KeyError."""
    fn = getattr(_dispatch, query)
    for bad in ("auto", "fortran"):
        with pytest.raises(ValueError, match=r"backend: expected one of \('cpp', 'numba'"):
            fn(bad)


@pytest.mark.parametrize("backend", rf.available_backends())
def test_a_huge_batch_of_empty_items_is_answered_at_once(backend):
    """Items with a zero core axis have nothing to compute, but a loop over the batch would
    still walk every item: a zero-stride batch claiming 2^40 of them hung the Numba route (and
    NumPy's eigh). ``call`` answers one item and repeats it: at once for empty answers, a
    MemoryError for a batch of scalars that cannot fit; small batches as before."""
    from numpy.lib.stride_tricks import as_strided

    from rfl_fast.kernels import call

    huge = as_strided(np.ones(1), (2**40, 0, 0), (0, 0, 0))
    out = call("spd_exp", huge, huge, backend=backend)
    assert out.shape == (2**40, 0, 0)
    with pytest.raises(MemoryError):
        call("spd_dist", huge, huge, backend=backend)
    small = np.ones((3, 0, 0))
    np.testing.assert_array_equal(call("spd_dist", small, small, backend=backend), np.zeros(3))
    assert call("stiefel_exp", np.ones((4, 5, 0)), np.ones((4, 5, 0)), backend=backend).shape \
        == (4, 5, 0)
