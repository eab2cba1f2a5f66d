"""The application's one name -> object registry: every name is known to the experiment files,
the estimators and the Flower run config alike, a typo lists the known names, and no second
table of names exists anywhere in the package."""

import ast
import pathlib

import numpy as np
import pytest

import rfl_fast
from rfl_fast.app import estimators
from rfl_fast.app import names
from rfl_fast.app.config import ConfigError, build_plan, resolve_config
from rfl_fast.flower.spec import build_algorithm, build_participation

#: Arguments every algorithm needs besides the step (the rest have defaults).
NEEDS = {"RFedProx": {"mu": 0.1}, "PriRFed": {"sigma": 0.0},
         "RFedSVRG2BBS": {"eta_min": 0.01, "eta_max": 0.5}}
BASE = {"problem": {"type": "KPCA", "r": 2},
        "data": {"source": "heterogeneous_gaussian", "n_clients": 3, "n_samples": 12, "d": 4}}


def _plan(algorithms, participation=None, problem=None, data=None):
    cfg = resolve_config({"rounds": 2, "problem": problem or BASE["problem"],
                          "data": data or BASE["data"],
                          "participation": participation or {"type": "full"},
                          "algorithm": algorithms})
    return build_plan(cfg)


@pytest.mark.parametrize("kind", list(names.TABLES))
def test_an_unknown_name_lists_the_known_ones(kind):
    with pytest.raises(names.UnknownName) as info:
        names.get(kind, "Nope")
    assert info.value.known == tuple(names.TABLES[kind])
    assert all(name in str(info.value) for name in names.TABLES[kind])
    assert names.canonical(kind, next(iter(names.TABLES[kind])).upper()) \
        == next(iter(names.TABLES[kind]))


def test_every_front_end_names_the_known_algorithms_on_a_typo():
    known = tuple(names.ALGORITHMS)
    with pytest.raises(ConfigError) as info:
        resolve_config({**BASE, "algorithm": [{"name": "RFedNope", "step": 0.1}]})
    assert info.value.key == "algorithm[0].name" and info.value.allowed == known
    with pytest.raises(ValueError, match="known: " + ", ".join(known)):
        build_algorithm("RFedNope", {})
    with pytest.raises(ValueError, match="known: " + ", ".join(known)):
        estimators.FederatedPCA(2, algorithm="RFedNope").fit(np.ones((6, 3)))
    with pytest.raises(ConfigError) as info:
        resolve_config({**BASE, "algorithm": [{"name": "RFedAvg", "local_steps": 1,
                                               "step": {"schedule": "cosine"}}]})
    assert info.value.key == "algorithm[0].step.schedule"
    assert info.value.allowed == tuple(names.SCHEDULES)
    with pytest.raises(ValueError, match="known: full, uniform, bernoulli"):
        build_participation("Sometimes(2)")


@pytest.mark.parametrize("name", list(names.ALGORITHMS))
def test_every_algorithm_builds_the_same_through_config_estimators_and_flower(name):
    kwargs = {"step": 0.1, "local_steps": 2, **NEEDS.get(name, {})}
    (_, from_config), = _plan([{"name": name, **kwargs}]).algorithms
    from_flower = build_algorithm(name, kwargs)
    from_estimator = estimators._make_algorithm(name, 0.1, 2, NEEDS.get(name))
    assert type(from_config) is names.get("algorithm", name)
    assert repr(from_config) == repr(from_flower) == repr(from_estimator)
    assert name in estimators.ALGORITHMS


@pytest.mark.parametrize("spec, flower, estimator", [
    ({"type": "full"}, "Full", None),
    ({"type": "uniform", "k": 2}, "Uniform(2)", 2),
    ({"type": "bernoulli", "p": 0.5}, "Bernoulli(0.5)", 0.5),
])
def test_every_participation_builds_the_same_everywhere(spec, flower, estimator):
    assert {spec["type"]} <= set(names.PARTICIPATIONS)
    built = _plan([{"name": "RFedAvg", "step": 0.1, "local_steps": 1}], spec).participation
    assert repr(built) == repr(build_participation(flower)) \
        == repr(estimators._participation(estimator))


def test_parametrized_cases_cover_the_tables():
    participation = test_every_participation_builds_the_same_everywhere.pytestmark[0].args[1]
    assert {case[0]["type"] for case in participation} == set(names.PARTICIPATIONS)
    assert {case[0]["schedule"] for case in STEPS} == set(names.SCHEDULES)


STEPS = [({"schedule": "constant", "value": 0.2}, {"Constant": {"value": 0.2}}),
         ({"schedule": "decaying", "a0": 0.2, "dec": 2}, {"Decaying": {"a0": 0.2, "dec": 2}})]


