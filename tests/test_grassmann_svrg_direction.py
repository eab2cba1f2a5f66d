"""RFedSVRG's (and 2BB's) local direction on Grassmann in one projection
(``Grassmann._corrected_direction``, used by ``svrg.py``'s composed local steps): the same
vector as the composed maps ``proj_Y(G) - T_{X -> Y}(V - c R^-1_X(Y))`` to rounding, and the
same iterates."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.algorithms import RFedSVRG, RFedSVRG2BB
from rfl_fast.algorithms.participation import Full
from rfl_fast.errors import NoSolutionError
from rfl_fast.problems import KPCA

EPS = np.finfo(np.float64).eps


def _composed(M, x, y, g, v, coef, method):
    w = v if coef is None else v - coef[:, None, None] * M.inv_retr(x, y, method)
    return M.proj(y, g) - M.transport(x, y, w, "projection")


def _case(n=12, p=3, k=6, seed=0, step=0.3, stacked_anchor=False):
    M = rf.Grassmann(n, p)
    rng = np.random.default_rng(seed)
    x = M.random_point(rng=rng)
    u = M.proj(np.broadcast_to(x, (k, n, p)), step * rng.standard_normal((k, n, p)))
    y = np.ascontiguousarray(M.retr(x, u, "polar"))
    g = rng.standard_normal((k, n, p))
    v = M.proj(np.broadcast_to(x, (k, n, p)), rng.standard_normal((k, n, p)))
    coef = rng.uniform(-2.0, 2.0, k)
    if stacked_anchor:
        x = np.ascontiguousarray(np.broadcast_to(x, (k, n, p)))
    return M, x, y, g, v, coef


@pytest.mark.parametrize("method", ["polar", "qr", "exp"])
@pytest.mark.parametrize("with_coef", [False, True])
@pytest.mark.parametrize("stacked_anchor", [False, True])
def test_one_projection_is_the_composed_direction(method, with_coef, stacked_anchor):
    """The identities used (``proj_Y`` commutes with the right factor ``Q``; for the polar/QR
    inverse ``X + R^-1_X(Y)`` spans ``Y``) hold exactly for orthonormal ``Y``; in floating
    point the two forms differ by the rounding of a few n x p products (terms of size
    ``|G| + |V| + |c| |R^-1|``, all O(1) here): bound 100 eps relative to that scale."""
    M, x, y, g, v, coef = _case(stacked_anchor=stacked_anchor)
    c = coef if with_coef else None
    g0, v0 = g.copy(), v.copy()
    scratch = np.full_like(y, np.nan)
    got = M._corrected_direction(x, y, g, v, c, method, scratch)
    want = _composed(M, x, y, g, v, c, method)
    scale = 1.0 + np.max(np.abs(g)) + np.max(np.abs(v))
    if with_coef:
        scale += np.max(np.abs(coef)) * np.max(np.abs(M.inv_retr(x, y, method)))
    assert got.shape == want.shape and got is not scratch
    assert np.max(np.abs(got - want)) <= 100 * EPS * scale
    assert np.array_equal(g, g0) and np.array_equal(v, v0)       # inputs not written
    # horizontal at Y, as a direction of the polar step must be
    assert np.max(np.abs(np.swapaxes(y, -1, -2) @ got)) <= 100 * EPS * scale
    # without a scratch buffer, and into a given one: the same numbers
    assert np.array_equal(M._corrected_direction(x, y, g, v, c, method), got)
    buf = np.full_like(y, np.nan)
    into = M._corrected_direction(x, y, g, v, c, method, scratch, buf)
    assert into is buf and np.array_equal(into, got)


def test_one_projection_refuses_a_right_angle_as_inv_retr_does():
    """A principal angle of 90 degrees between ``X`` and some ``Y``: the inverse retraction
    has no answer, and the one-projection form raises the same ``NoSolutionError``."""
    M, x, y, g, v, coef = _case(k=3)
    e = np.eye(12)
    x = e[:, :3].copy()
    y[1] = e[:, [0, 1, 5]]                                  # X'Y singular for item 1
    v = M.proj(x, v)                                        # tangent at the new X
    with pytest.raises(NoSolutionError, match="inv_retr"):
        M.inv_retr(x, y, "polar")
    with pytest.raises(NoSolutionError, match="inv_retr.*batch index \\[\\[1\\]\\]"):
        M._corrected_direction(x, y, g, v, coef, "polar")
    # without the term the transport needs no inverse: no error, as the composed maps
    got = M._corrected_direction(x, y, g, v, None, "polar")
    assert np.max(np.abs(got - _composed(M, x, y, g, v, None, "polar"))) <= 1e-13


def _runs(alg, problem, x0, rounds, monkeypatch, coef=None):
    """The server points of ``rounds`` rounds with the one-projection direction and with the
    composed maps (``_one_projection`` off); ``coef``: 2BB's correction weights forced (the
    PCA runs have ``<s,y> <= 0``, so the second-order term would never be taken)."""
    from rfl_fast.federation import run
    if coef is not None:
        monkeypatch.setattr(RFedSVRG2BB, "_correction",
                            lambda self, problem, idx, x_t, msg, memo: coef)
    out = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(RFedSVRG, "_one_projection",
                                staticmethod(lambda *a: None))
        out.append(run(problem, alg, rounds, Full(), x0=x0, seed=0, metrics=False).x)
    return out


@pytest.mark.parametrize("label", ["RFedSVRG", "2BB", "2BB corrected", "2BB exp corrected"])
def test_svrg_iterates_equal_the_composed_maps(label, monkeypatch):
    """Grassmann PCA rounds through the one-projection direction and through the composed
    maps: the server points agree to rounding (5 rounds of 4 corrected steps: each step's
    direction differs by ~eps relative (above), the steps are small; bound 1e-12)."""
    rng = np.random.default_rng(3)
    k, m, d, r = 5, 20, 16, 3
    problem = KPCA(rng.standard_normal((k, m, d)), r, manifold="grassmann")
    x0 = problem.manifold.random_point(rng=rng)
    coef = None
    if label == "RFedSVRG":
        alg = RFedSVRG(0.02, 5)
    else:
        alg = RFedSVRG2BB(0.02, 5, retraction="exp" if "exp" in label else None)
        if "corrected" in label:
            coef = np.linspace(-0.5, 0.7, k)
    a, b = _runs(alg, problem, x0, 5, monkeypatch, coef)
    moved = np.max(np.abs(a - x0))
    assert moved > 1e-3                                        # the rounds did move
    assert np.max(np.abs(a - b)) <= 1e-12
