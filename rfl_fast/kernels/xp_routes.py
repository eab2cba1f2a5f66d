"""Array-namespace routes of the primitives: the differentiable floor (issue 41).

The compiled kernels and the NumPy code compute on NumPy arrays, so a gradient cannot flow
through them. When an argument of a manifold method carries a gradient (a PyTorch tensor with
``requires_grad`` or inside ``torch.func``, a JAX tracer under ``grad``/``jit``/``vmap``), the
array seam (:mod:`rfl_fast.kernels.arrays`) runs the method's route here instead: the same
formulas, written once against the caller's array-API namespace (``xp.matmul``,
``xp.linalg.eigh``, ``xp.linalg.qr``, ``xp.sqrt``, ...; no NumPy), so that torch autograd and
JAX ``grad``/``jit``/``vmap`` trace through them. A manifold declares its routes in
``array_routes`` (method name -> a key of :data:`ROUTES`); a method without one refuses
gradient-carrying arrays, naming the argument. The functions of ``rfl_fast.linalg`` have theirs
(``linalg_<name>``: the matrix functions of a symmetric matrix, the polar factor).

The routes mirror the NumPy code of ``rfl_fast.manifolds`` and ``rfl_fast.kernels.reference``:
the same metric, retraction and transport names, sign fixes, shapes and broadcasting over
leading axes, and the same values to rounding (float64). They compute in the arguments' own
dtype (float32 in: float32 arithmetic). What they leave out, since a traced array cannot be
inspected: the finiteness check of the inputs, on-manifold validation (``validate=True``), the
rescaling of inputs near the float64 limits, and ``NoSolutionError``: an item without an answer
(a rank-deficient polar or QR factor, an SPD argument that is not positive definite, antipodal
points of the sphere) comes back as NaN instead. The ``backend`` option is accepted and ignored.

Autodiff traps, handled:

* square roots and ``acos``-type functions at 0 or at the end of their domain (``exp`` at a zero
  tangent, ``log``/``dist`` of equal points) sit behind double ``where`` guards (the masked
  branch sees a safe input, so no ``inf * 0`` reaches the gradient); at equal points ``dist``
  has gradient 0 (a subgradient: the distance is not differentiable there);
* symmetric matrix functions (``f(S) = V f(W) V'``: the polar retraction's ``(A'A)^(-1/2)``,
  SPD's square roots, ``expm``, ``logm``) take their eigenvectors from one ``eigh`` of the
  detached matrix and their first derivative from the Daleckii-Krein formula
  ``V (F o (V' dS V)) V'``, ``F_ij`` the divided differences of ``f`` (its derivative where two
  eigenvalues meet): finite and exact for repeated eigenvalues (the identity Gram matrix of the
  polar retraction at a zero step, ``dist(x, x)`` on SPD), where the derivative of ``eigh``
  itself divides by zero. Only first derivatives are exact through these: a second derivative
  (a Hessian-vector product) misses the eigenvectors' own derivative;
* no SVD: its derivative divides by the gaps between singular values and, at a zero step, by
  the singular values themselves. Grassmann's maps are functions of the p x p matrices
  ``U'U`` (``exp``) and ``Z'Z`` (``Z = (I - XX') Y (X'Y)^-1``: ``log``, ``dist``, the
  parallel transport) computed as above, with Taylor series of the eigenvalue functions near 0;
  polar factors come from the ``eigh`` of the Gram matrix. Stiefel's inverse polar retraction
  solves its Lyapunov equation as one p^2 x p^2 linear system (p is small).

One map uses a namespace's own function beyond the array API: Stiefel's ``exp`` (and its
``"exp"`` retraction) takes the exponential of a general 2p x 2p matrix from
``torch.linalg.matrix_exp`` or ``jax.scipy.linalg.expm`` (both differentiable).
"""

import math
import sys

from .arrays import NoRoute, is_foreign

__all__ = ["ROUTES", "detach"]


