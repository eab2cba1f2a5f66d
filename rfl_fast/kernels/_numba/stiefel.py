"""Stiefel St(n, p) kernels on ``(N, n, p)`` stacks: projection, polar and QR retractions and
their exact inverses, and the polar factor.

* ``polar``: the p x p Gram route ``a (a'a)^-½`` with a Jacobi eigendecomposition of ``a'a``;
  its error grows like ``eps cond(a)^2``, so items with ``cond(a) > 100`` (``GRAM_MAX_COND2``)
  take a one-sided Jacobi SVD of ``a`` instead (accurate at any condition). NaN for
  rank-deficient items by the reference's rule ``s_min <= s_max eps n``.
* polar inverse: ``(x'y) S + S (y'x) = 2I`` solved directly as a linear system in the
  ``p(p+1)/2`` entries of the symmetric ``S`` (Gaussian elimination, partial pivoting); NaN when
  a pivot falls below ``1e-12 max|K|`` (the system is singular iff two eigenvalues of ``x'y`` sum
  to zero, which is the reference's test) or the solution is not finite, and where ``S`` is
  not positive definite (no tangent vector retracts to ``y``; the reference's ``polar_spd``).
* QR retraction: modified Gram-Schmidt with re-orthogonalization (twice is enough), which gives
  the positive-diagonal factor directly.
* QR inverse: the reference's column-by-column triangular systems, NaN on an exactly zero pivot.
* Exp: Edelman's geodesic with the reference's degree-13 Pade exponentials (``_expm_item``);
  NaN for a non-finite item and where the answer is off the manifold (the reference's rule).
"""

import math

import numpy as np
from numba import njit, prange

from .. import reference
from ._linalg import congruence, cross, gram, jacobi_eigh, lu_solve, svd_polar
from ._runtime import run

__all__ = ["stiefel_proj", "stiefel_retr_polar", "stiefel_inv_retr_polar", "stiefel_retr_qr",
           "stiefel_inv_retr_qr", "polar", "stiefel_exp"]

_JIT = dict(cache=True, error_model="numpy")
CHUNK = 8
GRAM_MAX_COND2 = 1e4
_EPS = float(np.finfo(np.float64).eps)
_SPD_PIVOT = 1e-12      # reference.SPD_PIVOT


# ---------------------------------------------------------------- items


@njit(**_JIT)
def _proj_item(x, u, out, m):
    n, p = x.shape
    cross(x, u, m)
    for i in range(p):
        for j in range(i, p):
            s = 0.5 * (m[i, j] + m[j, i])
            m[i, j] = s
            m[j, i] = s
    for k in range(n):
        for j in range(p):
            acc = u[k, j]
            for i in range(p):
                acc -= x[k, i] * m[i, j]
            out[k, j] = acc


@njit(**_JIT)
def _rescale(b, g):
    """Whether the Gram ``g = b'b`` is usable: finite with its largest (diagonal) entry in
    [2^-300, 2^300]; if not, ``b`` is scaled by the power of two (exact) that brings max|b| into
    [1, 2) (the polar factor does not change) and ``g`` recomputed. False if ``b`` is zero or
    not finite (no polar factor)."""
    p = b.shape[1]
    dmax = 0.0
    for k in range(p):
        dmax = max(dmax, g[k, k])
    if dmax >= 2.0 ** -300 and dmax <= 2.0 ** 300:
        return True
    m = 0.0
    for k in range(b.shape[0]):
        for j in range(p):
            m = max(m, abs(b[k, j]))
    if not (m > 0.0 and m < np.inf):
        return False
    s = math.ldexp(1.0, -max(-1000, min(1000, math.frexp(m)[1] - 1)))
    for k in range(b.shape[0]):
        for j in range(p):
            b[k, j] *= s
    gram(b, g)
    return True


