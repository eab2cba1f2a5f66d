"""Sphere S^(d-1) kernels, one fused pass per point (rows of ``(N, d)`` arrays).

Same formulas as ``rfl_fast.kernels.reference`` (see there); each row is read from memory once
(it stays in L1 between the passes over it) and no temporaries are allocated.
"""

import math

import numpy as np
from numba import njit, prange

from ._runtime import run

__all__ = ["sphere_exp", "sphere_log", "sphere_dist", "sphere_transport"]

_EPS = float(np.finfo(np.float64).eps)
_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _exp_row(x, u, out):
    d = x.shape[0]
    t = 0.0
    for k in range(d):
        t += u[k] * u[k]
    if t <= 1e300:
        t = math.sqrt(t)
    else:  # |u|^2 overflows (|u| beyond ~1.3e154): m |u/m|, m = max|u_k|
        m = 0.0
        for k in range(d):
            m = max(m, abs(u[k]))
        t = 0.0
        for k in range(d):
            t += (u[k] / m) * (u[k] / m)
        t = m * math.sqrt(t)
    c = math.cos(t)
    s = math.sin(t) / t if t != 0.0 else 1.0
    for k in range(d):
        out[k] = c * x[k] + s * u[k]


@njit(**_JIT)
def _log_row(x, y, out):
    d = x.shape[0]
    c = 0.0
    for k in range(d):
        c += x[k] * y[k]
    nv = 0.0
    for k in range(d):
        r = y[k] - c * x[k]
        nv += r * r
    nv = math.sqrt(nv)
    if c < 0.0 and nv <= 2.0 * (d + 3) * _EPS * -c:
        scale = np.nan  # antipodal within rounding (reference.sphere_log): no unique logarithm
    elif nv > 0.0:
        scale = math.atan2(nv, c) / nv
    else:
        scale = 1.0
    for k in range(d):
        out[k] = scale * (y[k] - c * x[k])


@njit(**_JIT)
def _dist_row(x, y):
    d = x.shape[0]
    h = 0.0
    for k in range(d):
        r = x[k] - y[k]
        h += r * r
    h = math.sqrt(h) / 2.0
    return 2.0 * math.asin(min(h, 1.0))


@njit(**_JIT)
def _transport_row(x, y, v, out):
    d = x.shape[0]
    yv = 0.0
    xy = 0.0
    for k in range(d):
        yv += y[k] * v[k]
        xy += x[k] * y[k]
    f = yv / (1.0 + xy)
    for k in range(d):
        out[k] = v[k] - f * (x[k] + y[k])


@njit(**_JIT)
def _exp_serial(x, u, out):
    for i in range(x.shape[0]):
        _exp_row(x[i], u[i], out[i])


@njit(parallel=True, **_JIT)
def _exp_parallel(x, u, out):
    for i in prange(x.shape[0]):
        _exp_row(x[i], u[i], out[i])


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
        out[i] = _dist_row(x[i], y[i])


@njit(parallel=True, **_JIT)
def _dist_parallel(x, y, out):
    for i in prange(x.shape[0]):
        out[i] = _dist_row(x[i], y[i])


@njit(**_JIT)
def _transport_serial(x, y, v, out):
    for i in range(x.shape[0]):
        _transport_row(x[i], y[i], v[i], out[i])


@njit(parallel=True, **_JIT)
def _transport_parallel(x, y, v, out):
    for i in prange(x.shape[0]):
        _transport_row(x[i], y[i], v[i], out[i])


def sphere_exp(x, u):
    """``cos|u| x + sin|u| u/|u|``; x, u: (N, d) -> (N, d)."""
    out = np.empty_like(x)
    run(_exp_serial, _exp_parallel, 4 * x.size, x.shape[0], x, u, out)
    return out


def sphere_log(x, y):
    """``atan2(|v|, <x,y>) v/|v|``, ``v = y - <x,y> x``; NaN at antipodal points; (N, d)."""
    out = np.empty_like(x)
    run(_log_serial, _log_parallel, 6 * x.size, x.shape[0], x, y, out)
    return out


def sphere_dist(x, y):
    """``2 asin(|x - y|/2)``; (N, d) -> (N,)."""
    out = np.empty(x.shape[0])
    run(_dist_serial, _dist_parallel, 3 * x.size, x.shape[0], x, y, out)
    return out


def sphere_transport(x, y, v):
    """Parallel transport ``v - <y,v>/(1+<x,y>) (x+y)``; (N, d)."""
    out = np.empty_like(x)
    run(_transport_serial, _transport_parallel, 7 * x.size, x.shape[0], x, y, v, out)
    return out
