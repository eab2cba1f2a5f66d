"""The kernel registry is the one place a kernel is declared; auto chooses per shape from it."""

import ast
import pathlib

import numpy as np
import pytest

import rfl_fast
from rfl_fast import kernels
from rfl_fast.kernels import KERNELS, REGISTRY, _dispatch
from rfl_fast.kernels import reference as ref
from rfl_fast.kernels import policy
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
    """``_core.pyi`` is written by hand: it must name every function of the compiled module and
    nothing else, and every registered kernel's C++ route and fast lane is among them."""
    stub = ast.parse((PACKAGE / "_core.pyi").read_text())
    declared = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
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


def test_the_shipped_policy_is_well_formed_and_covers_every_kernel():
    """The shipped policy parses strictly (``policy.parse``), is portable, and has points for
    every registered kernel."""
    shipped = policy.shipped()
    assert shipped.portable and shipped.source == "shipped"
    assert set(shipped.kernels) == set(REGISTRY)
    for name, points in shipped.kernels.items():
        core = REGISTRY[name].args[0]
        for p in points:
            assert len(p.at) == 1 + core and min(p.at) >= 1, (name, p.at)
            assert "numpy" in p.order and set(p.order) <= set(_dispatch.BACKENDS), p.order


AUTO = {k: tuple((e.at, e.order) for e in v) for k, v in policy.effective().items()}


@pytest.mark.parametrize("name", sorted(AUTO))
def test_auto_takes_the_order_of_the_nearest_point(name):
    """At each policy point, and at a shape a little off it, auto resolves to that point's first
    available backend (declared fit for the size), and the C++ fast lane is offered only where
    C++ is auto's choice."""
    from rfl_fast.kernels.registry import handles

    for shape, order in AUTO[name]:
        want = next(b for b in order if kernels.is_available(b) and handles(name, b, shape[-1]))
        nudged = (shape[0] + (shape[0] > 4),) + shape[1:]  # nearer to this point than to others
        for s in (shape, nudged, shape[1:] if shape[0] == 1 else shape):
            got, _ = kernels.resolve(name, "auto", s)
            assert got == want, (name, s, order)
        lane = kernels.fast_lane(name, "auto", shape)
        assert (lane is not None) == (want == "cpp" and REGISTRY[name].fast_lane)


def test_auto_chooses_by_batch_as_well_as_by_size():
    """Two points that differ only in their number of items may take different backends."""
    points = dict(AUTO["lorentz_dist"])
    near = {_dispatch.auto_order("lorentz_dist", (b, 785)) for b in (1, 200)}
    assert near == {points[(1, 785)], points[(200, 785)]} and len(near) == 2


def test_the_portable_rule_puts_the_reference_before_routes_that_make_its_blas_calls():
    """Where the shipped policy's C++ route makes the reference's BLAS calls (``same_calls``:
    Stiefel proj from p = 9, the SPD kernels on LAPACK), its measured lead over the reference is
    overhead saved on the measuring machine (16 cores: 0.56x at Stiefel(1000, 12).proj, batch
    40), so auto takes the reference there; elsewhere the measured order stands."""
    shipped = policy.shipped()
    assert shipped.same_calls["stiefel_proj"] == {"cpp": 9}
    moved = 0
    for name, points in shipped.kernels.items():
        start = shipped.same_calls.get(name, {}).get("cpp")
        for p in points:
            got = shipped.order(name, p)
            assert sorted(got) == sorted(p.order)
            if start is not None and p.at[-1] >= start:
                assert got.index("numpy") < got.index("cpp"), (name, p.at)
                moved += p.order.index("cpp") < p.order.index("numpy")
            else:
                assert got == p.order
    assert moved > 0  # the rule changed measured choices
    near = _dispatch.resolve("stiefel_proj", "auto", (40, 1000, 12))[0]
    assert near != "cpp"


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


def _sweep_row(b, p, cpp, numba, numba_ok=True, rounds=None):
    times = {"cpp": cpp, "numba": numba, "numpy": 1.0}
    row = {"kernel": "stiefel_proj", "point": [b, 784, p], "auto": "cpp", "times": times,
           "agree": {"cpp": True, "numba": numba_ok, "numpy": True}}
    if rounds is not None:
        row["rounds"] = [times] + [{"cpp": c, "numba": n, "numpy": 1.0} for c, n in rounds]
    return row


def test_derive_auto_orders_backends_by_their_time_per_point():
    """The table derivation from sweep rows (times given, not measured): each point orders the
    backends that agree with the reference and beat it by the margin fastest first, then the
    reference, then the rest, a disagreeing one last."""
    from rfl_fast.app.sweep import derive_auto

    rows = [_sweep_row(1, 4, 0.1, 0.5), _sweep_row(1, 16, 2.0, 3.0),
            _sweep_row(16, 16, 0.8, 3.0), _sweep_row(1, 32, 2.0, 0.5, numba_ok=False)]
    got = derive_auto(rows)["stiefel_proj"]
    assert tuple((p.at, p.order) for p in got) == (
        ((1, 784, 4), ("cpp", "numba", "numpy")), ((1, 784, 16), ("numpy", "cpp", "numba")),
        ((16, 784, 16), ("cpp", "numpy", "numba")), ((1, 784, 32), ("numpy", "cpp", "numba")))
    assert dict(got[0].speedup) == {"cpp": 10.0, "numba": 2.0}


