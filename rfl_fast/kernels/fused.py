"""Fused multi-client kernels of PCA-type losses over clients' rows (private).

The kernels of ``registry.FUSED``: not entries of ``KERNELS``, whose kernels map equal-shaped
items ``(N, *core)`` one to one, since these read clients of different sizes from one
contiguous row array through offsets (the layout of ``problems._clients.pack_clients``). The
same two-level design: a NumPy reference ``<name>_reference`` (the test oracle and benchmark
baseline) and compiled routes (``rfl_fast._core.<name>``, header ``cpp/include/rfl/pca.hpp``),
the route chosen by :func:`route` from the backend in force and the kernel's ``order``.
Callers hand clean arrays; nothing is validated here beyond what the compiled binding checks
cheaply.

For each selected client ``i = idx[j]`` with rows ``Z_i`` (m_i, d) and point ``X_j`` (d, r)::

    y    = Z_i X_j                                   (m_i, r)
    St_j = (Z_i' y)'                                  (r, d)   plain
    St_j = (sum_rows s (res/|res|) (y/|y|)')'         (r, d)   clipped
    q_j  = sum |y|^2                                  (= m_i tr(X' A_i X))

with, when clipped, ``s = min(|c| |res| |y|, tau)`` and ``|res|`` of the residual
``res = z - X y`` formed explicitly, with scaled (overflow-free) norms: ``|z|^2 - |y|^2`` cancels
for ``z`` almost in ``span(X)``. The compiled pass (compile-time ``r``, clients of at least
``r`` rows) takes ``|res|^2 = |z|^2 - |y|^2`` only where it keeps a quarter of ``|z|^2`` and the
squares are in range, and adds those rows in the plain pass's blocks as ``a y z' - a y y' X'``
(``a = s / (|res| |y|)``, ``|a y| |z| <= 2 s``); the other rows take the explicit residual. Either
way one row adds at most ``tau`` to ``S`` up to ``O((d + r) eps) tau`` in floating point, for
finite rows of any size. The kPCA / sphere-PCA gradient is ``-2c/m_i St_j'``
(Euclidean) and the DP clipped sum of ``g = -c res y'`` is ``-sign(c) S`` with ``S = St_j'``
(already tangent). A non-finite row gives a non-finite ``St_j``.
"""

import numpy as np

from . import _dispatch, reference
from ._dispatch import get_threads
from .registry import FUSED

__all__ = ["route", "pca_grad_sum", "pca_grad_sum_reference", "pca_local_steps",
           "pca_local_steps_reference", "sphere_local_steps", "sphere_local_steps_reference",
           "sphere_projection_local_steps", "sphere_projection_local_steps_reference",
           "SPHERE_STEPS", "TRANSPORT_MODES", "local_stepper", "compiled_available", "BLOCK_BYTES",
           "row_norms", "clipped_pca_rows", "clipped_pca_sum", "clipped_pca_sum_reference",
           "brockett_clipped_sum", "brockett_clipped_sum_reference"]

#: Rows of ``Z_i`` per block in the reference (about this many bytes stay in cache between the
#: two products, so the data is read from memory once).
BLOCK_BYTES = 2**18

#: The sphere's fused local steps (siblings of :func:`pca_local_steps`, by name): the retraction
#: mode of ``pca_local_steps`` each runs with (its loop and its compiled kernel, on the
#: sphere's points ``(d,)`` as ``(d, 1)`` matrices): ``"exp"``, Exp and Log; ``"polar"`` at
#: ``r = 1``, the projection retraction ``(x + u)/|x + u|`` and its inverse ``y/<x,y> - x``.
SPHERE_STEPS = {"sphere_local_steps": "exp", "sphere_projection_local_steps": "polar"}


def compiled_available(name="pca_grad_sum"):
    """Whether the C++ extension has fused kernel ``name`` (the sphere's local steps: that of
    ``pca_local_steps``, which runs them)."""
    mod = _dispatch.load("cpp")
    return mod is not None and hasattr(mod, "pca_local_steps" if name in SPHERE_STEPS else name)


def _provides(backend, name):
    """Whether ``backend`` has fused kernel ``name`` (the reference always does)."""
    if backend == "numpy":
        return True
    if backend == "cpp":
        return compiled_available(name)
    return backend == "numba" and name == "clipped_pca_sum" and _numba_clipped() is not None


def route(name, backend=None):
    """The backend fused kernel ``name`` (of ``registry.FUSED``) runs on, by one rule for all
    of them: ``backend`` (default: the choice in force, :func:`rfl_fast.backend`) where it has
    the kernel, else the first backend of the kernel's declared order (``FUSED[name].order``,
    the reference last) that has it; ``"auto"`` takes that order."""
    choice = _dispatch.get_backend() if backend is None else backend
    _dispatch.check_choice(choice, "backend")
    order = FUSED[name].order if choice == "auto" else (choice,) + FUSED[name].order
    return next(b for b in order if _provides(b, name))


