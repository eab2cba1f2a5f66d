"""Numba backend: every kernel of ``rfl_fast.kernels.KERNELS`` with the reference's name and
calling convention (C-contiguous float64 ``(N, core...)`` arrays in, a fresh array out).

Plain ``@njit(cache=True)`` functions in flat modules; a new process loads the compiled kernels
from Numba's cache instead of recompiling. Batches above a small size run a ``prange`` driver
over the items with Numba's thread count of the calling thread (``numba.set_num_threads`` or
``NUMBA_NUM_THREADS``; set it to 1 for serial kernels); see ``_runtime``. Importing this package
changes no global Numba setting.

Small dense linear algebra is hand-written (``_linalg``): a cyclic Jacobi eigensolver, batched
across SIMD lanes, for the symmetric matrix functions and SPD kernels (LAPACK above 12 x 12), a p x p Gram route for polar factors with a one-sided
Jacobi SVD fallback for ill-conditioned items, and direct solves of the small Lyapunov and
triangular systems of the inverse retractions.
"""

from . import _runtime, sphere
from ._runtime import PARALLEL_MIN_WORK
from .lorentz import lorentz_dist, lorentz_exp, lorentz_log, lorentz_transport
from .spd import (spd_dist, spd_exp, spd_log, sym_expm, sym_invsqrtm, sym_logm, sym_sqrtm)
from .sphere import sphere_dist, sphere_exp, sphere_log, sphere_transport
from .stiefel import (polar, stiefel_inv_retr_polar, stiefel_inv_retr_qr, stiefel_proj,
                      stiefel_retr_polar, stiefel_retr_qr)

__all__ = [
    "stiefel_proj", "stiefel_retr_polar", "stiefel_inv_retr_polar", "stiefel_retr_qr",
    "stiefel_inv_retr_qr", "polar",
    "sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm", "spd_exp", "spd_log", "spd_dist",
    "sphere_exp", "sphere_log", "sphere_dist", "sphere_transport",
    "lorentz_exp", "lorentz_log", "lorentz_dist", "lorentz_transport",
    "PARALLEL_MIN_WORK", "cache_note",
]


def cache_note():
    """Where Numba caches this package's compiled kernels, and why there."""
    return _runtime.cache_note(sphere._exp_serial)