def test_derive_auto_keeps_the_reference_where_a_backend_wins_by_less_than_the_margin():
    """1.05x is within a busy machine's noise (MARGIN = 1.1): auto keeps the reference there;
    a backend goes first by its median round, and not at all when one round has it behind the
    reference (0.9x), however fast the others."""
    from rfl_fast.app.sweep import MARGIN, derive_auto

    assert MARGIN == 1.1
    rows = [_sweep_row(1, 64, 1 / 1.05, 2.0),
            _sweep_row(16, 64, 0.5, 0.8, rounds=[(1 / 0.9, 0.8), (0.5, 0.8)]),
            _sweep_row(16, 128, 0.5, 0.6, rounds=[(0.55, 0.7)]),
            _sweep_row(200, 64, 0.8, 2.0, rounds=[(1 / 1.05, 2.0), (0.8, 2.0)])]
    assert tuple((p.at, p.order) for p in derive_auto(rows)["stiefel_proj"]) == (
        ((1, 784, 64), ("numpy", "cpp", "numba")), ((16, 784, 64), ("numba", "numpy", "cpp")),
        ((16, 784, 128), ("cpp", "numba", "numpy")), ((200, 784, 64), ("cpp", "numpy", "numba")))


def test_a_close_point_is_timed_again_and_a_clear_one_is_not(monkeypatch):
    from rfl_fast.app import sweep

    calls = []

    def fake_time_point(name, point, backends, repeats, fns=None):
        calls.append(point)
        cpp = {(1, 784, 5): 0.1, (1, 784, 64): 0.95}[tuple(point)]
        return {"kernel": name, "point": list(point), "times": {"numpy": 1.0, "cpp": cpp},
                "agree": {"numpy": True, "cpp": True}, "given_up": []}

    monkeypatch.setattr(sweep, "time_point", fake_time_point)
    clear = sweep.time_rounds("stiefel_proj", (1, 784, 5), ["numpy", "cpp"], 1, rounds=3)
    close = sweep.time_rounds("stiefel_proj", (1, 784, 64), ["numpy", "cpp"], 1, rounds=3)
    assert len(clear["rounds"]) == 1 and len(close["rounds"]) == 3
    assert calls == [(1, 784, 5)] + [(1, 784, 64)] * 3


def _write(table, path, note="a test sweep.", portable=True):
    from rfl_fast.app.sweep import write_policy

    return write_policy(table, path, note, policy.machine_key(), 2, portable=portable,
                        command="test")


def test_write_policy_merges_point_by_point(tmp_path):
    """A sweep of some points replaces their orders and keeps every other point of the policy;
    the file parses strictly."""
    import shutil

    from rfl_fast.app.sweep import derive_auto

    path = tmp_path / "policy.json"
    shutil.copy(PACKAGE / "kernels" / policy.SHIPPED, path)
    new = _write(derive_auto([_sweep_row(1, 784, 2.0, 3.0)]), str(path))
    again = policy.parse(path.read_bytes(), str(path))
    assert again.kernels == new.kernels and again.portable
    old = {p.at: p.order for p in policy.shipped().kernels["stiefel_proj"]}
    assert {p.at: p.order for p in again.kernels["stiefel_proj"]} == {
        **old, (1, 784, 784): ("numpy", "cpp", "numba")}
    for name, points in policy.shipped().kernels.items():
        if name != "stiefel_proj":
            assert again.kernels[name] == points
    notes = again.provenance["notes"]
    assert notes[0] == "a test sweep." and notes[2:] == policy.shipped().provenance["notes"]
    assert again.provenance["machine"] == policy.machine_key()


def test_write_policy_drops_the_earlier_notes_once_every_point_is_replaced(tmp_path):
    """A sweep that times every point of the policy is the whole story: the notes of the sweeps
    before it go; one that leaves a point keeps them, under a line saying so."""
    import shutil

    path = tmp_path / "policy.json"
    shutil.copy(PACKAGE / "kernels" / policy.SHIPPED, path)
    everything = {name: tuple(policy.Point(p.at, ("numpy",)) for p in points)
                  for name, points in policy.shipped().kernels.items()}
    new = _write(everything, str(path), "the whole grid.")
    assert new.provenance["notes"] == ["the whole grid."] and new.kernels == everything
    one_short = {**everything, "stiefel_proj": everything["stiefel_proj"][1:]}
    new = _write(one_short, str(path), "all but one point.")
    assert new.provenance["notes"][:3] == ["all but one point.",
                                           "Points this sweep did not time are kept from the "
                                           "policy before it:", "the whole grid."]


def test_bench_write_auto_writes_the_shipped_policy(monkeypatch, capsys):
    """``rfl-fast bench --sweep --write-auto`` merges into ``rfl_fast/kernels/auto_policy.json``
    (portable)."""
    from rfl_fast.app import bench, sweep

    written = []
    monkeypatch.setattr(sweep, "write_policy", lambda table, path, note, machine, threads, **kw:
                        written.append((table, path, note, kw)))
    assert bench.main(["--sweep", "--only", "stiefel_proj", "--min-size", "100000",
                       "--write-auto"]) == 0
    (table, path, note, kw), = written
    assert table == {} and kw["portable"] is True
    assert path == str(PACKAGE / "kernels" / "auto_policy.json")
    assert "--min-size 100000" in note


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
