"""Thread settings: the compiled kernels' default (``RFL_FAST_THREADS``, applied by the
dispatcher when it loads the extension; see ``_dispatch.set_threads``) and the BLAS libraries
NumPy and SciPy load (``limit_blas_threads``, through threadpoolctl)."""

import contextlib
import os
from typing import Any

__all__ = ["limit_blas_threads", "default_threads"]

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


def limit_blas_threads(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """Context manager: BLAS uses at most ``threads`` threads inside.

    The previous limits come back on exit, also on error.

    Parameters
    ----------
    threads : int or None
        The limit; ``None``: no change.

    Returns
    -------
    context manager
    """
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads), user_api="blas")
