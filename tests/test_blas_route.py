"""The C++ kernels' BLAS / LAPACK route (SciPy's dgemm, dgesv, dsyevd, dgees and dtrsyl,
rfl/blas.hpp) for Stiefel p >= 9 and SPD n >= 128 / 256:
same answers as the kernels' own loops and the NumPy reference, independent of threads and of
the other items of the batch."""

import subprocess
import sys
import zlib

import numpy as np
import pytest

from rfl_fast.kernels import _dispatch
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels.testing import kernel_inputs

core = _dispatch.load("cpp")
pytestmark = pytest.mark.skipif(core is None, reason="the C++ extension is not built")

BLAS_KERNELS = ["stiefel_proj", "stiefel_retr_polar", "stiefel_inv_retr_polar",
                "stiefel_retr_qr", "stiefel_inv_retr_qr", "polar"]
# (N, n, p): p = 9 (the smallest runtime p); n p^2 below and above 2^18, where BLAS threads the
# products and the batch loop runs in the calling thread; p = n
SHAPES = [(5, 30, 9), (3, 120, 17), (2, 300, 40), (7, 24, 24)]
CASES = [(k, s) for k in BLAS_KERNELS for s in SHAPES]


@pytest.fixture
def own_loops():
    """Run the block without BLAS (the kernels' own loops), then hand it back."""
    core.set_blas(None, None, None, None, None)
    try:
        yield
    finally:
        _dispatch._give_blas(core)


def inputs(name, shape):
    return kernel_inputs(name, np.random.default_rng(zlib.crc32(f"{name}{shape}".encode())),
                         *shape)


def test_the_extension_has_scipys_blas():
    assert core.has_blas()


