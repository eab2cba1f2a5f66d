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

The first call of a driver with no entry in Numba's cache compiles it (seconds); the first time
that happens in a kernel family (module) a message says so on the ``rfl_fast.kernels`` logger
(level WARNING, so it reaches stderr unless logging is configured otherwise), with where the
cache goes (``cache_note``).
"""

import logging
import os
import threading

import numba

__all__ = ["run", "PARALLEL_MIN_WORK", "cache_note"]

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


_log = logging.getLogger("rfl_fast.kernels")
_seen = set()  # drivers called in this process
_announced = set()  # kernel families whose compilation was announced


def _cache_dir(driver):
    """Numba's cache folder for ``driver`` (``None`` if Numba does not say)."""
    try:
        return driver._cache._cache_path  # Numba internals: guarded
    except AttributeError:
        return None


def _is_cached(driver):
    try:
        return os.path.exists(driver._cache._cache_file._index_path)
    except AttributeError:
        return False


def cache_note(driver):
    """Where Numba caches this package's compiled kernels (``driver``: one of them), and why
    there."""
    where = _cache_dir(driver)
    if os.environ.get("NUMBA_CACHE_DIR"):
        return f"Numba cache: {where} (NUMBA_CACHE_DIR)"
    package = os.path.dirname(os.path.abspath(__file__))
    if where is None or where.startswith(package):
        return f"Numba cache: {where or 'next to the package'} (the package folder)"
    return (f"Numba cache: {where} (the package folder {package} is not writable; set "
            f"NUMBA_CACHE_DIR to choose another)")


def _first_call(driver):
    _seen.add(driver)
    py_func = getattr(driver, "py_func", None)  # a plain function (tests) compiles nothing
    if py_func is None:
        return
    family = py_func.__module__.rsplit(".", 1)[-1]
    if family in _announced or _is_cached(driver):
        return
    _announced.add(family)
    _log.warning("rfl_fast: compiling the Numba kernels of %r on first use (about 10 s per "
                 "kernel family, once: later processes load them from the cache). %s",
                 family, cache_note(driver))


def run(serial, parallel, work, tasks, *args):
    """Call ``serial(*args)`` or ``parallel(*args)`` (whose ``prange`` has ``tasks``
    iterations); see the module docstring."""
    if work < PARALLEL_MIN_WORK or tasks < 2 or numba.get_num_threads() < 2:
        if serial not in _seen:
            _first_call(serial)
        return serial(*args)
    if parallel not in _seen:
        _first_call(parallel)
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