@njit(**_JIT)
def _polar_core(b, out, g, w, v, h, t):
    """Polar factor of ``b`` (n, p) into ``out``; ``b`` may be destroyed. Any scale of ``b``:
    a Gram out of range is rescaled first (``_rescale``)."""
    n, p = b.shape
    gram(b, g)
    if not _rescale(b, g):
        out[:, :] = np.nan
        return
    jacobi_eigh(g, w, v, True)
    lmax = 0.0
    lmin = np.inf
    for k in range(p):
        lmax = max(lmax, w[k])
        lmin = min(lmin, w[k])
    if lmin > 0.0 and lmax <= GRAM_MAX_COND2 * lmin:
        for k in range(p):
            w[k] = 1.0 / math.sqrt(w[k])
        congruence(v, w, t, h)
        for k in range(n):
            for j in range(p):
                acc = 0.0
                for i in range(p):
                    acc += b[k, i] * h[i, j]
                out[k, j] = acc
    else:
        svd_polar(b, v, out)


@njit(**_JIT)
def _polar_item(a, out, b, g, w, v, h, t):
    n, p = a.shape
    for k in range(n):
        for j in range(p):
            b[k, j] = a[k, j]
    _polar_core(b, out, g, w, v, h, t)


@njit(**_JIT)
def _retr_polar_item(x, u, out, b, g, w, v, h, t):
    n, p = x.shape
    for k in range(n):
        for j in range(p):
            b[k, j] = x[k, j] + u[k, j]
    _polar_core(b, out, g, w, v, h, t)


@njit(**_JIT)
def _sym_index(i, j, p):
    if i > j:
        i, j = j, i
    return i * p - (i * (i - 1)) // 2 + (j - i)


@njit(**_JIT)
def _spd(s, a):
    """reference.polar_spd: Cholesky pivots of sym(s) above SPD_PIVOT times its largest
    diagonal entry (a: p x p scratch)."""
    p = s.shape[0]
    dmax = 0.0
    for i in range(p):
        for j in range(p):
            v = 0.5 * (s[i, j] + s[j, i])
            if not np.isfinite(v):
                return False
            a[i, j] = v
        dmax = max(dmax, a[i, i])
    tol = _SPD_PIVOT * dmax
    for k in range(p):
        d = a[k, k]
        if not d > tol:
            return False
        for i in range(k + 1, p):
            f = a[i, k]
            for j in range(k + 1, p):
                a[i, j] -= f * a[k, j] / d
    return True


@njit(**_JIT)
def _inv_polar_item(x, y, out, m, kk, rhs, s):
    n, p = x.shape
    cross(x, y, m)
    q = p * (p + 1) // 2
    for r in range(q):
        rhs[r] = 0.0
        for c in range(q):
            kk[r, c] = 0.0
    for i in range(p):
        for j in range(i, p):
            r = _sym_index(i, j, p)
            if i == j:
                rhs[r] = 2.0
            for k in range(p):
                kk[r, _sym_index(k, j, p)] += m[i, k]
                kk[r, _sym_index(i, k, p)] += m[j, k]
    ok = lu_solve(kk, rhs, False, 1e-12)
    if ok:
        for r in range(q):
            if not np.isfinite(rhs[r]):
                ok = False
    if not ok:
        out[:, :] = np.nan
        return
    for i in range(p):
        for j in range(i, p):
            s[i, j] = rhs[_sym_index(i, j, p)]
            s[j, i] = s[i, j]
    if not _spd(s, m):          # no tangent vector retracts to y (reference.polar_spd)
        out[:, :] = np.nan
        return
    for k in range(n):
        for j in range(p):
            acc = -x[k, j]
            for i in range(p):
                acc += y[k, i] * s[i, j]
            out[k, j] = acc


