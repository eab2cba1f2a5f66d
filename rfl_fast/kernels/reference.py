"""Plain NumPy/SciPy reference kernels: the test oracle and the benchmark baseline.

Written for clarity, not speed: batched ``numpy.linalg`` where NumPy batches, a Python loop over
items where it does not (the Lyapunov and triangular systems). Arrays are ``(N, ...)`` float64
as described in ``rfl_fast.kernels``; items without an answer come back as NaN.
"""

import math

import numpy as np

__all__ = [
    "stiefel_proj", "stiefel_retr_polar", "stiefel_inv_retr_polar", "stiefel_retr_qr",
    "stiefel_inv_retr_qr", "polar", "stiefel_exp",
    "sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm", "spd_exp", "spd_log", "spd_dist",
    "sphere_exp", "sphere_log", "sphere_dist", "sphere_transport",
    "lorentz_exp", "lorentz_log", "lorentz_dist", "lorentz_transport",
]


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


# ---------------------------------------------------------------- Stiefel


def stiefel_proj(x, u):
    """Tangent projection ``u - x sym(x'u)``; x, u: (N, n, p)."""
    return u - x @ _sym(_t(x) @ u)


def polar(a):
    """Polar factor ``a (a'a)^(-1/2)`` via the thin SVD ``U V'``; a: (N, n, p), n >= p.

    NaN for rank-deficient items (the polar factor is then not unique).
    """
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    # singular values out of range (|a| near the float64 limits): the polar factor of a / 2^e
    # (exact scaling), max|a / 2^e| in [1, 2), is that of a
    far = ~((s[..., 0] >= 2.0**-500) & (s[..., 0] <= 2.0**500))
    if far.any():
        a = np.array(a)
        m = np.abs(a[far]).max(axis=(-2, -1))
        e = np.clip(np.frexp(m)[1] - 1, -1000, 1000)
        a[far] = np.ldexp(a[far], -e[:, None, None])
        u, s, vt = np.linalg.svd(a, full_matrices=False)
    q = u @ vt
    bad = s[..., -1] <= s[..., 0] * np.finfo(float).eps * a.shape[-2]
    q[bad] = np.nan
    return q


def stiefel_retr_polar(x, u):
    """Polar retraction ``polar(x + u)``; x, u: (N, n, p)."""
    return polar(x + u)


def stiefel_inv_retr_polar(x, y):
    """Inverse polar retraction ``y S - x`` with ``(x'y) S + S (y'x) = 2I``; (N, n, p).

    One ``scipy.linalg.solve_continuous_lyapunov`` per item; NaN where it has no solution, and
    where ``S`` is not positive definite (:func:`polar_spd`): then ``polar(x + u) = y
    polar(S) != y`` for the only candidate ``u``, no tangent vector retracts to ``y``.
    """
    from scipy.linalg import solve_continuous_lyapunov   # SciPy's import only where used

    m = _t(x) @ y
    p = x.shape[-1]
    s = np.empty_like(m)
    for k in range(m.shape[0]):
        if not _unique_lyapunov(m[k]):
            s[k] = np.nan
            continue
        try:
            s[k] = solve_continuous_lyapunov(m[k], 2.0 * np.eye(p))
        except (np.linalg.LinAlgError, ValueError):
            s[k] = np.nan
            continue
        if not polar_spd(s[k]):
            s[k] = np.nan
    return y @ s - x


#: A pivot of the Cholesky factorization of the polar inverse's ``S`` must exceed this times
#: ``S``'s largest diagonal entry (the same test in every backend).
SPD_PIVOT = 1e-12


def polar_spd(s):
    """Whether the symmetric ``s`` (p x p) is positive definite by the test every backend
    applies to the polar inverse's ``S``: its symmetric part's Cholesky pivots (Schur
    complements, no pivoting) all exceed :data:`SPD_PIVOT` times the largest diagonal entry,
    and every entry is finite. ``X + U = Y S`` has polar factor ``Y`` exactly when ``S`` is
    symmetric positive definite."""
    a = 0.5 * (s + s.T)
    if not np.isfinite(a).all():
        return False
    p = a.shape[0]
    tol = SPD_PIVOT * max(float(np.max(np.diag(a))), 0.0)
    a = np.array(a)
    for k in range(p):
        d = a[k, k]
        if not d > tol:
            return False
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:]) / d
    return True


