"""Numba kernel of the fused clipped per-sample gradient sum for PCA-type losses.

Private: called by ``clipping.clipped_sum_pca(..., backend="numba")`` (the default route is the
C++ kernel ``rfl_fast.kernels.fused``, faster in side-by-side measurements; this one stays as
the fallback when the extension is missing) with clean input (C-contiguous float64
``Z`` (m, d) and ``Xt = X'`` (r, d), scalars ``tau`` (> 0, may be inf) and ``c``); never
validates. One pass over the rows of ``Z``: for row ``z`` it forms ``|z|^2`` and ``p = X'z``
(r dot products of contiguous length-d vectors, the row staying in L1), the per-sample norm
``|c| sqrt(|z|^2 - |p|^2) |p|`` (``|(I - XX')z| |X'z|`` for orthonormal ``X``), the clip factor
``w = min(1, tau / norm)``, and accumulates ``St[l] += z * (w p_l)``. No (m, d) or (m, d, r)
temporary; memory traffic is one read of ``Z``. The caller finishes with
``-c (S - X (X'S))``, ``S = St'``.

``fastmath`` is limited to reassociation/contraction (so the dot products vectorize); NaN and
inf semantics are kept (``tau = inf`` means no clipping). The prange driver splits the rows in
one block per thread with a private accumulator each (summed at the end), so results differ
from the serial driver only by rounding.
"""

import math

import numba
import numpy as np
from numba import njit, prange  # noqa: F401 (prange used in _pca_parallel)

from ..kernels._numba._runtime import run

__all__ = ["pca_clipped_sum_t"]

_FM = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _pca_rows(Z, Xt, lo, hi, tau, c, St, p):
    r, d = Xt.shape
    for j in range(lo, hi):
        z = Z[j]
        z2 = 0.0
        for k in range(d):
            z2 += z[k] * z[k]
        a2 = 0.0
        for l in range(r):
            x = Xt[l]
            s = 0.0
            for k in range(d):
                s += z[k] * x[k]
            p[l] = s
            a2 += s * s
        res2 = z2 - a2
        if res2 < 0.0:
            res2 = 0.0
        nrm = c * math.sqrt(res2) * math.sqrt(a2)
        w = 1.0
        if nrm > tau:
            w = tau / nrm
        for l in range(r):
            q = w * p[l]
            row = St[l]
            for k in range(d):
                row[k] += z[k] * q


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _pca_serial(Z, Xt, tau, c, nth):
    St = np.zeros(Xt.shape)
    p = np.empty(Xt.shape[0])
    _pca_rows(Z, Xt, 0, Z.shape[0], tau, c, St, p)
    return St


@njit(cache=True, fastmath=_FM, error_model="numpy", parallel=True)
def _pca_parallel(Z, Xt, tau, c, nth):
    m = Z.shape[0]
    r, d = Xt.shape
    nth = max(1, min(nth, m))
    parts = np.zeros((nth, r, d))
    chunk = (m + nth - 1) // nth
    for t in prange(nth):
        p = np.empty(r)
        _pca_rows(Z, Xt, t * chunk, min(m, (t + 1) * chunk), tau, c, parts[t], p)
    St = np.zeros((r, d))
    for t in range(nth):
        St += parts[t]
    return St


def pca_clipped_sum_t(Z, Xt, tau, c):
    """``St = (sum_j w_j z_j z_j' X)'`` of shape (r, d), ``w_j = min(1, tau/(|c| |res_j| |p_j|))``.

    Z : (m, d) C-contiguous float64; Xt : (r, d) C-contiguous float64 with orthonormal rows.
    """
    work = 3 * Z.shape[0] * Z.shape[1] * Xt.shape[0]
    return run(_pca_serial, _pca_parallel, work, Z, Xt, float(tau), abs(float(c)),
               numba.get_num_threads())