def detach(a):
    """``a`` without its gradient (torch ``detach``, JAX ``stop_gradient``); other arrays as
    they are.

    Parameters
    ----------
    a : array
        An array of any namespace.

    Returns
    -------
    array
        The same values, cut from the autodiff graph.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return a.detach()
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(a, (jax.Array, jax.core.Tracer)):
        return jax.lax.stop_gradient(a)
    return a


# ---------------------------------------------------------------- arguments


def _inputs(caller, M, **named):
    """The arrays ``named`` in the caller's namespace, one floating dtype (their promotion;
    integers alone: float64), their core shapes checked against ``M.shape``."""
    import numpy as np  # only to read native (NumPy, list, number) arguments

    from .._validation import check_core_shape

    xp = caller.xp
    arrays = {}
    for name, a in named.items():
        if not is_foreign(a):
            a = np.asarray(a)
            if a.dtype.kind not in "fiu":
                raise TypeError(f"{name}: expected a float or integer array, got dtype "
                                f"{a.dtype}")
            a = xp.asarray(a, device=caller.device)
        elif not (xp.isdtype(a.dtype, "real floating") or xp.isdtype(a.dtype, "integral")):
            raise TypeError(f"{name}: expected a float or integer array, got dtype {a.dtype}")
        check_core_shape(a, name, M.shape)
        arrays[name] = a
    floats = [a.dtype for a in arrays.values() if xp.isdtype(a.dtype, "real floating")]
    dt = xp.result_type(*floats) if floats else xp.float64
    return xp, dt, [a if a.dtype == dt else xp.astype(a, dt) for a in arrays.values()]


def _eps(xp, dt):
    return float(xp.finfo(dt).eps)


def _t(xp, a):
    return xp.matrix_transpose(a)


def _sym(xp, a):
    return 0.5 * (a + _t(xp, a))


def _dot(xp, a, b):
    return xp.sum(a * b, axis=-1, keepdims=True)


def _sqrt0(xp, s):
    """``sqrt(s)`` for ``s >= 0`` with gradient 0 (not inf) at ``s = 0``."""
    pos = s > 0
    return xp.where(pos, xp.sqrt(xp.where(pos, s, 1.0)), 0.0)


def _sum_core(xp, a, k):
    return xp.sum(a, axis=tuple(range(-k, 0)))


# ---------------------------------------------------------------- routes of one shape
# The seam calls a route with every positional parameter of the method (an option too) and the
# keyword-only options by keyword; these make the routes that only read their arrays and apply
# one formula, or check an option and defer to another route.


def _plain(core, arrays, with_dtype=False):
    """The route ``core(xp, *arrays)`` (``core(xp, *arrays, dtype)``) of the checked arrays named
    ``arrays``."""
    k = len(arrays)

    def route(c, M, *args, backend=None):
        xp, dt, a = _inputs(c, M, **dict(zip(arrays, args[:k])))
        return core(xp, *a, dt) if with_dtype else core(xp, *a)

    return route


def _one_option(route, options):
    """``route`` of a method whose option (the positional parameter after its two arrays) has
    one value: the option checked (``Manifold._option``), then ``route`` of the arrays."""
    kind = _KINDS[options]

    def checked(c, M, x, a, method=None, *, backend=None):
        M._option(method, getattr(M, options), kind)
        return route(c, M, x, a)

    return checked


#: The options' kinds, for ``Manifold._option``'s and ``Product._methods``' messages
_KINDS = {"retractions": "retraction", "inverse_retractions": "inverse retraction",
          "transports": "transport"}


# ---------------------------------------------------------------- symmetric matrix functions


def _spectral(xp, s, funs):
    """``([f(s) for f in funs], w)`` for symmetric ``s`` (..., n, n): ``V f(W) V'`` from one
    ``eigh`` of the detached ``s``, with the Daleckii-Krein first derivative.

    ``funs`` holds ``(f, fprime)`` pairs of elementwise functions of the eigenvalues. The value
    is exactly ``V f(W) V'``; ``V (F o (V' (s - detach(s)) V)) V'`` adds zero to it and carries
    the derivative, ``F_ij = (f(w_i) - f(w_j)) / (w_i - w_j)``, ``(f'(w_i) + f'(w_j)) / 2``
    where ``|w_i - w_j| <= eps^(1/3) max|w|`` (there the divided difference cancels and the
    mean derivative is as accurate).
    """
    s0 = detach(s)
    w, v = xp.linalg.eigh(s0)
    vt = _t(xp, v)
    ds = vt @ (s - s0) @ v
    wi, wj = w[..., :, None], w[..., None, :]
    gap = wi - wj
    scale = xp.max(xp.abs(w), axis=-1, keepdims=True)[..., None]
    close = xp.abs(gap) <= _eps(xp, w.dtype) ** (1.0 / 3.0) * scale
    safe = xp.where(close, 1.0, gap)
    out = []
    for f, fp in funs:
        fw, d = f(w), fp(w)
        dd = xp.where(close, 0.5 * (d[..., :, None] + d[..., None, :]),
                      (fw[..., :, None] - fw[..., None, :]) / safe)
        out.append((v * fw[..., None, :]) @ vt + v @ (dd * ds) @ vt)
    return out, w


def _eigvals(xp, s):
    """Ascending eigenvalues of symmetric ``s`` with derivative ``v_i' ds v_i`` (a spectral
    function's gradient ``V g'(W) V'`` results, finite for repeated eigenvalues)."""
    s0 = detach(s)
    w, v = xp.linalg.eigh(s0)
    return w + xp.sum(v * ((s - s0) @ v), axis=-2)


def _pos(xp, f):
    """``f`` on positive eigenvalues, NaN elsewhere (eigenvalues are detached: no trap)."""
    return lambda w: xp.where(w > 0, f(xp.where(w > 0, w, 1.0)), math.nan)


def _sqrt_pair(xp):
    return (_pos(xp, xp.sqrt), _pos(xp, lambda w: 0.5 / xp.sqrt(w)))


def _invsqrt_pair(xp):
    return (_pos(xp, lambda w: 1.0 / xp.sqrt(w)), _pos(xp, lambda w: -0.5 / (w * xp.sqrt(w))))


# ---------------------------------------------------------------- Manifold's own methods
# The generic methods of ``Manifold`` (the embedded metric, ``egrad2rgrad`` as ``proj``): a
# subclass that inherits them computes them on its NumPy route, and these routes compute the
# same in the caller's namespace; ``norm`` and ``egrad2rgrad`` call the subclass's ``inner``
# and ``proj`` with the caller's arrays, so they take those methods' routes (or their refusal).


def _manifold_inner(c, M, x, u, v):
    xp, dt, (x, u, v) = _inputs(c, M, x=x, u=u, v=v)
    return _sum_core(xp, u * v, M.core_ndim)


def _manifold_norm(c, M, x, u):
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    return _sqrt0(xp, M.inner(x, u, u))


def _manifold_egrad2rgrad(c, M, x, g):
    xp, dt, (x, g) = _inputs(c, M, x=x, g=g)
    return M.proj(x, g)


def _manifold_zero_vector(c, M, x):
    xp, dt, (x,) = _inputs(c, M, x=x)
    return xp.zeros_like(x)


# ---------------------------------------------------------------- Euclidean


def _euclidean_proj(c, M, x, u):
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    return u


def _euclidean_exp(c, M, x, u, *, backend=None):
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    return x + u


_euclidean_retr = _one_option(_euclidean_exp, "retractions")


def _euclidean_log(c, M, x, y, *, backend=None):
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    return y - x


_euclidean_inv_retr = _one_option(_euclidean_log, "inverse_retractions")


def _euclidean_dist(c, M, x, y):
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    return _sqrt0(xp, _sum_core(xp, (y - x) ** 2, M.core_ndim))


def _euclidean_transport(c, M, x, y, v, method=None, *, backend=None):
    M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    return v


# ---------------------------------------------------------------- Sphere