def _unique_lyapunov(m):
    """``M S + S M' = C`` has a unique solution iff no two eigenvalues of M sum to zero."""
    lam = np.linalg.eigvals(m)
    sums = np.abs(lam[:, None] + lam[None, :])
    return sums.min() > 1e-12 * max(1.0, np.abs(lam).max())


#: Higham's (2005) degree-13 Pade coefficients and the 1-norm below which it needs no scaling.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def pade13_uv(x, b, eye):
    """The odd and even parts ``(u, v)`` of the degree-13 Pade approximant of ``exp`` at ``x``
    (one matrix or a stack), ``exp(x) ~ (v - u)^{-1} (v + u)``, with coefficients ``b``
    (:data:`_PADE13`) and ``eye`` the identity: Higham's (2005) six products. Also the Numba
    kernel's, compiled from this text."""
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2)
             + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 \
        + b[0] * eye
    return u, v


def expm_pade13(a):
    """Matrix exponentials of a stack ``a`` (..., n, n) of small matrices: scaling and squaring
    of the degree-13 Pade approximant (Higham 2005, the algorithm of ``scipy.linalg.expm`` at
    its largest degree), as matrix products over the whole stack instead of SciPy's item-by-item
    loop. Each item is scaled by its own power of two (from its own 1-norm), so an item's result
    does not depend on the other items of the stack."""
    b = _PADE13
    norm = np.max(np.sum(np.abs(a), axis=-2), axis=-1)              # 1-norm per item
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.maximum(0, np.ceil(np.log2(norm / _THETA13)))
    scale = np.where(np.isfinite(scale), scale, 0).astype(np.int64)
    out = np.empty(np.shape(a))
    eye = np.eye(a.shape[-1])
    for s in np.unique(scale):                                     # one pass per scaling
        sel = scale == s
        u, v = pade13_uv(a[sel] / 2.0 ** int(s), b, eye)
        with np.errstate(invalid="ignore"):
            r = _solve_or_nan(v - u, v + u)
        for _ in range(int(s)):
            r = r @ r
        out[sel] = r
    return out


def _solve_or_nan(a, b):
    """``solve(a, b)`` per item, NaN for an item whose ``a`` is singular or not finite."""
    ok = np.isfinite(a).all(axis=(-2, -1)) & np.isfinite(b).all(axis=(-2, -1))
    out = np.full(np.shape(b), np.nan)
    if ok.all():
        try:
            return np.linalg.solve(a, b)
        except np.linalg.LinAlgError:   # a singular item: item by item below
            pass
    for j in np.flatnonzero(ok):
        try:
            out[j] = np.linalg.solve(a[j], b[j])
        except np.linalg.LinAlgError:
            pass
    return out


#: Largest ``max |Y'Y - I|`` of an Exp answer beyond ``EXP_GRAM_SLACK`` times the point's own
#: ``max |X'X - I|``: beyond it (a step so long that the scaled and squared exponentials lost
#: their accuracy, |U| ~ 1e5 and more) the item is NaN. (A point off the manifold, as a finite
#: difference takes it, moves the answer off by about as much: the slack.)
EXP_GRAM_TOL = 1.5e-8
EXP_GRAM_SLACK = 10.0


