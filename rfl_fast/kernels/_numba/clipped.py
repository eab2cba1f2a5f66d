"""Numba kernel of the fused clipped per-sample gradient sum for PCA-type losses.

Private: called by ``clipping.clipped_sum_pca(..., backend="numba")`` (the default route is the
C++ kernel ``rfl_fast.kernels.fused``, faster in side-by-side measurements; this one stays as
the fallback when the extension is missing) with clean input (C-contiguous float64
``Z`` (m, d) and ``Xt = X'`` (r, d), scalars ``tau`` (> 0, may be inf) and ``c``); never
validates. One pass over the rows of ``Z``: for row ``z`` it forms ``p = X'z`` (r dot products
of contiguous length-d vectors, the row staying in L1), the residual ``res = z - X p``
explicitly (never ``|z|^2 - |p|^2``, which cancels for ``z`` almost in ``span(X)``), scaled
norms ``|res|``, ``|p|``, ``s = min(|c| |res| |p|, tau)``, and accumulates
``St[l] += res * (s p_l / (|p| |res|))``: one row adds at most ``tau`` in floating point. No
(m, d) or (m, d, r) temporary; memory traffic is one read of ``Z``. The caller finishes with
``-sign(c) S``, ``S = St'``; a non-finite row makes ``St`` NaN.

``fastmath`` is limited to reassociation/contraction (so the dot products vectorize); NaN and
inf semantics are kept (``tau = inf`` means no clipping). The prange driver splits the rows in
one block per thread with a private accumulator each (summed at the end), so results differ
from the serial driver only by rounding.
"""

import math

import numba
import numpy as np
from numba import njit, prange  # noqa: F401 (prange used in _pca_parallel)

from ._runtime import run

__all__ = ["pca_clipped_sum_t"]

_FM = {"reassoc", "contract"}


@njit(cache=True, error_model="numpy")
def _scaled_norm(v, n):
    s = 0.0
    chk = 0.0
    for k in range(n):
        a = abs(v[k])
        if a > s:
            s = a
        chk += v[k] * 0.0
    if chk != 0.0 or s != s:
        return np.nan
    if s == 0.0:
        return 0.0
    t = 0.0
    for k in range(n):
        u = v[k] / s
        t += u * u
    return s * math.sqrt(t)


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _pca_rows(Z, Xt, lo, hi, tau, c, St, p, res):
    r, d = Xt.shape
    for j in range(lo, hi):
        z = Z[j]
        for l in range(r):
            x = Xt[l]
            s = 0.0
            for k in range(d):
                s += z[k] * x[k]
            p[l] = s
        for k in range(d):
            res[k] = z[k]
        for l in range(r):
            x = Xt[l]
            pl = p[l]
            for k in range(d):
                res[k] -= pl * x[k]
        nr2 = 0.0                      # a sum of squares: no cancellation
        for k in range(d):
            nr2 += res[k] * res[k]
        if nr2 > 1e-280 and nr2 < 1e280:
            nr = math.sqrt(nr2)
        else:                          # squares may over/underflow (or NaN): scaled
            nr = _scaled_norm(res, d)
        ny = _scaled_norm(p, r)
        if not (math.isfinite(ny) and math.isfinite(nr)):
            for l in range(r):
                p[l] = np.nan
        elif ny > 0.0 and nr > 0.0:
            g = c * nr * ny
            sc = tau if g > tau else g
            for l in range(r):
                p[l] = (sc * (p[l] / ny)) / nr
        else:
            for l in range(r):
                p[l] = 0.0
        for l in range(r):
            q = p[l]
            row = St[l]
            for k in range(d):
                row[k] += res[k] * q


@njit(cache=True, fastmath=_FM, error_model="numpy")
def _pca_serial(Z, Xt, tau, c, nth):
    St = np.zeros(Xt.shape)
    p = np.empty(Xt.shape[0])
    res = np.empty(Xt.shape[1])
    _pca_rows(Z, Xt, 0, Z.shape[0], tau, c, St, p, res)
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
        res = np.empty(d)
        _pca_rows(Z, Xt, t * chunk, min(m, (t + 1) * chunk), tau, c, parts[t], p, res)
    St = np.zeros((r, d))
    for t in range(nth):
        St += parts[t]
    return St


def pca_clipped_sum_t(Z, Xt, tau, c):
    """``St = (sum_j s_j (res_j/|res_j|)(p_j/|p_j|)')'`` of shape (r, d), ``p_j = X'z_j``,
    ``res_j = z_j - X p_j`` (formed explicitly), ``s_j = min(|c| |res_j| |p_j|, tau)``.

    Z : (m, d) C-contiguous float64; Xt : (r, d) C-contiguous float64 with orthonormal rows.
    """
    work = 3 * Z.shape[0] * Z.shape[1] * Xt.shape[0]
    nth = numba.get_num_threads()
    return run(_pca_serial, _pca_parallel, work, nth, Z, Xt, float(tau), abs(float(c)), nth)
