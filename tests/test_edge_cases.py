"""Numerical edge cases of the manifolds: each one answered accurately or refused clearly.

Decisions (documented in the methods' docstrings):

* Stiefel polar/QR retraction: for a tangent ``U``, ``X + U`` always has full rank
  (``(X+U)'(X+U) = I + U'U``), so huge steps are answered; a non-tangent ``U`` making ``X + U``
  numerically rank deficient raises ``NoSolutionError`` (polar and QR, every backend); nearly
  rank-deficient ``X + U`` with a unique polar factor is answered to ``cond * eps``.
* Stiefel inverse retractions: near-singular ``X'Y`` gives the exact (huge) inverse; singular
  ``X'Y`` raises ``NoSolutionError``.
* Sphere: exactly antipodal ``Log``/transport raise ``NoSolutionError``; nearly antipodal pairs
  are answered (the transport switches to a log-based form that stays accurate).
* SPD up to condition number 1e12: finite, accurate to ``~ eps * cond``.
* Zero tangent vectors: identities hold exactly or to rounding on every manifold.
* Huge steps: sphere ``exp`` wraps around; Lorentz ``exp`` whose point overflows the dtype
  raises ``NoSolutionError`` (never inf/NaN).
* float32 in, float32 out, for every method of every manifold.
"""

import mpmath
import numpy as np
import pytest

import rfl_fast as rf
from manifold_cases import one_each, trait
from rfl_fast.errors import MethodNotAvailableError, NoSolutionError

EPS = np.finfo(np.float64).eps
MANIFOLDS = one_each() + [rf.Stiefel(3, 3)]
manifolds = pytest.mark.parametrize("M", MANIFOLDS, ids=repr)


def orthonormal(rng, n, p):
    q, r = np.linalg.qr(rng.standard_normal((n, p)))
    return q * np.sign(np.diag(r))


# ---------------------------------------------------------------- Stiefel retractions


@pytest.mark.parametrize("method", ["polar", "qr"])
def test_rank_deficient_x_plus_u_is_refused(method, backend):
    St = rf.Stiefel(4, 2)
    x = np.eye(4)[:, :2]
    u = np.zeros((4, 2))
    u[0, 0] = -1.0                       # X + U = [0, e2]: rank 1 (U is not tangent)
    with pytest.raises(NoSolutionError, match="rank deficient"):
        St.retr(x, u, method)
    # in a batch: only the bad item is named
    xs, us = np.stack([x, x]), np.stack([np.zeros((4, 2)), u])
    with pytest.raises(NoSolutionError, match=r"batch index \[\[1\]\]"):
        St.retr(xs, us, method)


@pytest.mark.parametrize("cond", [1e4, 1e8])
def test_nearly_rank_deficient_polar_gives_the_unique_answer(cond, backend):
    """``A = Q diag(s) V'`` with ``s`` spread over ``cond``: ``polar(A) = Q V'``."""
    rng = np.random.default_rng(0)
    St = rf.Stiefel(6, 3)
    q, v = orthonormal(rng, 6, 3), orthonormal(rng, 3, 3)
    a = (q * np.array([1.0, cond**-0.5, 1.0 / cond])) @ v.T
    x = St.random_point(rng=1)
    y = St.retr(x, a - x, "polar")
    np.testing.assert_allclose(y, q @ v.T, atol=50 * EPS * cond)
    assert St.is_point(y)


# Edelman's exp is tested at 1e3 only: expm of a block of norm 1e8 is not meaningful
@pytest.mark.parametrize("method,scale", [(m, s) for m in ("polar", "qr", "cayley", "exp")
                                          for s in (1e3, 1e8) if (m, s) != ("exp", 1e8)])
def test_huge_tangent_steps_on_stiefel(method, scale, backend):
    St = rf.Stiefel(6, 3)
    x = St.random_point(rng=3)
    u = scale * St.random_tangent(x, rng=4)
    y = St.retr(x, u, method)
    assert np.isfinite(y).all() and St.is_point(y, atol=1e-8)
    if method == "polar":  # oracle: the SVD polar factor of X + U
        w, _, vt = np.linalg.svd(x + u, full_matrices=False)
        np.testing.assert_allclose(y, w @ vt, atol=1e-9)


