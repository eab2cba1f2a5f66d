"""Differentiable primitives (issue 41): gradient-carrying torch tensors and JAX tracers take
the array-namespace routes of ``rfl_fast.kernels.xp_routes`` instead of being refused.

For every covered (manifold, method, option): the route's values equal the NumPy path's
(float64), ``torch.autograd.gradcheck`` passes, ``jax.grad`` agrees with central finite
differences of the NumPy path, and the degenerate points (a zero tangent, equal points) give
finite gradients (and, where the map is smooth there, correct ones). A torch layer trains
through ``Stiefel.retr``; calls without a gradient still take the NumPy/compiled route; methods
and options without a route still refuse. Tests skip by mark where torch or JAX is missing.
"""

import importlib.util
import math

import numpy as np
import pytest

import rfl_fast as rf

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None
HAS_COMPAT = importlib.util.find_spec("array_api_compat") is not None
needs_torch = pytest.mark.skipif(not (HAS_TORCH and HAS_COMPAT),
                                 reason="needs torch and array_api_compat")
needs_jax = pytest.mark.skipif(not (HAS_JAX and HAS_COMPAT),
                               reason="needs jax and array_api_compat")

#: The manifolds with routes, small shapes (gradcheck differentiates every entry).
MANIFOLDS = {
    "Euclidean": lambda: rf.Euclidean(3, 2),
    "Sphere": lambda: rf.Sphere(4),
    "Stiefel": lambda: rf.Stiefel(4, 2),
    "SPD": lambda: rf.SPD(3),
    "Lorentz": lambda: rf.Lorentz(3),
    "Grassmann": lambda: rf.Grassmann(4, 2),
    "Product": lambda: rf.Product(rf.Sphere(3), rf.Lorentz(2)),
}

#: (manifold, method, option): every covered combination
COVERED = [
    *[(m, "proj", None) for m in MANIFOLDS],
    *[(m, "exp", None) for m in ("Euclidean", "Sphere", "SPD", "Lorentz", "Grassmann")],
    *[(m, "log", None) for m in ("Euclidean", "Sphere", "SPD", "Lorentz", "Grassmann")],
    *[(m, "dist", None) for m in ("Euclidean", "Sphere", "SPD", "Lorentz", "Grassmann")],
    ("Euclidean", "retr", "exp"), ("Sphere", "retr", "exp"), ("Sphere", "retr", "projection"),
    ("Stiefel", "retr", "polar"), ("Stiefel", "retr", "qr"), ("Stiefel", "retr", "cayley"),
    ("Stiefel", "retr", "exp"), ("Stiefel", "exp", None), ("Stiefel", "inv_retr", "polar"),
    ("Stiefel", "inv_retr", "qr"), ("SPD", "retr", "exp"),
    ("SPD", "retr", "second_order"), ("Lorentz", "retr", "exp"),
    ("Euclidean", "inv_retr", "exp"), ("Sphere", "inv_retr", "exp"),
    ("Sphere", "inv_retr", "projection"), ("SPD", "inv_retr", "exp"),
    ("Lorentz", "inv_retr", "exp"),
    ("Euclidean", "transport", "parallel"), ("Euclidean", "transport", "projection"),
    ("Sphere", "transport", "parallel"), ("Sphere", "transport", "projection"),
    ("Stiefel", "transport", "projection"), ("SPD", "transport", "parallel"),
    ("SPD", "transport", "projection"), ("Lorentz", "transport", "parallel"),
    ("Lorentz", "transport", "projection"),
    ("Grassmann", "retr", "polar"), ("Grassmann", "retr", "qr"), ("Grassmann", "retr", "exp"),
    ("Grassmann", "inv_retr", "polar"), ("Grassmann", "inv_retr", "qr"),
    ("Grassmann", "inv_retr", "exp"), ("Grassmann", "transport", "projection"),
    ("Grassmann", "transport", "parallel"),
    ("Product", "exp", None), ("Product", "log", None), ("Product", "dist", None),
    ("Product", "retr", "default"), ("Product", "retr", "exp"),
    ("Product", "inv_retr", "default"), ("Product", "inv_retr", "exp"),
    ("Product", "transport", "default"), ("Product", "transport", "parallel"),
    ("Product", "transport", "projection"),
    *[(m, "project", None) for m in ("Euclidean", "Sphere", "Stiefel", "Grassmann")],
    *[(m, "inner", None) for m in MANIFOLDS],
    *[(m, "norm", None) for m in MANIFOLDS],
    *[(m, "egrad2rgrad", None) for m in MANIFOLDS],
]


