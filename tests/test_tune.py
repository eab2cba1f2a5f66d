"""``rfl-fast tune`` writes a per-machine policy that auto follows from then on (times are
given here, never measured and asserted), and ``rfl-fast bench --scaling`` prints its table
(tiny sizes: structure only)."""

import json

import pytest

import rfl_fast as rf
from rfl_fast import kernels
from rfl_fast.app import bench, sweep, tune
from rfl_fast.app.cli import main
from rfl_fast.kernels import policy


def _fake_rows(monkeypatch, first):
    """``sweep.time_rounds`` answering with given times: ``first`` 5x the reference, the others
    at half its speed."""
    def fake(name, point, backends, repeats, rounds, fns=None):
        times = {b: (0.2 if b == first else 2.0) for b in backends}
        times["numpy"] = 1.0
        return {"kernel": name, "point": list(point), "times": times, "rounds": [times],
                "agree": {b: True for b in backends}, "given_up": []}

    monkeypatch.setattr(sweep, "time_rounds", fake)
    monkeypatch.setattr(kernels, "warm_up", lambda names: kernels.available_backends())


def test_tune_writes_a_policy_that_auto_then_follows(policy_cache, monkeypatch, capsys):
    name, point = "stiefel_retr_polar", (200, 784, 5)
    shipped = kernels.auto_order(name, point)[0]
    other = next(b for b in rf.available_backends() if b not in (shipped, "numpy"))
    _fake_rows(monkeypatch, other)
    monkeypatch.setattr(tune, "quick_points", lambda: [(name, point)])
    assert main(["tune", "--quick"]) == 0
    out = capsys.readouterr().out
    path = policy.tuned_path(rf.get_threads())
    assert f"wrote {path}" in out and "changes at 1 of them" in out
    with open(path, "rb") as f:
        written = policy.parse(f.read(), path)
    assert not written.portable and written.provenance["machine"] == policy.machine_key()
    assert written.provenance["threads"] == rf.get_threads()
    (p,) = written.kernels[name]
    assert p.at == point and p.order[0] == other and dict(p.speedup)[other] == 5.0
    assert kernels.auto_order(name, point)[0] == other
    assert kernels.resolve(name, "auto", point)[0] == other
    assert path in kernels.policy_notes()[1]


def test_tune_dry_run_writes_nothing(policy_cache, monkeypatch, capsys):
    _fake_rows(monkeypatch, "cpp")
    monkeypatch.setattr(tune, "quick_points", lambda: [("sphere_exp", (10_000, 784))])
    assert main(["tune", "--dry-run"]) == 0
    assert "nothing written (--dry-run)" in capsys.readouterr().out
    assert not list(policy_cache.iterdir())


def test_tune_stops_at_its_time_budget(policy_cache, monkeypatch, capsys):
    _fake_rows(monkeypatch, "cpp")
    assert main(["tune", "--budget-s", "0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "time budget 0 s spent" in out and "timed 0 points" in out


def test_tune_times_a_real_point(policy_cache, capsys):
    """One tiny point through the real timing (no time asserted): a valid policy comes out."""
    table, rows = tune.tune([("stiefel_proj", (2, 12, 3))], repeats=1, rounds=1)
    (p,) = table["stiefel_proj"]
    assert p.at == (2, 12, 3) and "numpy" in p.order and len(rows) == 1
    assert set(dict(p.speedup)) == set(rf.available_backends()) - {"numpy"}
    assert "stiefel_proj" in capsys.readouterr().out


def test_the_quick_list_is_known_kernels_at_valid_points():
    for name, point in tune.quick_points() + tune.full_points()[:5]:
        core = rf.kernels.REGISTRY[name].args[0]
        assert len(sweep._shape(name, point)) == 1 + core


def test_bench_scaling_prints_the_table_with_the_floor(tmp_path, capsys):
    """``rfl-fast bench --scaling --smoke``: one row per workload, one column per thread count
    (1, 2, 4, ... up to the C++ threads), the copy bandwidth on 1 and on all threads, the floor.
    Structure only: times are never asserted."""
    out = tmp_path / "scaling.json"
    assert bench.main(["--scaling", "--smoke", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    result = json.loads(out.read_text())
    counts = bench.thread_counts(rf.get_threads())
    assert result["threads"] == counts and counts[0] == 1 and counts[-1] == rf.get_threads()
    assert set(result["copy_bandwidth_GBps"]) == {"1", str(counts[-1])}
    assert [r["kernel"] for r in result["rows"]] == [k for _, k, _ in bench.SMOKE_SCALING]
    for r in result["rows"]:
        assert set(r["seconds"]) == {str(c) for c in counts} and r["floor_s"] > 0
        assert r["workload"] in text
    assert "copy bandwidth (read + write)" in text and "floor ms" in text
    assert bench.thread_counts(16) == [1, 2, 4, 8, 16] and bench.thread_counts(6) == [1, 2, 4, 6]
    assert bench.thread_counts(1) == [1]