def row_norms(a):
    """Euclidean norms of the rows of ``a`` (n, k) without overflow/underflow in the squares
    (scaled by each row's largest entry); NaN for a row holding inf or NaN."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return _row_norms(a)


def _row_norms(a):
    s = np.max(np.abs(a), axis=1) if a.shape[1] else np.zeros(a.shape[0])
    bad = ~np.isfinite(a).all(axis=1)
    safe = np.where((s > 0) & ~bad, s, 1.0)
    n = s * np.sqrt(np.einsum("ij,ij->i", a / safe[:, None], a / safe[:, None]))
    n[s == 0] = 0.0
    n[bad] = np.nan
    return n


def clipped_pca_rows(z, x, tau, c):
    """``(S, q)`` of a block of rows ``z`` (b, d) at ``x`` (d, r): the clipped sum
    ``S = sum_j min(|c| |res_j| |y_j|, tau) (res_j/|res_j|)(y_j/|y_j|)'`` (d, r) with
    ``y = z x``, ``res = z - y x'`` (module docstring), and ``q = sum |y|^2``."""
    y = z @ x
    res = z - y @ x.T
    ny, nr = row_norms(y), row_norms(res)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        s = np.minimum(abs(c) * nr * ny, tau)
        coef = np.where((nr > 0) & (ny > 0), s / np.where(nr > 0, nr, 1.0), 0.0)
        coef = np.where(np.isfinite(nr) & np.isfinite(ny), coef, np.nan)
        yu = y / np.where(ny > 0, ny, 1.0)[:, None]
        S = res.T @ (yu * coef[:, None])
    return S, float(np.vdot(y, y))