def case_id(case):
    return "-".join(str(c) for c in case if c is not None)


def make_args(M, method, option, *, step=0.7, seed=0, degenerate=False):
    """NumPy float64 arguments of ``M.method`` (a batch of 2): ``degenerate`` gives a zero
    tangent (``exp``, ``retr``) or equal points (``log``, ``inv_retr``, ``dist``,
    ``transport``)."""
    rng = np.random.default_rng(seed)
    x = M.random_point(2, rng=rng)
    u = M.random_tangent(x, rng=rng) * (0.0 if degenerate else step)
    v = M.random_tangent(x, rng=rng)
    y = x.copy() if degenerate else M.retr(x, M.random_tangent(x, rng=rng) * step, option
                                            if method == "inv_retr" else None)
    if method == "project":
        return (x + 0.3 * rng.standard_normal(x.shape),)
    if method in ("proj", "egrad2rgrad"):
        return (x, rng.standard_normal(x.shape))
    if method == "inner":
        return (x, u, v)
    if method == "norm":
        return (x, u)
    if method in ("exp", "retr"):
        return (x, u)
    if method in ("log", "inv_retr", "dist"):
        return (x, y)
    return (x, y, v)


def kw(option):
    return {} if option is None else {"method": option}


def directions(M, method, args, rng):
    """Random perturbations of ``args``; symmetric for SPD (its maps read symmetric matrices:
    NumPy's ``eigh`` the lower triangle, the routes ``sym(x)``); horizontal at the points for
    Grassmann (off the manifold, ``X'X != I``, its NumPy maps, from one SVD of ``X'Y``, and the
    routes, from ``Z'Z``, are different extensions of the same maps)."""
    points = (0, 1) if method in ("log", "inv_retr", "dist", "transport") else (0,)
    out = []
    for i, a in enumerate(args):
        d = rng.standard_normal(a.shape)
        if isinstance(M, rf.SPD):
            d = 0.5 * (d + np.swapaxes(d, -1, -2))
        if isinstance(M, rf.Grassmann) and i in points:
            d = M.proj(a, d)
        out.append(d)
    return out


def bound(M, ref):
    """Values of the route against the NumPy path. Both evaluate the same formulas on the same
    float64 inputs, but by other means: the polar factor from the eigh of the p x p Gram matrix
    (NumPy: an SVD), SPD's matrix functions from torch's or JAX's eigh (NumPy and C++: their
    own eigensolvers), other summation orders. Each entry is a short, well-conditioned chain of
    sums no longer than a point (``size``) and eigen-decompositions of matrices of condition at
    most ~20 here: 100 ``size`` eps of the result's scale covers them with room (the observed
    differences are below 50 eps)."""
    size = math.prod(M.shape)
    return 100 * size * np.finfo(np.float64).eps * max(1.0, float(np.max(np.abs(ref))))


# ---------------------------------------------------------------- torch


@pytest.fixture
def torch():
    import torch

    return torch


@needs_torch
@pytest.mark.parametrize("case", COVERED, ids=case_id)
def test_torch_values_equal_the_numpy_path(torch, case):
    name, method, option = case
    M = MANIFOLDS[name]()
    args = make_args(M, method, option)
    ref = getattr(M, method)(*args, **kw(option))
    targs = [torch.tensor(a, requires_grad=True) for a in args]
    out = getattr(M, method)(*targs, **kw(option))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert out.shape == np.shape(ref)
    got = out.detach().numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound(M, ref))
    assert out.requires_grad