@pytest.mark.parametrize("name,shape", CASES, ids=[f"{k}-{s}" for k, s in CASES])
def test_blas_route_matches_reference_and_own_loops(name, shape, request):
    args = inputs(name, shape)
    with_blas = getattr(core, name)(*args)
    fast_lane = getattr(core, name + "_checked", None)
    if fast_lane is not None:
        np.testing.assert_array_equal(fast_lane(*args, shape[1:]), with_blas)
    request.getfixturevalue("own_loops")
    own = getattr(core, name)(*args)
    want = getattr(ref, name)(*args)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(with_blas, want, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(with_blas, own, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("name", BLAS_KERNELS)
@pytest.mark.parametrize("shape", [(40, 30, 9), (6, 300, 40)])
def test_blas_route_does_not_depend_on_threads_or_batch(name, shape):
    args = inputs(name, shape)
    threads = core.get_threads()
    try:
        core.set_threads(1)
        one = getattr(core, name)(*args)
        core.set_threads(2)
        two = getattr(core, name)(*args)
    finally:
        core.set_threads(threads)
    np.testing.assert_array_equal(one, two)
    alone = getattr(core, name)(*(a[3:4] for a in args))
    np.testing.assert_array_equal(alone, one[3:4])


@pytest.mark.parametrize("name", BLAS_KERNELS)
def test_blas_route_gives_nan_only_for_the_bad_item(name):
    args = [a.copy() for a in inputs(name, (4, 120, 17))]
    args[-1][2, 5, 3] = np.nan
    got = getattr(core, name)(*args)
    assert np.isnan(got[2]).all()
    assert np.isfinite(np.delete(got, 2, axis=0)).all()
    if hasattr(core, name + "_checked"):
        assert getattr(core, name + "_checked")(*args, (120, 17)) is None


@pytest.mark.parametrize("name", ["polar", "stiefel_retr_polar", "stiefel_retr_qr"])
@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_blas_gram_routes_on_extreme_and_ill_conditioned_items(name, scale):
    """polar(a), retr(a, 0) = polar(a) or qf(a) for a far from 1 (rescaled first), of
    condition 1e7 (the SVD / Householder fallbacks) and rank deficient (NaN for polar): the
    reference's answers."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 60, 12))
    a[1, :, 0] *= 1e-7  # condition ~1e7
    a[2, :, 1] = a[2, :, 0]  # rank deficient
    args = (a * scale,) if name == "polar" else (a * scale, np.zeros_like(a))
    got = getattr(core, name)(*args)
    want = getattr(ref, name)(*args)
    np.testing.assert_allclose(got[:2], want[:2], atol=1e-9)
    if name != "stiefel_retr_qr":
        assert np.isnan(got[2]).all() and np.isnan(want[2]).all()


def rotated(x, angles):
    """y = x R, R orthogonal with 2 x 2 rotation blocks by `angles` (the rest of R: I), so that
    x'y = R has eigenvalues exp(+-i angle)."""
    p = x.shape[-1]
    R = np.eye(p)
    for k, t in enumerate(angles):
        R[2 * k:2 * k + 2, 2 * k:2 * k + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return x @ R


@pytest.mark.parametrize("p", [8, 12, 40, 64])
def test_inverse_polar_refuses_where_s_is_not_positive_definite(p, request):
    """x'y not positive stable: y = -x (S = -I), and y = x R with rotations by more than pi / 2
    (S indefinite). The symmetric S of (x'y)S + S(y'x) = 2I exists but is not positive
    definite, so y S - x is no tangent vector whose polar retraction reaches y: the reference,
    the BLAS route and the kernels' own loops all give NaN (the public inverse raises
    NoSolutionError), at every p, below and above the BLAS route."""
    x = ref.polar(np.random.default_rng(p).standard_normal((1, 90, p)))
    ys = [-x, rotated(x, [0.3, 2.0, 2.5, 2.9])]
    for y in ys:
        assert np.isnan(ref.stiefel_inv_retr_polar(x, y)).all()
        assert np.isnan(core.stiefel_inv_retr_polar(x, y)).all()
    request.getfixturevalue("own_loops")
    for y in ys:
        assert np.isnan(core.stiefel_inv_retr_polar(x, y)).all()


@pytest.mark.parametrize("p", [8, 12, 40])
def test_inverse_polar_refuses_where_no_unique_solution_exists(p, request):
    """x'y with eigenvalues +-i (a rotation by pi / 2): M S + S M' = 2I is singular. The
    reference and every route give NaN, not an S of size 1e15: the sign iteration (p = 8 and
    the own loops) converges there, and dtrsyl alone flags only exactly opposite eigenvalues."""
    x = ref.polar(np.random.default_rng(3).standard_normal((1, 90, p)))
    y = rotated(x, [0.4, np.pi / 2])
    assert np.isnan(ref.stiefel_inv_retr_polar(x, y)).all()
    assert np.isnan(core.stiefel_inv_retr_polar(x, y)).all()
    request.getfixturevalue("own_loops")
    assert np.isnan(core.stiefel_inv_retr_polar(x, y)).all()


def test_set_blas_refuses_what_is_not_a_capsule():
    with pytest.raises(TypeError, match="dgemm: expected a capsule"):
        core.set_blas(1, None, None, None, None)
    assert core.has_blas()


# The SPD kernels' BLAS / LAPACK route (rfl/spd.hpp): spd_exp and spd_log from n = 128, the
# symmetric matrix functions and spd_dist from n = 256; one size below each threshold keeps the
# own eigensolvers (the lockstep lanes for batches).
# (the fast tier: the thresholds of both routes, one kernel at n = 256; the full tier: all)
SPD_CASES = [("spd_exp", 128), ("spd_log", 128), ("spd_log", 127),
             pytest.param("spd_dist", 256, marks=pytest.mark.full),
             pytest.param("sym_expm", 256, marks=pytest.mark.full), ("sym_logm", 256),
             pytest.param("sym_sqrtm", 256, marks=pytest.mark.full),
             pytest.param("sym_invsqrtm", 256, marks=pytest.mark.full), ("sym_expm", 255)]


@pytest.mark.parametrize("name,n", SPD_CASES)
def test_spd_blas_route_matches_reference_and_own_loops(name, n, request):
    args = kernel_inputs(name, np.random.default_rng(zlib.crc32(f"{name}{n}".encode())), 3, n)
    with_blas = getattr(core, name)(*args)
    fast_lane = getattr(core, name + "_checked", None)
    if fast_lane is not None:
        np.testing.assert_array_equal(fast_lane(*args, (n, n)), with_blas)
    if n in (128, 256):  # per item on LAPACK: the batch does not change an item's bits
        alone = getattr(core, name)(*(a[1:2] for a in args))
        np.testing.assert_array_equal(alone, with_blas[1:2])
    want = getattr(ref, name)(*args)
    request.getfixturevalue("own_loops")
    own = getattr(core, name)(*args)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(with_blas, want, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(with_blas, own, rtol=0, atol=1e-10 * scale)
    if with_blas.ndim == 3:
        np.testing.assert_array_equal(with_blas, np.swapaxes(with_blas, 1, 2))  # symmetric


@pytest.mark.parametrize("name,n", [("spd_exp", 128), ("spd_log", 128), ("spd_dist", 256),
                                    ("sym_logm", 256), ("sym_expm", 256)])
def test_spd_blas_route_gives_nan_only_for_the_bad_items(name, n):
    """Item 0: NaN in an input; item 1: x (or s) indefinite, where the kernel has no answer
    (sym_expm answers it); item 2: a good item, answered as when alone."""
    args = [a.copy() for a in kernel_inputs(name, np.random.default_rng(5), 3, n)]
    args[-1][0, 3, 2] = np.nan
    args[0][1] -= 2 * np.abs(np.linalg.eigvalsh(args[0][1])).max() * np.eye(n)
    got = getattr(core, name)(*args)
    assert np.isnan(got[0]).all()
    assert np.isfinite(got[1]).all() if name == "sym_expm" else np.isnan(got[1]).all()
    np.testing.assert_array_equal(got[2:], getattr(core, name)(*(a[2:] for a in args)))


def test_item_blas_work_is_declared_for_every_kernel_on_blas():
    """The binding declares, for every kernel of the families that run on BLAS, which items
    call a BLAS that threads each call (``_core.item_blas_work``, the rule its batch loop
    follows and ``kernels.batch_modes`` reads); small items and other families are 0, and
    without BLAS every item is 0."""
    from rfl_fast.kernels.registry import REGISTRY

    if not core.has_blas():
        pytest.skip("BLAS was not handed to the C++ kernels")
    big = {"stiefel": (3072, 64), "square": (512,)}
    small = {"stiefel": (50, 5), "square": (9,)}
    for name, spec in REGISTRY.items():
        if not hasattr(core, name):
            continue
        if spec.family in big:
            assert core.item_blas_work(name, big[spec.family]) > 0, name
            assert core.item_blas_work(name, small[spec.family]) == 0, name
        else:
            assert core.item_blas_work(name, (10_000,)) == 0, name


def test_item_blas_work_is_zero_without_blas(own_loops):
    assert core.item_blas_work("stiefel_retr_polar", (3072, 64)) == 0
    assert core.item_blas_work("sym_logm", (512,)) == 0


@pytest.mark.parametrize("bad", [(), (1, 2, 3), (-1,), (2**31, 4)])
def test_item_blas_work_names_a_bad_core(bad):
    with pytest.raises(ValueError, match="item_blas_work: core"):
        core.item_blas_work("stiefel_proj", bad)


def test_the_client_path_takes_scipys_blas_without_importing_scipy_linalg():
    """A Flower ClientApp is a fresh process per message: rfl_fast's client path (the app,
    the problems, the algorithms, the privacy accounting, the compiled core with SciPy's BLAS)
    does not import ``scipy.linalg`` (0.2 s of CPU), only the two Cython capsule modules."""
    code = (
        "import sys\n"
        "import rfl_fast.flower, rfl_fast.problems, rfl_fast.algorithms, rfl_fast.privacy\n"
        "from rfl_fast.kernels import _dispatch\n"
        "core = _dispatch.load('cpp')\n"
        "print(core is not None and core.has_blas(), 'scipy.linalg' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"], out