@pytest.mark.parametrize("config, flower", STEPS)
def test_a_step_is_read_one_way_everywhere(config, flower):
    (_, from_config), = _plan([{"name": "RFedAvg", "step": config, "local_steps": 1}]).algorithms
    from_flower = build_algorithm("RFedAvg", {"step": flower, "local_steps": 1})
    from_estimator = estimators._make_algorithm("RFedAvg", config, 1, None)
    assert from_config.step == from_flower.step == from_estimator.step
    assert names.step_config(from_config.step) == resolve_config(
        {**BASE, "algorithm": [{"name": "RFedAvg", "step": config, "local_steps": 1}]}
    )["algorithm"][0]["step"]


def test_every_problem_and_data_source_builds_through_config(tmp_path):
    fitting = {"rows": "wine", "client_rows": "heterogeneous_gaussian",
               "covariances": "gaussian_covariances", "spd": "wishart", "symmetric": "brockett"}
    small = {"heterogeneous_gaussian": {"n_clients": 3, "n_samples": 12, "d": 4},
             "gaussian_covariances": {"n_clients": 3, "d": 4, "p": 20},
             "wishart": {"n_clients": 3, "n_samples": 4, "d": 3},
             "brockett": {"n_clients": 3, "n_samples": 4, "d": 4}}
    alg = [{"name": "RFedAvg", "step": 0.01, "local_steps": 1}]
    for ptype, entry in names.PROBLEMS.items():
        source = fitting[entry.data[0]]
        problem = {"type": ptype, **{k: 2 for k, v in entry.keys.items()
                                     if v is names.REQUIRED}}
        plan = _plan(alg, problem=problem, data={"source": source, **small.get(source, {})})
        assert type(plan.problem) is names.get("problem", ptype)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(20, 4)))
    files = {"npy": {"path": str(tmp_path / "x.npy")}}
    needs_download = ("mnist", "cifar10")
    for source, entry in names.DATA_SOURCES.items():
        assert callable(entry.load())
        if source in needs_download:
            continue
        kind = entry.data[0]
        ptype = next(p for p, e in names.PROBLEMS.items() if kind in e.data)
        problem = {"type": ptype, **{k: 2 for k, v in names.PROBLEMS[ptype].keys.items()
                                     if v is names.REQUIRED}}
        data = {"source": source, **small.get(source, {}), **files.get(source, {})}
        plan = _plan(alg, problem=problem, data=data)
        assert plan.problem.n_clients >= 1


def test_adding_an_algorithm_is_one_registry_line(monkeypatch):
    """A name registered in ``rfl_fast.algorithms.ALGORITHMS`` reaches the experiment files,
    the estimators and Flower (``names.ALGORITHMS`` derives from it)."""
    monkeypatch.setitem(rfl_fast.algorithms.ALGORITHMS, "RFedAvgAgain",
                        rfl_fast.algorithms.RFedAvg)
    assert "RFedAvgAgain" in names.ALGORITHMS
    kwargs = {"step": 0.1, "local_steps": 2}
    (_, from_config), = _plan([{"name": "RFedAvgAgain", **kwargs}]).algorithms
    assert repr(from_config) == repr(build_algorithm("RFedAvgAgain", kwargs)) \
        == repr(estimators._make_algorithm("RFedAvgAgain", 0.1, 2, None))


def _string_collections(tree):
    """Literal tuples/lists/sets and dict keys of string constants, except ``__all__``."""
    exports = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(getattr(t, "id", None) == "__all__" for t in node.targets)}
    for node in ast.walk(tree):
        if id(node) in exports:
            continue
        items = (node.keys if isinstance(node, ast.Dict)
                 else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else ())
        strings = {i.value for i in items if isinstance(i, ast.Constant)
                   and isinstance(i.value, str)}
        if strings:
            yield node.lineno, strings


def test_every_name_is_registered_once():
    """No front end that takes names (the app floor, the Flower app, the root's re-exports)
    holds a table of two or more names of one kind besides the registry. The experiments build
    their algorithms directly and label their runs with the names; the library floors below
    cannot see the registry (``rfl_fast.data.load_sklearn`` keeps its own four names)."""
    package = pathlib.Path(rfl_fast.__file__).parent
    front_ends = [*package.glob("*.py"), *package.glob("app/*.py"), *package.glob("flower/*.py")]
    found = []
    for path in sorted(front_ends):
        if path in (package / "app" / "names.py", package / "app" / "workloads.py"):
            continue  # workloads: benchmark cells (a problem at a shape with its NumPy floor),
            # which select nothing a user names; tests/test_workloads.py derives its coverage
            # from the problem classes
        for line, strings in _string_collections(ast.parse(path.read_text())):
            for kind, table in names.TABLES.items():
                known = {n.lower() for n in table}
                if len({s.lower() for s in strings} & known) >= 2:
                    found.append(f"{path.relative_to(package)}:{line}: {kind} names "
                                 f"{sorted(strings)}")
    assert not found, "\n".join(found)
