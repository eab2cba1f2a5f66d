"""Arrays of other namespaces through the manifolds (``rfl_fast.kernels.arrays``, issue 41).

The identity suite of ``test_manifold_identities.py`` runs again, its cases and marks taken from
that module's own parametrization, on a manifold seen through array-api-strict (on a device other
than the default one), PyTorch CPU and JAX CPU arrays: every array method is called with the
foreign arrays, its answer must be of the caller's type, on the caller's device, of the NumPy
answer's dtype and equal to the NumPy answer to a few units of rounding of that dtype; the
suite's own assertions then run on the NumPy answer. Each namespace's tests skip when its package
is not installed (the ``torch``, ``jax`` and ``array-api`` extras).
"""

import copy
import inspect
import math
import subprocess
import sys

import numpy as np
import pytest

import rfl_fast as rf
import test_manifold_identities as identities
from rfl_fast.kernels import arrays
from subprocess_env import same_package


class Namespace:
    """One caller namespace: how the tests make its arrays and recognise its answers."""

    def __init__(self, name):
        self.name = name

    def setup(self):
        pytest.importorskip("array_api_compat")
        if self.name == "torch":
            self.torch = pytest.importorskip("torch")
            self.device = self.torch.device("cpu")
        elif self.name == "jax":
            self.jax = pytest.importorskip("jax")
            self.jnp = pytest.importorskip("jax.numpy")
            self.device = self.jax.devices("cpu")[0]
        else:
            self.xp = pytest.importorskip("array_api_strict")
            self.device = self.xp.Device("device1")  # not the default: the answer stays there
        return self

    def put(self, a):
        """A NumPy array as this namespace's array (a copy), on its device."""
        a = np.array(a)
        if self.name == "torch":
            return self.torch.from_numpy(a)
        if self.name == "jax":
            return self.jax.device_put(a, self.device)
        return self.xp.asarray(a, device=self.device)

    def owns(self, a):
        """Whether ``a`` is this namespace's array on the expected device."""
        if self.name == "torch":
            return isinstance(a, self.torch.Tensor) and a.device == self.device
        if self.name == "jax":
            return isinstance(a, self.jax.Array) and a.devices() == {self.device}
        return type(a) is type(self.xp.asarray(0.0)) and a.device == self.device

    def __repr__(self):
        return self.name


NAMESPACES = [Namespace(n) for n in ("array_api_strict", "torch", "jax")]


@pytest.fixture(params=NAMESPACES, ids=repr)
def ns(request):
    ns = request.param.setup()
    if ns.name == "jax":  # float64 arrays: JAX's 64-bit mode, for this test only
        before = ns.jax.config.jax_enable_x64
        ns.jax.config.update("jax_enable_x64", True)
        yield ns
        ns.jax.config.update("jax_enable_x64", before)
    else:
        yield ns


def agree(ns, out, ref, what, size):
    """``out`` (from foreign arrays) is ``ref`` (the NumPy answer) in ``ns``: same type, device,
    dtype and shape, and the same values to rounding; returns ``ref``.

    The tolerance: both calls run the same code on the same input bits (the foreign arrays are
    views or exact copies), so they can differ only where BLAS picks its kernel by the memory's
    alignment (PyTorch and JAX allocate at 64 bytes, NumPy at 16) and sums in another order: a
    sum of ``k`` terms then moves by at most ``k eps`` of the sum of their magnitudes, and no sum
    in a map of ``M`` is longer than one point (``size``, the product of ``M.shape``). A factor 4
    covers the few well-conditioned steps after it; float32 answers are rounded from float64,
    so they differ by at most an ulp of their own."""
    if isinstance(ref, tuple):
        assert isinstance(out, tuple) and len(out) == len(ref), what
        return tuple(agree(ns, o, r, what, size) for o, r in zip(out, ref))
    if not isinstance(ref, (np.ndarray, np.floating)):
        assert out == ref, what  # booleans, reasons
        return ref
    assert ns.owns(out), f"{what}: got {type(out)}"
    got = np.from_dlpack(out)
    assert got.dtype == ref.dtype and got.shape == np.shape(ref), what
    bound = 4 * max(size, 2) * np.finfo(ref.dtype).eps * max(1.0, np.max(np.abs(ref)))
    np.testing.assert_allclose(got, ref, rtol=0, atol=bound, err_msg=what)
    return ref