#: ``Sphere.transport``: below this ``1 + <x, y>`` the transport is computed from the log
_NEAR_ANTIPODAL = 1e-6


def _sphere_proj_xp(xp, x, u):
    return u - _dot(xp, x, u) * x


def _sphere_exp_xp(xp, x, u):
    t2 = _dot(xp, u, u)
    pos = t2 > 0
    t = xp.sqrt(xp.where(pos, t2, 1.0))
    return (xp.where(pos, xp.cos(t), 1.0) * x + xp.where(pos, xp.sin(t) / t, 1.0) * u)


def _sphere_log_xp(xp, x, y, dt):
    d = x.shape[-1]
    c = _dot(xp, x, y)
    v = y - c * x
    nv2 = _dot(xp, v, v)
    pos = nv2 > 0
    nv = xp.sqrt(xp.where(pos, nv2, 1.0))
    scale = xp.where(pos, xp.atan2(nv, c) / nv, 1.0)
    antipodal = (c < 0) & (xp.where(pos, nv, 0.0) <= 2.0 * (d + 3) * _eps(xp, dt) * -c)
    return xp.where(antipodal, math.nan, scale) * v


def _sphere_project_xp(xp, z):
    return z / _sqrt0(xp, _dot(xp, z, z))


_sphere_proj = _plain(_sphere_proj_xp, "xu")
_sphere_exp = _plain(_sphere_exp_xp, "xu")


def _sphere_retr(c, M, x, u, method=None, *, backend=None):
    method = M._option(method, M.retractions, "retraction")
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    if method == "exp":
        return _sphere_exp_xp(xp, x, u)
    return _sphere_project_xp(xp, x + u)


_sphere_log = _plain(_sphere_log_xp, "xy", with_dtype=True)


def _sphere_inv_retr(c, M, x, y, method=None, *, backend=None):
    method = M._option(method, M.inverse_retractions, "inverse retraction")
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    if method == "exp":
        return _sphere_log_xp(xp, x, y, dt)
    cxy = _dot(xp, x, y)
    ok = cxy > 0  # <x, y> <= 0: not reached by the projection retraction (NaN)
    return xp.where(ok, y / xp.where(ok, cxy, 1.0) - x, math.nan)


def _sphere_dist(c, M, x, y, *, backend=None):
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    h = _sqrt0(xp, xp.sum((x - y) ** 2, axis=-1)) / 2.0
    inside = h < 1.0
    return xp.where(inside, 2.0 * xp.asin(xp.where(inside, h, 0.0)), math.pi)


def _sphere_transport(c, M, x, y, v, method=None, *, backend=None):
    method = M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    if method == "projection":
        return _sphere_proj_xp(xp, y, v)
    cxy = _dot(xp, x, y)
    near = (1.0 + cxy) < _NEAR_ANTIPODAL
    out = v - _dot(xp, y, v) / xp.where(near, 1.0, 1.0 + cxy) * (x + y)
    # the log-based form of Sphere._transport_by_log where the kernel's loses accuracy
    w = y - cxy * x
    nw2 = _dot(xp, w, w)
    pos = near & (nw2 > 0)
    nw = xp.sqrt(xp.where(pos, nw2, 1.0))
    t = xp.atan2(nw, cxy)
    e = xp.where(pos, w / nw, 0.0)  # NaN only at the end: a NaN factor poisons gradients
    by_log = v + _dot(xp, e, v) * ((xp.cos(t) - 1.0) * e - xp.sin(t) * x)
    return xp.where(near, xp.where(pos, by_log, math.nan), out)


# ---------------------------------------------------------------- Stiefel


def _stiefel_proj_xp(xp, x, u):
    return u - x @ _sym(xp, _t(xp, x) @ u)


_stiefel_proj = _plain(_stiefel_proj_xp, "xu")
_stiefel_egrad2rgrad = _plain(_stiefel_proj_xp, "xg")


def _stiefel_polar_xp(xp, a, dt):
    """``a (a'a)^(-1/2)`` from one ``eigh`` of the p x p Gram matrix (``I + U'U`` for ``a = X
    + U``, ``U`` tangent: eigenvalues >= 1); NaN where ``a`` is numerically rank deficient (the
    test of ``reference.polar`` on the singular values ``sqrt(w)``)."""
    g = _sym(xp, _t(xp, a) @ a)
    (isq,), w = _spectral(xp, g, [_invsqrt_pair(xp)])
    n = a.shape[-2]
    bad = ~(w[..., 0] > w[..., -1] * (_eps(xp, dt) * n) ** 2)
    return a @ xp.where(bad[..., None, None], math.nan, isq)  # NaN by the p x p factor


def _stiefel_qr_xp(xp, a, dt):
    """``qf(a)`` with a positive diagonal of R (the sign fix of ``reference.stiefel_retr_qr``),
    NaN where a diagonal entry of R vanishes (``Stiefel._qr_full_rank``)."""
    q, r = xp.linalg.qr(a)
    rd = xp.linalg.diagonal(r)
    d = xp.sign(rd)
    d = xp.where(d == 0, 1.0, d)
    scale = _sqrt0(xp, xp.sum(a * a, axis=(-2, -1)))[..., None]
    bad = xp.any(xp.abs(detach(rd)) <= detach(scale) * (_eps(xp, dt) * a.shape[-2]), axis=-1)
    return q * xp.where(bad[..., None], math.nan, d)[..., None, :]  # NaN by the signs


