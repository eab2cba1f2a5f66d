"""Threads: of the compiled C++ kernels (``set_threads``), and of the BLAS libraries NumPy and
SciPy load (``limit_blas_threads``, through threadpoolctl)."""

import contextlib
import os

__all__ = ["limit_blas_threads", "set_threads", "get_threads", "default_threads"]

_ENV = "RFL_FAST_THREADS"


def _parse_threads(raw):
    if raw is None or raw.strip() == "":
        return None
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{_ENV}: expected an int >= 1, got {raw!r}")
    return threads


def default_threads():
    """``RFL_FAST_THREADS`` if set, else the cores this process may run on."""
    env = _parse_threads(os.environ.get(_ENV))
    if env is not None:
        return env
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _core():
    from . import _dispatch

    return _dispatch._load("cpp")


def set_threads(threads):
    """Use at most ``threads`` threads in the compiled C++ kernels (their batch loops and the
    fused PCA sums); ``None``: back to the default, ``RFL_FAST_THREADS`` (read when the
    extension loads) or else all cores.

    Small batches use fewer threads (each thread must get ~0.5 MB of input). Results never
    depend on the thread count: the work is split into fixed chunks that threads take in turn,
    so a thread on a busy core simply takes fewer. The setting is process-wide. Numba kernels
    follow Numba's own setting (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``).
    """
    if threads is None:
        threads = default_threads()
    elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected an int >= 1 or None, got {threads!r}")
    core = _core()
    if core is not None:
        core.set_threads(threads)


def get_threads():
    """Threads the compiled kernels use at most (see ``set_threads``)."""
    core = _core()
    return core.get_threads() if core is not None else default_threads()


def limit_blas_threads(threads):
    """Context manager: BLAS uses at most ``threads`` threads inside (``None``: no change).

    The previous limits come back on exit, also on error.
    """
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads), user_api="blas")