def stiefel_exp(x, u):
    """Exponential map (Edelman's geodesic) ``[X U] expm([[A, -S], [I, A]]) [I; 0] expm(-A)``,
    ``A = X'U``, ``S = U'U``; x, u: (N, n, p). NaN for items with non-finite entries and for
    answers off the manifold by more than :data:`EXP_GRAM_TOL` (``Y'Y`` from ``A``, ``S``
    and the p x p factors) by more than ``EXP_GRAM_SLACK`` times the point's own ``X'X - I``."""
    p = x.shape[-1]
    if x.size == 0:
        return np.empty_like(x, dtype=np.float64)
    a = _t(x) @ u
    s = _t(u) @ u
    eye = np.broadcast_to(np.eye(p), a.shape)
    block = np.concatenate([np.concatenate([a, -s], -1), np.concatenate([eye, a], -1)], -2)
    e = expm_pade13(block)[..., :, :p] @ expm_pade13(-a)
    ex, eu = e[..., :p, :], e[..., p:, :]
    out = x @ ex + u @ eu                          # [X U] e, without forming [X U]
    xx = _t(x) @ x
    with np.errstate(invalid="ignore", over="ignore"):
        cm = xx @ ex + a @ eu                      # [[X'X, A], [A', S]] e, top and bottom
        gram = _t(ex) @ cm + _t(eu) @ (_t(a) @ ex + s @ eu)
        off = np.max(np.abs(gram - np.eye(p)), axis=(-2, -1))
        own = np.max(np.abs(xx - np.eye(p)), axis=(-2, -1))
    out[~(off <= EXP_GRAM_TOL + EXP_GRAM_SLACK * own)] = np.nan
    return out


def stiefel_retr_qr(x, u):
    """QR retraction ``qf(x + u)`` with a positive diagonal of R; (N, n, p)."""
    q, r = np.linalg.qr(x + u)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    d[d == 0] = 1.0
    return q * d[..., None, :]


def stiefel_inv_retr_qr(x, y):
    """Inverse QR retraction ``y R - x``, R upper triangular with ``(x'y)R + R'(y'x) = 2I``.

    Column j of R solves ``M[:j+1, :j+1] r = b`` with ``M = x'y``, ``b_i = -(M r_i)_j`` for
    i < j and ``b_j = 1`` (one triangular-system loop per item). NaN if a leading minor of
    ``M`` vanishes within the rounding of ``M`` (:func:`_qr_minor_vanishes`).
    """
    m = _t(x) @ y
    n_items, p, _ = m.shape
    gamma = _qr_minor_gamma(x.shape[-2])
    r = np.zeros_like(m)
    for k in range(n_items):
        mk = m[k]
        try:
            for j in range(p):
                b = np.empty(j + 1)
                b[:j] = -(mk[j, :] @ r[k, :, :j])
                b[j] = 1.0
                r[k, : j + 1, j] = np.linalg.solve(mk[: j + 1, : j + 1], b)
                if _qr_minor_vanishes(r[k, : j + 1, j], b, j, gamma):
                    raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            r[k] = np.nan
    return y @ r - x


def _qr_minor_gamma(n):
    """``gamma_n = n eps / (1 - n eps)``: each entry of ``M = x'y`` (columns of unit norm,
    length ``n``) is computed to within ``gamma_n`` (the standard bound for an inner product)."""
    eps = np.finfo(np.float64).eps
    return n * eps / (1.0 - n * eps)


def _qr_minor_vanishes(r, b, j, gamma):
    """Whether the solve ``M_j r = b`` of the QR inverse proves that the leading block
    ``M_j = M[:j+1, :j+1]`` is singular within the rounding of ``M``.

    ``|r| <= |M_j^-1| |b|``, so ``|r| (j+1) gamma >= |b|`` gives ``sigma_min(M_j) <= (j+1)
    gamma``: a perturbation of ``M_j`` no larger than its rounding error (each entry within
    ``gamma``, so at most ``(j+1) gamma`` in the 2-norm) makes it singular, and the inverse is
    not determined by the data. (``y`` = ``x`` with its columns reversed: ``M_0 = x_0'x_{p-1}``
    is rounding noise, ``|r| ~ 1e16``.) The same test in every backend. Overflow of the sums
    of squares (``|r| > ~1e154``) counts as vanishing.
    """
    with np.errstate(over="ignore"):
        return not (math.sqrt(float(r @ r)) * ((j + 1) * gamma) < math.sqrt(float(b @ b)))


# ---------------------------------------------------------------- symmetric matrix functions


def _sym_fun(s, f):
    w, v = np.linalg.eigh(s)
    return (v * f(w)[..., None, :]) @ _t(v)


def _log_pos(w):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), np.nan)


def sym_expm(s):
    """Matrix exponential of symmetric s: (N, n, n)."""
    return _sym_fun(s, np.exp)