def through(M, ns):
    """``M`` with every array method seen through ``ns``: the call is made with ``ns`` arrays,
    checked against the same call with NumPy arrays (``agree``), and answers the NumPy answer.
    The same class (a shallow copy with instance attributes), so the suite's traits apply."""
    seen = copy.copy(M)

    def mirror(name):
        method = getattr(M, name)

        def call(*args, **kwargs):
            foreign = [ns.put(a) if isinstance(a, np.ndarray) else a for a in args]
            out = method(*foreign, **copy.deepcopy(kwargs))  # a Generator: the same draws
            return agree(ns, out, method(*args, **kwargs), f"{M!r}.{name} on {ns}",
                         math.prod(M.shape))
        return call

    for name in M.array_methods:
        setattr(seen, name, mirror(name))
    return seen


def identity_cases():
    """Every test of the identity suite that takes a manifold, with its own parameter sets
    and marks (the expected failures of manifolds without a closed-form map). The covariance
    test (thousands of samples) runs in the full tier: its draws are compared to NumPy's in
    every other test (``random_tangent``)."""
    for name, fn in vars(identities).items():
        if not name.startswith("test_") or "backend" not in inspect.signature(fn).parameters:
            continue
        (grid,) = [m for m in fn.pytestmark if m.name == "parametrize"]
        argnames = [a.strip() for a in grid.args[0].split(",")]
        for values in grid.args[1]:
            if not isinstance(values, type(pytest.param(0))):
                values = pytest.param(*(values if len(argnames) > 1 else (values,)))
            marks = list(values.marks)
            if name == "test_tangent_gaussian_covariance":
                marks.append(pytest.mark.full)
            label = "-".join(repr(v) if isinstance(v, rf.Manifold) else str(v)
                             for v in values.values)
            yield pytest.param(fn, dict(zip(argnames, values.values)), marks=marks,
                               id=f"{name[5:]}-{label}")


@pytest.mark.parametrize("test,params", identity_cases())
def test_identity_suite(ns, test, params):
    params = dict(params, M=through(params["M"], ns))
    test(backend=None, **params)


def test_identity_suite_is_reused():
    cases = list(identity_cases())
    assert len(cases) > 100
    assert {c.values[0].__name__ for c in cases} >= {
        "test_retraction_identities", "test_exp_log_dist", "test_project_or_explicit_absence",
        "test_float32_works_to_float32_tolerance"}


# ------------------------------------------------------------------- the seam itself


def test_torch_cpu_float64_reaches_the_kernels_without_a_copy():
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    t = torch.randn(6, 5, 3, dtype=torch.float64)
    a = arrays.to_numpy(t, "x")
    assert a.__array_interface__["data"][0] == t.data_ptr() and a.dtype == np.float64
    a[0, 0, 0] = 7.0  # the same memory
    assert t[0, 0, 0].item() == 7.0
    # a transposed view too: DLPack carries the strides
    v = t.transpose(-1, -2)
    assert arrays.to_numpy(v, "x").__array_interface__["data"][0] == t.data_ptr()
    # and a result goes back sharing the NumPy memory
    out = np.arange(6.0)
    back = arrays.from_numpy(out, arrays.caller_of({"x": t}))
    assert isinstance(back, torch.Tensor) and back.data_ptr() == out.__array_interface__["data"][0]
    # through a manifold call, both ways: Euclidean's projection answers its u itself
    M = rf.Euclidean(5, 3)
    assert M.proj(t, t).data_ptr() == t.data_ptr()