def pca_grad_sum_reference(Z, offsets, idx, Xt, tau=np.inf, c=1.0, clipped=False, scale=None):
    """NumPy reference of :func:`pca_grad_sum` (blocked BLAS, one pass over the data).

    Parameters
    ----------
    Z : ndarray, shape (M, d)
        All clients' rows.
    offsets : ndarray of int, shape (n + 1,)
        Client ``i`` owns rows ``offsets[i]:offsets[i + 1]``.
    idx : ndarray of int, shape (k,)
        Selected clients.
    Xt : ndarray, shape (k, r, d)
        The points ``X_j`` transposed.
    tau, c : float
        Clipping threshold (> 0, may be inf) and gradient scale; used when ``clipped``.
    clipped : bool
    scale : ndarray, shape (k,), optional
        Return the gradient form ``G[j] = scale[j] St[j]'`` (k, d, r) instead of ``St``.

    Returns
    -------
    St : ndarray, shape (k, r, d) (or G, shape (k, d, r), with ``scale``)
    q : ndarray, shape (k,)
    """
    k, r, d = Xt.shape
    St = np.zeros((k, r, d))
    q = np.zeros(k)
    step = max(16, BLOCK_BYTES // (8 * d))
    for j, i in enumerate(idx):
        z = Z[offsets[i]:offsets[i + 1]]
        x = Xt[j].T
        acc = np.zeros((d, r))
        for s in range(0, z.shape[0], step):
            zb = z[s:s + step]
            if clipped:
                S, qb = clipped_pca_rows(zb, x, tau, c)
                q[j] += qb
                acc += S
                continue
            y = zb @ x
            q[j] += np.vdot(y, y)
            acc += zb.T @ y
        St[j] = acc.T
    if scale is not None:
        G = np.swapaxes(St, -1, -2) * np.asarray(scale, dtype=np.float64)[:, None, None]
        return np.ascontiguousarray(G), q
    return St, q


def pca_grad_sum(Z, offsets, idx, Xt, tau=np.inf, c=1.0, clipped=False, scale=None, *,
                 points=False, threads=None, backend=None):
    """``(St, q)`` of :func:`pca_grad_sum_reference` by the fastest available route.

    ``points=True``: ``Xt`` holds the points ``X_j`` themselves, ``(k, d, r)``; the compiled
    kernel transposes each in the thread that takes its client (no transposed copy of the
    stack), the reference transposes them first. The same results.

    ``backend``: ``None`` follows ``rfl_fast.backend`` / ``RFL_FAST_BACKEND``; ``"numpy"`` runs
    the reference, anything else the C++ kernel when the extension has it (the reference
    otherwise; there is no Numba version of the multi-client pass). ``threads`` (default
    ``rfl_fast.get_threads()``) only changes the speed, never the result. Arrays must be
    C-contiguous float64 (``Z``, ``Xt``) and int64 (``offsets``, ``idx``) for the fast path.
    """
    if route("pca_grad_sum", backend) == "cpp":
        fn = _dispatch.load("cpp").pca_grad_sum
        return fn(Z, offsets, idx, Xt, float(tau), float(c), bool(clipped),
                  get_threads() if threads is None else int(threads), scale, bool(points))
    if points:      # (contiguous: the reference's products as for a transposed stack)
        Xt = np.ascontiguousarray(np.swapaxes(Xt, -1, -2))
    return pca_grad_sum_reference(Z, offsets, idx, Xt, tau, c, clipped, scale)


def _egrad(Z, offsets, idx, x, scale, h):
    """The Euclidean gradients of :func:`pca_local_steps_reference` at ``x`` (k, d, r): the rows
    form through :func:`pca_grad_sum_reference`, the matrices' form ``scale_j A_i X_j diag(h)``
    (``A_i`` the client's ``d`` rows)."""
    if h is None:
        xt = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        g, _ = pca_grad_sum_reference(Z, offsets, idx, xt, scale=scale)
        return g
    d = Z.shape[1]
    a = np.stack([Z[offsets[i]:offsets[i] + d] for i in idx]) if idx.size else \
        np.zeros((0, d, d))
    return scale[:, None, None] * (np.matmul(a, x) * h)


def _sphere_exp(x, u):
    """The sphere's Exp on ``(k, d, 1)`` points (:func:`reference.sphere_exp`)."""
    return reference.sphere_exp(x[..., 0], u[..., 0])[..., None]


def _sphere_log(x, y):
    """The sphere's Log on ``(k, d, 1)`` points (:func:`reference.sphere_log`)."""
    return reference.sphere_log(x[..., 0], y[..., 0])[..., None]


#: The transports of the offset (``pca_local_steps``' argument ``transport``) by the kernel
#: (``registry.Fused.transports``) a manifold declares for them (``Manifold.transport_kernels``):
#: beside the gradient's own projection ``P_x(egrad - offset)`` ("projection"), the sphere's
#: parallel transport of the offset from the anchor x_t ("parallel", retraction "exp" only).
TRANSPORT_MODES = {"sphere_transport": "parallel"}


#: Below this ``1 + <x, y>`` the sphere's parallel transport takes the logarithm's form (the
#: threshold of ``Sphere.transport``, as ``xp_routes``' and the compiled kernel's).
NEAR_ANTIPODAL = 1e-6


def _sphere_parallel_transport(x, y, v):
    """``Sphere.transport(x, y, v, "parallel")`` on (k, d) arrays from the kernels' NumPy
    forms: :func:`reference.sphere_transport` (``v - <y,v>/(1 + <x,y>) (x + y)``), or where
    ``1 + <x,y> < NEAR_ANTIPODAL`` the logarithm's form ``v + <e,v>((cos t - 1) e - sin t x)``
    (``e`` the unit direction of ``w = y - <x,y> x``, ``t = atan2(|w|, <x,y>)``; NaN at the
    antipode)."""
    out = reference.sphere_transport(x, y, v)
    c = np.add.reduce(x * y, axis=-1, keepdims=True)
    near = (1.0 + c[..., 0]) < NEAR_ANTIPODAL
    if near.any():
        xn, vn, cn = x[near], v[near], c[near]
        w = y[near] - cn * xn
        nw = np.sqrt(np.add.reduce(w * w, axis=-1, keepdims=True))
        t = np.arctan2(nw, cn)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.where(nw > 0, w / np.where(nw > 0, nw, 1.0), np.nan)
        out[near] = vn + np.add.reduce(e * vn, axis=-1, keepdims=True) * (
            (np.cos(t) - 1.0) * e - np.sin(t) * xn)
    return out


def _sphere_parallel_reference(Z, offsets, idx, x0, scale, eta, steps, offset, anchor, coef,
                               h, accumulate=False):
    """:func:`pca_local_steps_reference`'s ``transport="parallel"`` steps in the composed
    loop's order (``algorithms.svrg``), with the sphere's maps' NumPy kernels (those
    ``Sphere``'s methods call: :func:`reference.sphere_log`, :func:`_sphere_parallel_transport`,
    :func:`reference.sphere_exp`; the kernels layer imports no manifold):
    ``v = offset[j] - coef[j] Log_{x_t}(x)`` (``v = offset[j]`` without ``coef``),
    ``d = P_x(egrad) - PT_{x_t -> x}(v)``, ``x <- Exp_x(-eta d)``, ``x_t`` the anchor. (k, d, 1)
    arrays in and out; NaN where a Log or the transport has no answer (the antipode). With
    ``accumulate`` (no offset): RFedAGS's stream ``sum += PT_{x -> x_t}(d)`` of ``d =
    P_x(egrad)`` (from ``x0 = x_t`` the first transport is the identity to rounding),
    ``x <- Exp_x(-eta d)`` but after the last step: ``(x, sum)``."""
    x = np.array(x0[..., 0], dtype=np.float64)
    at = np.ascontiguousarray(np.broadcast_to(np.asarray(anchor, dtype=np.float64)[..., 0],
                                              x.shape))
    if accumulate:
        total = np.zeros_like(x)
        for step in range(steps):
            d = reference.stiefel_proj(x[..., None], _egrad(Z, offsets, idx, x[..., None],
                                                            scale, h))[..., 0]
            total += _sphere_parallel_transport(x, at, d)
            if step + 1 < steps:
                x = reference.sphere_exp(x, -eta * d)
        return x[..., None], total[..., None]
    off = np.asarray(offset, dtype=np.float64)[..., 0]
    for _ in range(steps):
        rg = reference.stiefel_proj(x[..., None], _egrad(Z, offsets, idx, x[..., None], scale,
                                                         h))[..., 0]
        v = off if coef is None else off - coef[:, None] * reference.sphere_log(at, x)
        d = rg - _sphere_parallel_transport(at, x, v)
        x = reference.sphere_exp(x, -eta * d)
    return x[..., None]


def _check_transport(transport, retraction, offset, anchor, mu, accumulate, ambient, coef):
    """Refuse a ``transport`` (``pca_local_steps``' argument) the steps cannot take, naming
    it, as the compiled binding does."""
    if transport not in ("projection", "parallel"):
        raise ValueError(f"pca_local_steps: transport must be 'projection' or 'parallel', "
                         f"got {transport!r}")
    if transport == "parallel" and retraction != "exp":
        raise ValueError(f"pca_local_steps: transport 'parallel' (the sphere's parallel "
                         f"transport of the offset) needs retraction 'exp' at r = 1, got "
                         f"retraction {retraction!r}")
    if transport == "parallel" and ((offset is None) == (not accumulate) or anchor is None
                                    or mu != 0.0 or ambient
                                    or (accumulate and coef is not None)):
        raise ValueError("pca_local_steps: transport 'parallel' needs the anchor x_t, mu = 0, "
                         "no ambient steps, and either an offset (tangent at x_t) or "
                         "accumulate (the stream transported to x_t, without coef), not both")


#: retraction mode -> (retraction, inverse retraction) of the local steps' reference
_RETRACTIONS = {"polar": (reference.stiefel_retr_polar, reference.stiefel_inv_retr_polar),
                "exp": (_sphere_exp, _sphere_log)}


def pca_local_steps_reference(Z, offsets, idx, x0, scale, eta, steps, offset=None,
                              anchor=None, mu=0.0, accumulate=False, ambient=False, drift=None,
                              coef=None, h=None, retraction="polar", transport="projection"):
    """NumPy reference of :func:`pca_local_steps`: from ``x0[j]``, ``steps`` times
    ``X <- polar(X - eta P_X(scale[j] Z_i' Z_i X))`` (``P_X`` the Stiefel tangent projection)
    for each selected client ``i = idx[j]``, through :func:`pca_grad_sum_reference` and the
    Stiefel references: the batched NumPy route's arithmetic. With ``offset``, every step is
    ``X <- polar(X - eta P_X(scale[j] Z_i' Z_i X - offset[j]))``; with ``anchor``, the direction
    also subtracts ``mu R_X^{-1}(anchor)`` (the inverse polar retraction); with ``accumulate``,
    the directions are summed as well (RFedAGS's gradient stream); with ``ambient``, RFedProj's
    steps ``zhat <- zhat - eta (P_X(...) + drift[j])``, ``X <- polar(zhat)`` from
    ``zhat = X = x0[j]``; with ``anchor`` and ``coef`` (``mu = 0``), RFedSVRG-2BB's direction
    ``P_X(scale[j] Z_i' Z_i X - offset[j] + coef[j] R_anchor^{-1}(X))``; with ``h``, the
    client's rows are its symmetric ``d x d`` matrix ``A_i`` and the Euclidean gradient is
    ``scale[j] A_i X diag(h)``.

    Parameters
    ----------
    Z, offsets, idx
        As :func:`pca_grad_sum_reference`.
    x0 : ndarray, shape (k, d, r)
        Starting points on Stiefel.
    scale : ndarray, shape (k,)
        Gradient scale per selected client (kPCA: ``-2c / m_i``).
    eta : float
        Step size.
    steps : int
        Number of steps (>= 0).
    offset : ndarray, shape (k, d, r), optional
        A constant per-client offset subtracted from every step's Euclidean gradient
        (RFedSVRG: ``grad f_i(x_t) - g_t``, whose projection transport to ``X`` is ``P_X`` of
        it); ``None``: none (RFedAvg's steps).
    anchor : ndarray, shape (d, r), optional
        RFedProx's server point ``x_t``: the direction is then
        ``P_X(...) - mu R_X^{-1}(anchor)``; ``None``: no proximal term.
    mu : float
        The proximal weight (with ``anchor``).
    accumulate : bool
        Also return the sum of each client's step directions (before ``-eta``); the last
        step's retraction (or projection) is then not taken.
    ambient : bool
        RFedProj's steps in the ambient space (no ``anchor``); the ambient iterates ``zhat``
        are returned in place of ``x``.
    drift : ndarray, shape (k, d, r), optional
        RFedProj's drift corrections (with ``ambient``).
    coef : ndarray, shape (k,), optional
        RFedSVRG-2BB's correction weights ``B - B_i`` (with ``anchor``, the round's server
        point, in place of ``mu``'s term).
    h : ndarray, shape (r,), optional
        The matrices' form (``QuadraticRows.h``); ``None``: the rows form.
    retraction : {"polar", "exp"}
        The retraction and its inverse: the polar pair, or (``r = 1``, the sphere's points as
        ``(d, 1)`` matrices) the sphere's Exp ``cos|u| x + sin|u| u/|u|`` and Log; the
        projection ``P_X`` and the ambient steps' nearest point (``x/|x|`` at ``r = 1``) are the
        same.
    transport : {"projection", "parallel"}
        How the offset reaches ``X``: ``P_X`` of it (the projection transport, above), or
        (retraction ``"exp"``, ``anchor`` the point ``x_t`` the offset is tangent at, ``mu = 0``)
        the sphere's parallel transport from ``x_t``: the direction
        ``P_x(scale[j] Z_i' Z_i x) - PT_{x_t -> x}(offset[j] - coef[j] Log_{x_t}(x))``
        (``coef`` optional), RFedSVRG's (and 2BB's) steps under the sphere's default transport,
        computed with the NumPy kernels of the sphere's maps (``Sphere.log``, ``transport``,
        ``exp``; NaN where they have no answer); with ``accumulate`` instead of an offset (no
        ``coef``), RFedAGS's stream: each direction transported to ``x_t``, then summed.

    Returns
    -------
    ndarray, shape (k, d, r)
        The last iterates (NaN where a polar factor or the inverse retraction does not exist);
        with ``accumulate``, ``(x, sum)``, ``x`` the last point whose gradient was taken.
    """
    retr, inv = _RETRACTIONS[retraction]
    if retraction == "exp" and np.shape(x0)[-1] != 1:
        raise ValueError(f"pca_local_steps: retraction 'exp' (the sphere's Exp and Log) needs "
                         f"r = 1, got x0 of shape {np.shape(x0)}")
    _check_transport(transport, retraction, offset, anchor, mu, accumulate, ambient, coef)
    if transport == "parallel":
        return _sphere_parallel_reference(Z, offsets, idx, x0, scale, eta, steps, offset,
                                          anchor, coef, h, accumulate)
    x = np.array(x0, dtype=np.float64)
    if anchor is None:
        total = np.zeros_like(x)
        zhat = x.copy() if ambient else None
        for step in range(steps):
            g = _egrad(Z, offsets, idx, x, scale, h)
            if offset is not None:
                g = g - offset
            d = reference.stiefel_proj(x, g)
            last = step + 1 == steps
            if accumulate:
                total += d
            if ambient:
                zhat += -eta * d if drift is None else -eta * d - eta * drift
                if not (accumulate and last):
                    x = reference.polar(zhat)
                continue
            if accumulate and last:
                break
            x = retr(x, -eta * d)
        out = zhat if ambient else x
        return (out, total) if accumulate else out
    if ambient:
        raise ValueError("pca_local_steps: ambient steps (RFedProj's) take no anchor")
    total = np.zeros_like(x)
    live = np.arange(idx.size)         # clients whose inverse retractions all had a solution
    for step in range(steps):
        xl = x[live]
        g = _egrad(Z, offsets, idx[live], xl, scale[live], h)
        if offset is not None:
            g = g - offset[live]
        at = np.broadcast_to(anchor, xl.shape)
        v = inv(xl, at) if coef is None else inv(at, xl)
        ok = np.isfinite(v).all(axis=(-2, -1))
        x[live[~ok]] = np.nan
        total[live[~ok]] = np.nan
        if coef is None:
            d = reference.stiefel_proj(xl[ok], g[ok]) - mu * v[ok]
        else:
            d = reference.stiefel_proj(xl[ok], g[ok] + coef[live[ok], None, None] * v[ok])
        live = live[ok]
        if accumulate:
            total[live] += d
            if step + 1 == steps:
                break
        x[live] = retr(xl[ok], -eta * d)
    return (x, total) if accumulate else x


def pca_local_steps(Z, offsets, idx, x0, scale, eta, steps, offset=None, anchor=None, mu=0.0,
                    accumulate=False, ambient=False, drift=None, coef=None, h=None,
                    retraction="polar", transport="projection", *, threads=None, backend=None):
    """The iterates of :func:`pca_local_steps_reference` by the route :func:`route` picks.

    The C++ kernel works client by client (each client's rows stay in cache over its steps)
    through the very functions of the batched C++ route, so its iterates are that route's bit
    for bit (without ``offset`` and ``anchor``); ``retraction="exp"`` (``r = 1``) steps with the
    sphere's Exp and Log in the same loop; ``transport="parallel"`` (with ``"exp"``) transports
    the offset in its own loop of the sphere's kernels (``rfl/sphere.hpp``). ``threads``: as :func:`pca_grad_sum`. Arrays
    must be C-contiguous float64 (``Z``, ``x0``, ``scale``, ``offset``, ``anchor``) and int64
    (``offsets``, ``idx``).
    """
    if route("pca_local_steps", backend) == "cpp":
        return _dispatch.load("cpp").pca_local_steps(
            Z, offsets, idx, x0, scale, float(eta), int(steps),
            get_threads() if threads is None else int(threads), offset, anchor, float(mu),
            bool(accumulate), bool(ambient), drift, coef, h, retraction, transport)
    return pca_local_steps_reference(Z, offsets, idx, x0, scale, eta, steps, offset, anchor,
                                     mu, accumulate, ambient, drift, coef, h, retraction,
                                     transport)


def _sphere_steps(name, fn, Z, offsets, idx, x0, scale, eta, steps, offset, anchor, mu,
                  accumulate, ambient, drift, coef, h, transport="projection", **route):
    """The sphere's local steps ``name`` (:data:`SPHERE_STEPS`) through ``fn``
    (:func:`pca_local_steps` or its reference): the one place where the sphere's points and
    vectors ``(k, d)`` (``anchor`` ``(d,)``) become the kernel's ``(k, d, 1)`` matrices and
    back (views, no copies)."""
    col = (lambda a: None if a is None else np.asarray(a, dtype=np.float64)[..., None])
    out = fn(Z, offsets, idx, col(x0), scale, eta, steps, col(offset), col(anchor), mu,
             accumulate, ambient, col(drift), coef, h, SPHERE_STEPS[name], transport, **route)
    return tuple(a[..., 0] for a in out) if accumulate else out[..., 0]


def sphere_local_steps_reference(Z, offsets, idx, x0, scale, eta, steps, offset=None,
                                 anchor=None, mu=0.0, accumulate=False, ambient=False,
                                 drift=None, coef=None, h=None, transport="projection"):
    """NumPy reference of :func:`sphere_local_steps`: :func:`pca_local_steps_reference`'s steps
    with the sphere's Exp and Log, on points ``x0`` ``(k, d)`` of ``S^(d-1)`` (``offset``,
    ``drift`` ``(k, d)``, ``anchor`` ``(d,)``; ``h`` ``(1,)``): from ``x0[j]``, ``steps`` times
    ``x <- Exp_x(-eta (P_x(scale[j] Z_i' Z_i x - offset[j]) - mu Log_x(anchor)))`` with
    ``P_x u = u - <x,u> x``, and the other terms as there (``coef``: the direction
    ``P_x(... + coef[j] Log_anchor(x))``; ``ambient``: ``x <- zhat/|zhat|``; ``transport=
    "parallel"``: the offset, tangent at ``anchor``, parallel-transported from it, the
    direction ``P_x(scale[j] Z_i' Z_i x) - PT_{anchor -> x}(offset[j] - coef[j]
    Log_anchor(x))``)."""
    return _sphere_steps("sphere_local_steps", pca_local_steps_reference, Z, offsets, idx, x0,
                         scale, eta, steps, offset, anchor, mu, accumulate, ambient, drift,
                         coef, h, transport)


def sphere_local_steps(Z, offsets, idx, x0, scale, eta, steps, offset=None, anchor=None,
                       mu=0.0, accumulate=False, ambient=False, drift=None, coef=None, h=None,
                       transport="projection", *, threads=None, backend=None):
    """The iterates of :func:`sphere_local_steps_reference` by :func:`pca_local_steps`'s route
    (its C++ loop with ``retraction="exp"``, or its reference)."""
    return _sphere_steps("sphere_local_steps", pca_local_steps, Z, offsets, idx, x0, scale,
                         eta, steps, offset, anchor, mu, accumulate, ambient, drift, coef, h,
                         transport, threads=threads, backend=backend)


def sphere_projection_local_steps_reference(Z, offsets, idx, x0, scale, eta, steps,
                                            offset=None, anchor=None, mu=0.0,
                                            accumulate=False, ambient=False, drift=None,
                                            coef=None, h=None):
    """NumPy reference of :func:`sphere_projection_local_steps`: as
    :func:`sphere_local_steps_reference` with the projection retraction
    ``(x + u)/|x + u|`` and its inverse ``y/<x,y> - x`` (the polar pair at ``r = 1``)."""
    return _sphere_steps("sphere_projection_local_steps", pca_local_steps_reference, Z,
                         offsets, idx, x0, scale, eta, steps, offset, anchor, mu, accumulate,
                         ambient, drift, coef, h)


def sphere_projection_local_steps(Z, offsets, idx, x0, scale, eta, steps, offset=None,
                                  anchor=None, mu=0.0, accumulate=False, ambient=False,
                                  drift=None, coef=None, h=None, *, threads=None, backend=None):
    """The iterates of :func:`sphere_projection_local_steps_reference` by
    :func:`pca_local_steps`'s route (its polar mode at ``r = 1``)."""
    return _sphere_steps("sphere_projection_local_steps", pca_local_steps, Z, offsets, idx, x0,
                         scale, eta, steps, offset, anchor, mu, accumulate, ambient, drift,
                         coef, h, threads=threads, backend=backend)


def local_stepper(rows, step_kernels, inverse=None, projection=None):
    """The fused kernel of ``registry.FUSED`` that fuses ``step_kernels`` (and the proximal
    term's ``inverse``), bound to the clients' rows, where one does: decided from the
    declarations alone, before any work.

    Parameters
    ----------
    rows : rfl_fast.problems.QuadraticRows or None
        The clients' rows (or matrices) and gradient scales (a problem's
        ``quadratic_rows()``).
    step_kernels : tuple of str or None
        The kernels of one step on the manifold: its Riemannian gradient's and its
        retraction's (``Manifold.step_kernels[method]``).
    inverse : str, optional
        The inverse retraction's kernel of a proximal term (``Manifold.inverse_kernels``);
        ``None``: the steps have none.
    projection : str, optional
        The nearest-point projection's kernel of ambient steps (``Manifold.project_kernel``);
        ``None``: the steps retract.

    Returns
    -------
    callable or None
        ``steps(idx, x, eta, n, offset=None, anchor=None, mu=0.0, accumulate=False,
        ambient=False, drift=None, coef=None)``: ``n`` full-gradient steps
        ``x <- R_x(-eta grad f_i(x))`` of the clients ``idx`` (k,) from the point ``x``
        ``(*shape)`` (or one point per client, ``(k, *shape)``), the last iterates
        ``(k, *shape)`` (Stiefel's polar steps: the bits of stepping through the two kernels;
        the sphere's Exp steps: to rounding; NaN items where a step has no answer); with
        ``offset`` ``(k, *shape)`` the steps
        ``x <- R_x(-eta P_x(egrad f_i(x) - offset_j))``, ``P_x`` the gradient's kernel (a
        projection, linear in its vector): RFedSVRG's steps where the transport is that
        projection; with ``anchor`` ``(*shape)`` (``inverse`` given) the direction also
        subtracts ``mu R_x^{-1}(anchor)``: RFedProx's steps (with ``coef`` (k,) instead, the
        direction is ``P_x(egrad f_i(x) - offset_j + coef_j R_anchor^{-1}(x))``: RFedSVRG-2BB's
        corrected steps); with ``transport`` a transport kernel the fused kernel declares
        (``registry.Fused.transports``, e.g. ``"sphere_transport"``) and ``anchor`` the point
        ``x_t`` the offset is tangent at, the offset is that transport's from ``x_t`` instead
        of ``P_x`` of it: ``x <- R_x(-eta (grad f_i(x) - T_{x_t -> x}(offset_j - coef_j
        R_{x_t}^{-1}(x))))`` (RFedSVRG's and 2BB's steps under the sphere's parallel transport;
        ``steps.transports`` lists the kernels it takes); with ``accumulate``, ``(x, sum)``,
        ``sum`` each client's directions summed over its steps (the last retraction not taken):
        RFedAGS's gradient stream before its transport (with ``transport`` and ``anchor`` x_t,
        no offset: each direction transported to ``x_t`` by that kernel, then summed); with ``ambient`` (``projection``
        given), RFedProj's steps ``zhat <- zhat - eta (grad f_i(x) + drift_j)``,
        ``x <- P_M(zhat)``, returning ``zhat``. ``None`` where no fused kernel fuses
        ``step_kernels`` (and ``inverse``, ``projection``) or ``rows`` is ``None``.
    """
    kernel = next((f.name for f in FUSED.values() if f.steps and f.steps == step_kernels
                   and (inverse is None or f.inverse == inverse)
                   and (projection is None or f.projection == projection)), None)
    if rows is None or kernel is None:
        return None
    fn = globals()[kernel]
    core = 1 if kernel in SPHERE_STEPS else 2     # the points' core ndim: (d,) or (d, r)

    def steps(idx, x, eta, n, offset=None, anchor=None, mu=0.0, accumulate=False,
              ambient=False, drift=None, coef=None, transport=None):
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        shape = np.shape(x)[-core:]
        x0 = np.ascontiguousarray(np.broadcast_to(x, (idx.size,) + shape), dtype=np.float64)
        if offset is not None:
            offset = np.ascontiguousarray(offset, dtype=np.float64)
        if anchor is not None:
            anchor = np.ascontiguousarray(anchor, dtype=np.float64)
        if drift is not None:
            drift = np.ascontiguousarray(drift, dtype=np.float64)
        if coef is not None:
            coef = np.ascontiguousarray(coef, dtype=np.float64)
        terms = {}
        if transport is not None:
            if transport not in FUSED[kernel].transports:
                raise ValueError(f"transport: {kernel} transports its offset by "
                                 f"{FUSED[kernel].transports or 'none'}, not {transport!r}")
            terms["transport"] = TRANSPORT_MODES[transport]
        return fn(rows.rows, rows.offsets, idx, x0, rows.scale[idx], eta, n, offset=offset,
                  anchor=anchor, mu=mu, accumulate=accumulate, ambient=ambient, drift=drift,
                  coef=coef, h=rows.h, **terms)

    steps.transports = FUSED[kernel].transports
    return steps


def _numba_clipped():
    """The Numba one-pass kernel's module, or ``None`` when Numba is missing."""
    try:
        from ._numba import clipped
    except ImportError:
        return None
    return clipped


def clipped_pca_sum(Z, Xt, tau, c, route):
    """``St`` (r, d) of the clipped one-pass sum of one client's rows ``Z`` (m, d) at ``Xt``
    (r, d) (module docstring) by ``route`` (:func:`route`). C-contiguous float64."""
    if route == "cpp":
        St, _ = pca_grad_sum(Z, np.array([0, Z.shape[0]], dtype=np.int64),
                             np.zeros(1, dtype=np.int64), Xt[None], tau, c, True, backend="cpp")
        return St[0]
    if route == "numba":
        return _numba_clipped().pca_clipped_sum_t(Z, Xt, tau, c)
    return clipped_pca_sum_reference(Z, Xt, tau, c)


def clipped_pca_sum_reference(Z, Xt, tau, c):
    """NumPy reference of :func:`clipped_pca_sum`: ``St`` (r, d)."""
    return pca_grad_sum_reference(Z, np.array([0, Z.shape[0]]), [0], Xt[None], tau, c,
                                  True)[0][0]


def brockett_clipped_sum(a, rows, x, h, tau, *, threads=None, backend=None):
    """Brockett's clipped per-sample gradient sums by the compiled one-pass kernel
    (``rfl/brockett.hpp``) where :func:`route` picks it: ``(out, trusted)``, ``out`` (k, d, p)
    the sums of :func:`brockett_clipped_sum_reference` and ``trusted`` whether every sample's
    norm came from ``|G|^2 - |sym(X'G)|^2`` within its trust rule (where not, ``out`` is not to
    be used: the caller's exact form answers). ``None`` where the route is the reference: the
    caller's NumPy form (``Brockett``'s blocked sums) runs then. ``a`` (M, d, d), ``rows`` (k, b)
    int64 sample indices, ``x`` (k, d, p), ``h`` (p,): C-contiguous; ``threads`` only changes
    the speed."""
    if route("brockett_clipped_sum", backend) != "cpp":
        return None
    return _dispatch.load("cpp").brockett_clipped_sum(
        a, rows, x, h, float(tau), get_threads() if threads is None else int(threads))


def brockett_clipped_sum_reference(a, rows, x, h, tau):
    """NumPy reference of :func:`brockett_clipped_sum` (the test oracle): for client ``j`` and
    each of its samples ``A`` (``a[rows[j]]``) the Riemannian gradient ``g = P_X(2 A X H)``
    (``X = x[j]``, ``H = diag(h)``), clipped to norm ``tau`` (``g min(1, tau/|g|)``), summed;
    ``(out, True)``."""
    g = np.matmul(a[rows], (x * (2.0 * h))[:, None])                  # (k, b, d, p)
    xb = x[:, None]
    s = np.matmul(np.swapaxes(xb, -1, -2), g)
    g = g - np.matmul(xb, 0.5 * (s + np.swapaxes(s, -1, -2)))
    norms = np.sqrt(np.einsum("kbij,kbij->kb", g, g))
    with np.errstate(divide="ignore"):
        factor = np.minimum(1.0, tau / norms)
    return np.einsum("kb,kbij->kij", factor, g), True