@needs_torch
@pytest.mark.parametrize("case", COVERED, ids=case_id)
def test_torch_gradcheck(torch, case):
    name, method, option = case
    M = MANIFOLDS[name]()
    args = make_args(M, method, option)
    targs = tuple(torch.tensor(a, requires_grad=True) for a in args)
    assert torch.autograd.gradcheck(lambda *t: getattr(M, method)(*t, **kw(option)), targs,
                                    eps=1e-6, atol=1e-6, rtol=1e-5)


DEGENERATE = [c for c in COVERED if c[1] not in ("proj", "egrad2rgrad", "project")]
#: not differentiable at the degenerate point (equal points, a zero vector): gradient 0 there
KINKED = ("dist", "norm")


@needs_torch
@pytest.mark.parametrize("case", DEGENERATE, ids=case_id)
def test_torch_degenerate_points_give_finite_gradients(torch, case):
    """A zero tangent (``exp``/``retr``), equal points (``log``, ``inv_retr``, ``dist``,
    ``transport``; ``inner`` and ``norm`` of a zero vector): the gradient is finite; where the
    map is smooth there (all but ``dist`` and ``norm``, whose gradient there is 0, a
    subgradient) gradcheck passes across the point."""
    name, method, option = case
    M = MANIFOLDS[name]()
    args = make_args(M, method, option, degenerate=True)
    targs = tuple(torch.tensor(a, requires_grad=True) for a in args)
    out = getattr(M, method)(*targs, **kw(option))
    assert torch.isfinite(out).all()
    weights = torch.from_numpy(np.random.default_rng(1).standard_normal(tuple(out.shape)))
    (out * weights).sum().backward()
    for t in targs:
        assert t.grad is None or torch.isfinite(t.grad).all()
    if method not in KINKED:
        targs = tuple(torch.tensor(a, requires_grad=True) for a in args)
        assert torch.autograd.gradcheck(lambda *t: getattr(M, method)(*t, **kw(option)),
                                        targs, eps=1e-6, atol=1e-6, rtol=1e-5)


@needs_torch
def test_torch_exp_at_zero_has_the_identity_differential(torch):
    """d/du Exp_x(u) at u = 0 is the identity on the tangent space (Sphere, Lorentz, SPD)."""
    for M in (rf.Sphere(4), rf.Lorentz(3), rf.SPD(3)):
        x = M.random_point(rng=3)
        w = M.random_tangent(x, rng=4)
        u = torch.zeros(M.shape, dtype=torch.float64, requires_grad=True)
        jvp = torch.autograd.functional.jvp(lambda u: M.exp(torch.from_numpy(x), u), u,
                                            torch.from_numpy(w))[1]
        np.testing.assert_allclose(jvp.numpy(), w, atol=1e-12)


@needs_torch
def test_torch_lorentz_near_and_far_branches(torch):
    """Lorentz's log and dist switch formulas at distance ~1e-2: both sides differentiate
    (the finite-difference step a thousandth of the distance: the distance's curvature is
    ~1/distance)."""
    M = rf.Lorentz(3)
    x = M.random_point(rng=5)
    for t in (1e-5, 1e-3, 0.5, 3.0):
        y = M.exp(x, t * M.random_tangent(x, rng=6))
        for method in ("log", "dist"):
            ref = getattr(M, method)(x, y)
            tx, ty = (torch.tensor(a, requires_grad=True) for a in (x, y))
            out = getattr(M, method)(tx, ty)
            np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-15)
            tx, ty = (torch.tensor(a, requires_grad=True) for a in (x, y))
            assert torch.autograd.gradcheck(lambda a, b: getattr(M, method)(a, b), (tx, ty),
                                            eps=min(1e-6, 1e-3 * t), atol=1e-6,
                                            rtol=1e-5)


