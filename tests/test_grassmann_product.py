"""Grassmann and Product beyond the shared identity suite: what is particular to a quotient
(results independent of the representatives) and to a product (the flat layout, per-factor
options, errors naming the factor)."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.errors import MethodNotAvailableError, NoSolutionError, NotOnManifoldError

EPS = np.finfo(np.float64).eps


def _t(a):
    return np.swapaxes(a, -1, -2)


def rotations(p, *batch, seed=0):
    q = np.linalg.qr(np.random.default_rng(seed).standard_normal(batch + (p, p)))[0]
    return q


def unit_tangent(M, x, scale, seed):
    return scale * M.random_tangent(x, rng=seed)


# ------------------------------------------------------------------ Grassmann


@pytest.fixture
def gr():
    return rf.Grassmann(9, 3)


def test_grassmann_maps_do_not_depend_on_the_representatives(gr, backend):
    """inv_retr, log, dist and the transports give the lift at the representatives given:
    ``y -> yQ`` leaves a lift at ``x`` unchanged and turns a lift at ``y`` into ``W Q``;
    ``x -> xQ`` turns a lift at ``x`` into ``U Q``."""
    x, y = gr.random_point(4, rng=1), gr.random_point(4, rng=2)
    q1, q2 = rotations(3, 4, seed=3), rotations(3, 4, seed=4)
    v = unit_tangent(gr, x, 0.7, 5)
    bound = 100 * EPS   # a few products and one p x p SVD of well-conditioned matrices
    for method in gr.inverse_retractions:
        u = gr.inv_retr(x, y, method)
        np.testing.assert_allclose(gr.inv_retr(x, y @ q2, method), u, atol=bound)
        np.testing.assert_allclose(gr.inv_retr(x @ q1, y, method), u @ q1, atol=bound)
    np.testing.assert_allclose(gr.dist(x @ q1, y @ q2), gr.dist(x, y), atol=bound)
    for method in gr.transports:
        w = gr.transport(x, y, v, method)
        np.testing.assert_allclose(gr.transport(x, y @ q2, v, method), w @ q2, atol=bound)
        np.testing.assert_allclose(gr.transport(x @ q1, y, v @ q1, method), w, atol=bound)


def test_grassmann_polar_and_qr_reach_one_subspace_with_one_inverse(gr, backend):
    x = gr.random_point(5, rng=0)
    u = unit_tangent(gr, x, 2.0, 1)
    yp, yq = gr.retr(x, u, "polar"), gr.retr(x, u, "qr")
    np.testing.assert_allclose(yp @ _t(yp), yq @ _t(yq), atol=1e-13)
    np.testing.assert_allclose(gr.dist(yp, yq), 0.0, atol=1e-7)
    np.testing.assert_allclose(gr.inv_retr(x, yp, "qr"), u, atol=1e-12)
    np.testing.assert_allclose(gr.inv_retr(x, yq, "polar"), u, atol=1e-12)
    # the polar retraction is the Stiefel kernel's: same bits
    np.testing.assert_array_equal(yp, rf.Stiefel(9, 3).retr(x, u))


def test_grassmann_exp_is_the_geodesic_and_parallel_transport_carries_its_velocity(gr):
    x = gr.random_point(rng=0)
    u = unit_tangent(gr, x, 1.2, 1)
    h = 1e-5
    for t in (0.3, 1.0):
        y = gr.exp(x, t * u)
        velocity = (gr.exp(x, (t + h) * u) - gr.exp(x, (t - h) * u)) / (2 * h)
        # the curve Exp_X(tU) is horizontal, so its velocity is the lift of the geodesic's
        # velocity, which parallel transport carries: error O(h^2) of the central difference
        np.testing.assert_allclose(gr.transport(x, y, u, "parallel"), velocity, atol=1e-8)
        np.testing.assert_allclose(gr.dist(x, y), t * 1.2, atol=1e-13)
    # the principal angles of Exp_X(U) are U's singular values
    s = np.linalg.svd(u, compute_uv=False)[::-1]
    np.testing.assert_allclose(gr.principal_angles(x, gr.exp(x, u)), s, atol=1e-13)


def test_grassmann_dist_is_accurate_for_tiny_and_right_angles(gr):
    x = gr.random_point(rng=0)
    u = unit_tangent(gr, x, 1.0, 1)
    for t in (1e-12, 1e-6):
        # the principal angles come from atan2(sin, cos): an error of a few eps (the rounding
        # of the stored Exp_X(tU) itself), not the sqrt(eps) ~ 1e-8 floor of arccos(cos)
        np.testing.assert_allclose(gr.dist(x, gr.exp(x, t * u)), t, rtol=0, atol=64 * EPS)
    e = np.eye(9)
    np.testing.assert_allclose(gr.principal_angles(e[:, :3], e[:, [0, 1, 5]]),
                               [0, 0, np.pi / 2], atol=1e-15)
    np.testing.assert_allclose(gr.dist(x, x), 0.0, atol=1e-14)
    np.testing.assert_allclose(gr.dist(x, gr.random_point(rng=3)),
                               rf.Stiefel(9, 3).dist_subspace(x, gr.random_point(rng=3)),
                               atol=1e-13)


@pytest.mark.parametrize("what", ["log", "inv_retr", "qr", "parallel"])
def test_grassmann_right_angle_has_no_unique_lift(gr, what):
    e = np.eye(9)
    x = np.stack([e[:, :3], e[:, :3]])
    y = np.stack([e[:, [1, 0, 2]], e[:, [0, 1, 7]]])     # the second item: 90 degrees
    v = gr.proj(x, np.ones((2, 9, 3)))
    call = {"log": lambda: gr.log(x, y), "inv_retr": lambda: gr.inv_retr(x, y),
            "qr": lambda: gr.inv_retr(x, y, "qr"),
            "parallel": lambda: gr.transport(x, y, v, "parallel")}[what]
    with pytest.raises(NoSolutionError, match=r"90 degrees.*batch index \[\[1\]\]"):
        call()
    # the projection transport is defined there (with some rotation): tangent at y
    assert gr.is_tangent(y, gr.transport(x, y, v, "projection"))


def test_grassmann_projection_transport_is_pymanopts_after_a_polar_step(gr):
    x = gr.random_point(rng=0)
    u, v = unit_tangent(gr, x, 0.5, 1), unit_tangent(gr, x, 1.0, 2)
    for y in (gr.retr(x, u), gr.exp(x, u)):
        np.testing.assert_allclose(gr.transport(x, y, v), v - y @ (y.T @ v), atol=1e-14)


def test_grassmann_checks_its_arguments(gr):
    with pytest.raises(ValueError, match="n >= p >= 1"):
        rf.Grassmann(2, 3)
    x = gr.random_point(rng=0)
    with pytest.raises(ValueError, match="u"):
        gr.retr(x, np.ones((9, 2)))
    with pytest.raises(ValueError, match="unknown retraction 'cayley'"):
        gr.retr(x, np.zeros_like(x), "cayley")
    checked = rf.Grassmann(9, 3, validate=True)
    with pytest.raises(NotOnManifoldError, match="u: not a tangent vector"):
        checked.retr(x, x)
    # vertical: tangent to St(9, 3) (X'U skew), so the Stiefel kernels would take it, but not
    # horizontal (X'U != 0)
    with pytest.raises(NotOnManifoldError, match="u: not a tangent vector"):
        checked.retr(x, x @ np.array([[0, 1, 0], [-1, 0, 0], [0, 0, 0.0]]))
    assert gr == rf.Grassmann(9, 3) and gr != rf.Stiefel(9, 3)
    assert repr(gr) == "Grassmann(9, 3)" and gr.dim == 18


# ------------------------------------------------------------------ Product

@pytest.fixture
def prod():
    return rf.Product(rf.Stiefel(6, 2), rf.Sphere(3), rf.SPD(2))


def test_product_layout_split_and_join(prod):
    assert prod.shape == (12 + 3 + 4,) and prod.dim == 9 + 2 + 3
    x = prod.random_point(2, 5, rng=0)
    frame, direction, spd = prod.split(x)
    assert frame.shape == (2, 5, 6, 2) and direction.shape == (2, 5, 3)
    assert spd.shape == (2, 5, 2, 2)
    assert np.shares_memory(frame, x)                          # views, no copy
    np.testing.assert_array_equal(prod.join(frame, direction, spd), x)
    # batch axes broadcast in join: one frame with five directions
    joined = prod.join(frame[0, 0], direction[0], spd[0])
    assert joined.shape == (5, 19)
    np.testing.assert_array_equal(prod.split(joined)[0], np.broadcast_to(frame[0, 0],
                                                                         (5, 6, 2)))
    with pytest.raises(ValueError, match=r"parts: expected 3 arrays"):
        prod.join(frame, direction)
    with pytest.raises(ValueError, match=r"parts\[1\]"):
        prod.join(frame, spd, spd)


def test_product_maps_are_the_factors_maps(prod, backend):
    x = prod.random_point(4, rng=0)
    u = 0.5 * prod.random_tangent(x, rng=1)
    v = 0.5 * prod.random_tangent(x, rng=2)
    parts = list(zip(prod.factors, prod.split(x), prod.split(u), prod.split(v)))
    y = prod.retr(x, u)
    for (f, xi, ui, _), yi in zip(parts, prod.split(y)):
        np.testing.assert_array_equal(yi, f.retr(xi, ui))
    np.testing.assert_allclose(prod.inner(x, u, v),
                               sum(f.inner(xi, ui, vi) for f, xi, ui, vi in parts), rtol=1e-15)
    np.testing.assert_allclose(prod.norm(x, u), np.sqrt(sum(f.norm(xi, ui) ** 2
                                                            for f, xi, ui, _ in parts)),
                               rtol=1e-15)
    # per-factor methods: a tuple of names
    y2 = prod.retr(x, u, ("qr", "projection", "second_order"))
    for (f, xi, ui, _), yi, m in zip(parts, prod.split(y2), ("qr", "projection",
                                                             "second_order")):
        np.testing.assert_array_equal(yi, f.retr(xi, ui, m))
    np.testing.assert_allclose(prod.inv_retr(x, y), u, atol=1e-12)


def test_product_options_and_errors_name_the_factor(prod):
    assert prod.retractions == ("default", "exp")
    assert prod.inverse_retractions == ("default",)      # Stiefel has no exp inverse (log)
    assert prod.transports == ("default", "projection")
    assert prod.has_project is False and prod.has_tangent_gaussian is True
    x = prod.random_point(rng=0)
    with pytest.raises(MethodNotAvailableError, match=r"no `log`: factor 0, Stiefel\(6, 2\)"):
        prod.log(x, x)
    with pytest.raises(MethodNotAvailableError, match="provides no `project`"):
        prod.project(x)
    with pytest.raises(ValueError, match="one retraction per factor"):
        prod.retr(x, prod.zero_vector(x), ("qr", "exp"))
    with pytest.raises(ValueError, match="unknown retraction 'qr'"):
        prod.retr(x, prod.zero_vector(x), "qr")
    with pytest.raises(TypeError, match=r"factors\[1\]: expected an rfl_fast manifold"):
        rf.Product(rf.Sphere(3), "Sphere(3)")
    with pytest.raises(ValueError, match="at least one manifold"):
        rf.Product()
    bad = x.copy()
    bad[12] += 1.0                                   # the sphere factor's first entry
    with pytest.raises(NotOnManifoldError, match=r"factor 1 \(Sphere\(3\)\)"):
        rf.Product(*prod.factors, validate=True).exp(bad, prod.zero_vector(x))


def test_product_equality_and_norms_without_overflow():
    a = rf.Product(rf.Sphere(3), rf.Euclidean(2))
    assert a == rf.Product(rf.Sphere(3), rf.Euclidean(2))
    assert a != rf.Product(rf.Euclidean(2), rf.Sphere(3))
    assert hash(a) == hash(rf.Product(rf.Sphere(3), rf.Euclidean(2)))
    assert repr(a) == "Product(Sphere(3), Euclidean(2))"
    x = a.random_point(rng=0)
    assert a.norm(x, a.zero_vector(x)) == 0.0
    # factor norms whose squares sum past the largest float: the product's norm is combined
    # without squaring them
    b = rf.Product(rf.Euclidean(1), rf.Euclidean(1))
    u = np.array([1.2e154, 1.3e154])                 # squares 1.44e308, 1.69e308
    assert b.norm(np.zeros(2), u) == pytest.approx(np.sqrt(1.44 + 1.69) * 1e154, rel=1e-15)


@pytest.mark.parametrize("scale", [0.0, 1e-9, 1e-2, 0.7, 3.0])
@pytest.mark.parametrize("rank", [3, 1])
def test_grassmann_exp_is_the_thin_svd_formula(scale, rank):
    """``exp`` from ``U'U``'s eigendecomposition (``X C + U D``, ``D = B sinc(S) B'``) against
    the textbook thin-SVD form ``X B cos(S) B' + A sin(S) B'`` (then the same Newton-Schulz
    step): equal to rounding for tiny, moderate, beyond-pi and rank-deficient steps (the
    eigenvalues' absolute rounding eps |U|^2 moves cos and sinc, even in S, by rounding only;
    the angle's own rounding, eps |S|, bounds both forms' agreement), and orthonormal."""
    M = rf.Grassmann(11, 3)
    rng = np.random.default_rng(5)
    x = M.random_point(4, rng=rng)
    g = rng.standard_normal((4, 11, rank)) @ rng.standard_normal((4, rank, 3))
    u = M.proj(x, g)
    u *= scale / max(np.max(np.linalg.norm(u, axis=(-2, -1))), 1e-300)
    a, sig, bt = np.linalg.svd(u, full_matrices=False)
    y = (x @ (_t(bt) * np.cos(sig)[..., None, :]) + a * np.sin(sig)[..., None, :]) @ bt
    want = 1.5 * y - 0.5 * y @ (_t(y) @ y)
    got = M.exp(x, u)
    assert np.max(np.abs(got - want)) <= 64 * EPS * (1.0 + scale)
    assert np.max(np.abs(_t(got) @ got - np.eye(3))) <= 16 * EPS
    # broadcasting of one point against a stack, both ways, and float32 in float32 out
    assert np.allclose(M.exp(x[0], u[:1])[0], got[0], rtol=0, atol=64 * EPS * (1 + scale))
    assert M.exp(x.astype(np.float32), u.astype(np.float32)).dtype == np.float32
