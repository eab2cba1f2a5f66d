"""The C++ batch loops (rfl/batch.hpp) never take the process down: a thread the system refuses
to start is not started (the threads that run take every chunk, with the same result), and
memory it refuses comes back as a Python ``MemoryError``. Batches whose items call BLAS run
their items on the loop's threads with BLAS held to one thread, and an item's bits depend
neither on its batch nor on the thread count.

The refusals are provoked in a child process (a crash there fails the test instead of taking
the test worker down): by the test hook ``_core._refuse_thread_starts`` on any system, and by
the operating system itself on Linux (an address-space limit, ``RLIMIT_AS``, that leaves no
room for a thread's stack or a kernel's scratch)."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.kernels import _dispatch
from rfl_fast.kernels.testing import kernel_inputs

from subprocess_env import same_package

core = _dispatch.load("cpp")
pytestmark = pytest.mark.skipif(core is None, reason="the C++ extension is not built")


def _child(code, timeout=300):
    """Run ``code`` in a fresh interpreter with the package; its last stdout line as JSON."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, **same_package())
    assert proc.returncode == 0, f"child died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


_SETUP = """
    import json, numpy as np
    from rfl_fast.kernels import _dispatch
    from rfl_fast.kernels.testing import kernel_inputs
    core = _dispatch.load("cpp")
    core.set_threads(4)
    rng = np.random.default_rng(0)
    calls = {  # every threaded loop: a few MB each, so several threads are wanted
        "stiefel_retr_polar": (core.stiefel_retr_polar, kernel_inputs("stiefel_retr_polar", rng, 200, 200, 5)),
        "stiefel_inv_retr_polar": (core.stiefel_inv_retr_polar, kernel_inputs("stiefel_inv_retr_polar", rng, 40, 300, 40)),
        "sym_logm": (core.sym_logm, kernel_inputs("sym_logm", rng, 3000, 9)),
        "spd_dist": (core.spd_dist, kernel_inputs("spd_dist", rng, 3000, 9)),
        "sphere_transport": (core.sphere_transport, kernel_inputs("sphere_transport", rng, 30000, 11)),
        "stiefel_proj_checked": (lambda x, u: core.stiefel_proj_checked(x, u, (200, 5)),
                                 kernel_inputs("stiefel_proj", rng, 400, 200, 5)),
    }
    z = rng.standard_normal((24000, 50))
    offsets = np.arange(0, 24001, 2000, dtype=np.int64)
    idx = np.arange(12, dtype=np.int64)
    xt = np.ascontiguousarray(np.swapaxes(kernel_inputs("polar", rng, 12, 50, 3)[0], 1, 2))
    calls["pca_grad_sum"] = (lambda z, xt: core.pca_grad_sum(z, offsets, idx, xt, 1.0, 1.0,
                                                             False, 4)[0], (z, xt))
    x0 = np.ascontiguousarray(np.swapaxes(xt, 1, 2))
    calls["pca_local_steps"] = (lambda z, x0: core.pca_local_steps(
        z, offsets, idx, x0, np.ones(12), 0.01, 3, 4), (z, x0))
    want = {k: f(*a) for k, (f, a) in calls.items()}
    hold = core.can_hold_blas_threads()
"""
#: Loops of _SETUP whose items call BLAS (p = 40): they run on the loop's threads only where the
#: BLAS's thread setting can be held (OpenBLAS with pthreads), else one item at a time on BLAS's
#: own threads, asking for no loop thread.
ON_BLAS = {"stiefel_inv_retr_polar"}


def test_thread_starts_refused_leave_the_work_to_the_threads_that_run():
    """With every thread start refused (the test hook), each threaded loop still answers, with
    the bits of an unrefused run; a refusal was consumed, so threads were asked for."""
    got = _child(_SETUP + """
    out = {}
    for name, (f, args) in calls.items():
        core._refuse_thread_starts(1000)
        same = np.array_equal(f(*args), want[name], equal_nan=True)
        out[name] = [same, 1000 - core._refuse_thread_starts(0)]
    print(json.dumps([hold, out]))
    """)
    hold, got = got
    assert set(got) >= {"stiefel_retr_polar", "sym_logm", "pca_grad_sum", "pca_local_steps"}
    for name, (same, refused) in got.items():
        assert same, name
        if hold or name not in ON_BLAS:
            assert refused >= 1, name  # the loop asked for a thread and was refused