@needs_torch
def test_torch_model_layer_trains_through_stiefel_retr(torch):
    """A layer whose weight is ``Stiefel.retr(x0, proj(x0, p))`` of a free parameter ``p``
    (initialised at zero: the identity Gram matrix, a repeated eigenvalue): ``backward`` works
    and SGD on a PCA loss decreases it, the weight staying on the manifold."""
    M = rf.Stiefel(6, 2)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 6))
    cov = torch.from_numpy(a @ a.T)
    x0 = torch.from_numpy(M.random_point(rng=rng))

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p = torch.nn.Parameter(torch.zeros(6, 2, dtype=torch.float64))

        def weight(self):
            return M.retr(x0, M.proj(x0, self.p))

        def forward(self, z):
            return z @ self.weight()

    layer = Layer()
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        w = layer.weight()
        loss = -torch.trace(w.T @ cov @ w)
        loss.backward()
        assert torch.isfinite(layer.p.grad).all()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0] - 1.0
    assert all(b <= a + 1e-12 for a, b in zip(losses, losses[1:]))
    w = layer.weight().detach().numpy()
    assert M.is_point(w)
    out = layer(torch.ones(3, 6, dtype=torch.float64))
    assert out.shape == (3, 2)


@needs_torch
def test_torch_func_grad_and_vmap(torch):
    M = rf.Sphere(4)
    x = torch.from_numpy(M.random_point(3, rng=8))
    u = torch.from_numpy(M.random_tangent(x.numpy(), rng=9))
    g = torch.func.grad(lambda u: M.dist(x[0], M.exp(x[0], u)))(u[0])
    # dist(x, Exp_x(u)) = |u| for tangent u (|u| = 1 < pi): its tangent gradient is u/|u|
    np.testing.assert_allclose(M.proj(x[0].numpy(), g.numpy()),
                               u[0].numpy() / np.linalg.norm(u[0].numpy()), atol=1e-12)
    leaf = u[0].clone().requires_grad_(True)
    M.dist(x[0], M.exp(x[0], leaf)).backward()
    np.testing.assert_allclose(g.numpy(), leaf.grad.numpy(), atol=1e-15)
    out = torch.func.vmap(lambda x, u: M.exp(x, u))(x, u)
    np.testing.assert_allclose(out.numpy(), M.exp(x.numpy(), u.numpy()), atol=1e-15)


@needs_torch
def test_torch_float32_and_broadcasting(torch):
    M = rf.Sphere(4)
    x = M.random_point(rng=10)
    u = M.random_tangent(np.broadcast_to(x, (3, 4)), rng=11)
    tu = torch.tensor(u, dtype=torch.float32, requires_grad=True)
    out = M.exp(torch.tensor(x, dtype=torch.float32), tu)
    assert out.dtype == torch.float32 and out.shape == (3, 4)
    np.testing.assert_allclose(out.detach().numpy(), M.exp(x, u), atol=1e-6)
    out = M.exp(x, torch.tensor(u, requires_grad=True))  # NumPy x, grad-carrying u
    assert out.dtype == torch.float64 and out.requires_grad


@needs_torch
def test_calls_without_a_gradient_keep_the_numpy_route(torch, monkeypatch):
    """No gradient: the compiled/NumPy route as before (the route is never called), NumPy in
    gives NumPy out."""
    M = rf.Stiefel(5, 2)
    x = M.random_point(rng=12)
    u = M.random_tangent(x, rng=13)

    def spy(*args, **kwargs):
        raise AssertionError("the namespace route ran without a gradient")

    monkeypatch.setitem(type(M).retr.__globals__, "_route", spy)
    ref = M.retr(x, u)
    assert type(ref) is np.ndarray
    out = M.retr(torch.from_numpy(x), torch.from_numpy(u))
    assert isinstance(out, torch.Tensor) and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), ref)
    with pytest.raises(AssertionError, match="route ran"):
        M.retr(x, torch.tensor(u, requires_grad=True))


