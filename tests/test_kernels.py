"""Every compiled kernel equals its NumPy reference (float64, 1e-10) on random inputs."""

import zlib

import numpy as np
import pytest

from rfl_fast import _dispatch
from rfl_fast.kernels import KERNELS, call
from rfl_fast.kernels import reference as ref

from rfl_fast.kernels.testing import kernel_inputs

COMPILED = [b for b in _dispatch.BACKENDS if b != "numpy"]

# (N, n, p) per kernel family; p only matters for Stiefel kernels and polar
SHAPES = {
    "stiefel": [(1, 4, 1), (7, 10, 3), (3, 50, 5), (2, 6, 6), (4, 784, 5)],
    "sym": [(1, 1, None), (9, 2, None), (20, 9, None), (4, 20, None), (2, 33, None)],
    "vec": [(1, 2, None), (50, 3, None), (13, 25, None), (3, 784, None)],
}


def family(name):
    if name.startswith("stiefel") or name == "polar":
        return "stiefel"
    if name.startswith(("sym_", "spd_")):
        return "sym"
    return "vec"


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
@pytest.mark.parametrize("name", [k for k in KERNELS if family(k) == "sym"])
def test_ill_conditioned_spd(backend, name):
    rng = np.random.default_rng(3)
    args = kernel_inputs(name, rng, 16, 9, cond=1e10)
    want = getattr(ref, name)(*args)
    got = call(name, *args, backend=backend)
    # relative to the result's size: the data themselves span 10 orders of magnitude
    assert_matches(got, want, rtol=1e-9)


@pytest.mark.parametrize("backend", COMPILED)
def test_backend_is_available_and_complete(backend):
    assert _dispatch.is_available(backend), _dispatch.backend_error(backend)
    assert _dispatch.backend_kernels(backend) == sorted(KERNELS)