@pytest.mark.parametrize("method", ["polar", "qr"])
def test_singular_xty_is_refused(method, backend):
    St = rf.Stiefel(4, 2)
    x = np.eye(4)[:, :2]
    y = np.eye(4)[:, [2, 1]]                 # X'Y = [[0, 0], [0, 1]]: singular
    with pytest.raises(NoSolutionError, match="too singular"):
        St.inv_retr(x, y, method)


@pytest.mark.parametrize("method", ["polar", "qr"])
@pytest.mark.parametrize("delta", [1e-3, 1e-6])
def test_near_singular_xty_gives_the_exact_huge_inverse(method, delta, backend):
    rng = np.random.default_rng(5)
    St = rf.Stiefel(5, 2)
    x = St.random_point(rng=6)
    # Y: first column almost orthogonal to span(X) (X'Y has a singular value ~ delta)
    perp = rng.standard_normal(5)
    perp -= x @ (x.T @ perp)
    perp /= np.linalg.norm(perp)
    y = St.project(np.column_stack([delta * x[:, 0] + perp, x[:, 1]]))
    u = St.inv_retr(x, y, method)
    assert np.isfinite(u).all() and St.is_tangent(x, u, atol=1e-6)
    assert St.norm(x, u) > 0.1 / delta                           # the inverse really is huge
    np.testing.assert_allclose(St.retr(x, u, method), y, atol=1e3 * EPS / delta)


# ---------------------------------------------------------------- sphere near the antipode


def test_antipodal_log_and_transport_are_refused(backend):
    S = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(NoSolutionError, match="antipodal"):
        S.log(x, -x)
    with pytest.raises(NoSolutionError, match="antipodal"):
        S.transport(x, -x, np.array([0.0, 1.0, 0.0]))
    assert S.dist(x, -x) == pytest.approx(np.pi)
    # the projection transport has no such restriction
    np.testing.assert_allclose(S.transport(x, -x, [0.0, 1.0, 0.0], "projection"), [0, 1, 0])


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-8, 1e-10])
def test_nearly_antipodal_log_and_transport_are_accurate(delta, backend):
    """x = e1, y = cos t e1 + sin t e2 with t = pi - delta: Log_x y = t e2, the transport
    maps e2 to the geodesic's velocity ``cos t e2 - sin t e1`` and fixes e3."""
    S = rf.Sphere(3)
    t = np.pi - delta
    x = np.array([1.0, 0.0, 0.0])
    y = np.array([np.cos(t), np.sin(t), 0.0])
    np.testing.assert_allclose(S.log(x, y), [0.0, t, 0.0], atol=1e-12)
    np.testing.assert_allclose(S.dist(x, y), t, atol=1e-12)
    tol = 10 * EPS / delta                    # the problem's own conditioning
    np.testing.assert_allclose(S.transport(x, y, [0.0, 1.0, 0.0]),
                               [-np.sin(t), np.cos(t), 0.0], atol=tol)
    np.testing.assert_allclose(S.transport(x, y, [0.0, 0.0, 1.0]), [0.0, 0.0, 1.0], atol=tol)
    # batched: one near-antipodal item among ordinary ones
    xs = np.stack([x, x, x])
    ys = np.stack([y, S.exp(x, [0.0, 0.5, 0.0]), y])
    vs = np.tile([0.0, 1.0, 0.0], (3, 1))
    out = S.transport(xs, ys, vs)
    np.testing.assert_allclose(out[1], [-np.sin(0.5), np.cos(0.5), 0.0], atol=1e-14)
    np.testing.assert_allclose(out[[0, 2]], [[-np.sin(t), np.cos(t), 0.0]] * 2, atol=tol)


# ---------------------------------------------------------------- ill-conditioned SPD


def _spd(rng, n, cond):
    q = orthonormal(rng, n, n)
    w = np.geomspace(cond**-0.5, cond**0.5, n)
    a = (q * w) @ q.T
    return 0.5 * (a + a.T)


def _dist_mp(x, y):
    """Affine-invariant distance of the float64 matrices x, y at 50 digits."""
    with mpmath.workdps(50):
        L = mpmath.cholesky(mpmath.matrix(x.tolist()))
        Li = L**-1
        w = mpmath.eigsy(Li * mpmath.matrix(y.tolist()) * Li.T, eigvals_only=True)
        return float(mpmath.sqrt(sum(mpmath.log(v) ** 2 for v in w)))


