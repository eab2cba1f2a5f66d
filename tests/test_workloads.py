"""The workload matrix (``rfl-fast bench --federated``, :mod:`rfl_fast.app.workloads`) at toy
size: every pair the package accepts gives a row, the batched-NumPy floors compute the
package's iterates, and the command's arguments are checked.

Times are recorded, never asserted (benchmarks measure speed; tests measure correctness).
"""

import json
import math

import numpy as np
import pytest

from rfl_fast.app import bench
from rfl_fast.app import workloads as W
from rfl_fast.app.cli import main

RATES = {"dgemm_flops": 1e10, "copy_Bps": 1e10}


@pytest.fixture(scope="module")
def matrix():
    return W.run_matrix(ks=(3,), shapes=W.Shapes.tiny(), repeats=1, memory=False, rates=RATES)


def test_every_pair_is_a_row_or_refused_by_the_package(matrix):
    labels = [c[0] for c in W.ALGORITHM_CASES]
    rows = {(r["problem"], r["algorithm"]) for r in matrix["rows"]}
    refused = {(r["problem"], r["algorithm"]): r["refused"] for r in matrix["refused"]}
    assert rows | set(refused) == {(p, a) for p in W.PROBLEMS for a in labels}
    assert not rows & set(refused)
    # the refusals are the package's own answers, each naming what is missing
    shapes = W.Shapes.tiny()
    for (name, label), why in refused.items():
        data = W.make_data(name, 3, shapes, np.random.default_rng(0))
        spec, reason = W.accepted(W.build_problem(name, data, shapes), W.make_algorithm(
            label, name))
        assert spec is None and reason == why and why
    # the algorithm names are the registry's
    from rfl_fast.algorithms import ALGORITHMS
    assert {c[1] for c in W.ALGORITHM_CASES} == set(ALGORITHMS)
    # what the package refuses today: RFedProj needs a projection, PriRFed an accountable
    # problem; every other pair runs
    assert ("SPDMean", "RFedProj") in refused and ("kPCA", "PriRFed/DP-RSGD") in rows


def test_floors_compute_the_package_iterates(matrix):
    for r in matrix["rows"]:
        assert r["max_dx"] <= 1e-12, r
        assert r["moved"] > 1e-6, r            # the iterates moved: the agreement says something


def test_rows_hold_every_measure(matrix):
    for r in matrix["rows"]:
        assert r["us_per_client_step"] > 0 and r["round_s"]["min"] <= r["round_s"]["median"]
        assert r["numpy_floor_s"]["median"] > 0 and r["over_numpy"] > 0
        assert r["flop_floor_s"] > 0 and r["physical_floor_s"] >= r["flop_floor_s"]
        assert ("memory_floor_s" in r) == (r["problem"] in ("kPCA", "SpherePCA", "Brockett",
                                                            "GrassmannPCA"))
        assert ("over_twin" in r) == r["algorithm"].startswith("PriRFed")
        assert ("exp_over_polar" in r) == (r["algorithm"].startswith("PriRFed") and r[
            "problem"] in ("kPCA", "Brockett", "GrassmannPCA"))
        assert ("first_over_later" in r) == (r["algorithm"] in ("RFedSVRG", "2BB", "2BBS"))
    W.print_table(matrix)


def test_peak_memory_counts_the_data():
    row = W.measure_cell("SPDMean", "RFedAvg", 3, W.Shapes.tiny(), 1, RATES, floors=False)
    assert row["peak_over_data"] > 1.0 and "numpy_floor_s" not in row


def test_a_wrong_floor_is_seen():
    """The agreement check is sharp: a floor run with another step size disagrees."""
    shapes = W.Shapes.tiny()
    rng = np.random.default_rng(0)
    data = W.make_data("kPCA", 3, shapes, rng)
    x0 = W.initial_point("kPCA", shapes, rng)
    P = W.build_problem("kPCA", data, shapes)
    spec, _ = W.accepted(P, W.make_algorithm("RFedAvg", "kPCA"), 2)
    dx, moved = W.floor_agreement("kPCA", data, shapes, spec, P, x0)
    assert dx <= 1e-12 < moved
    other, _ = W.accepted(P, W.make_algorithm("RFedAvg", "kPCA").__class__(2e-3, 5), 2)
    x_fl, _ = W.floor_rounds("kPCA", data, shapes, other, P.manifold, x0, 2)
    x_pkg, _ = W._package_rounds(P, spec, x0, 2)
    assert np.max(np.abs(x_fl - x_pkg)) > 1e3 * max(dx, 1e-16)


def test_dp_rsvrg_floor_uses_the_package_picks():
    shapes = W.Shapes.tiny()
    rng = np.random.default_rng(1)
    data = W.make_data("SPDMean", 2, shapes, rng)
    x0 = W.initial_point("SPDMean", shapes, rng)
    P = W.build_problem("SPDMean", data, shapes)
    spec, _ = W.accepted(P, W.make_algorithm("PriRFed/DP-RSVRG", "SPDMean"), 2)
    dx, moved = W.floor_agreement("SPDMean", data, shapes, spec, P, x0, rounds=2)
    assert dx <= 1e-12 < moved
    assert not math.isinf(spec.clip)


def test_cli_federated_smoke(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["bench", "--federated", "--smoke", "--only", "SpherePCA", "--no-memory",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {r["problem"] for r in result["rows"]} == {"SpherePCA"}
    assert len(result["rows"]) == len(W.ALGORITHM_CASES)
    assert result["machine"]["cpus"] >= 1 and result["rates"]["dgemm_flops"] > 0
    text = capsys.readouterr().out
    assert "SpherePCA" in text and "x numpy" in text


@pytest.mark.parametrize("argv", [["--federated", "--ks", "0"], ["--federated", "--ks", "a"],
                                  ["--ks", "10"], ["--federated", "--sweep"],
                                  ["--federated", "--only", "nothing-matches"]])
def test_bad_arguments_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_the_matrix_covers_every_problem_class():
    """Every problem class the package exports has a cell of the workload matrix (its labels
    are the matrix's own, so a new problem must be added there: this test says so)."""
    import rfl_fast.problems as problems

    rng = np.random.default_rng(0)
    shapes = W.Shapes.tiny()
    built = {type(W.build_problem(name, W.make_data(name, 3, shapes, rng), shapes))
             for name in W.PROBLEMS}
    classes = {getattr(problems, n) for n in problems.__all__}
    classes = {c for c in classes if isinstance(c, type) and issubclass(c, problems.Problem)
               and c is not problems.Problem}
    # problem classes that are not one workload, with the reason (a cell would be arbitrary)
    generic = {problems.LossProblem: "a user's loss in torch, an optional dependency; "
               "tests/test_loss_problem.py runs it"}
    classes -= set(generic)
    assert classes <= built, sorted(c.__name__ for c in classes - built)