@njit(**_JIT)
def _retr_qr_item(x, u, out, r):
    n, p = x.shape
    m = 0.0
    for k in range(n):
        for j in range(p):
            out[k, j] = x[k, j] + u[k, j]
            m = max(m, abs(out[k, j]))
    if not (m >= 2.0 ** -150 and m <= 2.0 ** 150):  # |a|^2 would over/underflow: qf(a 2^-e)
        if not (m > 0.0 and m < np.inf):           # = qf(a), exact scaling
            out[:, :] = np.nan
            return
        s = math.ldexp(1.0, -max(-1000, min(1000, math.frexp(m)[1] - 1)))
        for k in range(n):
            for j in range(p):
                out[k, j] *= s
    for j in range(p):
        for _ in range(2):  # Gram-Schmidt twice: orthogonal to working precision
            for i in range(j):
                r[i] = 0.0
            for k in range(n):
                okj = out[k, j]
                for i in range(j):
                    r[i] += out[k, i] * okj
            for k in range(n):
                acc = out[k, j]
                for i in range(j):
                    acc -= out[k, i] * r[i]
                out[k, j] = acc
        nrm = 0.0
        for k in range(n):
            nrm += out[k, j] * out[k, j]
        inv = 1.0 / math.sqrt(nrm)
        for k in range(n):
            out[k, j] *= inv


@njit(**_JIT)
def _inv_qr_item(x, y, out, m, lu, rr, b):
    n, p = x.shape
    cross(x, y, m)
    gamma = n * _EPS / (1.0 - n * _EPS)  # rounding of x'y (reference._qr_minor_gamma)
    for i in range(p):
        for j in range(p):
            rr[i, j] = 0.0
    for j in range(p):
        for i in range(j):
            acc = 0.0
            for l in range(i + 1):
                acc += m[j, l] * rr[l, i]
            b[i] = -acc
        b[j] = 1.0
        bb = 0.0
        for i in range(j + 1):
            bb += b[i] * b[i]
        for i in range(j + 1):
            for l in range(j + 1):
                lu[i, l] = m[i, l]
        if not lu_solve(lu[: j + 1, : j + 1], b[: j + 1], True, 0.0):
            out[:, :] = np.nan
            return
        rn = 0.0
        for i in range(j + 1):
            rr[i, j] = b[i]
            rn += b[i] * b[i]
        # the leading block is singular within the rounding of x'y (reference._qr_minor_vanishes)
        if not (math.sqrt(rn) * ((j + 1) * gamma) < math.sqrt(bb)):
            out[:, :] = np.nan
            return
    for k in range(n):
        for j in range(p):
            acc = -x[k, j]
            for i in range(j + 1):
                acc += y[k, i] * rr[i, j]
            out[k, j] = acc


# ---------------------------------------------------------------- chunks of items


@njit(**_JIT)
def _proj_chunk(x, u, out, lo, hi):
    p = x.shape[2]
    m = np.empty((p, p))
    for i in range(lo, hi):
        _proj_item(x[i], u[i], out[i], m)


@njit(**_JIT)
def _polar_chunk(x, u, out, retr, lo, hi):
    n, p = x.shape[1], x.shape[2]
    b = np.empty((n, p))
    g = np.empty((p, p))
    v = np.empty((p, p))
    h = np.empty((p, p))
    t = np.empty((p, p))
    w = np.empty(p)
    for i in range(lo, hi):
        if retr:
            _retr_polar_item(x[i], u[i], out[i], b, g, w, v, h, t)
        else:
            _polar_item(x[i], out[i], b, g, w, v, h, t)


@njit(**_JIT)
def _inv_polar_chunk(x, y, out, lo, hi):
    p = x.shape[2]
    q = p * (p + 1) // 2
    m = np.empty((p, p))
    s = np.empty((p, p))
    kk = np.empty((q, q))
    rhs = np.empty(q)
    for i in range(lo, hi):
        _inv_polar_item(x[i], y[i], out[i], m, kk, rhs, s)


@njit(**_JIT)
def _retr_qr_chunk(x, u, out, lo, hi):
    r = np.empty(x.shape[2])
    for i in range(lo, hi):
        _retr_qr_item(x[i], u[i], out[i], r)


@njit(**_JIT)
def _inv_qr_chunk(x, y, out, lo, hi):
    p = x.shape[2]
    m = np.empty((p, p))
    lu = np.empty((p, p))
    rr = np.empty((p, p))
    b = np.empty(p)
    for i in range(lo, hi):
        _inv_qr_item(x[i], y[i], out[i], m, lu, rr, b)


