"""Thread limits of the BLAS libraries NumPy and SciPy load (through threadpoolctl)."""

import contextlib

__all__ = ["limit_blas_threads"]


def limit_blas_threads(threads):
    """Context manager: BLAS uses at most ``threads`` threads inside (``None``: no change).

    The previous limits come back on exit, also on error.
    """
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads), user_api="blas")