@needs_torch
def test_uncovered_methods_and_options_still_refuse(torch):
    M = rf.Stiefel(5, 2)
    x = torch.from_numpy(M.random_point(rng=14))
    u = torch.zeros(5, 2, dtype=torch.float64, requires_grad=True)
    z = torch.from_numpy(M.random_point(rng=15)).requires_grad_(True)
    with pytest.raises(NotImplementedError, match=r"^x: a tensor that requires grad; "
                       r"Stiefel\.tangent_gaussian has no differentiable route.*x\.detach"):
        M.tangent_gaussian(z, 1.0)
    with pytest.raises(NotImplementedError, match=r"^x: .*Sphere\.tangent_gaussian has no "):
        rf.Sphere(3).tangent_gaussian(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64,
                                                   requires_grad=True), 1.0)
    G = rf.Grassmann(5, 2)
    with pytest.raises(NotImplementedError, match=r"^y: .*Grassmann\.principal_angles has no"):
        G.principal_angles(x, torch.zeros(5, 2, dtype=torch.float64, requires_grad=True))
    P = rf.Product(rf.Grassmann(3, 2), rf.Sphere(3))
    with pytest.raises(NotImplementedError, match=r"^x: .*Product\.split has no differentia"):
        P.split(torch.ones(9, dtype=torch.float64, requires_grad=True))

    class Mine(rf.Sphere):  # overrides exp without declaring a route: refused, not Sphere's
        def exp(self, x, u, *, backend=None):
            return super().exp(x, u, backend=backend)

    with pytest.raises(NotImplementedError, match=r"^u: .*Mine\.exp has no differentiable"):
        Mine(3).exp(np.array([1.0, 0.0, 0.0]),
                    torch.zeros(3, dtype=torch.float64, requires_grad=True))
    assert Mine(3).log(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64, requires_grad=True),
                       np.array([0.0, 1.0, 0.0])).requires_grad  # inherited: Sphere's route
    with pytest.raises(ValueError, match="unknown retraction"):
        rf.Sphere(3).retr(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
                          torch.zeros(3, dtype=torch.float64, requires_grad=True), "nope")
    with pytest.raises(ValueError, match=r"u: expected shape \(\.\.\., 3\)"):
        rf.Sphere(3).exp(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),
                         torch.zeros(4, dtype=torch.float64, requires_grad=True))


# ---------------------------------------------------------------- JAX


@pytest.fixture
def jax():
    import jax

    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", before)


@needs_jax
@pytest.mark.parametrize("case", COVERED, ids=case_id)
def test_jax_grad_matches_finite_differences_of_the_numpy_path(jax, case):
    """``jax.grad`` of ``sum(W * f(args))`` along random directions against the central
    difference of the NumPy path with step 1e-6 (error ~ 1e-12 from the step, ~1e-10 from
    rounding divided by the step: rtol 1e-6); the values agree as in torch."""
    name, method, option = case
    M = MANIFOLDS[name]()
    args = make_args(M, method, option)
    rng = np.random.default_rng(2)
    ref = getattr(M, method)(*args, **kw(option))
    weights = rng.standard_normal(np.shape(ref))
    jnp = jax.numpy

    def loss(*a):
        return jnp.sum(jnp.asarray(weights) * getattr(M, method)(*a, **kw(option)))

    jargs = [jnp.asarray(a) for a in args]
    value, grads = jax.value_and_grad(loss, argnums=tuple(range(len(args))))(*jargs)
    np.testing.assert_allclose(float(value), float(np.sum(weights * ref)), rtol=0,
                               atol=bound(M, ref) * np.sum(np.abs(weights)))
    dirs = directions(M, method, args, rng)
    h = 1e-6

    def f(sign):
        moved = [a + sign * h * d for a, d in zip(args, dirs)]
        return float(np.sum(weights * getattr(M, method)(*moved, **kw(option))))

    fd = (f(1.0) - f(-1.0)) / (2 * h)
    ad = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(grads, dirs))
    np.testing.assert_allclose(ad, fd, rtol=1e-6, atol=1e-7)


@needs_jax
@pytest.mark.parametrize("case", DEGENERATE, ids=case_id)
def test_jax_degenerate_points_give_finite_gradients(jax, case):
    name, method, option = case
    M = MANIFOLDS[name]()
    args = make_args(M, method, option, degenerate=True)
    jnp = jax.numpy
    grads = jax.grad(lambda *a: jnp.sum(getattr(M, method)(*a, **kw(option))),
                     argnums=tuple(range(len(args))))(*[jnp.asarray(a) for a in args])
    for g in grads:
        assert np.isfinite(np.asarray(g)).all()