def test_a_start_refused_while_other_threads_run():
    """The second thread start fails while the first thread already takes chunks (before the
    fix: a joinable std::thread destroyed during unwinding, std::terminate): the loop finishes
    on the threads that run."""
    got = _child(_SETUP + """
    out = {}
    for name, (f, args) in calls.items():
        core._refuse_thread_starts(1, after=1)
        same = np.array_equal(f(*args), want[name], equal_nan=True)
        out[name] = [same, core._refuse_thread_starts(0)]
    print(json.dumps([hold, out]))
    """)
    hold, got = got
    for name, (same, pending) in got.items():
        assert same, name
        if hold or name not in ON_BLAS:
            assert pending == 0, name  # the second start was asked for, and refused


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_what_the_operating_system_refuses_is_a_result_or_a_memory_error():
    """Under an address-space limit a few MB above what the process holds (no loop thread has
    run before it, so glibc has no other arena to fall back on): a kernel whose scratch (13 MB
    for one St(20000, 32) item) does not fit raises MemoryError, so does one whose output does
    not fit; a batch that wants threads gets no thread stack and runs on the caller, with the
    result of one thread; the process goes on computing."""
    got = _child("""
    import ctypes, json, resource, numpy as np
    from rfl_fast.kernels import _dispatch
    from rfl_fast.kernels.testing import kernel_inputs
    core = _dispatch.load("cpp")
    core.set_threads(1)
    rng = np.random.default_rng(0)
    x, u = kernel_inputs("sphere_exp", rng, 4000, 100)      # 3.2 MB each: threads wanted
    want = core.sphere_exp(x, u)
    big = kernel_inputs("stiefel_retr_polar", rng, 1, 20000, 32)
    huge = np.zeros((2, 40 * 2**20 // 8))                      # its result needs 80 MB more
    out = {}

    def size():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))

    ctypes.CDLL(None).malloc_trim(0)  # glibc: give freed heap back, so the limit is real
    limit = size() + 6 * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    for name, call in (("scratch", lambda: core.stiefel_retr_polar(*big)),
                       ("output", lambda: core.sphere_exp(huge, huge))):
        try:
            call()
            out[name] = "answered"
        except MemoryError:
            out[name] = "MemoryError"
    core.set_threads(4)
    out["threads"] = bool(np.array_equal(core.sphere_exp(x, u), want))
    out["after"] = bool(np.array_equal(core.sphere_exp(x, u), want))
    print(json.dumps(out))
    """)
    assert got == {"scratch": "MemoryError", "output": "MemoryError", "threads": True,
                   "after": True}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_the_operating_system_refusing_the_second_thread_while_the_first_runs():
    """Room for one thread's stack, not two: the first loop thread starts and takes chunks,
    the system refuses the second (before the fix: std::terminate, the process aborted); the
    batch finishes with the result of one thread."""
    import resource

    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    if stack == resource.RLIM_INFINITY or not 2**20 <= stack <= 2**26:
        pytest.skip(f"a thread's stack size is not known here (RLIMIT_STACK {stack})")
    got = _child(f"""
    import ctypes, json, resource, numpy as np
    from rfl_fast.kernels import _dispatch
    from rfl_fast.kernels.testing import kernel_inputs
    core = _dispatch.load("cpp")
    core.set_threads(1)
    x, u = kernel_inputs("sphere_exp", np.random.default_rng(0), 4000, 100)  # out: 3.2 MB
    want = core.sphere_exp(x, u)
    with open("/proc/self/status") as f:
        size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    ctypes.CDLL(None).malloc_trim(0)
    limit = size + 4 * 2**20 + {stack} * 3 // 2
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    core.set_threads(4)
    got = core.sphere_exp(x, u)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # room again to compare
    print(json.dumps(bool(np.array_equal(got, want))))
    """)
    assert got is True


# ---------------------------------------------------------------- items on BLAS: batch modes

BLAS_SHAPES = [("stiefel_retr_polar", (6, 300, 40)), ("stiefel_inv_retr_polar", (6, 300, 40)),
               ("stiefel_proj", (6, 300, 40)), ("polar", (6, 300, 40)),
               ("spd_log", (6, 128)), ("sym_logm", (5, 256))]
FULL_ONLY = {"sym_logm"}          # the longest (the fast tier has spd_log on the same route)


@pytest.mark.parametrize("name,shape", [
    pytest.param(n, s, id=n, marks=pytest.mark.full if n in FULL_ONLY else ())
    for n, s in BLAS_SHAPES])
def test_an_items_bits_depend_neither_on_its_batch_nor_on_the_threads(name, shape):
    """Where the items call BLAS (Stiefel p >= 16 with n p^2 >= 2^18, SPD on LAPACK) the batch
    mode is a function of the core shape: alone or in a batch, on 1, 2 or 3 loop threads, an
    item has the same bits; both modes agree to rounding."""
    args = kernel_inputs(name, np.random.default_rng(3), *shape)
    fn = getattr(core, name)
    before = rf.get_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            rf.set_threads(threads)
            results.append(fn(*args))
        alone = fn(*(a[2:3] for a in args))
    finally:
        rf.set_threads(before)
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    np.testing.assert_array_equal(alone, results[0][2:3])
    modes = {m: fn(*args, parallel=m) for m in ("items", "blas")}
    scale = max(1.0, float(np.abs(results[0]).max()))
    for m in modes.values():
        np.testing.assert_allclose(m, results[0], rtol=0, atol=1e-12 * scale)


def test_the_parallel_argument_is_checked():
    x, u = kernel_inputs("stiefel_proj", np.random.default_rng(0), 2, 20, 3)
    with pytest.raises(ValueError, match="stiefel_proj: parallel: expected 'auto', 'items' or "
                                         "'blas', got 'gpu'"):
        core.stiefel_proj(x, u, parallel="gpu")
    with pytest.raises(ValueError, match="spd_exp: parallel"):
        core.spd_exp_checked(*kernel_inputs("spd_exp", np.random.default_rng(0), 2, 4), (4, 4),
                             "fast")


def test_blas_is_held_to_one_thread_only_during_an_items_batch():
    """The items mode sets SciPy's BLAS to one thread and gives back the setting it found."""
    from threadpoolctl import threadpool_info

    def counts():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    before = counts()
    args = kernel_inputs("stiefel_retr_polar", np.random.default_rng(0), 4, 300, 40)
    core.stiefel_retr_polar(*args, parallel="items")
    assert counts() == before