def test_torch_one_point_and_scalar_answers():
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    M = rf.Sphere(3)
    x, y = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])   # float32
    d = M.dist(x, y)
    assert isinstance(d, torch.Tensor) and d.shape == () and d.dtype == torch.float32
    assert abs(d.item() - np.pi / 2) < 1e-6
    # NumPy arrays and Python lists mix with one foreign namespace; the answer is the caller's
    u = M.proj(x, [0.0, 0.5, 0.5])  # float32 and a float64 list: float64, as in NumPy
    assert isinstance(u, torch.Tensor) and u.dtype == torch.float64
    assert torch.allclose(u, torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64))
    w = M.proj(np.array([1.0, 0.0, 0.0]), torch.tensor([0.3, 0.5, 0.5], dtype=torch.float64))
    assert isinstance(w, torch.Tensor) and w.dtype == torch.float64
    # integers become float64, as for NumPy
    z = M.project(torch.tensor([3, 0, 4]))
    assert z.dtype == torch.float64 and torch.allclose(z, torch.tensor([0.6, 0.0, 0.8],
                                                                       dtype=torch.float64))
    # the bad-input errors are NumPy's, naming the argument
    with pytest.raises(TypeError, match="u: expected a float64 or float32"):
        M.proj(x, torch.ones(3, dtype=torch.float16))
    with pytest.raises(TypeError, match="u: .*bfloat16"):
        M.proj(x, torch.ones(3, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="u: contains NaN"):
        M.proj(x, torch.tensor([0.0, float("nan"), 1.0]))


def test_mixed_namespaces_are_refused_naming_the_argument():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    pytest.importorskip("array_api_compat")
    M = rf.Sphere(3)
    x = torch.tensor([1.0, 0.0, 0.0])
    with pytest.raises(TypeError, match=r"^u: an array of namespace jax[.\w]*, but x is of "
                                        r"array_api_compat\.torch"):
        M.proj(x, jnp.ones(3))
    P = rf.Product(rf.Sphere(3), rf.Euclidean(2))
    with pytest.raises(TypeError, match=r"^parts\[1\]: an array of namespace jax"):
        P.join(x, jnp.ones(2))


def test_two_devices_are_refused_naming_the_argument():
    xp = pytest.importorskip("array_api_strict")
    pytest.importorskip("array_api_compat")
    M = rf.Sphere(3)
    x = xp.asarray([1.0, 0.0, 0.0], device=xp.Device("device1"))
    y = xp.asarray([0.0, 1.0, 0.0], device=xp.Device("device2"))
    with pytest.raises(TypeError, match="^y: an array on device .*device2.*, but x is on"):
        M.dist(x, y)


def test_gradients_are_refused_not_detached():
    """A gradient-carrying argument of a method (or option) without a differentiable route is
    refused, naming it; covered methods differentiate (tests/test_differentiable.py)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    M = rf.Stiefel(5, 2)
    x = torch.from_numpy(M.random_point(rng=0))
    u = torch.zeros(5, 2, dtype=torch.float64, requires_grad=True)
    y = torch.from_numpy(M.random_point(rng=1)).requires_grad_(True)
    with pytest.raises(NotImplementedError, match=r"^x: a tensor that requires grad; Stiefel\."
                                                  r"tangent_gaussian has no differentiable "
                                                  r"route.*x\.detach\(\)"):
        M.tangent_gaussian(y, 1.0)
    with pytest.raises(NotImplementedError, match=r"^x: .*Stiefel\.random_tangent has no"):
        M.random_tangent(y, rng=0)
    with pytest.raises(NotImplementedError, match="^u: a tensor that requires grad"):
        arrays.to_numpy(u, "u")
    assert M.retr(x, u).requires_grad  # polar: routed, differentiable


def test_jax_tracers_are_refused():
    jax = pytest.importorskip("jax")
    pytest.importorskip("array_api_compat")
    M = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    with pytest.raises(NotImplementedError, match=r"^x: a JAX tracer.*Sphere\.check_point has"):
        jax.grad(lambda z: M.check_point(z)[0])(jax.numpy.asarray([0.0, 1.0, 0.0]))
    g = jax.grad(lambda u: M.dist(x, M.exp(x, u)))(jax.numpy.asarray([0.0, 0.5, 0.0]))
    np.testing.assert_allclose(np.asarray(g)[1:], [1.0, 0.0], atol=1e-6)  # routed: tangent part


def test_float32_stays_float32_in_every_namespace(ns):
    M = rf.Stiefel(6, 2)
    x = M.random_point(4, rng=0)
    u = 0.3 * M.random_tangent(x, rng=1)
    ref = M.retr(x.astype(np.float32), u.astype(np.float32))
    out = M.retr(ns.put(x.astype(np.float32)), ns.put(u.astype(np.float32)))
    assert ns.owns(out)
    agree(ns, out, ref, "retr float32", math.prod(M.shape))


def test_every_array_method_is_declared():
    """Each public method of a manifold class with an array parameter is in ``array_methods``
    (and so takes foreign arrays); the names of array parameters in this package are these."""
    array_params = {"x", "y", "u", "v", "g", "z", "parts", "sigma"}
    for cls in [rf.Manifold, *rf.manifolds.MANIFOLDS.values()]:
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_"):
                continue
            takes = array_params & set(inspect.signature(fn).parameters)
            assert not takes or name in cls.array_methods, f"{cls.__name__}.{name}"
            if name in cls.array_methods:
                assert hasattr(fn, "__wrapped__"), f"{cls.__name__}.{name} is not wrapped"


def test_numpy_calls_never_import_array_api_compat():
    code = ("import sys, numpy as np, rfl_fast as rf\n"
            "M = rf.Stiefel(5, 2); x = M.random_point(3, rng=0)\n"
            "M.retr(x, M.random_tangent(x, rng=1)); rf.Sphere(3).dist([1, 0, 0], [0, 1.0, 0])\n"
            "print('array_api_compat' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, **same_package())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# ------------------------------------------------------------------- linalg through the seam


def _spd_stack(rng, *batch, n=4, dtype=np.float64):
    a = rng.standard_normal((*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_linalg_takes_every_namespace(ns, dtype):
    """Every public function of ``rf.linalg`` takes the caller's arrays and answers in its type,
    device and dtype, equal to the NumPy answer to rounding."""
    rng = np.random.default_rng(0)
    s = _spd_stack(rng, 3, dtype=dtype)
    small = (0.1 * s).astype(dtype)   # expm of it stays far from overflow
    a = rng.standard_normal((2, 6, 3)).astype(dtype)
    for fn, arg in [(rf.linalg.sym_expm, small), (rf.linalg.sym_logm, s),
                    (rf.linalg.sym_sqrtm, s), (rf.linalg.sym_invsqrtm, s), (rf.linalg.polar, a)]:
        agree(ns, fn(ns.put(arg)), fn(arg), f"linalg.{fn.__name__} on {ns}", 16)
    # one matrix (no batch axis), and a backend option passed through
    agree(ns, rf.linalg.sym_sqrtm(ns.put(s[0]), backend="numpy"), rf.linalg.sym_sqrtm(s[0]),
          f"linalg.sym_sqrtm on one matrix in {ns}", 16)


def test_linalg_errors_are_numpys_naming_the_argument(ns):
    s = np.array([[1.0, 2.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="^s: expected symmetric matrices"):
        rf.linalg.sym_expm(ns.put(s))
    with pytest.raises(rf.errors.NoSolutionError, match="^s: expected symmetric positive"):
        rf.linalg.sym_logm(ns.put(-np.eye(2)))
    with pytest.raises(rf.errors.NoSolutionError, match="^a: rank deficient"):
        rf.linalg.polar(ns.put(np.zeros((3, 2))))
    with pytest.raises(ValueError, match="^a: expected shape"):
        rf.linalg.polar(ns.put(np.ones((2, 3))))


def test_linalg_takes_a_gradient_through_its_route():
    """A tensor that requires grad takes the function's differentiable route
    (``xp_routes.linalg_*``; values and gradients: tests/test_differentiable.py), one without
    a gradient the compiled route."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    s = (4.0 * torch.eye(3, dtype=torch.float64)).requires_grad_(True)
    out = rf.linalg.sym_sqrtm(s)
    assert out.requires_grad and torch.allclose(out, 2.0 * torch.eye(3, dtype=torch.float64))
    out = rf.linalg.sym_sqrtm(s.detach())
    assert isinstance(out, torch.Tensor) and not out.requires_grad
    assert torch.equal(out, 2.0 * torch.eye(3, dtype=torch.float64))


def test_linalg_numpy_calls_stay_numpy():
    s = np.eye(3)
    assert type(rf.linalg.sym_sqrtm(s)) is np.ndarray
    assert type(rf.linalg.polar([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])) is np.ndarray
    assert rf.linalg.sym_expm.__wrapped__.__name__ == "sym_expm"


# ------------------------------------------------------------------- PyTorch CPU's short route


def test_torch_cpu_answers_are_the_numpy_answers_bit_for_bit():
    """The short route of PyTorch CPU tensors (``arrays._torch_cpu_call``) runs the NumPy code on
    views: the answers are the NumPy answers exactly, for any strides, a tensor subclass, and
    NumPy arrays mixed in."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    M = rf.Stiefel(6, 2)
    x = M.random_point(4, rng=0)
    u = 0.2 * M.random_tangent(x, rng=2)
    y = M.retr(x, 0.3 * M.random_tangent(x, rng=1))
    for name, args in [("retr", (x, u)), ("inv_retr", (x, y)), ("exp", (x, u)),
                       ("proj", (x, u)), ("transport", (x, y, u)), ("inner", (x, u, u)),
                       ("norm", (x, u))]:
        ref = getattr(M, name)(*args)
        got = getattr(M, name)(*(torch.from_numpy(np.array(a)) for a in args))
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64, name
        np.testing.assert_array_equal(got.numpy(), ref, err_msg=name)
    # a transposed view (not contiguous), NumPy mixed in, a Parameter without a gradient
    S = rf.Sphere(5)
    z = S.random_point(3, rng=3)
    zt = torch.from_numpy(np.ascontiguousarray(z.T)).T
    assert not zt.is_contiguous()
    w = S.random_tangent(z, rng=4)
    np.testing.assert_array_equal(S.proj(zt, w).numpy(), S.proj(z, w))
    p = torch.nn.Parameter(torch.from_numpy(z.copy()), requires_grad=False)
    out = S.exp(p, torch.from_numpy(w))
    assert type(out) is torch.Tensor
    np.testing.assert_array_equal(out.numpy(), S.exp(z, w))
    # a scalar answer: a 0-d tensor
    d = S.dist(torch.from_numpy(z[0]), torch.from_numpy(z[1]))
    assert isinstance(d, torch.Tensor) and d.shape == () and d.item() == S.dist(z[0], z[1])


def test_torch_cpu_refusals_keep_their_words():
    """What ``Tensor.numpy`` cannot view (a lazily conjugated tensor, bfloat16) or must not (a
    gradient) takes the general route, which words the error as before."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("array_api_compat")
    S = rf.Sphere(3)
    x = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    with pytest.raises(TypeError, match="^u: "):
        S.proj(x, torch.ones(3, dtype=torch.complex128).conj())
    with pytest.raises(TypeError, match="^u: .*bfloat16"):
        S.proj(x, torch.ones(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="^u: expected a float64 or float32"):
        S.proj(x, torch.ones(3, dtype=torch.float16))
    with pytest.raises(NotImplementedError, match=r"^x: a tensor that requires grad; "
                                                  r"Sphere\.random_tangent"):
        S.random_tangent(x.clone().requires_grad_(True), rng=0)