@needs_jax
def test_jax_jit_and_vmap_trace_through(jax):
    jnp = jax.numpy
    M = rf.Stiefel(5, 2)
    x = M.random_point(3, rng=15)
    u = M.random_tangent(x, rng=16)
    out = jax.jit(lambda x, u: M.retr(x, u))(jnp.asarray(x), jnp.asarray(u))
    np.testing.assert_allclose(np.asarray(out), M.retr(x, u), atol=1e-14)
    out = jax.vmap(lambda x, u: M.retr(x, u, "qr"))(jnp.asarray(x), jnp.asarray(u))
    np.testing.assert_allclose(np.asarray(out), M.retr(x, u, "qr"), atol=1e-14)
    S = rf.SPD(3)
    p = S.random_point(2, rng=17)
    q = S.random_point(2, rng=18)
    d = jax.jit(jax.vmap(S.dist))(jnp.asarray(p), jnp.asarray(q))
    np.testing.assert_allclose(np.asarray(d), S.dist(p, q), rtol=1e-13)


@needs_jax
def test_jax_uncovered_methods_still_refuse(jax):
    M = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(NotImplementedError, match=r"^x: a JAX tracer.*Sphere\.check_point has"):
        jax.grad(lambda z: M.check_point(z)[0])(jax.numpy.asarray([0.0, 1.0, 0.0]))


def test_every_declared_route_exists():
    """Without torch or JAX too: each manifold's ``array_routes`` names a route of
    ``xp_routes.ROUTES`` for a method the class itself defines, wrapped with that route."""
    from rfl_fast.kernels import xp_routes

    declared = 0
    for cls in (rf.Manifold, rf.Euclidean, rf.Sphere, rf.Stiefel, rf.SPD, rf.Lorentz,
                rf.Grassmann, rf.Product):
        for method, route in cls.array_routes.items():
            assert route in xp_routes.ROUTES, (cls, route)
            fn = vars(cls)[method]
            assert fn.__globals__["_route"] is xp_routes.ROUTES[route], (cls, method)
            declared += 1
    for name in rf.linalg.__all__:  # the functions of rfl_fast.linalg: linalg_<name>
        fn = getattr(rf.linalg, name)
        assert fn.__globals__["_route"] is xp_routes.ROUTES[f"linalg_{name}"], name
        declared += 1
    assert declared == len(xp_routes.ROUTES) == 70


@needs_torch
def test_torch_zero_vector_and_a_riemannian_gradient_norm(torch):
    """``zero_vector`` answers zeros of the caller's type; ``norm(x, egrad2rgrad(x, g))``, the
    Riemannian gradient's norm, differentiates (SPD: the affine-invariant metric)."""
    M = rf.SPD(3)
    x = torch.tensor(M.random_point(rng=19), requires_grad=True)
    z = M.zero_vector(x)
    assert isinstance(z, torch.Tensor) and not z.any()
    g = torch.tensor(np.eye(3), requires_grad=True)
    out = M.norm(x, M.egrad2rgrad(x, g))
    ref = M.norm(x.detach().numpy(), M.egrad2rgrad(x.detach().numpy(), np.eye(3)))
    np.testing.assert_allclose(float(out.detach()), ref, rtol=1e-13)
    out.backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(g.grad).all()


@needs_torch
def test_torch_product_project(torch):
    """``Product.project`` factor by factor (the test product's Lorentz factor has none)."""
    P = rf.Product(rf.Sphere(3), rf.Stiefel(3, 2))
    z = P.random_point(2, rng=20) + 0.3 * np.random.default_rng(21).standard_normal((2, 9))
    tz = torch.tensor(z, requires_grad=True)
    out = P.project(tz)
    np.testing.assert_allclose(out.detach().numpy(), P.project(z), atol=1e-14)
    assert torch.autograd.gradcheck(P.project, (tz,), eps=1e-6, atol=1e-6, rtol=1e-5)


@needs_torch
def test_a_route_that_cannot_serve_refuses(torch, monkeypatch):
    """A route that raises ``NoRoute`` (Stiefel's ``exp`` without a differentiable matrix
    exponential in the namespace) ends in the refusal, with the reason."""
    from rfl_fast.kernels import xp_routes

    def no_expm(xp, a):
        raise xp_routes.NoRoute("no differentiable matrix exponential here")

    monkeypatch.setattr(xp_routes, "_expm", no_expm)
    M = rf.Stiefel(4, 2)
    x = M.random_point(rng=22)
    with pytest.raises(NotImplementedError, match=r"^u: a tensor that requires grad; Stiefel\.exp "
                       r"\(no differentiable matrix exponential here\) has no differentiable"):
        M.exp(x, torch.zeros(4, 2, dtype=torch.float64, requires_grad=True))


