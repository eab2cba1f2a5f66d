"""The ``rfl-fast`` command: ``run CONFIG`` end to end, bad input (exit 2, nothing written),
``reproduce``, and Ctrl-C handling (partial results kept and marked)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rfl_fast
from rfl_fast.app.cli import build_parser, main
from rfl_fast.app.config import ConfigError, load_plan, resolve_config
from rfl_fast.app.runner import execute
from rfl_fast.federation import History

TINY = """\
name = "tiny"
rounds = 6
seed = 1
plots = {plots}

[problem]
type = "KPCA"
r = 2

[data]
source = "wine"

[partition]
method = "equal"
n_clients = 4

[[algorithm]]
name = "RFedSVRG"
step = 0.02
local_steps = 3

[[algorithm]]
name = "RFedAvg"
label = "avg"
step = {{ schedule = "decaying", a0 = 0.05, dec = 2 }}
local_steps = 3
"""


def _write(folder, text, name="exp.toml"):
    path = folder / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def tiny(tmp_path):
    return _write(tmp_path, TINY.format(plots='["grad_norm", "angle", "f_gap"]'))


@pytest.fixture
def tiny_noplot(tmp_path):
    return _write(tmp_path, TINY.format(plots="[]"))


def _env():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(rfl_fast.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    return env


# ----------------------------------------------------------------------------- run CONFIG

def test_run_writes_the_whole_results_folder(tiny, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", tiny, "--out", str(out), "-q"]) == 0
    assert capsys.readouterr().out == ""                       # --quiet
    names = set(os.listdir(out))
    for label in ("RFedSVRG", "avg"):
        assert {f"history_{label}.csv", f"history_{label}.json", f"model_{label}.npy"} <= names
        h_csv = History.from_csv(out / f"history_{label}.csv")
        h_json = History.from_json(out / f"history_{label}.json")
        assert len(h_csv) == len(h_json) == 7                  # row 0 + 6 rounds
        assert h_csv.equal(h_json)
        x = np.load(out / f"model_{label}.npy")
        assert x.shape == (13, 2) and np.allclose(x.T @ x, np.eye(2), atol=1e-10)
    for metric in ("grad_norm", "angle", "f_gap"):             # one PNG per figure
        assert os.path.getsize(out / f"plot_{metric}.png") > 1000
        assert not (out / f"plot_{metric}.pdf").exists()          # a PDF only with --pdf
    assert (out / "config.toml").read_text() == Path(tiny).read_text()     # as given
    resolved = json.loads((out / "config_resolved.json").read_text())
    assert resolved["status"] == "completed"
    assert resolved["out"] == str(out) and resolved["metrics_every"] == 1   # defaults filled
    assert resolved["participation"] == {"type": "full"}
    assert resolved["algorithm"][1]["step"] == {"schedule": "decaying", "a0": 0.05, "beta": 1.0,
                                                "dec": 2, "power": 1.0}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["algorithms"]["RFedSVRG"]["rounds"] == 6
    assert not [n for n in names if ".tmp" in n]               # no temporary files left


def test_run_overrides_and_messages(tiny_noplot, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", tiny_noplot, "--out", str(out), "--rounds", "2", "--seed", "5",
                 "-v"]) == 0
    text = capsys.readouterr().out
    assert "resolved configuration" in text and "RFedSVRG round 2" in text
    assert "completed: results in" in text and "grad norm" in text
    assert len(History.from_csv(out / "history_avg.csv")) == 3
    assert json.loads((out / "config_resolved.json").read_text())["seed"] == 5
    # a second run into the same folder needs --overwrite
    assert main(["run", tiny_noplot, "--out", str(out), "-q"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["run", tiny_noplot, "--out", str(out), "-q", "--overwrite"]) == 0


def test_run_yaml_and_missing_pyyaml(tmp_path, monkeypatch, capsys):
    pytest.importorskip("yaml")
    text = ("rounds: 3\nproblem: {type: SPDMean}\n"
            "data: {source: wishart, n_clients: 3, n_samples: 5, d: 2}\n"
            "plots: []\nalgorithm:\n  - {name: RFedSVRG, step: 0.1, local_steps: 2}\n")
    cfg = _write(tmp_path, text, "spd.yaml")
    assert main(["run", cfg, "--out", str(tmp_path / "a"), "-q"]) == 0
    assert np.load(tmp_path / "a" / "model_RFedSVRG.npy").shape == (2, 2)
    monkeypatch.setitem(sys.modules, "yaml", None)             # as if PyYAML were missing
    assert main(["run", cfg, "--out", str(tmp_path / "b"), "-q"]) == 2
    assert "PyYAML" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


BASE = """\
rounds = 3
[problem]
type = "KPCA"
r = 2
[data]
source = "wine"
[[algorithm]]
name = "RFedAvg"
step = 0.1
local_steps = 2
"""

BAD = [
    # (replace, by, key named in the message, a word of the message)
    ('type = "KPCA"', 'type = "PCA"', "problem.type", "SpherePCA"),
    ("r = 2", "r = 99", "problem.r", "r <= d"),
    ("r = 2", 'r = "two"', "problem.r", "expected an int"),
    ("step = 0.1", "step = -1", "algorithm[0].step", "> 0"),
    ("step = 0.1", 'step = { schedule = "cosine" }', "algorithm[0].step.schedule", "decaying"),
    ("step = 0.1", "stepsize = 0.1", "algorithm[0].stepsize", "local_steps"),
    ('name = "RFedAvg"', 'name = "FedAvg"', "algorithm[0].name", "RFedSVRG"),
    ("local_steps = 2", "local_steps = 0", "algorithm[0].local_steps", "local_steps"),
    ('source = "wine"', 'source = "wines"', "data.source", "breast_cancer"),
    ('source = "wine"', 'source = "wishart"', "data.source", "wine"),
    ('source = "wine"', 'source = "npy"\npath = "missing.npy"', "data.path", "missing.npy"),
    ("rounds = 3", "rounds = -3", "rounds", ">= 0"),
    ("rounds = 3", "round = 3", "round", "rounds"),
    ("rounds = 3", 'rounds = 3\nplots = ["loss"]', "plots[0]", "grad_norm"),
    ('source = "wine"', 'source = "wine"\n[partition]\nmethod = "random"', "partition.method",
     "dirichlet"),
    ('source = "wine"', 'source = "wine"\n[partition]\nn_clients = 500', "partition.n_clients",
     "178 samples"),
    ('source = "wine"', 'source = "wine"\n[participation]\ntype = "uniform"\nk = 20',
     "participation.k", "n=10"),
    ('source = "wine"', 'source = "wine"\n[participation]\ntype = "bernoulli"\np = 1.5',
     "participation.p", "expected a value in [0, 1]"),
    ("local_steps = 2", "local_steps = 2\nbatch_size = 1000", "algorithm[0].batch_size",
     "larger than"),
    ("[[algorithm]]", "[[algorithms]]", "algorithms", "algorithm"),
    ('name = "RFedAvg"', 'name = "PriRFed"\nsigma = 0.5\nbatch_size = 1000',
     "algorithm[0].batch_size", "exceeds the N_i"),
    ('name = "RFedAvg"', 'name = "PriRFed"\nsigma = 1e-3\ntarget = [1.0, 1e-5]',
     "algorithm[0].sigma", "cannot reach the privacy target"),
    ('name = "RFedAvg"', 'name = "PriRFed"\ntarget = [1.0, 1e-5]\naccountant = "pld"\n'
     'batch_size = 5', "algorithm[0].target", "cannot be reached"),
    ('[[algorithm]]\nname = "RFedAvg"', '[participation]\ntype = "bernoulli"\np = 0.5\n'
     '[[algorithm]]\nname = "PriRFed"\nsigma = 0.5', "algorithm[0]", "without replacement"),
    ("rounds = 3", "rounds = = 3", "", "not valid TOML"),
]


@pytest.mark.parametrize("old, new, key, word", BAD, ids=[b[2] or "toml" for b in BAD])
def test_bad_config_exits_2_naming_the_key_and_writes_nothing(tmp_path, capsys, old, new, key,
                                                              word):
    assert old in BASE
    cfg = _write(tmp_path, BASE.replace(old, new, 1))
    out = tmp_path / "never"
    assert main(["run", cfg, "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"{key}: " in err and word in err, err
    assert not out.exists()


def test_config_errors_name_the_allowed_values():
    with pytest.raises(ConfigError) as info:
        resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                        "participation": {"type": "some"}, "algorithm": []})
    assert info.value.key == "participation.type"
    assert info.value.allowed == ("full", "uniform", "bernoulli")


def test_library_errors_map_to_keys_by_their_attributes_never_their_text(monkeypatch):
    """(issue 31) A library object's error names its argument as an attribute
    (``ParameterError.param``); the reader maps it to ``table.param`` from that alone. Text
    that merely looks like a key maps to the table, with the whole text."""
    import rfl_fast.app.config as C
    from rfl_fast.errors import InvalidParameterError

    cfg = resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                          "algorithm": [{"name": "RFedAvg", "step": 0.1, "local_steps": 2}]})
    for exc, key, shown in [
            (InvalidParameterError("r", "too large for the data"), "problem.r",
             "problem.r: too large for the data"),
            (InvalidParameterError("nope", "not a key of the table"), "problem",
             "problem: nope: not a key of the table"),
            (ValueError("r: looks like a key, is not one"), "problem",
             "problem: r: looks like a key, is not one")]:
        def boom(*args, exc=exc):
            raise exc
        monkeypatch.setattr(C, "_build_problem", boom)
        with pytest.raises(ConfigError) as info:
            C.build_plan(cfg)
        assert info.value.key == key and str(info.value) == shown


def test_a_config_error_carries_the_constraint_as_attributes():
    """The constraint a library object stated (``ParameterError.expected`` / ``got``) reaches
    the caller of the experiment-file reader as attributes too, not only in the text."""
    with pytest.raises(ConfigError) as info:
        resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                        "algorithm": [{"name": "RFedAvg", "step": -1.0, "local_steps": 2}]})
    err = info.value
    assert (err.key, err.expected, err.got) == ("algorithm[0].step", "a value > 0", "-1")
    assert str(err) == "algorithm[0].step: expected a value > 0, got -1"


def test_an_experiment_file_is_built_once_and_its_noise_calibrated_once(tmp_path, monkeypatch):
    """(issue 31) The plan holds each algorithm fixed for the run (PriRFed's noise calibrated,
    its ledger planned); the run uses it as it is: one calibration per client group, where
    plan time and run time used to calibrate twice (an lru_cache hid the second)."""
    pytest.importorskip("dp_accounting")
    from rfl_fast.privacy import Accountant

    calls = []
    calibrate = Accountant.calibrate
    monkeypatch.setattr(Accountant, "calibrate",
                        staticmethod(lambda *a, **k: calls.append(a) or calibrate(*a, **k)))
    # eps = 8: noise that keeps the clients within the polar inverse's reach of the server
    # point (at eps = 2 a client leaves it in round 1 and the tangent mean refuses, issue 38)
    cfg = _write(tmp_path, BASE.replace('name = "RFedAvg"', 'name = "PriRFed"\ntarget = [8.0, '
                                        '1e-5]\naccountant = "seed"'))
    plan = load_plan(cfg, overrides={"out": str(tmp_path / "out")})
    (label, alg), = plan.algorithms
    assert alg.ledger is not None and alg.ledger.calibrated
    groups = len(set(alg.ledger.settings))
    assert len(calls) == groups                       # once per distinct client
    outcome = execute(plan, progress=False, quiet=True)
    assert len(calls) == groups                       # and not again when it runs
    assert outcome.status == "completed"
    eps = outcome.histories[label]["eps_seed"]
    assert eps.tolist() == alg.ledger.columns["eps_seed"].tolist()


def test_only_federated_algorithms_are_algorithm_names():
    from rfl_fast import algorithms
    from rfl_fast.app.config import algorithm_names
    from rfl_fast.flower.spec import build_algorithm

    ALGORITHMS = tuple(algorithms.ALGORITHMS)       # the registry, in its order
    assert algorithm_names() == ALGORITHMS
    others = [n for n in algorithms.__all__ if n not in ALGORITHMS]
    assert "FederatedAlgorithm" in others and "PointState" in others
    for name in others:          # exported next to the algorithms, but none of them
        assert name in algorithms.__all__ and name not in algorithm_names()
        with pytest.raises(ConfigError) as info:
            resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                            "algorithm": [{"name": name, "x": np.zeros(2)}]})
        assert info.value.key == "algorithm[0].name"
        assert info.value.allowed == ALGORITHMS
        with pytest.raises(ValueError, match="algorithm: unknown"):   # nor in a Flower run
            build_algorithm(name, {})
    cfg = resolve_config({"problem": {"type": "KPCA", "r": 2}, "data": {"source": "wine"},
                          "algorithm": [{"name": "rfedprox", "step": 0.1, "local_steps": 2,
                                         "mu": 0.5}]})
    assert cfg["algorithm"][0]["name"] == "RFedProx"


def test_bad_command_line_exits_2(tmp_path, tiny, capsys):
    assert main(["run", tiny, "--rounds", "-1"]) == 2
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["run", _write(tmp_path, "x", "exp.json")]) == 2
    assert ".toml, .yaml, .yml" in capsys.readouterr().err
    from rfl_fast.app.experiments import EXPERIMENTS

    assert main(["reproduce", f"E{len(EXPERIMENTS) + 1}"]) == 2
    assert ", ".join(EXPERIMENTS) in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert not os.path.exists("rfl_fast_runs/exp")


# ----------------------------------------------------------------------------- reproduce

def test_reproduce_small_e1(tmp_path, capsys):
    out = tmp_path / "e1"
    assert main(["reproduce", "e1", "--small", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "E1: Tangent-space vs Karcher" in text
    res = json.loads((out / "E1.json").read_text())
    assert res["small"] is True and "100" in res["results"]["table"]


def test_reproduce_shows_expected_time_progress_and_table(tmp_path, capsys):
    """The measured estimate first (tests/test_experiments.py keeps it within 2x), a line per
    run with the time left from the second on, the plots announced with their count and their
    time, PNG only."""
    out = tmp_path / "e4"
    assert main(["reproduce", "E4", "--small", "--table", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "expected: the runs take about under 1 s on an idle 2-core machine (measured); " \
           "then the plots (--no-plots skips them)" in text
    assert "E4 [1/5]" in text and "E4 [5/5]" in text and "fig1a_RFedSVRG-2BBS" in text
    assert re.search(r"E4 \[2/5\] .*\((about .*|under 1 s) left\)$", text, re.M)
    assert "left" not in next(ln for ln in text.splitlines() if "E4 [5/5]" in ln)
    assert re.search(r"plotting \d+ figures \(png; --no-plots skips them\) \.\.\.", text)
    assert re.search(r"\d+ plot files in [\d.]+ s", text)
    assert "| setting | quantity | ours | paper | verdict |" in text
    assert (out / "E4.md").read_text().startswith("# E4")
    assert sorted(p.suffix for p in out.glob("E4_plot_*")) == [".png"] * len(
        list(out.glob("E4_plot_*")))


def test_reproduce_without_plots_and_full_forms_promise_no_unmeasured_time(tmp_path, capsys):
    """--no-plots writes no figure and does not mention them; a full form names only a
    measured time (or none) and promises the time left from its own pace."""
    from rfl_fast.app.cli import _expectation

    out = tmp_path / "e1"
    assert main(["reproduce", "E1", "--small", "--no-plots", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "plot" not in text.split("\n", 2)[1] and not list(out.glob("*.png"))
    assert _expectation("E7", False, None, False).startswith("the runs' time is not on record")
    assert "took 19 min when last measured" in _expectation("E2", False, 1130, True)


def test_reproduce_exits_1_with_the_reason_when_a_declared_run_is_missing(tmp_path, capsys,
                                                                         monkeypatch):
    from rfl_fast.app.experiments import e1
    from rfl_fast.app.experiments._common import Recorder

    def broken(small=False, seed=0, out=None):
        rec = Recorder("E1", "t", "s", small, seed, out)
        rec.declare("setting_RFedAvg")
        return rec.finish()
    monkeypatch.setattr(e1, "run", broken)
    assert main(["reproduce", "E1", "--small", "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "ExperimentError" in err and "setting_RFedAvg" in err


def test_info_still_works(capsys):
    """``info`` reads as words: every thread pool with its library, no ``None`` where a library
    reports no kernel or version (OpenMP runtimes)."""
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "backends" in out and "None" not in out
    from rfl_fast import _pool_line

    assert _pool_line({"internal_api": "openmp", "prefix": "libgomp", "num_threads": 2,
                       "architecture": None, "version": None,
                       "filepath": "/x/scipy.libs/libgomp-a34b3233.so.1"}) == \
        "openmp (scipy's libgomp): 2 threads"


# ----------------------------------------------------------------------------- Ctrl-C

def test_keyboard_interrupt_inside_a_run_keeps_the_rounds_so_far(tiny_noplot, tmp_path):
    """A KeyboardInterrupt raised inside the engine (a second Ctrl-C) after round 3."""
    plan = load_plan(tiny_noplot, overrides={"out": str(tmp_path / "res")})

    def interrupt(label, t, x, row):
        if t == 3:
            raise KeyboardInterrupt

    outcome = execute(plan, callback=interrupt, quiet=True)
    out = tmp_path / "res"
    assert outcome.status == "interrupted"
    h = History.from_csv(out / "history_RFedSVRG.csv")
    assert h["round"].tolist() == [0, 1, 2, 3]
    assert np.isfinite(h["grad_norm"]).all()
    assert np.load(out / "model_RFedSVRG.npy").shape == (13, 2)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["algorithms"]["RFedSVRG"]["status"] == "interrupted"
    assert summary["algorithms"]["RFedSVRG"]["rounds"] == 3
    assert summary["algorithms"]["avg"] == {"status": "not run", "rounds": 0}
    assert not (out / "history_avg.csv").exists()
    assert json.loads((out / "config_resolved.json").read_text())["status"] == "interrupted"


def test_ctrl_c_stops_after_the_current_round(tiny_noplot, tmp_path):
    """A real SIGINT during round 2: the run finishes the round, stops, writes and marks."""
    before = signal.getsignal(signal.SIGINT)
    plan = load_plan(tiny_noplot, overrides={"out": str(tmp_path / "res")})

    def press_ctrl_c(label, t, x, row):
        if label == "RFedSVRG" and t == 2:
            os.kill(os.getpid(), signal.SIGINT)

    outcome = execute(plan, callback=press_ctrl_c, quiet=True)
    assert signal.getsignal(signal.SIGINT) is before            # handler restored
    assert outcome.status == "interrupted"
    entry = outcome.summary["algorithms"]["RFedSVRG"]
    assert entry["stopped_by"] == "Ctrl-C" and entry["rounds"] == 2
    assert len(History.from_json(tmp_path / "res" / "history_RFedSVRG.json")) == 3
    assert outcome.summary["algorithms"]["avg"]["status"] == "not run"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_on_the_command_line_exits_130_with_results(tmp_path):
    cfg = _write(tmp_path, TINY.format(plots="[]").replace("rounds = 6", "rounds = 100000")
                 .replace("name = \"tiny\"", "name = \"long\"\nmetrics_every = 100"))
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "rfl_fast.app.cli", "run", cfg, "--out",
                             str(out), "-q"], env=_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not (out / "config_resolved.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)                                              # some rounds
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    rounds = summary["algorithms"]["RFedSVRG"]["rounds"]
    assert 0 < rounds < 100000
    assert len(History.from_csv(out / "history_RFedSVRG.csv")) == rounds + 1


def test_python_dash_m_rfl_fast_runs_the_command_line():
    from subprocess_env import same_package

    proc = subprocess.run([sys.executable, "-m", "rfl_fast", "info"], capture_output=True,
                          text=True, timeout=120, **same_package())
    assert proc.returncode == 0, proc.stderr
    assert "backends" in proc.stdout


# ----------------------------------------------------------------------------- every command

def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rfl-fast {rfl_fast.__version__}"


@pytest.mark.parametrize("command", _subcommands())
def test_every_command_takes_quiet_and_verbose(command, capsys):
    assert main([command, "--help"]) == 0
    usage = capsys.readouterr().out
    assert "-q, --quiet" in usage and "-v, --verbose" in usage
    assert main([command, "-q", "-v"]) == 2          # one or the other
    assert "not allowed with argument" in capsys.readouterr().err


def test_info_quiet_is_one_line_and_verbose_adds_the_numba_cache(capsys):
    assert main(["info", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith(f"rfl_fast {rfl_fast.__version__}: backends")
    assert main(["info", "-v"]) == 0
    out = capsys.readouterr().out
    assert "backends" in out and ("Numba cache:" in out or "Numba unavailable" in out)


def test_bench_smoke_says_what_it_checked(capsys):
    assert main(["bench", "--smoke", "--only", "sphere_"]) == 0
    out = capsys.readouterr().out
    sphere = [k for k in rfl_fast.kernels.REGISTRY if k.startswith("sphere_")]   # in its order
    summary = out[out.index(f"checked {len(sphere)} kernels against the NumPy reference"):]
    assert ", ".join(sphere) in summary
    for b in rfl_fast.available_backends():
        if b != "numpy":
            assert f"  {b:6s} {len(sphere)}/{len(sphere)} agree, largest scaled error" in summary
    assert main(["bench", "--smoke", "--only", "sphere_exp", "-q"]) == 0
    assert capsys.readouterr().out.startswith("checked 1 kernels against the NumPy reference")
    assert main(["bench", "--smoke", "--only", "sphere_exp", "-v"]) == 0
    assert "    sphere_exp" in capsys.readouterr().out


def test_quiet_also_silences_the_package_notices(monkeypatch, caplog):
    import logging

    from rfl_fast.app import cli

    def notice(args):  # as the Numba backend announces a first compilation
        logging.getLogger("rfl_fast.kernels").warning("compiling the Numba kernels")
        return 0

    monkeypatch.setattr(cli, "_info", notice)
    assert main(["info", "-q"]) == 0
    assert not caplog.records
    assert main(["info"]) == 0
    assert [r.getMessage() for r in caplog.records] == ["compiling the Numba kernels"]


def test_demo_prints_the_runners_summary_table(tmp_path, capsys):
    """``rfl-fast demo`` prints the table ``run`` prints (one ``summary_table``): a row per
    algorithm with the rounds played."""
    from rfl_fast.app.demo import demo_algorithms

    assert main(["demo", "--rounds", "2", "--out", str(tmp_path / "demo")]) == 0
    lines = capsys.readouterr().out.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("algorithm"))
    assert lines[top].split()[:3] == ["algorithm", "rounds", "grad"]
    names = [type(a).__name__ for a in demo_algorithms()]
    rows = [line.split() for line in lines[top + 1:top + 1 + len(names)]]
    assert [r[0] for r in rows] == names and all(r[1] == "2" for r in rows)


def test_the_demo_shows_algorithms_that_differ_with_every_row_measured(tmp_path):
    """The demo's five algorithms end at different points (RFedProx's mu = 0.1 made it RFedAvg
    to four digits), its histories measure the metrics at every round (no empty rows), and
    its one plot is a PNG."""
    from rfl_fast.app.demo import run_demo

    results = run_demo(20, out=str(tmp_path))
    final = {name: res.history["grad_norm"][-1] for name, res in results.items()}
    names = sorted(final)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert abs(final[a] - final[b]) > 0.01 * max(final[a], final[b]), (a, b, final)
    for name in results:
        h = History.from_csv(tmp_path / f"{name}.csv")
        assert len(h) == 21 and np.isfinite(h["grad_norm"]).all(), name
    assert sorted(p.name for p in tmp_path.glob("grad_norm.*")) == ["grad_norm.png"]


@pytest.mark.parametrize("command", [[]] + [[c] for c in _subcommands()])
def test_help_texts_are_plain_text(command, capsys):
    """``--help`` reads as plain text: no reST markup (double backquotes, roles, directives)."""
    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert not re.search(r"``|:(func|class|mod|meth|data|attr|doc):`|^\s*\.\. \w", text, re.M), \
        text


def test_help_starts_without_the_federated_layer():
    """``rfl-fast --help`` and a command's help import less at startup: the experiment-file
    keys (which need the federated layer) load only for ``run --help``."""
    code = ("import sys\nfrom rfl_fast.app.cli import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['reproduce', '--help'])\n"
            "print(sorted(m for m in ('rfl_fast.federation', 'rfl_fast.app.config', "
            "'rfl_fast.algorithms', 'matplotlib') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
