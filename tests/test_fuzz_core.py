"""Fuzzing the compiled backends' entry points with malformed arrays (hypothesis).

Every kernel of ``rfl_fast._core`` (and of the Numba backend) is called directly and through
the public API (``rfl_fast.kernels.call`` and the manifolds) with non-contiguous, wrong-dtype,
zero-size, wrong-ndim, mismatched, NaN/inf and huge (zero-stride) arrays. The contract: the
interpreter never crashes; malformed input raises a Python exception or gives NaN items. The
fuzz runs in a subprocess, so a segfault or abort is a test failure, not a dead test run.
"""

import subprocess
import sys
import textwrap

import pytest

from rfl_fast.kernels import _dispatch

from manifold_cases import one_each
from rfl_fast.flower.codec import manifold_spec
from subprocess_env import same_package
from tiers import count

WORKER = textwrap.dedent(r'''
    import sys, warnings
    import numpy as np
    from hypothesis import given, settings, HealthCheck, strategies as st
    import rfl_fast as rf
    from rfl_fast.kernels import _dispatch
    from rfl_fast.kernels import KERNELS, REGISTRY, call
    from rfl_fast.flower.codec import manifold_from_spec

    backend, mode, n_examples = sys.argv[1], sys.argv[2], int(sys.argv[3])
    MANIFOLDS = [manifold_from_spec(spec) for spec in sys.argv[4:]]  # one of each registered
    mod = _dispatch.load(backend)
    warnings.simplefilter("ignore")
    NAMES = sorted(KERNELS)
    # Numba compiles one specialization per argument type: keep its direct calls to
    # C-contiguous float64 arrays of the right ndim (shapes, sizes and values still fuzzed)
    # plus a fixed list of type errors, so the run stays fast.
    typed_only = backend == "numba" and mode == "direct"

    def core_shape(name, k, n, p):
        if KERNELS[name][0][k] == 1:
            return (n,)
        return (n, n if REGISTRY[name].family == "square" else p)

    @st.composite
    def argument(draw, name, k, batch, n, p):
        shape = (batch,) + core_shape(name, k, n, p)
        variant = draw(st.sampled_from(
            ["ok", "nan", "inf", "mismatch", "zero_dim", "big"] if typed_only else
            ["ok", "nan", "inf", "mismatch", "zero_dim", "noncontig", "float32", "int",
             "complex", "object", "bool", "ndim_low", "ndim_high", "scalar", "huge",
             "fortran", "list"]))
        rng = np.random.default_rng(draw(st.integers(0, 1000)))
        a = rng.standard_normal(shape)
        if variant == "nan":
            a.reshape(-1)[: draw(st.integers(0, a.size))] = np.nan
        elif variant == "inf":
            a.reshape(-1)[: draw(st.integers(0, a.size))] = np.inf * (-1) ** k
        elif variant == "mismatch":
            a = rng.standard_normal((batch,) + tuple(s + draw(st.integers(1, 3))
                                                   for s in shape[1:]))
        elif variant == "zero_dim":
            a = np.zeros((batch,) + tuple(0 for _ in shape[1:]))
        elif variant == "big":
            a = rng.standard_normal((batch,) + tuple(min(s * 7, 40) for s in shape[1:]))
        elif variant == "noncontig":
            a = rng.standard_normal(shape + (2,))[..., 0]
        elif variant == "float32":
            a = a.astype(np.float32)
        elif variant == "int":
            a = (10 * a).astype(np.int64)
        elif variant == "complex":
            a = a + 1j
        elif variant == "object":
            a = a.astype(object)
        elif variant == "bool":
            a = a > 0
        elif variant == "ndim_low":
            a = a.reshape(-1)
        elif variant == "ndim_high":
            a = a[None]
        elif variant == "scalar":
            a = np.float64(1.0)
        elif variant == "huge":   # claims ~2**40 items without the memory (zero strides)
            a = np.lib.stride_tricks.as_strided(np.ones(1), (2**40,) + shape[1:],
                                                (0,) * len(shape))
        elif variant == "fortran":
            a = np.asfortranarray(a)
        elif variant == "list":
            a = a.tolist()
        return a

    @st.composite
    def case(draw):
        name = draw(st.sampled_from(NAMES))
        batch = draw(st.sampled_from([0, 1, 2, 3, 17]))
        n = draw(st.integers(0 if not typed_only else 1, 6))
        p = draw(st.integers(1, max(n, 1)))
        args = tuple(draw(argument(name, k, batch, n, p))
                     for k in range(len(KERNELS[name][0])))
        return name, args

    def check(out):
        if isinstance(out, np.ndarray):
            out.sum()            # touch the memory: a bad buffer shows here
        else:
            np.asarray(out)

    @settings(max_examples=n_examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case())
    def fuzz(c):
        name, args = c
        try:
            if mode == "direct":
                out = getattr(mod, name)(*args)
            else:
                out = call(name, *(np.asarray(a) for a in args), backend=backend)
            check(out)
        except (ValueError, TypeError, MemoryError, OverflowError, IndexError,
                ZeroDivisionError, np.linalg.LinAlgError, RuntimeError) as exc:
            pass
        except Exception as exc:   # numba typing errors subclass these or TypingError
            if type(exc).__module__.split(".")[0] not in ("numba",):
                raise

    fuzz()

    if backend == "numba" and mode == "direct":   # a few wrong types: clear errors
        for bad in (np.ones(3), np.ones((2, 3, 1, 1)),
                    np.ones((2, 3))[:, ::2]):
            try:
                mod.sphere_exp(bad, bad)
            except Exception:
                pass

    if mode == "public":  # the manifolds on malformed input: exceptions only
        with rf.backend(backend):
            bad = [np.full(3, np.nan), np.ones((0, 3)), np.ones((2, 5)), np.ones(3, complex),
                   np.ones((4, 2))[::2], np.zeros((4, 2)), np.zeros((3, 3)), "abc"]
            for m in MANIFOLDS:
                for a in bad:
                    for f in (lambda: m.exp(a, a), lambda: m.retr(a, a), lambda: m.dist(a, a),
                              lambda: m.proj(a, a), lambda: m.transport(a, a, a)):
                        try:
                            f()
                        except Exception:
                            pass
    print("FUZZ-OK")
''')


def _run(backend, mode, examples):
    specs = [manifold_spec(M) for M in one_each()]       # every registered manifold class
    proc = subprocess.run([sys.executable, "-c", WORKER, backend, mode, str(examples), *specs],
                          capture_output=True, text=True, timeout=300, **same_package())
    assert proc.returncode == 0, (
        f"fuzz of {backend} ({mode}) died with return code {proc.returncode} "
        f"(negative: killed by signal {-proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\n"
        f"stderr:\n{proc.stderr[-5000:]}")
    assert "FUZZ-OK" in proc.stdout


@pytest.mark.skipif(not _dispatch.is_available("cpp"), reason="C++ extension not built")
@pytest.mark.parametrize("mode", ["direct", "public"])
def test_core_extension_never_crashes(mode):
    _run("cpp", mode, count(100, 800))          # examples: the fast tier's, the full tier's


@pytest.mark.skipif(not _dispatch.is_available("numba"), reason="numba not installed")
@pytest.mark.parametrize("mode", ["direct", "public"])
def test_numba_backend_never_crashes(mode):
    _run("numba", mode, count(20, 120))