# ---------------------------------------------------------------- rfl_fast.linalg


def linalg_cases():
    """``(function, argument)`` of each ``rfl_fast.linalg`` function: a small stack of SPD
    matrices (well inside ``expm``'s range) or of full-rank 5 x 3 matrices for ``polar``."""
    rng = np.random.default_rng(30)
    a = rng.standard_normal((2, 3, 3))
    s = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    return [("sym_expm", 0.2 * s), ("sym_logm", s), ("sym_sqrtm", s), ("sym_invsqrtm", s),
            ("polar", rng.standard_normal((2, 5, 3)))]


def _symmetrized(name, z):
    """The function of the symmetric part of ``z`` (gradcheck moves one entry at a time, which
    leaves the symmetric matrices; the route's derivative is the symmetric part's)."""
    fn = getattr(rf.linalg, name)
    return fn(z) if name == "polar" else fn(0.5 * (z + z.transpose(-1, -2)))


@needs_torch
@pytest.mark.parametrize("name,arg", linalg_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_torch_linalg_values_and_gradcheck(torch, name, arg):
    ref = getattr(rf.linalg, name)(arg)
    t = torch.tensor(arg, requires_grad=True)
    out = getattr(rf.linalg, name)(t)
    assert isinstance(out, torch.Tensor) and out.requires_grad and out.dtype == torch.float64
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=0,
                               atol=100 * 9 * np.finfo(np.float64).eps * np.max(np.abs(ref)))
    assert torch.autograd.gradcheck(lambda z: _symmetrized(name, z), (t,), eps=1e-6, atol=1e-6,
                                    rtol=1e-5)


@needs_jax
@pytest.mark.parametrize("name,arg", linalg_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_jax_linalg_grad_matches_finite_differences(jax, name, arg):
    """``jax.grad`` of ``sum(W * f(a))`` along a random symmetric (for ``polar``: any)
    direction against the central difference of the NumPy path."""
    fn = getattr(rf.linalg, name)
    jnp = jax.numpy
    rng = np.random.default_rng(31)
    weights = rng.standard_normal(np.shape(fn(arg)))
    d = rng.standard_normal(np.shape(arg))
    if name != "polar":
        d = d + np.swapaxes(d, -1, -2)
    grad = jax.jit(jax.grad(lambda a: jnp.sum(jnp.asarray(weights) * fn(a))))(jnp.asarray(arg))
    h = 1e-6
    fd = (np.sum(weights * fn(arg + h * d)) - np.sum(weights * fn(arg - h * d))) / (2 * h)
    np.testing.assert_allclose(float(np.sum(np.asarray(grad) * d)), fd, rtol=1e-6, atol=1e-7)


@needs_torch
def test_torch_linalg_routes_check_shapes_and_give_nan_without_an_answer(torch):
    """A gradient-carrying argument is checked for shape and dtype as NumPy's path checks it;
    values cannot be inspected on a traced array, so a matrix that is not positive definite
    gives NaN (not ``NoSolutionError``), as the manifolds' routes do."""
    with pytest.raises(ValueError, match=r"^s: expected shape \(\.\.\., 3, 3\)"):
        rf.linalg.sym_sqrtm(torch.ones(2, 3, dtype=torch.float64, requires_grad=True))
    with pytest.raises(ValueError, match="^a: expected shape .* n >= p"):
        rf.linalg.polar(torch.ones(2, 3, dtype=torch.float64, requires_grad=True))
    with pytest.raises(ValueError, match="^s: expected at least 2 dimensions"):
        rf.linalg.sym_expm(torch.ones(3, dtype=torch.float64, requires_grad=True))
    out = rf.linalg.sym_logm(-torch.eye(2, dtype=torch.float64).requires_grad_(True))
    assert torch.isnan(out).all()
