"""Bad input raises a clear error that names the argument and what was expected."""

import numpy as np
import pytest

import rfl_fast as rf
from manifold_cases import CASES
from rfl_fast.errors import NoSolutionError, NotOnManifoldError


def test_constructor_values_are_named():
    with pytest.raises(ValueError, match="need n >= p >= 1; values supplied were n=2, p=3"):
        rf.Stiefel(2, 3)
    with pytest.raises(ValueError, match="d >= 2"):
        rf.Sphere(1)
    with pytest.raises(ValueError, match="n >= 1"):
        rf.SPD(0)
    with pytest.raises(ValueError, match="d >= 1"):
        rf.Lorentz(0)


def test_wrong_shape_names_argument():
    M = rf.Stiefel(5, 2)
    x = M.random_point(rng=0)
    with pytest.raises(ValueError, match=r"u: expected shape \(\.\.\., 5, 2\), got \(5, 3\)"):
        M.retr(x, np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"x: expected shape \(\.\.\., 5, 2\)"):
        M.proj(np.zeros(5), np.zeros((5, 2)))


def test_batch_axes_that_do_not_broadcast():
    M = rf.Sphere(3)
    with pytest.raises(ValueError, match="batch axes do not broadcast"):
        M.exp(M.random_point(2, rng=0), np.zeros((3, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_inf_are_refused(bad):
    M = rf.SPD(3)
    x = M.random_point(rng=0)
    u = np.zeros((3, 3))
    u[1, 1] = bad
    with pytest.raises(ValueError, match="u: contains (NaN|inf); expected finite values"):
        M.exp(x, u)


def test_wrong_dtype_is_refused():
    M = rf.Sphere(3)
    with pytest.raises(TypeError, match="x: expected a real floating-point array, got dtype complex"):
        M.proj(np.ones(3, dtype=complex), np.ones(3))
    with pytest.raises(TypeError, match="got dtype object"):
        M.proj(np.array(["a", "b", "c"], dtype=object), np.ones(3))
    # integers are promoted, not refused
    assert M.proj(np.array([1, 0, 0]), np.array([1, 1, 1])).dtype == np.float64


def test_non_spd_matrix_is_refused():
    S = rf.SPD(3)
    x = S.random_point(rng=0)
    not_spd = np.diag([1.0, -1.0, 2.0])
    with pytest.raises(NoSolutionError, match="not positive definite"):
        S.log(x, not_spd)
    with pytest.raises(NoSolutionError, match="s: expected symmetric positive-definite"):
        rf.linalg.sym_logm(not_spd)
    with pytest.raises(ValueError, match="s: expected symmetric matrices"):
        rf.linalg.sym_expm(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(NotOnManifoldError, match="smallest eigenvalue -1"):
        rf.SPD(3, validate=True).dist(x, not_spd)


def test_inverse_retraction_without_solution():
    M = rf.Stiefel(4, 2)
    x = np.eye(4)[:, :2]
    y = np.eye(4)[:, 2:]  # X'Y = 0: no inverse retraction
    for method in M.inverse_retractions:
        with pytest.raises(NoSolutionError, match="X'Y is too singular"):
            M.inv_retr(x, y, method)


def test_sphere_log_at_antipode():
    M = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0])
    with pytest.raises(NoSolutionError, match="antipodal"):
        M.log(x, -x)


def test_rank_deficient_projection():
    with pytest.raises(NoSolutionError, match="rank deficient"):
        rf.Stiefel(4, 2).project(np.ones((4, 2)))
    with pytest.raises(ValueError, match="cannot project the zero vector"):
        rf.Sphere(3).project(np.zeros(3))


def test_points_off_the_manifold_when_validating(monkeypatch):
    M = rf.Stiefel(4, 2, validate=True)
    with pytest.raises(NotOnManifoldError, match=r"x: not a point of Stiefel\(4, 2\): \|X'X - I\|"):
        M.retr(2 * np.eye(4)[:, :2], np.zeros((4, 2)))
    with pytest.raises(NotOnManifoldError, match="u: not a tangent vector"):
        M.retr(np.eye(4)[:, :2], np.ones((4, 2)))
    L = rf.Lorentz(2, validate=True)
    with pytest.raises(NotOnManifoldError, match="lower sheet"):
        L.dist(-L.origin, L.origin)
    # off by default, on through the environment variable
    rf.Sphere(3).exp(np.array([2.0, 0, 0]), np.zeros(3))
    monkeypatch.setenv("RFL_FAST_VALIDATE", "1")
    with pytest.raises(NotOnManifoldError, match=r"\| \|x\| - 1 \|"):
        rf.Sphere(3).exp(np.array([2.0, 0, 0]), np.zeros(3))


def test_unknown_method_names_the_options():
    M = rf.Stiefel(4, 2)
    x = M.random_point(rng=0)
    with pytest.raises(ValueError, match=r"method: unknown retraction 'svd'; expected one of \('polar'"):
        M.retr(x, np.zeros((4, 2)), "svd")
    with pytest.raises(ValueError, match="unknown inverse retraction 'cayley'"):
        M.inv_retr(x, x, "cayley")


def test_negative_sigma():
    M = rf.Sphere(3)
    with pytest.raises(ValueError, match="sigma: expected finite values >= 0"):
        M.tangent_gaussian(M.random_point(rng=0), -1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_manifold_finite_check_sees_bad_entries_in_any_view(bad):
    from rfl_fast.manifolds.base import _all_finite

    rng = np.random.default_rng(0)
    base = rng.standard_normal((3, 5, 7))
    views = {"C": base, "swapped": np.swapaxes(base, -1, -2), "strided": base[:, ::2],
             "broadcast": np.broadcast_to(base[0], (4, 5, 7)), "F": np.asfortranarray(base)}
    for name, v in views.items():
        assert _all_finite(v), name
    for name, v in views.items():
        w = np.array(v)  # same layout questions on a fresh copy with one bad entry
        w[(0,) * w.ndim] = bad
        for view in (w, np.swapaxes(w, -1, -2), np.broadcast_to(w[:1], (4,) + w.shape[1:])):
            assert not _all_finite(view), name
    huge = np.full((2, 3), 1e300)  # squares overflow, entries are finite: the exact test
    assert _all_finite(np.swapaxes(huge, 0, 1))


@pytest.mark.parametrize("where", ["x", "u"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("op", ["retr", "proj"])
def test_stiefel_joint_finite_check_names_the_bad_argument(where, bad, op):
    M = rf.Stiefel(6, 2)
    x = M.random_point(rng=0)
    u = M.random_tangent(x, rng=1)
    (x if where == "x" else u)[2, 1] = bad
    if where == "u":
        x[2, 1] = 0.0  # a zero partner: inf * 0 is NaN, still caught
    with pytest.raises(ValueError, match=f"{where}: contains (NaN|inf)"):
        getattr(M, op)(x, u)


def test_stiefel_joint_finite_check_passes_huge_finite_entries_and_keeps_validation():
    M = rf.Stiefel(6, 2)
    x = M.random_point(rng=0)
    big = np.full((6, 2), 1e200)  # x . big overflows to inf: the exact checks accept it
    np.testing.assert_allclose(M.proj(x, big), rf.Stiefel(6, 2).proj(x, big.copy()))
    Mv = rf.Stiefel(6, 2, validate=True)
    not_tangent = np.ones((6, 2))
    Mv.proj(x, not_tangent)  # proj takes any ambient array
    with pytest.raises(NotOnManifoldError, match="u"):
        Mv.retr(x, not_tangent)


@pytest.mark.parametrize("M", [case.instances[0] for case in CASES.values()], ids=repr)
@pytest.mark.parametrize("rng, error", [(True, TypeError), (np.bool_(False), TypeError),
                                        (-1, ValueError), ("seed", TypeError),
                                        (1.5, TypeError)])
def test_every_manifold_refuses_a_bad_rng_by_name(M, rng, error):
    """One ``as_rng`` for every ``rng=`` argument: a bool is not silently seed 0 or 1, and a
    negative or non-integer seed is refused naming ``rng`` (the manifolds' own converter used to
    pass anything to NumPy)."""
    with pytest.raises(error, match=r"^rng: expected "):
        M.random_point(rng=rng)
    x = M.random_point(rng=0)
    if M.has_tangent_gaussian:
        with pytest.raises(error, match=r"^rng: expected "):
            M.tangent_gaussian(x, 0.1, rng=rng)
    np.testing.assert_array_equal(M.random_point(rng=np.int64(3)), M.random_point(rng=3))