def _near_mp(x, s):
    """``L expm(S) L'`` (``x = LL'``) formed at 50 digits and rounded: a point at distance
    ``|S|_F`` from x, however ill-conditioned x is."""
    with mpmath.workdps(50):
        L = mpmath.cholesky(mpmath.matrix(x.tolist()))
        y = L * mpmath.expm(mpmath.matrix(s.tolist())) * L.T
        y = np.array(y.tolist(), dtype=float)
    return 0.5 * (y + y.T)


@pytest.mark.parametrize("cond", [1e6, 1e9, 1e12])
def test_spd_ill_conditioned(cond, backend):
    """x of condition ``cond``, y at distance ~1 from x (so ``X^-1 Y`` is well conditioned):
    every map is finite and accurate to ``~eps * cond``, the sensitivity of the answers to
    rounding x and y to float64."""
    rng = np.random.default_rng(7)
    P = rf.SPD(3)
    x = _spd(rng, 3, cond)
    s = rng.standard_normal((3, 3))
    y = _near_mp(x, 0.3 * (s + s.T))
    tol = 100 * EPS * cond
    d = P.dist(x, y)
    assert np.isfinite(d)
    assert abs(d - _dist_mp(x, y)) <= tol * max(1.0, d)
    u = P.log(x, y)
    assert np.isfinite(u).all() and P.is_tangent(x, u)
    assert abs(P.norm(x, u) - d) <= tol * max(1.0, d)
    y2 = P.exp(x, u)
    assert np.isfinite(y2).all() and P.is_point(y2)
    assert _dist_mp(y, y2) <= tol * max(1.0, d)
    v = P.tangent_gaussian(x, 1.0, rng=8)
    tv = P.transport(x, y, v)
    assert np.isfinite(tv).all() and P.is_tangent(y, tv)
    np.testing.assert_allclose(P.norm(y, tv), P.norm(x, v), rtol=tol)


def test_spd_beyond_float64_is_answered_or_refused(backend):
    """Two unrelated matrices of condition 1e12: ``X^-1 Y`` spans ~1e18, more than float64
    resolves (its smallest eigenvalue is below the rounding noise ``eps |Y| / lambda_min(X)``).
    Each map then returns finite values or raises ``NoSolutionError``, never NaN/inf."""
    rng = np.random.default_rng(7)
    P = rf.SPD(3)
    x, y = _spd(rng, 3, 1e12), _spd(rng, 3, 1e12)
    v = P.tangent_gaussian(x, 1.0, rng=8)
    for f in (lambda: P.dist(x, y), lambda: P.log(x, y), lambda: P.transport(x, y, v),
              lambda: P.exp(x, v)):
        try:
            assert np.isfinite(f()).all()
        except NoSolutionError as exc:
            assert "ill-conditioned" in str(exc)


# ---------------------------------------------------------------- zero tangent vectors


@manifolds
def test_zero_tangent_vectors(M, backend):
    x = M.random_point(2, rng=0)
    y = M.retr(x, 0.5 * M.random_tangent(x, rng=1))
    z = M.zero_vector(x)
    for method in M.retractions:
        np.testing.assert_allclose(M.retr(x, z, method), x, atol=1e-14)
    for method in M.inverse_retractions:
        np.testing.assert_allclose(M.inv_retr(x, x, method), z, atol=1e-12)
    try:
        np.testing.assert_allclose(M.exp(x, z), x, atol=1e-14)
        np.testing.assert_allclose(M.log(x, x), z, atol=1e-12)
        np.testing.assert_allclose(M.dist(x, x), 0.0, atol=1e-12)
    except MethodNotAvailableError:
        assert "log" in trait(M, "lacks")      # no closed-form log/dist: explicit absence
    v = M.random_tangent(x, rng=2)
    for method in M.transports:
        np.testing.assert_allclose(M.transport(x, y, z, method), np.zeros_like(x), atol=1e-15)
        np.testing.assert_allclose(M.transport(x, x, v, method), v, atol=1e-12)
    np.testing.assert_allclose(M.norm(x, z), 0.0, atol=0)


