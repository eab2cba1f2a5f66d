"""Serial-or-parallel choice for the Numba kernels (nothing global is changed here).

Every kernel exists as two compiled drivers, a serial one and a ``prange`` one (two distinct
functions: Numba's cache key does not include ``parallel=``, so one Python function jitted twice
would share a cache entry). ``run`` picks the parallel driver only when

* the batch is big enough for threads to pay (``work`` >= ``PARALLEL_MIN_WORK``),
* the parallel driver has at least two tasks (``prange`` iterations) to share: one task runs on
  one thread anyway, and entering the parallel region costs up to milliseconds on a busy
  machine (Stiefel(784, 8), one item: 20 ms instead of 0.1 ms with another process running), and
* the calling thread's Numba thread count is above 1 (``numba.set_num_threads`` is per thread,
  ``NUMBA_NUM_THREADS`` sets the default): ``numba.set_num_threads(1)`` makes every kernel serial.

Numba's ``workqueue`` threading layer (used when neither OpenMP nor TBB is available) aborts the
process if two Python threads enter a parallel region at once. Until the layer is known to be
thread-safe (``omp`` or ``tbb``), parallel drivers run under a lock taken without waiting; a
thread that finds it taken runs the serial driver instead, so concurrent callers never crash.
"""

import threading

import numba

__all__ = ["run", "PARALLEL_MIN_WORK"]

# Rough number of floating-point operations below which thread start-up costs more than it saves.
PARALLEL_MIN_WORK = 200_000

_lock = threading.Lock()
_layer_safe = None  # None: unknown until a parallel driver has run once


def _check_layer():
    global _layer_safe
    try:
        _layer_safe = numba.threading_layer() in ("omp", "tbb")
    except ValueError:  # no parallel region has run yet
        _layer_safe = None


def run(serial, parallel, work, tasks, *args):
    """Call ``serial(*args)`` or ``parallel(*args)`` (whose ``prange`` has ``tasks``
    iterations); see the module docstring."""
    if work < PARALLEL_MIN_WORK or tasks < 2 or numba.get_num_threads() < 2:
        return serial(*args)
    if _layer_safe:
        return parallel(*args)
    if not _lock.acquire(blocking=False):
        return serial(*args)
    try:
        result = parallel(*args)
    finally:
        _lock.release()
    _check_layer()
    return result