#: the reference's degree-13 Pade coefficients and scaling threshold, and its polynomial
_PADE13 = np.array(reference._PADE13)
_THETA13 = reference._THETA13
# (Numba's cache keys a function on its own file: after editing reference.pade13_uv, clear the
# cache, or the cached _expm_item keeps the former polynomial; as for the _linalg callees)
_pade13_uv = njit(**_JIT)(reference.pade13_uv)
_EXP_GRAM_TOL = reference.EXP_GRAM_TOL
_EXP_GRAM_SLACK = reference.EXP_GRAM_SLACK


@njit(**_JIT)
def _expm_item(a, out):
    """``out = expm(a)`` (m, m): the reference's scaling and squaring of the degree-13 Pade
    approximant, the solve by Gaussian elimination with partial pivoting; NaN for a non-finite
    ``a`` or a zero pivot."""
    m = a.shape[0]
    norm = 0.0
    for j in range(m):
        s = 0.0
        for i in range(m):
            s += abs(a[i, j])
        if s > norm or s != s:
            norm = s
    if not np.isfinite(norm):
        out[:] = np.nan
        return
    # (np.log2: the oldest Numba the package supports does not type math.log2)
    sq = int(math.ceil(np.log2(norm / _THETA13))) if norm > _THETA13 else 0
    b = _PADE13
    u, v = _pade13_uv(a * 0.5 ** sq, b, np.eye(m))
    q = v - u
    r = v + u
    col = np.empty(m)
    for j in range(m):                      # one column of the solve at a time
        lu = q.copy()
        for i in range(m):
            col[i] = r[i, j]
        if not lu_solve(lu, col, True, 0.0):
            out[:] = np.nan
            return
        for i in range(m):
            out[i, j] = col[i]
    for _ in range(sq):
        out[:] = out @ out


@njit(**_JIT)
def _exp_chunk(x, u, out, lo, hi):
    p = x.shape[2]
    a = np.empty((p, p))
    s = np.empty((p, p))
    block = np.empty((2 * p, 2 * p))
    e = np.empty((2 * p, 2 * p))
    f = np.empty((p, p))
    xx = np.empty((p, p))
    for i in range(lo, hi):
        cross(x[i], u[i], a)
        cross(u[i], u[i], s)
        for r in range(p):
            for c in range(p):
                block[r, c] = a[r, c]
                block[r, p + c] = -s[r, c]
                block[p + r, c] = 1.0 if r == c else 0.0
                block[p + r, p + c] = a[r, c]
        _expm_item(block, e)
        _expm_item(-a, f)
        m = np.ascontiguousarray(e[:, :p]) @ f
        ex = np.ascontiguousarray(m[:p])
        eu = np.ascontiguousarray(m[p:])
        out[i] = x[i] @ ex + u[i] @ eu
        cross(x[i], x[i], xx)
        gram = ex.T @ (xx @ ex + a @ eu) + eu.T @ (a.T @ ex + s @ eu)   # Y'Y, p x p factors
        off = 0.0
        own = 0.0
        for r in range(p):
            for c in range(p):
                dev = abs(gram[r, c] - (1.0 if r == c else 0.0))
                if not dev <= off:
                    off = dev
                dev = abs(xx[r, c] - (1.0 if r == c else 0.0))
                if not dev <= own:
                    own = dev
        if not off <= _EXP_GRAM_TOL + _EXP_GRAM_SLACK * own:   # lost accuracy (or NaN)
            out[i] = np.nan


# ---------------------------------------------------------------- serial / parallel drivers


