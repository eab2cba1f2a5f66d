"""The kernel registry is the one place a kernel is declared; auto chooses by its declared rules."""

import ast
import pathlib

import numpy as np
import pytest

import rfl_fast
from rfl_fast import kernels
from rfl_fast.kernels import KERNELS, REGISTRY, _dispatch
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels.registry import FAMILIES, sweep_grid

PACKAGE = pathlib.Path(rfl_fast.__file__).parent


def test_every_registered_kernel_has_a_reference_and_every_backend_the_same_set():
    for name in REGISTRY:
        assert callable(getattr(ref, name)), name
    assert sorted(ref.__all__) == sorted(REGISTRY)
    for b in kernels.available_backends():
        assert _dispatch.backend_kernels(b) == sorted(KERNELS)


@pytest.mark.skipif(not kernels.is_available("cpp"), reason="C++ extension not built")
def test_fast_lanes_are_exactly_the_declared_ones():
    core = _dispatch.load("cpp")
    lanes = sorted(n[: -len("_checked")] for n in dir(core) if n.endswith("_checked"))
    assert lanes == sorted(k for k, v in REGISTRY.items() if v.fast_lane)


@pytest.mark.skipif(not kernels.is_available("cpp"), reason="C++ extension not built")
def test_the_core_stub_declares_exactly_what_the_extension_exports():
    """``_core.pyi`` is written by hand: it must name every function and class of the compiled
    module and nothing else, and every registered kernel's C++ route and fast lane is among
    them."""
    stub = ast.parse((PACKAGE / "_core.pyi").read_text())
    declared = {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    core = _dispatch.load("cpp")
    exported = {n for n in dir(core) if not n.startswith("__") and callable(getattr(core, n))}
    assert declared == exported, (sorted(exported - declared), sorted(declared - exported))
    assert set(REGISTRY) <= declared
    assert {k + "_checked" for k, v in REGISTRY.items() if v.fast_lane} <= declared


def test_sweep_grid_is_the_issue_grid():
    st = sweep_grid("stiefel_proj")
    assert {p for _, _, p in st} == {1, 2, 3, 4, 5, 8, 10, 16, 32, 64, 128}
    assert {n for _, n, _ in st} == {50, 784, 3072} and {b for b, _, _ in st} == {1, 16, 200}
    assert all(p <= n for _, n, p in st)
    assert {n for _, n in sweep_grid("spd_exp")} == {2, 3, 4, 5, 9, 16, 20, 32, 64, 128, 256}
    assert {d for _, d in sweep_grid("sphere_exp")} == {3, 10, 100, 784, 10_000}
    assert set(FAMILIES) == {k.family for k in REGISTRY.values()}


def _grid_shape(name, point):
    """The first argument's shape at a sweep grid point (a square kernel's n: (n, n))."""
    core = REGISTRY[name].args[0]
    dims = tuple(point[1:])
    return (point[0],) + (dims * core if len(dims) < core else dims)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_auto_takes_the_declared_order_at_every_grid_point(name):
    """At every point of the kernel's sweep grid, auto resolves to the first available backend
    of its declared order (``registry.declared_order``: the first route whose band holds the
    size, else C++ > Numba > reference, never past a declared ``max_size``), and the C++ fast
    lane is offered only where C++ is that choice."""
    from rfl_fast.kernels.registry import declared_order, handles

    for point in sweep_grid(name):
        shape = _grid_shape(name, point)
        order = declared_order(name, shape[-1], point[0])
        assert sorted(order) == sorted(b for b in _dispatch.BACKENDS
                                       if handles(name, b, shape[-1])), (name, shape, order)
        want = next(b for b in order if kernels.is_available(b))
        assert kernels.resolve(name, "auto", shape)[0] == want, (name, shape, order)
        lane = kernels.fast_lane(name, "auto", shape)
        assert (lane is not None) == (want == "cpp" and REGISTRY[name].fast_lane)


def test_a_declared_route_takes_over_from_its_size_and_not_before():
    """A route is a band of sizes: Stiefel proj goes to the reference from p = 9 (C++ makes its
    GEMMs there), the eigen-decomposition kernels from n = 128 (LAPACK's blocked solver); the
    size below keeps the default order. The batch changes the choice only where a route bounds
    it: the plain matrix functions take the reference for one or two matrices from n = 64
    (the compiled lone-item route is slower there), the compiled batch from three."""
    from rfl_fast.kernels.registry import DEFAULT_ORDER, declared_order

    assert declared_order("stiefel_proj", 8) == DEFAULT_ORDER
    assert declared_order("stiefel_proj", 9)[0] == "numpy"
    for name in ("sym_logm", "spd_exp", "spd_dist"):
        assert declared_order(name, 127, 200)[0] == "cpp"
        assert declared_order(name, 128, 200)[0] == "numpy"
    for n, items, first in ((63, 1, "cpp"), (64, 1, "numpy"), (64, 2, "numpy"), (64, 3, "cpp"),
                            (64, None, "cpp"), (128, 3, "numpy")):
        assert declared_order("sym_sqrtm", n, items)[0] == first, (n, items)
        assert kernels.auto_order("sym_sqrtm", (items or 5, n, n))[0] == (
            first if items else "cpp")
    assert declared_order("spd_exp", 64, 1)[0] == "cpp"        # the SPD maps lead at any batch
    assert declared_order("sphere_dist", 10_000) == DEFAULT_ORDER
    assert {kernels.auto_order("stiefel_proj", (b, 784, 16)) for b in (1, 200)} == {
        declared_order("stiefel_proj", 16)}


def test_every_route_is_a_reasoned_order_of_the_backends():
    """Each declared route orders all three backends, starts past the smallest size, and says
    why with the benchmark that shows its margin; ``show_config`` lists every rule."""
    import io

    routes = [(name, r) for name, k in REGISTRY.items() for r in k.routes]
    assert routes
    for name, r in routes:
        assert sorted(r.order) == sorted(_dispatch.BACKENDS) and r.min_size > 1, (name, r)
        assert "rfl-fast bench --sweep" in r.why, (name, r)
    out = io.StringIO()
    rfl_fast.show_config(out)
    text = out.getvalue()
    for name, r in routes:
        assert name in text and r.why in text



def test_call_dispatches_on_the_shape(monkeypatch):
    """``call`` passes the first argument's shape to the choice."""
    seen = []
    orig = _dispatch.resolve

    def spy(kernel, choice=None, shape=None):
        seen.append(shape)
        return orig(kernel, choice, shape)

    monkeypatch.setattr(_dispatch, "resolve", spy)
    x = np.eye(7)[None, :, :3]
    kernels.call("stiefel_proj", x, x)
    assert seen[-1] == (1, 7, 3)


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            yield ("." * node.level) + mod, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def test_only_kernels_touch_the_compiled_module_and_the_dispatcher():
    bad = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "kernels":
            continue
        for mod, names in _imports(path):
            touched = {*mod.split("."), *names}  # any part: ..kernels._numba._runtime too
            if touched & {"_core", "_dispatch", "_numba", "_threads"}:
                bad.append(f"{rel}: {mod} {names}")
    assert not bad, bad


def test_a_backend_beyond_its_declared_size_is_never_auto():
    from rfl_fast.kernels.registry import handles

    assert handles("stiefel_inv_retr_polar", "numba", 32)
    assert not handles("stiefel_inv_retr_polar", "numba", 33)
    assert handles("stiefel_inv_retr_polar", "cpp", 10_000)
    for size in (5, 64, 128):
        shape = (1, 784, size)
        assert _dispatch.resolve("stiefel_inv_retr_polar", "auto", shape)[0] != "numba" or \
            size <= 32


@pytest.mark.skipif(not kernels.is_available("numba"), reason="Numba is not installed")
def test_a_backend_asked_for_beyond_its_declared_size_is_refused_with_the_alternatives():
    """Asked for by name, Numba's O(p^6) polar inverse at p = 64 would allocate gigabytes: the
    call is refused, naming the limit and the backends that handle the shape."""
    from rfl_fast.errors import BackendUnavailableError

    x = np.zeros((1, 70, 64))
    with pytest.raises(BackendUnavailableError, match=r"'numba' handles kernel "
                       r"'stiefel_inv_retr_polar' only up to size 32 .*got shape \(1, 70, 64\)"
                       r": use 'auto', or (?:'cpp', 'numpy'|'numpy')$"):
        kernels.call("stiefel_inv_retr_polar", x, x, backend="numba")
    assert _dispatch.resolve("stiefel_inv_retr_polar", "numba", (1, 70, 32))[0] == "numba"


def test_one_sweep_point_times_every_backend_and_agrees():
    from rfl_fast.app.sweep import time_point

    row = time_point("stiefel_retr_polar", (2, 12, 3), kernels.available_backends(), 1)
    assert set(row["times"]) == set(kernels.available_backends())
    assert all(t > 0 for t in row["times"].values()) and all(row["agree"].values())


def test_a_registry_refuses_a_name_given_twice():
    """Every registry is built by ``by_name``, which refuses a repeated name (a dict built from
    a sequence would keep the last entry and drop the other without a word)."""
    from rfl_fast._validation import by_name
    from rfl_fast.kernels.registry import Kernel

    entries = (Kernel("twin", (1,), 1, "vector"), Kernel("twin", (1, 1), 1, "vector"))
    with pytest.raises(ValueError, match="'twin' is registered twice"):
        by_name(entries, lambda k: k.name, "kernels.REGISTRY")
    assert by_name(entries[:1], lambda k: k.name, "x") == {"twin": entries[0]}


def _repeated_literal_keys(source):
    """``(line, key)`` of each constant key a dict literal of ``source`` repeats."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            seen = set()
            for key in node.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        found.append((key.lineno, key.value))
                    seen.add(key.value)
    return found


def test_no_dict_literal_of_the_package_repeats_a_key():
    """The name tables written as dict literals (``app.names``, the option tables) cannot lose
    an entry to a repeated key either: Python keeps the last silently."""
    assert _repeated_literal_keys("T = {'a': 1, 'b': 2, 'a': 3}") == [(1, "a")]
    found = {str(p.relative_to(PACKAGE)): r for p in sorted(PACKAGE.rglob("*.py"))
             if (r := _repeated_literal_keys(p.read_text(encoding="utf-8")))}
    assert not found, found


def test_every_declared_step_kernel_name_is_a_kernel_or_a_fused_kernels_name():
    """A manifold's step, transport, inverse and projection declarations name a kernel of
    ``REGISTRY`` or an operation some ``FUSED`` entry declares: a misspelt name would silently
    never fuse."""
    from dataclasses import fields

    from rfl_fast.kernels.registry import FUSED

    fused_names = set()
    for f in FUSED.values():
        for field in fields(f):
            value = getattr(f, field.name)
            if field.name in ("name", "order", "summary"):
                continue
            fused_names.update(value if isinstance(value, tuple) else (value,))
    known = set(REGISTRY) | fused_names - {""}
    for name in rfl_fast.manifolds.MANIFOLDS:
        cls = getattr(rfl_fast.manifolds, name)
        declared = [k for ks in cls.step_kernels.values() for k in ks]
        declared += [*cls.transport_kernels.values(), *cls.inverse_kernels.values()]
        declared += [cls.project_kernel] if cls.project_kernel else []
        assert set(declared) <= known, (name, sorted(set(declared) - known))
