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


def test_derive_auto_orders_backends_by_their_worst_ratio_per_size():
    """The table derivation from sweep rows (times given, not measured): bands merge where the
    order is the same, the boundary is the geometric mean of neighbouring sizes."""
    from rfl_fast.sweep import derive_auto

    def row(p, cpp, numba, b=1):
        return {"kernel": "stiefel_proj", "point": [b, 784, p], "auto": "cpp",
                "times": {"cpp": cpp, "numba": numba, "numpy": 1.0},
                "agree": {"cpp": True, "numba": True, "numpy": True}}

    rows = [row(4, 0.1, 0.5), row(4, 0.2, 0.5, b=16), row(8, 0.3, 0.5),
            row(16, 2.0, 3.0), row(16, 0.8, 3.0, b=16), row(32, 2.0, 0.5)]
    table = derive_auto(rows)["stiefel_proj"]
    # p = 16: cpp loses at batch 1 (worst ratio 0.5), so numpy leads there
    assert table == ((11, ("cpp", "numba", "numpy")), (22, ("numpy", "cpp", "numba")),
                     (None, ("numba", "numpy", "cpp")))


def test_a_backend_beyond_its_declared_size_is_never_auto():
    from rfl_fast.kernels.registry import handles

    assert handles("stiefel_inv_retr_polar", "numba", 32)
    assert not handles("stiefel_inv_retr_polar", "numba", 33)
    assert handles("stiefel_inv_retr_polar", "cpp", 10_000)
    for size in (5, 64, 128):
        assert _dispatch.resolve("stiefel_inv_retr_polar", "auto", size)[0] != "numba" or \
            size <= 32


def test_one_sweep_point_times_every_backend_and_agrees():
    from rfl_fast.sweep import time_point

    row = time_point("stiefel_retr_polar", (2, 12, 3), kernels.available_backends(), 1)
    assert set(row["times"]) == set(kernels.available_backends())
    assert all(t > 0 for t in row["times"].values()) and all(row["agree"].values())