@njit(**_JIT)
def _proj_serial(x, u, out):
    _proj_chunk(x, u, out, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _proj_parallel(x, u, out):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _proj_chunk(x, u, out, c * CHUNK, min(n_items, (c + 1) * CHUNK))


@njit(**_JIT)
def _polar_serial(x, u, out, retr):
    _polar_chunk(x, u, out, retr, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _polar_parallel(x, u, out, retr):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _polar_chunk(x, u, out, retr, c * CHUNK, min(n_items, (c + 1) * CHUNK))


@njit(**_JIT)
def _inv_polar_serial(x, y, out):
    _inv_polar_chunk(x, y, out, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _inv_polar_parallel(x, y, out):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _inv_polar_chunk(x, y, out, c * CHUNK, min(n_items, (c + 1) * CHUNK))


@njit(**_JIT)
def _retr_qr_serial(x, u, out):
    _retr_qr_chunk(x, u, out, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _retr_qr_parallel(x, u, out):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _retr_qr_chunk(x, u, out, c * CHUNK, min(n_items, (c + 1) * CHUNK))


@njit(**_JIT)
def _inv_qr_serial(x, y, out):
    _inv_qr_chunk(x, y, out, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _inv_qr_parallel(x, y, out):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _inv_qr_chunk(x, y, out, c * CHUNK, min(n_items, (c + 1) * CHUNK))


# ---------------------------------------------------------------- public kernels


def _work(x, factor):
    return factor * x.size * x.shape[-1]


def _tasks(x):
    """Tasks of the parallel drivers: chunks of ``CHUNK`` items."""
    return -(-x.shape[0] // CHUNK)


@njit(**_JIT)
def _exp_serial(x, u, out):
    _exp_chunk(x, u, out, 0, x.shape[0])


@njit(parallel=True, **_JIT)
def _exp_parallel(x, u, out):
    n_items = x.shape[0]
    for c in prange((n_items + CHUNK - 1) // CHUNK):
        _exp_chunk(x, u, out, c * CHUNK, min(n_items, (c + 1) * CHUNK))


def stiefel_exp(x, u):
    """Exponential map (Edelman's geodesic); x, u: (N, n, p)."""
    if x.shape != u.shape or x.ndim != 3:   # the items' matrix products need equal shapes
        raise ValueError(f"stiefel_exp: x and u must have the same shape (N, n, p), got "
                         f"{x.shape} and {u.shape}")
    out = np.empty_like(x)
    if x.size == 0:     # no item, or empty items: nothing to compute (BLAS refuses 0 x 0
        return out      # products, which the items' matrix products would make)
    run(_exp_serial, _exp_parallel, _work(x, 4), _tasks(x), x, u, out)
    return out


def stiefel_proj(x, u):
    """Tangent projection ``u - x sym(x'u)``; x, u: (N, n, p)."""
    out = np.empty_like(x)
    run(_proj_serial, _proj_parallel, _work(x, 4), _tasks(x), x, u, out)
    return out


def polar(a):
    """Polar factor ``a (a'a)^-½``; a: (N, n, p), n >= p; NaN for rank-deficient items."""
    out = np.empty_like(a)
    run(_polar_serial, _polar_parallel, _work(a, 5), _tasks(a), a, a, out, False)
    return out


def stiefel_retr_polar(x, u):
    """Polar retraction ``polar(x + u)``; (N, n, p)."""
    out = np.empty_like(x)
    run(_polar_serial, _polar_parallel, _work(x, 5), _tasks(x), x, u, out, True)
    return out


def stiefel_inv_retr_polar(x, y):
    """Inverse polar retraction ``y S - x``, ``(x'y) S + S (y'x) = 2I``; (N, n, p)."""
    out = np.empty_like(x)
    run(_inv_polar_serial, _inv_polar_parallel, _work(x, 4), _tasks(x), x, y, out)
    return out


def stiefel_retr_qr(x, u):
    """QR retraction ``qf(x + u)`` with a positive diagonal of R; (N, n, p)."""
    out = np.empty_like(x)
    run(_retr_qr_serial, _retr_qr_parallel, _work(x, 8), _tasks(x), x, u, out)
    return out


def stiefel_inv_retr_qr(x, y):
    """Inverse QR retraction ``y R - x``, R upper triangular, ``(x'y)R + R'(y'x) = 2I``."""
    out = np.empty_like(x)
    run(_inv_qr_serial, _inv_qr_parallel, _work(x, 4), _tasks(x), x, y, out)
    return out
