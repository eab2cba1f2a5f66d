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

from ..registry import REGISTRY
from . import _runtime, lorentz, spd, sphere, stiefel
from ._runtime import PARALLEL_MIN_WORK

#: The modules of the kernel families: each registered kernel is the function of its name in
#: one of them (a kernel the registry declares and no module defines has no Numba route).
_FAMILIES = (stiefel, spd, sphere, lorentz)

__all__ = [name for name in REGISTRY if any(hasattr(m, name) for m in _FAMILIES)] \
    + ["PARALLEL_MIN_WORK", "cache_note"]
globals().update({name: getattr(m, name) for m in _FAMILIES for name in __all__
                  if hasattr(m, name)})


def cache_note():
    """Where Numba caches this package's compiled kernels, and why there."""
    return _runtime.cache_note(sphere._exp_serial)