def sym_logm(s):
    """Matrix logarithm of SPD s: (N, n, n); NaN items where s is not positive definite."""
    return _sym_fun(s, _log_pos)


def sym_sqrtm(s):
    """Square root of SPD s: (N, n, n); NaN where s is not positive definite."""
    return _sym_fun(s, lambda w: np.where(w > 0, np.sqrt(np.abs(w)), np.nan))


def sym_invsqrtm(s):
    """Inverse square root of SPD s: (N, n, n); NaN where s is not positive definite."""
    return _sym_fun(s, lambda w: np.where(w > 0, 1.0 / np.sqrt(np.abs(w)), np.nan))


def _halves(x):
    """``x^½`` and ``x^-½`` from one eigendecomposition."""
    w, v = np.linalg.eigh(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(w > 0, np.sqrt(np.abs(w)), np.nan)
        return (v * r[..., None, :]) @ _t(v), (v / r[..., None, :]) @ _t(v)


def spd_exp(x, u):
    """Affine-invariant Exp ``x^½ expm(x^-½ u x^-½) x^½``; (N, n, n)."""
    c, ci = _halves(x)
    return c @ sym_expm(_sym(ci @ u @ ci)) @ c


def spd_log(x, y):
    """Affine-invariant Log ``x^½ logm(x^-½ y x^-½) x^½``; (N, n, n)."""
    c, ci = _halves(x)
    return c @ sym_logm(_sym(ci @ y @ ci)) @ c


def spd_dist(x, y):
    """Affine-invariant distance ``|logm(x^-½ y x^-½)|_F``; (N, n, n) -> (N,)."""
    _, ci = _halves(x)
    w = np.linalg.eigvalsh(_sym(ci @ y @ ci))
    return np.sqrt(np.sum(_log_pos(w) ** 2, axis=-1))


# ---------------------------------------------------------------- sphere


def _dot(a, b):
    return np.sum(a * b, axis=-1, keepdims=True)


def sphere_exp(x, u):
    """``cos|u| x + sin|u| u/|u|``; (N, d)."""
    with np.errstate(over="ignore"):
        t = np.sqrt(_dot(u, u))
    big = np.isinf(t[:, 0])  # |u|^2 overflowed (|u| beyond ~1.3e154): m |u/m|, m = max|u_k|
    if big.any():
        m = np.abs(u[big]).max(axis=-1, keepdims=True)
        t[big] = m * np.linalg.norm(u[big] / m, axis=-1, keepdims=True)
    # sin(t)/t, not np.sinc(t/pi): for large t, pi (t/pi) != t, and sin would not match cos
    sinc = np.sin(t) / np.where(t > 0, t, 1.0)
    return np.cos(t) * x + np.where(t > 0, sinc, 1.0) * u


def sphere_log(x, y):
    """``theta v/|v|``, ``v = y - <x,y> x``, ``theta = atan2(|v|, <x,y>)``; (N, d).

    NaN at antipodal points, where the logarithm is not unique: where ``<x,y> < 0`` and ``|v|``
    is within the rounding of v, ``|v| <= 2 (d + 3) eps |<x,y>|`` (each entry of
    ``y - <x,y> x`` is off by eps |y_k| + 2 eps |<x,y> x_k| plus the error d eps of the dot
    product, so for unit vectors |v| carries (d + 3) eps of noise; 2x for the rounding of |v|
    itself). An exact test ``|v| > 0`` would refuse or answer depending on whether the CPU
    fused the multiply-adds. The same test in every backend.
    """
    d = x.shape[-1]
    c = _dot(x, y)
    v = y - c * x
    nv = np.sqrt(_dot(v, v))
    theta = np.arctan2(nv, c)
    antipodal = (c < 0) & (nv <= 2.0 * (d + 3) * np.finfo(np.float64).eps * -c)
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(nv > 0, theta / np.where(nv > 0, nv, 1.0), 1.0)
    return np.where(antipodal, np.nan, scale) * v


def sphere_dist(x, y):
    """Great-circle distance ``2 asin(|x - y|/2)``; (N, d) -> (N,)."""
    h = np.sqrt(np.sum((x - y) ** 2, axis=-1)) / 2.0
    return 2.0 * np.arcsin(np.minimum(h, 1.0))


def sphere_transport(x, y, v):
    """Parallel transport along the minimizing geodesic, ``v - <y,v>/(1+<x,y>) (x+y)``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return v - _dot(y, v) / (1.0 + _dot(x, y)) * (x + y)


# ---------------------------------------------------------------- Lorentz (hyperboloid)


def _ldot(a, b):
    return np.sum(a * b, axis=-1, keepdims=True) - 2.0 * a[..., :1] * b[..., :1]


#: ``lorentz_exp`` gives NaN where its rounding errors, ~ eps cosh|v| x0, exceed 1e8 eps z0.
LORENTZ_EXP_MAX_LOSS = 1e8


def lorentz_exp(x, v):
    """``cosh|v| x + sinh|v| v/|v|`` with the Minkowski norm of v; (N, d+1).

    Where ``|v|^2 = |v_r|^2 - v0^2`` (r: spatial part) loses more than 2 bits to cancellation,
    the tangent form ``(|v_r|^2 + |x_r|^2 |v_r - (v_r.e)e|^2) / x0^2`` (``e = x_r/|x_r|``) is
    used; where the result's ``z0`` cancels (``cosh|v| x0 > 16 z0``) it is ``sqrt(1 + |z_r|^2)``
    (on the hyperboloid), NaN where the result would have fewer than ~8 correct digits
    (``cosh|v| x0 > 1e8 z0``).
    """
    vv = np.sum(v[:, 1:] ** 2, axis=-1, keepdims=True)
    sq = vv - v[:, :1] ** 2
    bad = ~(vv <= 4.0 * sq)[:, 0]
    if bad.any():
        xr, vr = x[bad, 1:], v[bad, 1:]
        xx = np.sum(xr * xr, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            xv = np.sum(xr * vr, axis=-1, keepdims=True)
            c = np.where(xx > 0, xv / np.where(xx > 0, xx, 1.0), 0.0)
        q = vr - c * xr
        sq[bad] = (vv[bad] + xx * np.sum(q * q, axis=-1, keepdims=True)) / x[bad, :1] ** 2
    t = np.sqrt(np.maximum(sq, 0.0))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        shc = np.where(t > 0, np.sinh(t) / np.where(t > 0, t, 1.0), 1.0)
        ch = np.cosh(t)
        z = ch * x + shc * v
        loss = ch * np.abs(x[:, :1])
        fix = ~(loss <= 16.0 * z[:, :1])[:, 0]  # z0 cancelled (more than 4 bits), or NaN
        if fix.any():
            zr = z[fix, 1:]
            z0 = np.sqrt(1.0 + np.sum(zr**2, axis=-1, keepdims=True))
            big = np.isinf(z0[:, 0]) & np.isfinite(zr).all(-1)  # |z_r|^2 overflowed: scaled
            if big.any():
                m = np.abs(zr[big]).max(axis=-1, keepdims=True)
                z0[big] = m * np.sqrt(m**-2 + np.sum((zr[big] / m) ** 2, axis=-1, keepdims=True))
            z[fix, :1] = np.where(loss[fix] <= LORENTZ_EXP_MAX_LOSS * z0, z0, np.nan)
    return z


def lorentz_log(x, y):
    """``acosh(a) w / sqrt(a^2 - 1)`` with ``a = -<x,y>_L``, ``w = y - a x``; (N, d+1)."""
    a = np.maximum(-_ldot(x, y), 1.0)
    w = y - a * x
    s = np.sqrt((a - 1.0) * (a + 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(s > 0, np.arccosh(a) / np.where(s > 0, s, 1.0), 1.0)
    return scale * w


def lorentz_dist(x, y):
    """``acosh(-<x,y>_L)``; (N, d+1) -> (N,)."""
    return np.arccosh(np.maximum(-_ldot(x, y)[..., 0], 1.0))


def lorentz_transport(x, y, v):
    """Parallel transport along the geodesic, ``v + <y,v>_L/(1 - <x,y>_L) (x+y)``."""
    return v + _ldot(y, v) / (1.0 - _ldot(x, y)) * (x + y)
