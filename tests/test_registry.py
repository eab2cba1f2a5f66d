"""The kernel registry is the one place a kernel is declared; auto chooses per shape from it."""

import ast
import pathlib

import numpy as np
import pytest

import rfl_fast
from rfl_fast import kernels
from rfl_fast.kernels import KERNELS, REGISTRY, _dispatch
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels._auto_table import AUTO
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


def test_sweep_grid_is_the_issue_grid():
    st = sweep_grid("stiefel_proj")
    assert {p for _, _, p in st} == {1, 2, 3, 4, 5, 8, 10, 16, 32, 64, 128}
    assert {n for _, n, _ in st} == {50, 784, 3072} and {b for b, _, _ in st} == {1, 16, 200}
    assert all(p <= n for _, n, p in st)
    assert {n for _, n in sweep_grid("spd_exp")} == {2, 3, 4, 5, 9, 16, 20, 32, 64, 128, 256}
    assert {d for _, d in sweep_grid("sphere_exp")} == {3, 10, 100, 784, 10_000}
    assert set(FAMILIES) == {k.family for k in REGISTRY.values()}


def test_auto_table_is_well_formed():
    for name, bands in AUTO.items():
        assert name in REGISTRY, name
        uppers = [u for u, _ in bands]
        assert uppers[-1] is None and all(u is not None for u in uppers[:-1])
        assert uppers[:-1] == sorted(uppers[:-1])
        for _, order in bands:
            assert "numpy" in order and set(order) <= set(_dispatch.BACKENDS), order


@pytest.mark.parametrize("name", sorted(AUTO))
def test_auto_follows_the_band_of_the_shape(name):
    """At a size inside each band, auto resolves to that band's first available backend, and
    the C++ fast lane is offered only where C++ is auto's choice."""
    bands = AUTO[name]
    lower = 1
    for upper, order in bands:
        size = lower if upper is None else upper
        want = next(b for b in order if kernels.is_available(b))
        got, _ = kernels.resolve(name, "auto", size)
        assert got == want, (name, size, order)
        lane = kernels.fast_lane(name, "auto", size)
        assert (lane is not None) == (want == "cpp" and REGISTRY[name].fast_lane)
        lower = (upper or lower) + 1


def test_call_dispatches_on_the_shape(monkeypatch):
    """``call`` passes the first argument's last dimension to the choice."""
    seen = []
    orig = _dispatch.resolve

    def spy(kernel, choice=None, size=None):
        seen.append(size)
        return orig(kernel, choice, size)

    monkeypatch.setattr(_dispatch, "resolve", spy)
    x = np.eye(7)[None, :, :3]
    kernels.call("stiefel_proj", x, x)
    assert seen[-1] == 3


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
            touched = {mod.rsplit(".", 1)[-1], *names}
            if touched & {"_core", "_dispatch", "_numba", "_threads"}:
                bad.append(f"{rel}: {mod} {names}")
    assert not bad, bad
