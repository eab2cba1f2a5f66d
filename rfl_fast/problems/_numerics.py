"""Numerical helpers shared by the problems (private): sign conventions, accurate principal
angles, eigenvectors of a few extreme eigenvalues, and a centralized Riemannian solver."""

import numpy as np

__all__ = ["fix_column_signs", "extreme_eigh", "principal_angles", "riemannian_descent"]


def fix_column_signs(v):
    """Flip columns of ``v`` (d, r) so that each column's largest-magnitude entry (the first
    one on ties) is positive: a deterministic representative of ``+-v_k``."""
    v = np.array(v, dtype=np.float64)
    k = np.argmax(np.abs(v), axis=0)
    s = np.sign(v[k, np.arange(v.shape[1])])
    s[s == 0] = 1.0
    return v * s


def extreme_eigh(a, count, which):
    """``count`` eigenpairs of symmetric ``a`` (d, d) at one end of the spectrum.

    Returns
    -------
    w : ndarray, shape (count,)
        Eigenvalues, ``which="largest"``: descending, ``"smallest"``: ascending.
    v : ndarray, shape (d, count)
        Matching eigenvectors, signs fixed by ``fix_column_signs``.
    """
    from scipy.linalg import eigh   # SciPy's import only where used

    d = a.shape[0]
    a = 0.5 * (a + a.T)
    if which == "largest":
        w, v = eigh(a, subset_by_index=[d - count, d - 1])
        w, v = w[::-1], v[:, ::-1]
    else:
        w, v = eigh(a, subset_by_index=[0, count - 1])
    return w, fix_column_signs(v)


def principal_angles(x, y):
    """Principal angles between ``span(x)`` and ``span(y)`` (both (d, r) orthonormal),
    ascending, accurate for small angles too.

    ``arccos`` of the singular values of ``x'y`` loses every angle below ~1e-8; this uses
    Knyazev & Argentati's combination: cosines from ``svd(x'y)``, sines from
    ``svd(y - x x'y)``, angle ``arctan2(sin, cos)`` (cosines descending pair with sines
    ascending).
    """
    xty = x.T @ y
    cos = np.linalg.svd(xty, compute_uv=False)               # descending
    sin = np.linalg.svd(y - x @ xty, compute_uv=False)[::-1]  # ascending
    return np.arctan2(np.clip(sin, 0.0, 1.0), np.clip(cos, 0.0, 1.0))


def riemannian_descent(manifold, cost, grad, x0, *, tol=1e-12, max_iter=5000, norm=None):
    """Riemannian gradient descent with Barzilai-Borwein steps and a nonmonotone Armijo
    line search on the exponential map; for the problems without a closed-form optimum.

    Parameters
    ----------
    manifold : Manifold
        Must provide ``exp``, ``transport``, ``inner``, ``norm``.
    cost : callable x -> float
    grad : callable x -> tangent vector at x
    x0 : ndarray, shape (*shape)
    tol : float
        Stop when ``|grad f(x)|_x <= tol`` (or when the gradient norm stops decreasing over
        50 iterations, i.e. at the rounding floor).
    max_iter : int
    norm : callable (x, v) -> float, optional
        Tangent-vector norm (default ``manifold.norm``).

    Returns
    -------
    x : ndarray, shape (*shape)
    info : dict
        ``iterations``, ``grad_norm``.
    """
    M = manifold
    norm = norm or (lambda p, v: float(M.norm(p, v)))
    x = x0
    fx = cost(x)
    g = grad(x)
    gn = norm(x, g)
    step = 1.0 / max(gn, 1.0)
    history = [fx]
    best = (gn, x)
    stall = 0
    it = 0
    for it in range(1, max_iter + 1):
        if gn <= tol:
            break
        # nonmonotone Armijo (Zhang-Hager style reference: max over the last 10 costs)
        ref = max(history[-10:])
        t = step
        for _ in range(60):
            y = M.exp(x, -t * g)
            fy = cost(y)
            if fy <= ref - 1e-4 * t * gn * gn or t < 1e-20:
                break
            t *= 0.5
        gy = grad(y)
        s = M.transport(x, y, -t * g)
        yk = gy - M.transport(x, y, g)
        sy = float(M.inner(y, s, yk))
        ss = float(M.inner(y, s, s))
        step = ss / sy if sy > 0 else 10.0 * t
        step = min(max(step, 1e-12), 1e12)
        x, fx, g = y, fy, gy
        gn = norm(x, g)
        history.append(fx)
        if gn < best[0] * (1 - 1e-3):
            best, stall = (gn, x), 0
        else:
            stall += 1
            if stall >= 50:
                break
    if best[0] < gn:
        x, gn = best[1], best[0]
    return x, {"iterations": it, "grad_norm": gn}
