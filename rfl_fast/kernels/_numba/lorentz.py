"""Hyperboloid (Lorentz) H^d kernels on rows of ``(N, d+1)`` arrays, ``<a,b>_L = -a0 b0 + sum ak bk``.

Same formulas and clamps as ``rfl_fast.kernels.reference``; one fused pass per point.
"""

import math

import numpy as np
from numba import njit, prange

from ._runtime import run

__all__ = ["lorentz_exp", "lorentz_log", "lorentz_dist", "lorentz_transport"]

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _ldot(a, b):
    s = -a[0] * b[0]
    for k in range(1, a.shape[0]):
        s += a[k] * b[k]
    return s


#: Exp gives NaN (no answer) where its rounding errors, ~ eps cosh|v| x0, exceed 1e8 eps z0.
EXP_MAX_LOSS = 1e8


@njit(**_JIT)
def _exp_row(x, v, out):
    # as the C++ kernel (cpp/include/rfl/lorentz.hpp): the tangent form of |v|^2 when
    # |v_r|^2 - v0^2 cancels, z0 = sqrt(1 + |z_r|^2) when it cancels, NaN when too
    # ill-conditioned
    d1 = x.shape[0]
    vv = 0.0
    for k in range(1, d1):
        vv += v[k] * v[k]
    sq = vv - v[0] * v[0]
    if not (vv <= 4.0 * sq):
        xx = 0.0
        xv = 0.0
        for k in range(1, d1):
            xx += x[k] * x[k]
            xv += x[k] * v[k]
        c = xv / xx if xx > 0.0 else 0.0
        pp = 0.0
        for k in range(1, d1):
            q = v[k] - c * x[k]
            pp += q * q
        sq = (vv + xx * pp) / (x[0] * x[0])
    t = math.sqrt(max(sq, 0.0))
    shc = math.sinh(t) / t if t > 0.0 else 1.0
    ch = math.cosh(t)
    for k in range(d1):
        out[k] = ch * x[k] + shc * v[k]
    loss = ch * abs(x[0])
    if loss <= 16.0 * out[0]:  # no cancellation in z0
        return
    zz = 0.0
    for k in range(1, d1):
        zz += out[k] * out[k]
    if zz <= 1e300:
        z0 = math.sqrt(1.0 + zz)
    else:  # |z_r|^2 overflows (coordinates beyond ~1e150): m sqrt(m^-2 + |z_r/m|^2)
        m = 0.0
        for k in range(1, d1):
            m = max(m, abs(out[k]))
        if m < np.inf:
            zz = 1.0 / (m * m)
            for k in range(1, d1):
                zz += (out[k] / m) * (out[k] / m)
            z0 = m * math.sqrt(zz)
        else:
            z0 = m
    out[0] = z0 if loss <= EXP_MAX_LOSS * z0 else np.nan


@njit(**_JIT)
def _log_row(x, y, out):
    a = max(-_ldot(x, y), 1.0)
    s = math.sqrt((a - 1.0) * (a + 1.0))
    scale = math.acosh(a) / s if s > 0.0 else 1.0
    for k in range(x.shape[0]):
        out[k] = scale * (y[k] - a * x[k])


@njit(**_JIT)
def _transport_row(x, y, v, out):
    yv = -y[0] * v[0]
    xy = -x[0] * y[0]
    for k in range(1, x.shape[0]):
        yv += y[k] * v[k]
        xy += x[k] * y[k]
    f = yv / (1.0 - xy)
    for k in range(x.shape[0]):
        out[k] = v[k] + f * (x[k] + y[k])


@njit(**_JIT)
def _exp_serial(x, v, out):
    for i in range(x.shape[0]):
        _exp_row(x[i], v[i], out[i])


@njit(parallel=True, **_JIT)
def _exp_parallel(x, v, out):
    for i in prange(x.shape[0]):
        _exp_row(x[i], v[i], out[i])


@njit(**_JIT)
def _log_serial(x, y, out):
    for i in range(x.shape[0]):
        _log_row(x[i], y[i], out[i])


@njit(parallel=True, **_JIT)
def _log_parallel(x, y, out):
    for i in prange(x.shape[0]):
        _log_row(x[i], y[i], out[i])


@njit(**_JIT)
def _dist_serial(x, y, out):
    for i in range(x.shape[0]):
        out[i] = math.acosh(max(-_ldot(x[i], y[i]), 1.0))


@njit(parallel=True, **_JIT)
def _dist_parallel(x, y, out):
    for i in prange(x.shape[0]):
        out[i] = math.acosh(max(-_ldot(x[i], y[i]), 1.0))


@njit(**_JIT)
def _transport_serial(x, y, v, out):
    for i in range(x.shape[0]):
        _transport_row(x[i], y[i], v[i], out[i])


@njit(parallel=True, **_JIT)
def _transport_parallel(x, y, v, out):
    for i in prange(x.shape[0]):
        _transport_row(x[i], y[i], v[i], out[i])


# transcendental functions dominate for small d: count them as ~20 flops each
def lorentz_exp(x, v):
    """``cosh|v| x + sinh|v| v/|v|`` (Minkowski norm of v); (N, d+1)."""
    out = np.empty_like(x)
    run(_exp_serial, _exp_parallel, 4 * x.size + 40 * x.shape[0], x.shape[0], x, v, out)
    return out


def lorentz_log(x, y):
    """``acosh(a) (y - a x)/sqrt(a^2 - 1)``, ``a = max(-<x,y>_L, 1)``; (N, d+1)."""
    out = np.empty_like(x)
    run(_log_serial, _log_parallel, 4 * x.size + 40 * x.shape[0], x.shape[0], x, y, out)
    return out


def lorentz_dist(x, y):
    """``acosh(max(-<x,y>_L, 1))``; (N, d+1) -> (N,)."""
    out = np.empty(x.shape[0])
    run(_dist_serial, _dist_parallel, 2 * x.size + 40 * x.shape[0], x.shape[0], x, y, out)
    return out


def lorentz_transport(x, y, v):
    """Parallel transport ``v + <y,v>_L/(1 - <x,y>_L) (x+y)``; (N, d+1)."""
    out = np.empty_like(x)
    run(_transport_serial, _transport_parallel, 6 * x.size + 10 * x.shape[0], x.shape[0],
        x, y, v, out)
    return out
