"""Small dense linear algebra for the Numba kernels: cyclic Jacobi eigensolvers, one-sided
Jacobi SVD, LU solves, Gram matrices.

All functions work on one item (a small matrix) in caller-provided buffers and never allocate,
so the batch drivers can hand each thread its own workspace. ``error_model="numpy"`` keeps IEEE
semantics (x/0 gives inf/NaN instead of raising).
"""

import math

import numpy as np
from numba import njit

EPS = np.finfo(np.float64).eps
_JIT = dict(cache=True, error_model="numpy")
MAX_SWEEPS = 60


@njit(**_JIT)
def jacobi_eigh(a, w, v, vectors):
    """Eigen-decompose the symmetric matrix ``a`` (n, n) by cyclic Jacobi rotations.

    ``a`` is overwritten (both triangles are read and kept symmetric); eigenvalues go to ``w``
    (unsorted) and, if ``vectors``, the orthonormal eigenvectors to the columns of ``v``.
    A rotation is skipped when ``|a_pq| <= eps sqrt(|a_pp a_qq|)`` (the relative criterion that
    keeps tiny eigenvalues of positive definite matrices accurate) or when ``a_pq`` is below
    ``eps^2 |a|_F`` (termination for zero diagonals); the sweeps stop when one makes no rotation.
    """
    n = a.shape[0]
    if vectors:
        for i in range(n):
            for j in range(n):
                v[i, j] = 0.0
            v[i, i] = 1.0
    fro = 0.0
    for i in range(n):
        for j in range(n):
            fro += a[i, j] * a[i, j]
    floor = EPS * EPS * math.sqrt(fro)
    for _ in range(MAX_SWEEPS):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = a[p, q]
                app = a[p, p]
                aqq = a[q, q]
                if abs(apq) <= floor or abs(apq) <= EPS * math.sqrt(abs(app) * abs(aqq)):
                    a[p, q] = 0.0
                    a[q, p] = 0.0
                    continue
                rotated = True
                theta = (aqq - app) / (2.0 * apq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                a[p, p] = app - t * apq
                a[q, q] = aqq + t * apq
                a[p, q] = 0.0
                a[q, p] = 0.0
                for k in range(n):
                    if k != p and k != q:
                        akp = a[k, p]
                        akq = a[k, q]
                        nkp = c * akp - s * akq
                        nkq = s * akp + c * akq
                        a[k, p] = nkp
                        a[p, k] = nkp
                        a[k, q] = nkq
                        a[q, k] = nkq
                if vectors:
                    for k in range(n):
                        vkp = v[k, p]
                        vkq = v[k, q]
                        v[k, p] = c * vkp - s * vkq
                        v[k, q] = s * vkp + c * vkq
        if not rotated:
            break
    for i in range(n):
        w[i] = a[i, i]


@njit(**_JIT)
def svd_polar(b, v, out):
    """Polar factor of ``b`` (n, p), n >= p, by one-sided (Hestenes) Jacobi; accurate for any
    condition number. ``b`` is overwritten, ``v`` (p, p) is workspace. Writes NaN into ``out``
    when ``b`` is rank deficient by the reference's rule ``s_min <= s_max eps n``.
    """
    n, p = b.shape
    for i in range(p):
        for j in range(p):
            v[i, j] = 0.0
        v[i, i] = 1.0
    for _ in range(MAX_SWEEPS):
        rotated = False
        for i in range(p - 1):
            for j in range(i + 1, p):
                alpha = 0.0
                beta = 0.0
                gamma = 0.0
                for k in range(n):
                    bi = b[k, i]
                    bj = b[k, j]
                    alpha += bi * bi
                    beta += bj * bj
                    gamma += bi * bj
                if gamma == 0.0 or abs(gamma) <= EPS * math.sqrt(alpha * beta):
                    continue
                rotated = True
                zeta = (beta - alpha) / (2.0 * gamma)
                if abs(zeta) > 1e150:
                    t = 0.5 / zeta
                else:
                    t = 1.0 / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                    if zeta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = c * t
                for k in range(n):
                    bi = b[k, i]
                    bj = b[k, j]
                    b[k, i] = c * bi - s * bj
                    b[k, j] = s * bi + c * bj
                for k in range(p):
                    vi = v[k, i]
                    vj = v[k, j]
                    v[k, i] = c * vi - s * vj
                    v[k, j] = s * vi + c * vj
        if not rotated:
            break
    smax = 0.0
    smin = np.inf
    for j in range(p):
        nrm = 0.0
        for k in range(n):
            nrm += b[k, j] * b[k, j]
        nrm = math.sqrt(nrm)
        smax = max(smax, nrm)
        smin = min(smin, nrm)
        for k in range(n):
            b[k, j] /= nrm
    if not (smin > smax * EPS * n):
        out[:, :] = np.nan
        return
    # out = U V' with U = b (columns normalized)
    for k in range(n):
        for j in range(p):
            acc = 0.0
            for l in range(p):
                acc += b[k, l] * v[j, l]
            out[k, j] = acc


@njit(**_JIT)
def gram(a, g):
    """``g = a'a`` for ``a`` (n, p); both triangles filled (dot products kept in registers)."""
    n, p = a.shape
    for i in range(p):
        for j in range(i, p):
            acc = 0.0
            for k in range(n):
                acc += a[k, i] * a[k, j]
            g[i, j] = acc
            g[j, i] = acc


@njit(**_JIT)
def cross(a, b, m):
    """``m = a'b`` for ``a``, ``b`` (n, p)."""
    n, p = a.shape
    for i in range(p):
        for j in range(p):
            acc = 0.0
            for k in range(n):
                acc += a[k, i] * b[k, j]
            m[i, j] = acc


@njit(**_JIT)
def lu_solve(a, b, exact_only, rtol):
    """Solve ``a x = b`` in place (``a`` (m, m) destroyed, ``x`` left in ``b``) by Gaussian
    elimination with partial pivoting. Returns False if a pivot is exactly zero or, unless
    ``exact_only``, below ``rtol * max|a|``.
    """
    m = a.shape[0]
    amax = 0.0
    for i in range(m):
        for j in range(m):
            amax = max(amax, abs(a[i, j]))
    tol = 0.0 if exact_only else rtol * amax
    for k in range(m):
        piv = k
        big = abs(a[k, k])
        for i in range(k + 1, m):
            if abs(a[i, k]) > big:
                big = abs(a[i, k])
                piv = i
        if not (big > tol) or big == 0.0:
            return False
        if piv != k:
            for j in range(m):
                tmp = a[k, j]
                a[k, j] = a[piv, j]
                a[piv, j] = tmp
            tmp = b[k]
            b[k] = b[piv]
            b[piv] = tmp
        inv = 1.0 / a[k, k]
        for i in range(k + 1, m):
            f = a[i, k] * inv
            if f != 0.0:
                for j in range(k + 1, m):
                    a[i, j] -= f * a[k, j]
                b[i] -= f * b[k]
    for k in range(m - 1, -1, -1):
        acc = b[k]
        for j in range(k + 1, m):
            acc -= a[k, j] * b[j]
        b[k] = acc / a[k, k]
    return True


@njit(**_JIT)
def congruence(v, f, t, out):
    """``out = v diag(f) v'`` (symmetric by construction); ``t`` is workspace."""
    n = v.shape[0]
    for i in range(n):
        for k in range(n):
            t[i, k] = v[i, k] * f[k]
    for i in range(n):
        for j in range(i, n):
            acc = 0.0
            for k in range(n):
                acc += t[i, k] * v[j, k]
            out[i, j] = acc
            out[j, i] = acc


# ---------------------------------------------------------------- lane-batched (SIMD) versions
# LANES matrices are processed in lockstep, stored as (n, n, LANES) with the lane axis last and
# contiguous, so every inner loop runs over lanes and compiles to vector instructions. All lanes
# follow the same cyclic rotation order; a lane that needs no rotation gets the identity
# (c, s) = (1, 0), so its numbers are exactly those of the scalar algorithm.

LANES = 16  # default lane count; the kernels take it from their buffers


@njit(**_JIT)
def jacobi_eigh_lanes(a, w, v, vectors, c, s, t):
    """Cyclic Jacobi on LANES symmetric matrices ``a`` (n, n, LANES) at once (same thresholds
    as ``jacobi_eigh``); eigenvalues to ``w`` (n, LANES), eigenvectors to ``v`` (n, n, LANES).
    ``c``, ``s``, ``t`` are (LANES,) workspace. Lanes must hold finite numbers.

    Any scale: each lane works on its matrix times the power of two that brings its largest
    entry into [0.5, 1) and its eigenvalues are scaled back (exact), so a matrix near 1e200 or
    1e-200, whose squares leave the range, gets the answer of the same matrix at scale 1,
    scaled (as the C++ solvers, rfl/linalg_small.hpp ``unit_exponent``, and LAPACK)."""
    nl = c.shape[0]
    n = a.shape[0]
    up = np.empty(nl)
    for l in range(nl):
        amax = 0.0
        for i in range(n):
            for j in range(n):
                amax = max(amax, abs(a[i, j, l]))
        e = max(-1000, min(1000, math.frexp(amax)[1])) if amax > 0.0 else 0
        down = math.ldexp(1.0, -e)
        up[l] = math.ldexp(1.0, e)
        for i in range(n):
            for j in range(n):
                a[i, j, l] *= down
    if vectors:
        for i in range(n):
            for j in range(n):
                for l in range(nl):
                    v[i, j, l] = 1.0 if i == j else 0.0
    floor = np.empty(nl)
    for l in range(nl):
        floor[l] = 0.0
    for i in range(n):
        for j in range(n):
            for l in range(nl):
                floor[l] += a[i, j, l] * a[i, j, l]
    for l in range(nl):
        floor[l] = EPS * EPS * math.sqrt(floor[l])
    for _ in range(MAX_SWEEPS):
        rotations = 0
        for p in range(n - 1):
            for q in range(p + 1, n):
                active = 0
                for l in range(nl):
                    apq = a[p, q, l]
                    app = a[p, p, l]
                    aqq = a[q, q, l]
                    skip = (abs(apq) <= floor[l]) | (abs(apq) <= EPS * math.sqrt(abs(app * aqq)))
                    theta = (aqq - app) / (2.0 * apq)
                    tt = math.copysign(1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0)), theta)
                    cc = 1.0 / math.sqrt(tt * tt + 1.0)
                    # select, never multiply: theta is NaN in skipped lanes with a_pq = 0
                    tt = 0.0 if skip else tt
                    t[l] = tt
                    c[l] = 1.0 if skip else cc
                    s[l] = 0.0 if skip else tt * cc
                    active += 0 if skip else 1
                    a[p, p, l] = app - tt * apq
                    a[q, q, l] = aqq + tt * apq
                    a[p, q, l] = 0.0
                    a[q, p, l] = 0.0
                if active == 0:
                    continue
                rotations += active
                for k in range(n):
                    if k != p and k != q:
                        for l in range(nl):
                            akp = a[k, p, l]
                            akq = a[k, q, l]
                            nkp = c[l] * akp - s[l] * akq
                            nkq = s[l] * akp + c[l] * akq
                            a[k, p, l] = nkp
                            a[p, k, l] = nkp
                            a[k, q, l] = nkq
                            a[q, k, l] = nkq
                if vectors:
                    for k in range(n):
                        for l in range(nl):
                            vkp = v[k, p, l]
                            vkq = v[k, q, l]
                            v[k, p, l] = c[l] * vkp - s[l] * vkq
                            v[k, q, l] = s[l] * vkp + c[l] * vkq
        if rotations == 0:
            break
    for i in range(n):
        for l in range(nl):
            w[i, l] = a[i, i, l] * up[l]


@njit(**_JIT)
def congruence_lanes(v, f, t, out):
    """``out[..., l] = v[..., l] diag(f[:, l]) v[..., l]'`` for every lane; ``t`` workspace."""
    nl = t.shape[2]
    n = v.shape[0]
    for i in range(n):
        for k in range(n):
            for l in range(nl):
                t[i, k, l] = v[i, k, l] * f[k, l]
    for i in range(n):
        for j in range(i, n):
            for l in range(nl):
                out[i, j, l] = 0.0
            for k in range(n):
                for l in range(nl):
                    out[i, j, l] += t[i, k, l] * v[j, k, l]
            if j != i:
                for l in range(nl):
                    out[j, i, l] = out[i, j, l]