def test_lorentz_coincident_points_far_from_the_origin(backend):
    """acosh(-<x,x>_L) near 1 loses half the digits; dist/log use the difference instead."""
    L = rf.Lorentz(3)
    x = L.exp(L.origin, [0.0, 3.0, -4.0, 6.0])          # x0 ~ 1e3
    assert L.dist(x, x) == 0.0
    assert np.all(L.log(x, x) == 0.0)
    v = 1e-6 * L.random_tangent(x, rng=0)
    y = L.exp(x, v)
    tol = EPS * x[0] ** 2      # y's rounding (eps x0 per coordinate) moves it ~eps x0^2 away
    np.testing.assert_allclose(L.dist(x, y), 1e-6, atol=tol)
    np.testing.assert_allclose(L.log(x, y), v, atol=tol * x[0])


# ---------------------------------------------------------------- huge steps


def test_sphere_huge_step_wraps_around(backend):
    S = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0])
    y = S.exp(x, [0.0, 1e3, 0.0])
    np.testing.assert_allclose(y, [np.cos(1e3), np.sin(1e3), 0.0], atol=1e-12)
    assert S.is_point(S.retr(x, [0.0, 1e3, 0.0], "projection"))


def test_lorentz_overflowing_step_is_refused(backend):
    L = rf.Lorentz(2)
    o = L.origin
    assert np.isfinite(L.exp(o, [0.0, 700.0, 0.0])).all()     # cosh(700) ~ 5e303
    with pytest.raises(NoSolutionError, match="too large"):
        L.exp(o, [0.0, 1e3, 0.0])
    with pytest.raises(NoSolutionError, match=r"batch index \[\[1\]\]"):
        L.exp(np.stack([o, o]), [[0.0, 1.0, 0.0], [0.0, 1e3, 0.0]])
    with pytest.raises(NoSolutionError, match="float32"):     # float32 overflows past ~88
        L.exp(o.astype(np.float32), np.array([0.0, 100.0, 0.0], np.float32))


# ---------------------------------------------------------------- float32


def _calls(M, x, y, u):
    yield "inner", lambda: M.inner(x, u, u)
    yield "norm", lambda: M.norm(x, u)
    yield "proj", lambda: M.proj(x, u)
    yield "egrad2rgrad", lambda: M.egrad2rgrad(x, u)
    yield "zero_vector", lambda: M.zero_vector(x)
    yield "random_tangent", lambda: M.random_tangent(x, rng=0)
    yield "tangent_gaussian", lambda: M.tangent_gaussian(x, 0.5, rng=0)
    for m in M.retractions:
        yield f"retr {m}", lambda m=m: M.retr(x, u, m)
    for m in M.inverse_retractions:
        yield f"inv_retr {m}", lambda m=m: M.inv_retr(x, y, m)
    for m in M.transports:
        yield f"transport {m}", lambda m=m: M.transport(x, y, u, m)
    if "log" not in trait(M, "lacks"):
        yield "exp", lambda: M.exp(x, u)
        yield "log", lambda: M.log(x, y)
        yield "dist", lambda: M.dist(x, y)
    if trait(M, "project"):
        yield "project", lambda: M.project(x)


@manifolds
def test_float32_on_every_method(M, backend):
    x = M.random_point(2, rng=0)
    u = 0.3 * M.random_tangent(x, rng=1)
    y = M.retr(x, 0.5 * M.random_tangent(x, rng=2))
    lo = [a.astype(np.float32) for a in (x, y, u)]
    for (name, f64), (_, f32) in zip(_calls(M, x, y, u), _calls(M, *lo)):
        r64, r32 = f64(), f32()
        for a64, a32 in zip(r64 if isinstance(r64, tuple) else (r64,),
                            r32 if isinstance(r32, tuple) else (r32,)):
            assert np.asarray(a32).dtype == np.float32, name
            if name in ("random_tangent", "tangent_gaussian"):
                continue  # same draws, but not comparable after float32 rounding of x
            np.testing.assert_allclose(a32, a64, atol=2e-4 * max(1.0, np.abs(a64).max()),
                                       err_msg=name)
    assert M.is_point(lo[0]) and M.check_point(lo[0])[0]