def _expm(xp, a):
    """Matrix exponentials of a stack of general square matrices, by the namespace's own
    differentiable ``expm`` (the array API has none): ``torch.linalg.matrix_exp``,
    ``jax.scipy.linalg.expm``; other namespaces: no route."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return torch.linalg.matrix_exp(a)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(a, (jax.Array, jax.core.Tracer)):
        import jax.scipy.linalg

        return jax.scipy.linalg.expm(a)
    raise NoRoute(f"no differentiable matrix exponential for {type(a).__name__} arrays")


def _stiefel_exp_xp(xp, x, u):
    """``Stiefel.exp``: Edelman's geodesic ``[X U] expm([[A, -S], [I, A]]) [I; 0] expm(-A)``,
    ``A = X'U``, ``S = U'U``."""
    p = x.shape[-1]
    a = _t(xp, x) @ u
    s = _t(xp, u) @ u
    eye = xp.eye(p, dtype=a.dtype) + xp.zeros_like(a)
    block = xp.concat([xp.concat([a, -s], axis=-1), xp.concat([eye, a], axis=-1)], axis=-2)
    e = _expm(xp, block)[..., :, :p] @ _expm(xp, -a)
    return x @ e[..., :p, :] + u @ e[..., p:, :]


def _stiefel_cayley_xp(xp, x, u):
    """``Stiefel._cayley``: ``X + A (I - B'A/2)^-1 B'X``, ``A = [PU, X]``, ``B = [X, -PU]``,
    ``P = I - XX'/2``."""
    x, u = xp.broadcast_arrays(x, u)
    pu = u - 0.5 * x @ (_t(xp, x) @ u)
    a = xp.concat([pu, x], axis=-1)
    b = xp.concat([x, -pu], axis=-1)
    k = a.shape[-1]
    inner = xp.eye(k, dtype=a.dtype) - 0.5 * (_t(xp, b) @ a)
    return x + a @ xp.linalg.solve(inner, _t(xp, b) @ x)


_stiefel_exp = _plain(_stiefel_exp_xp, "xu")


def _stiefel_retr(c, M, x, u, method=None, *, backend=None):
    method = M._option(method, M.retractions, "retraction")
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    if method == "polar":
        return _stiefel_polar_xp(xp, x + u, dt)
    if method == "qr":
        return _stiefel_qr_xp(xp, x + u, dt)
    if method == "cayley":
        return _stiefel_cayley_xp(xp, x, u)
    return _stiefel_exp_xp(xp, x, u)


def _stiefel_inv_polar_xp(xp, x, y):
    """``Y S - X`` with ``(X'Y) S + S (Y'X) = 2I``: the Lyapunov equation as one p^2 x p^2
    linear system, ``K[(i,j),(k,l)] = M_ik d_jl + d_ik M_jl`` (``M = X'Y``; p is small)."""
    m = _t(xp, x) @ y
    p = m.shape[-1]
    eye = xp.eye(p, dtype=m.dtype)
    k = (m[..., :, None, :, None] * eye[None, :, None, :]
         + eye[:, None, :, None] * m[..., None, :, None, :])
    batch = tuple(m.shape[:-2])
    k = xp.reshape(k, batch + (p * p, p * p))
    rhs = xp.reshape(2.0 * eye, (p * p, 1)) + xp.zeros(batch + (p * p, 1), dtype=m.dtype)
    s = xp.reshape(xp.linalg.solve(k, rhs), batch + (p, p))
    return y @ s - x


def _stiefel_inv_qr_xp(xp, x, y):
    """``Y R - X``, R upper triangular with ``(X'Y) R + R'(Y'X) = 2I`` (the column-by-column
    solves of ``reference.stiefel_inv_retr_qr``); NaN where a diagonal entry of R is not
    positive (``Stiefel._qr_reaches``: ``Y`` not reached by the QR retraction)."""
    m = _t(xp, x) @ y
    p = m.shape[-1]
    batch = tuple(m.shape[:-2])
    cols = []
    for j in range(p):
        one = xp.ones(batch + (1,), dtype=m.dtype)
        if j:
            prev = xp.stack(cols, axis=-1)                                  # (..., p, j)
            b = xp.concat([-(m[..., j:j + 1, :] @ prev)[..., 0, :], one], axis=-1)
        else:
            b = one
        r = xp.linalg.solve(m[..., :j + 1, :j + 1], b[..., None])[..., 0]
        cols.append(xp.concat([r, xp.zeros(batch + (p - j - 1,), dtype=m.dtype)], axis=-1))
    r = xp.stack(cols, axis=-1)
    bad = xp.any(~(detach(xp.linalg.diagonal(r)) > 0), axis=-1)
    return xp.where(bad[..., None, None], math.nan, y @ r - x)


def _stiefel_inv_retr(c, M, x, y, method=None, *, backend=None):
    method = M._option(method, M.inverse_retractions, "inverse retraction")
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    x, y = xp.broadcast_arrays(x, y)
    if method == "polar":
        return _stiefel_inv_polar_xp(xp, x, y)
    return _stiefel_inv_qr_xp(xp, x, y)


def _stiefel_transport(c, M, x, y, v, method=None, *, backend=None):
    M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    return _stiefel_proj_xp(xp, y, v)


# ---------------------------------------------------------------- SPD


def _halves(xp, x):
    """``x^(1/2)`` and ``x^(-1/2)`` from one ``eigh``."""
    return _spectral(xp, _sym(xp, x), [_sqrt_pair(xp), _invsqrt_pair(xp)])[0]


def _spd_exp_xp(xp, x, u):
    c, ci = _halves(xp, x)
    (e,), _ = _spectral(xp, _sym(xp, ci @ u @ ci), [(xp.exp, xp.exp)])
    return c @ e @ c


def _spd_log_xp(xp, x, y):
    c, ci = _halves(xp, x)
    log_pair = (_pos(xp, xp.log), _pos(xp, lambda w: 1.0 / w))
    (lg,), _ = _spectral(xp, _sym(xp, ci @ y @ ci), [log_pair])
    return c @ lg @ c


def _spd_proj(c, M, x, u):
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    return _sym(xp, u)


def _spd_inner(c, M, x, u, v):
    """``tr(X^-1 U X^-1 V)``."""
    xp, dt, (x, u, v) = _inputs(c, M, x=x, u=u, v=v)
    x, u, v = xp.broadcast_arrays(x, u, v)
    a = xp.linalg.solve(x, u)
    b = xp.linalg.solve(x, v)
    return xp.sum(a * _t(xp, b), axis=(-2, -1))


def _spd_egrad2rgrad(c, M, x, g):
    """``X sym(G) X``."""
    xp, dt, (x, g) = _inputs(c, M, x=x, g=g)
    return x @ _sym(xp, g) @ x


_spd_exp = _plain(_spd_exp_xp, "xu")


def _spd_retr(c, M, x, u, method=None, *, backend=None):
    method = M._option(method, M.retractions, "retraction")
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    if method == "exp":
        return _spd_exp_xp(xp, x, u)
    x, u = xp.broadcast_arrays(x, u)
    return _sym(xp, x + u + 0.5 * u @ xp.linalg.solve(x, u))


_spd_log = _plain(_spd_log_xp, "xy")
_spd_inv_retr = _one_option(_spd_log, "inverse_retractions")


def _spd_dist(c, M, x, y, *, backend=None):
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    (ci,), _ = _spectral(xp, _sym(xp, x), [_invsqrt_pair(xp)])
    w = _eigvals(xp, _sym(xp, ci @ y @ ci))
    pos = w > 0
    lw = xp.where(pos, xp.log(xp.where(pos, w, 1.0)), math.nan)
    return _sqrt0(xp, xp.sum(lw ** 2, axis=-1))


def _spd_transport(c, M, x, y, v, method=None, *, backend=None):
    method = M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    if method == "projection":
        return _sym(xp, v)
    cx, ci = _halves(xp, x)
    (r,), _ = _spectral(xp, _sym(xp, ci @ y @ ci), [_sqrt_pair(xp)])
    e = cx @ r @ ci
    return _sym(xp, e @ v @ _t(xp, e))


# ---------------------------------------------------------------- Lorentz

#: ``Lorentz``: distances below this use the cancellation-free forms
_NEAR = 1e-2
#: ``reference.LORENTZ_EXP_MAX_LOSS``
_MAX_LOSS = 1e8


def _ldot(xp, a, b):
    return _dot(xp, a, b) - 2.0 * a[..., :1] * b[..., :1]


def _lorentz_proj_xp(xp, x, u):
    return u + _ldot(xp, x, u) * x


def _lorentz_exp_xp(xp, x, v):
    """``reference.lorentz_exp``: its tangent form of ``|v|^2`` where the Minkowski one
    cancels, and ``z0 = sqrt(1 + |z_r|^2)`` where the result's ``z0`` cancels (NaN where fewer
    than ~8 digits would be correct)."""
    xr, vr = x[..., 1:], v[..., 1:]
    vv = _dot(xp, vr, vr)
    sq = vv - v[..., :1] ** 2
    bad = ~(vv <= 4.0 * sq)
    xx = _dot(xp, xr, xr)
    xpos = xx > 0
    cc = xp.where(xpos, _dot(xp, xr, vr) / xp.where(xpos, xx, 1.0), 0.0)
    q = vr - cc * xr
    sq = xp.where(bad, (vv + xx * _dot(xp, q, q)) / x[..., :1] ** 2, sq)
    pos = sq > 0
    t = xp.sqrt(xp.where(pos, sq, 1.0))
    shc = xp.where(pos, xp.sinh(t) / t, 1.0)
    ch = xp.where(pos, xp.cosh(t), 1.0)
    z = ch * x + shc * v
    loss = ch * xp.abs(x[..., :1])
    zr = z[..., 1:]
    z0 = xp.sqrt(1.0 + _dot(xp, zr, zr))
    fix = ~(loss <= 16.0 * z[..., :1])
    head = xp.where(fix, xp.where(loss <= _MAX_LOSS * z0, z0, math.nan), z[..., :1])
    return xp.concat([head, zr], axis=-1)


def _lorentz_log_xp(xp, x, y):
    """``Lorentz.log``: ``acosh(a) w / sqrt(a^2 - 1)``, and near ``x`` its cancellation-free
    form from ``d = y - x``, ``h = <d,d>_L / 2`` (a series in ``h`` below 1e-6: exact to
    rounding there, and a gradient free of ``1/h`` terms)."""
    a_raw = -_ldot(xp, x, y)
    near = a_raw - 1.0 < 0.5 * _NEAR ** 2
    a = xp.where(near, 2.0, xp.where(a_raw > 1.0, a_raw, 1.0))
    s = xp.sqrt((a - 1.0) * (a + 1.0))
    spos = s > 0
    far = xp.where(spos, xp.acosh(a) / xp.where(spos, s, 1.0), 1.0) * (y - a * x)
    d = y - x
    h = 0.5 * _ldot(xp, d, d)
    h = xp.where(h > 0, h, 0.0)
    small = h < 1e-6
    hs = xp.where(small, 1.0, h)
    scale = xp.where(small, 1.0 - h / 3.0 + 2.0 * h ** 2 / 15.0 - 4.0 * h ** 3 / 35.0,
                     2.0 * xp.asinh(xp.sqrt(hs / 2.0)) / xp.sqrt(hs * (hs + 2.0)))
    return xp.where(near, scale * (d - h * x), far)


_lorentz_proj = _plain(_lorentz_proj_xp, "xu")


def _lorentz_inner(c, M, x, u, v):
    xp, dt, (x, u, v) = _inputs(c, M, x=x, u=u, v=v)
    return _ldot(xp, u, v)[..., 0]


def _lorentz_norm(c, M, x, u):
    """``Lorentz.norm``'s cancellation-free form ``sqrt(|u_r|^2 + |x_r|^2 |u_r - (u_r.x^)x^|^2)
    / x0``."""
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    xr, ur = x[..., 1:], u[..., 1:]
    nx2 = _dot(xp, xr, xr)
    pos = nx2 > 0
    along = xp.where(pos, _dot(xp, ur, xr) / xp.where(pos, nx2, 1.0), 0.0)
    perp = ur - along * xr
    sq = xp.sum(ur * ur, axis=-1) + nx2[..., 0] * xp.sum(perp * perp, axis=-1)
    return _sqrt0(xp, sq) / x[..., 0]


def _lorentz_egrad2rgrad(c, M, x, g):
    """``proj(x, J g)``, ``J = diag(-1, 1, ..., 1)``."""
    xp, dt, (x, g) = _inputs(c, M, x=x, g=g)
    g = xp.concat([-g[..., :1], g[..., 1:]], axis=-1)
    return _lorentz_proj_xp(xp, x, g)


_lorentz_exp = _plain(_lorentz_exp_xp, "xu")
_lorentz_retr = _one_option(_lorentz_exp, "retractions")
_lorentz_log = _plain(_lorentz_log_xp, "xy")
_lorentz_inv_retr = _one_option(_lorentz_log, "inverse_retractions")


def _lorentz_dist(c, M, x, y, *, backend=None):
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    a_raw = -_ldot(xp, x, y)[..., 0]
    a = xp.where(a_raw > 1.0, a_raw, 1.0)
    near = ~(xp.acosh(detach(a)) >= _NEAR)  # Lorentz.dist: the near form below _NEAR
    far = xp.acosh(xp.where(near, 2.0, a))
    d = y - x
    h = 0.5 * _ldot(xp, d, d)[..., 0]
    return xp.where(near, 2.0 * xp.asinh(_sqrt0(xp, xp.where(h > 0, h, 0.0) / 2.0)), far)


def _lorentz_transport(c, M, x, y, v, method=None, *, backend=None):
    method = M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    if method == "projection":
        return _lorentz_proj_xp(xp, y, v)
    return v + _ldot(xp, y, v) / (1.0 - _ldot(xp, x, y)) * (x + y)


# ---------------------------------------------------------------- Grassmann
# Every map is a function of the p x p matrix ``S = U'U`` or ``Z'Z`` (``Z`` the lift of the
# inverse retraction), computed by ``_spectral``: no SVD (whose derivative divides by the gaps
# between singular values, and by the singular values themselves at a zero step). The
# functions of the eigenvalues are entire or analytic near 0; below 1e-4 their Taylor series
# (truncation < 1e-20) replace the closed forms, whose derivatives cancel there.

_SMALL = 1e-4


def _series(xp, f, series, small=_SMALL):
    """``f`` on eigenvalues >= ``small``, ``series`` below (eigenvalues are detached)."""
    lim = small

    def g(w):
        small = w < lim
        return xp.where(small, series(w), f(xp.where(small, 1.0, w)))
    return g


def _grassmann_exp_pairs(xp):
    """``cos(sqrt(s))`` and ``sin(sqrt(s)) / sqrt(s)`` with their derivatives."""
    def sinc(w):
        r = xp.sqrt(w)
        return xp.sin(r) / r

    sinc_s = _series(xp, sinc, lambda w: 1.0 - w / 6.0 + w ** 2 / 120.0 - w ** 3 / 5040.0)
    cos_s = _series(xp, lambda w: xp.cos(xp.sqrt(w)),
                    lambda w: 1.0 - w / 2.0 + w ** 2 / 24.0 - w ** 3 / 720.0)
    dsinc = _series(xp, lambda w: (xp.cos(xp.sqrt(w)) - sinc(w)) / (2.0 * w),
                    lambda w: -1.0 / 6.0 + w / 60.0 - w ** 2 / 1680.0)
    return (cos_s, lambda w: -0.5 * sinc_s(w)), (sinc_s, dsinc)


def _atan_ratio_pair(xp):
    """``atan(sqrt(t)) / sqrt(t)`` (``theta / tan(theta)`` of ``t = tan^2``) and derivative."""
    def g(w):
        r = xp.sqrt(w)
        return xp.atan(r) / r

    gs = _series(xp, g, lambda w: 1.0 - w / 3.0 + w ** 2 / 5.0 - w ** 3 / 7.0)
    dg = _series(xp, lambda w: (1.0 / (1.0 + w) - g(w)) / (2.0 * w),
                 lambda w: -1.0 / 3.0 + 2.0 * w / 5.0 - 3.0 * w ** 2 / 7.0)
    return gs, dg


def _grassmann_lift(xp, x, y):
    """``Z = (I - XX') Y (X'Y)^-1``: ``A tan(Theta) P'`` in the SVD terms of ``Grassmann``
    (the lift of the polar/QR inverse retraction at ``Y``'s representative)."""
    m = _t(xp, x) @ y
    r = y - x @ m
    return _t(xp, xp.linalg.solve(_t(xp, m), _t(xp, r)))


def _grassmann_proj(c, M, x, u):
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    return u - x @ (_t(xp, x) @ u)


def _grassmann_exp_xp(xp, x, u):
    """``X B cos(Sigma) B' + A sin(Sigma) B'`` (``U = A Sigma B'``) as ``X cos(sqrt(S)) + U
    sinc(S)``, ``S = U'U``, then ``Grassmann.exp``'s Newton-Schulz step."""
    (cs, sn), _ = _spectral(xp, _sym(xp, _t(xp, u) @ u), list(_grassmann_exp_pairs(xp)))
    y = x @ cs + u @ sn
    return 1.5 * y - 0.5 * y @ (_t(xp, y) @ y)


_grassmann_exp = _plain(_grassmann_exp_xp, "xu")


def _grassmann_retr(c, M, x, u, method=None, *, backend=None):
    method = M._option(method, M.retractions, "retraction")
    xp, dt, (x, u) = _inputs(c, M, x=x, u=u)
    if method == "exp":
        return _grassmann_exp_xp(xp, x, u)
    if method == "polar":
        return _stiefel_polar_xp(xp, x + u, dt)
    return _stiefel_qr_xp(xp, x + u, dt)


def _grassmann_log_xp(xp, x, y):
    """``A Theta P'`` as ``Z g(Z'Z)``, ``g(t) = atan(sqrt(t)) / sqrt(t)``."""
    z = _grassmann_lift(xp, x, y)
    (g,), _ = _spectral(xp, _sym(xp, _t(xp, z) @ z), [_atan_ratio_pair(xp)])
    return z @ g


_grassmann_log = _plain(_grassmann_log_xp, "xy")


def _grassmann_inv_retr(c, M, x, y, method=None, *, backend=None):
    method = M._option(method, M.inverse_retractions, "inverse retraction")
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    if method == "exp":
        return _grassmann_log_xp(xp, x, y)
    return _grassmann_lift(xp, x, y)


def _grassmann_dist(c, M, x, y):
    """``|Theta|_F``: ``sum atan(sqrt(t_i))^2`` over the eigenvalues ``t_i = tan^2`` of
    ``Z'Z``."""
    xp, dt, (x, y) = _inputs(c, M, x=x, y=y)
    z = _grassmann_lift(xp, x, y)
    w = _eigvals(xp, _sym(xp, _t(xp, z) @ z))
    small = w < _SMALL
    ws = xp.where(small, 1.0, w)
    th2 = xp.where(small, w - 2.0 * w ** 2 / 3.0 + 23.0 * w ** 3 / 45.0,
                   xp.atan(xp.sqrt(ws)) ** 2)
    return _sqrt0(xp, xp.sum(th2, axis=-1))


def _grassmann_parallel_pairs(xp):
    """``psi(t) = cos(theta)`` and ``phi(t) = (cos(theta) - 1) / t`` of ``t = tan^2(theta)``
    (``(1 + t)^-1/2`` and ``((1 + t)^-1/2 - 1) / t``) with their derivatives."""
    psi = (lambda w: 1.0 / xp.sqrt(1.0 + w), lambda w: -0.5 / ((1.0 + w) * xp.sqrt(1.0 + w)))
    phi = _series(xp, lambda w: (1.0 / xp.sqrt(1.0 + w) - 1.0) / w,
                  lambda w: -0.5 + 3.0 * w / 8.0 - 5.0 * w ** 2 / 16.0 + 35.0 * w ** 3 / 128.0
                  - 63.0 * w ** 4 / 256.0)
    dphi = _series(xp, lambda w: (-0.5 * w / ((1.0 + w) * xp.sqrt(1.0 + w))
                                  - (1.0 / xp.sqrt(1.0 + w) - 1.0)) / w ** 2,
                   lambda w: 3.0 / 8.0 - 5.0 * w / 8.0 + 105.0 * w ** 2 / 128.0
                   - 63.0 * w ** 3 / 64.0, small=1e-3)
    return psi, (phi, dphi)


def _grassmann_transport(c, M, x, y, v, method=None, *, backend=None):
    """``"projection"``: ``(I - YY') V Q``; ``"parallel"``: ``Grassmann.transport``'s
    ``V - X P sin(Theta) A'V + A (cos(Theta) - 1) A'V``, then ``Q``, written with ``Z = A
    tan(Theta) P'`` as ``V - X psi(Z'Z) Z'V + Z phi(Z'Z) Z'V``; ``Q`` the polar factor of
    ``X'Y``."""
    method = M._option(method, M.transports, "transport")
    xp, dt, (x, y, v) = _inputs(c, M, x=x, y=y, v=v)
    q = _stiefel_polar_xp(xp, _t(xp, x) @ y, dt)
    if method == "projection":
        return (v - y @ (_t(xp, y) @ v)) @ q
    z = _grassmann_lift(xp, x, y)
    (psi, phi), _ = _spectral(xp, _sym(xp, _t(xp, z) @ z), list(_grassmann_parallel_pairs(xp)))
    ztv = _t(xp, z) @ v
    return (v - x @ (psi @ ztv) + z @ (phi @ ztv)) @ q


# ---------------------------------------------------------------- Product
# Factor by factor: the flat arrays are split into the factors' parts (slices of a
# gradient-carrying array carry its gradient), each factor's method is called with them (so it
# takes its own route, or refuses naming the factor's argument), and the parts are joined.


def _product_split(xp, M, a):
    batch = tuple(a.shape[:-1])
    return [xp.reshape(a[..., lo:hi], batch + f.shape)
            for f, (lo, hi) in zip(M.factors, M._bounds)]


def _batch_shape(shapes):
    """The broadcast of the (static) batch shapes ``shapes``."""
    n = max(len(sh) for sh in shapes)
    out = []
    for i in range(n):
        dims = {int(sh[len(sh) - n + i]) for sh in shapes if len(sh) - n + i >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"batch axes do not broadcast: {[tuple(sh) for sh in shapes]}")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _product_join(xp, M, parts):
    batch = _batch_shape([tuple(p.shape[:p.ndim - f.core_ndim])
                          for f, p in zip(M.factors, parts)])
    return xp.concat([xp.reshape(xp.broadcast_to(p, batch + f.shape), batch + (-1,))
                      for f, p in zip(M.factors, parts)], axis=-1)


def _product_each(c, M, call, methods=None, **named):
    """``[call(factor, option, parts...) for each factor]`` of the arrays ``named``."""
    xp, dt, arrays = _inputs(c, M, **named)
    split = [_product_split(xp, M, a) for a in arrays]
    methods = methods if methods is not None else [None] * len(M.factors)
    return xp, [call(f, m, *(s[i] for s in split))
                for i, (f, m) in enumerate(zip(M.factors, methods))]


def _product_hypot(xp, M, values):
    return _sqrt0(xp, sum(v ** 2 for v in values))


def _product_route(method, arrays, combine, options=None):
    """Product's route of ``method``: the factors' own ``method`` (each with its option of
    ``Product._methods`` where the method takes one from ``M.<options>``) on the parts of the
    array arguments named ``arrays``, their answers combined by ``combine(xp, M, answers)``.
    The seam passes every positional parameter (an option too), options by keyword."""
    k = len(arrays)
    kind = _KINDS.get(options)

    def route(c, M, *args, backend=None):
        methods = None if options is None else M._methods(args[k], getattr(M, options), kind)
        xp, out = _product_each(
            c, M, lambda f, m, *a: getattr(f, method)(*a, *(() if m is None else (m,))),
            methods, **dict(zip(arrays, args)))
        return combine(xp, M, out)

    route.__name__ = route.__qualname__ = f"_product_{method}"
    return route


def _product_sum(xp, M, values):
    return sum(values)


_product_inner = _product_route("inner", "xuv", _product_sum)
_product_norm = _product_route("norm", "xu", _product_hypot)
_product_dist = _product_route("dist", "xy", _product_hypot)
_product_proj = _product_route("proj", "xu", _product_join)
_product_egrad2rgrad = _product_route("egrad2rgrad", "xg", _product_join)
_product_retr = _product_route("retr", "xu", _product_join, "retractions")
_product_inv_retr = _product_route("inv_retr", "xy", _product_join, "inverse_retractions")
_product_exp = _product_route("exp", "xu", _product_join)
_product_log = _product_route("log", "xy", _product_join)
_product_transport = _product_route("transport", "xyv", _product_join, "transports")


# ---------------------------------------------------------------- nearest points (project)


def _sphere_project(c, M, z):
    """``z / |z|`` (NaN for the zero vector, where NumPy raises)."""
    xp, dt, (z,) = _inputs(c, M, z=z)
    n2 = _dot(xp, z, z)
    pos = n2 > 0
    return xp.where(pos, z / xp.sqrt(xp.where(pos, n2, 1.0)), math.nan)


def _stiefel_project(c, M, z, *, backend=None):
    """The polar factor of ``Z`` (NaN where rank deficient)."""
    xp, dt, (z,) = _inputs(c, M, z=z)
    return _stiefel_polar_xp(xp, z, dt)


def _grassmann_project(c, M, z, *, backend=None):
    return _stiefel_project(c, M, z)


def _euclidean_project(c, M, z):
    xp, dt, (z,) = _inputs(c, M, z=z)
    return z


def _product_project(c, M, z):
    if not M.has_project:
        M._missing("project")
    xp, out = _product_each(c, M, lambda f, m, a: f.project(a), z=z)
    return _product_join(xp, M, out)


# ---------------------------------------------------------------- rfl_fast.linalg
# The functions of ``rfl_fast.linalg`` (``route(caller, None, a, *, backend)``): the matrix
# functions from one ``eigh`` with the Daleckii-Krein derivative (``_spectral``), the polar
# factor as Stiefel's polar retraction computes it. Symmetry is not checked (a traced array
# cannot be inspected; the symmetric part's derivative is the one of a symmetric input) and an
# item without an answer (an eigenvalue <= 0, a rank-deficient ``a``) comes back as NaN.


def _linalg_input(c, a, name, square=True):
    """``a`` in the caller's namespace and its floating dtype, checked as ``rfl_fast.linalg``
    checks it: at least 2 axes, square (``square``) or ``n >= p``."""
    from .._validation import check_core_shape

    xp = c.xp
    if not is_foreign(a):
        import numpy as np

        a = np.asarray(a)
        if a.dtype.kind not in "fiu":
            raise TypeError(f"{name}: expected a float or integer array, got dtype {a.dtype}")
        a = xp.asarray(a, device=c.device)
    elif not (xp.isdtype(a.dtype, "real floating") or xp.isdtype(a.dtype, "integral")):
        raise TypeError(f"{name}: expected a float or integer array, got dtype {a.dtype}")
    if a.ndim < 2:
        raise ValueError(f"{name}: expected at least 2 dimensions, got shape {a.shape}")
    if square:
        check_core_shape(a, name, (a.shape[-1], a.shape[-1]))
    elif a.shape[-2] < a.shape[-1]:
        raise ValueError(f"{name}: expected shape (..., n, p) with n >= p, got {a.shape}")
    dt = a.dtype if xp.isdtype(a.dtype, "real floating") else xp.float64
    return xp, dt, a if a.dtype == dt else xp.astype(a, dt)


def _linalg_spectral(c, s, pair):
    xp, dt, s = _linalg_input(c, s, "s")
    (out,), _ = _spectral(xp, _sym(xp, s), [pair(xp)])
    return out


def _linalg_sym_expm(c, _, s, *, backend=None):
    return _linalg_spectral(c, s, lambda xp: (xp.exp, xp.exp))


def _linalg_sym_logm(c, _, s, *, backend=None):
    return _linalg_spectral(c, s, lambda xp: (_pos(xp, xp.log), _pos(xp, lambda w: 1.0 / w)))


def _linalg_sym_sqrtm(c, _, s, *, backend=None):
    return _linalg_spectral(c, s, _sqrt_pair)


def _linalg_sym_invsqrtm(c, _, s, *, backend=None):
    return _linalg_spectral(c, s, _invsqrt_pair)


def _linalg_polar(c, _, a, *, backend=None):
    xp, dt, a = _linalg_input(c, a, "a", square=False)
    return _stiefel_polar_xp(xp, a, dt)


#: Route name -> route ``route(caller, manifold, *args, **options)`` with the arguments of the
#: manifold method it stands for (``caller``: the :class:`~rfl_fast.kernels.arrays.Caller`);
#: the ``linalg_`` routes take ``None`` for the manifold (functions of ``rfl_fast.linalg``).
ROUTES = {name[1:]: fn for name, fn in list(globals().items())
          if name.startswith(("_manifold_", "_euclidean_", "_sphere_", "_stiefel_", "_spd_",
                               "_lorentz_", "_grassmann_", "_product_", "_linalg_"))
          and not name.endswith(("_xp", "_pairs", "_lift", "_split", "_join", "_each", "_hypot",
                                 "_input", "_spectral", "_route", "_sum"))
          and callable(fn)}
