"""The Flower client's state across messages (rfl_fast.flower.client, issue 39).

A client runs its task once per run: in one process the built local problem is kept in
:data:`~rfl_fast.flower.client.PROBLEMS` (InProcessLink), and where every message is a fresh
process (Flower's deployment runtime) it is decoded from the run's ``context.state``
(:class:`~rfl_fast.flower.client.StateProblems`). The tests count the task's builds per client
and run (one) and check the iterates against the simulation bit for bit, as
``tests/test_flower.py`` does; the loopback deployment's count is in
``test_flower.py::test_deployment_rfedsvrg_kpca_equals_the_engine``.
"""

import importlib.util
import json
import threading
from collections import Counter

import numpy as np
import pytest

from rfl_fast.algorithms import RFedSVRG
from rfl_fast.federation import run
from rfl_fast.flower import InProcessLink, run_federation
from rfl_fast.flower.client import (LocalProblems, ProblemKey, decode_problem, encode_problem,
                                    handle)
from rfl_fast.flower.server import Failure
from rfl_fast.flower.spec import AppNames, FederationConfig
from rfl_fast.flower.tasks import synthetic_kpca
from rfl_fast.manifolds import SPD, Lorentz, Product, Sphere
from rfl_fast.problems import KPCA, Brockett, HyperbolicPrediction, SPDMean, SpherePCA

HAS_FLWR = importlib.util.find_spec("flwr") is not None
needs_flwr = pytest.mark.skipif(not HAS_FLWR, reason="flwr not installed: pip install "
                                "'.[flower]' to test the ClientApp's context.state")


class CountedTask:
    """``synthetic_kpca`` that counts its builds per client id (thread-safe)."""

    def __init__(self):
        self.builds, self._lock = Counter(), threading.Lock()
        self.full = synthetic_kpca.full

    def __call__(self, client_id, node_config=None, **kwargs):
        with self._lock:
            self.builds[client_id] += 1
        return synthetic_kpca(client_id, node_config, **kwargs)


def _run_config(algorithm, kwargs, n=4, rounds=3, participation="Uniform(3)", d=6):
    return {"algorithm": algorithm, "algorithm-kwargs": json.dumps(kwargs),
            "participation": participation, "rounds": rounds, "seed": 5, "num-clients": n,
            "task": "counted", "task-kwargs": json.dumps({"n_clients": n, "samples": 30,
                                                          "d": d, "r": 2, "seed": 1})}


def _engine(rc):
    cfg = FederationConfig.from_run_config(rc)
    its = []
    res = run(synthetic_kpca.full(**cfg.task_kwargs), cfg.build_algorithm(), cfg.rounds,
              participation=cfg.participation, seed=cfg.seed, metrics=False,
              callback=lambda t, x, row: its.append(np.array(x)))
    return np.stack([res.x0] + its)


def _federate(link, rc, names):
    its = []
    res = run_federation(link, rc, log=lambda s: None, app_names=names,
                         callback=lambda t, x, row: its.append(np.array(x)))
    assert res.history.meta["rejected"] == []
    return np.stack([res.x0] + its)


@pytest.fixture
def gathered(monkeypatch):
    """RFedSVRG's full gradient gathered as the clients send it (test_flower.py's fixture)."""
    monkeypatch.setattr(RFedSVRG, "_pooled_exchange", lambda self, problem, idx: False)


CASES = [("RFedSVRG", {"step": 0.2, "local_steps": 3}),            # two exchanges a round
         ("RFedProj", {"step": 0.2, "local_steps": 3, "batch_size": 5}),   # and a finalize
         ("RFedAvg", {"step": 0.2, "local_steps": 3, "batch_size": 5})]


@pytest.mark.parametrize("algorithm, kwargs", CASES, ids=[a for a, _ in CASES])
def test_in_process_builds_each_clients_task_once_per_run(algorithm, kwargs, gathered):
    task = CountedTask()
    names = AppNames(tasks={"counted": task})
    rc = _run_config(algorithm, kwargs)
    nodes = [{"partition-id": i} for i in range(4)]
    iterates = _federate(InProcessLink(rc, nodes, names), rc, names)
    assert task.builds == {0: 1, 1: 1, 2: 1, 3: 1}       # hello + 3 rounds: one build each
    np.testing.assert_array_equal(iterates, _engine(rc))  # bit for bit, as before the cache
    again = _federate(InProcessLink(rc, nodes, names), rc, names)   # a new run builds anew
    assert task.builds == {0: 2, 1: 2, 2: 2, 3: 2}
    np.testing.assert_array_equal(again, iterates)


class FreshProcessLink(InProcessLink):
    """InProcessLink as Flower's deployment runtime runs a ClientApp: every message in a
    fresh process (nothing kept in memory: a new :class:`LocalProblems` per message), the
    node's store in a Flower ``RecordDict`` (``context.state``), the contents through Flower
    records both ways (:func:`rfl_fast.flower.client.serve`)."""

    def __init__(self, *args, **kwargs):
        from flwr.app import RecordDict
        super().__init__(*args, **kwargs)
        self.states = {node: RecordDict() for node in self.node_configs}
        self.sources, self.notes = [], []

    def exchange(self, requests, timeout):
        from rfl_fast.flower.client import StateProblems, serve
        from rfl_fast.flower.records import from_recorddict, to_recorddict
        out = {}
        for node, _, content in requests:
            problems = StateProblems(self.states[node], LocalProblems())
            try:
                reply = serve(from_recorddict(to_recorddict(content)), self.states[node],
                              self.node_configs[node], self.run_config, self.app_names,
                              problems=problems)
            except Exception as exc:  # noqa: BLE001 - a failed exchange, as InProcessLink
                out[node] = Failure(f"client error: {type(exc).__name__}: {exc}")
                continue
            self.sources.append(problems.source)
            self.notes.append(problems.note)
            out[node] = from_recorddict(to_recorddict(reply))
        return out


@needs_flwr
@pytest.mark.parametrize("algorithm, kwargs", CASES[:2], ids=[a for a, _ in CASES[:2]])
def test_a_fresh_process_per_message_decodes_the_problem_from_context_state(algorithm, kwargs,
                                                                             gathered):
    task = CountedTask()
    names = AppNames(tasks={"counted": task})
    rc = _run_config(algorithm, kwargs)
    link = FreshProcessLink(rc, [{"partition-id": i} for i in range(4)], names)
    iterates = _federate(link, rc, names)
    assert task.builds == {0: 1, 1: 1, 2: 1, 3: 1}
    assert link.sources[:4] == ["built"] * 4                       # the hello builds
    assert set(link.sources[4:]) == {"state"} and len(link.sources) > 12
    np.testing.assert_array_equal(iterates, _engine(rc))          # the decoded problem: exact
    from rfl_fast.flower.client import STATE_PROBLEM, STATE_PROBLEM_META
    assert {STATE_PROBLEM, STATE_PROBLEM_META} <= set(link.states[1000].keys())


@needs_flwr
def test_a_problem_over_the_state_limit_or_not_plain_data_is_rebuilt(monkeypatch, gathered):
    """Not kept in context.state: the task runs at every message of a fresh process, and the
    iterates are the same."""
    from rfl_fast.flower import client
    task = CountedTask()
    names = AppNames(tasks={"counted": task})
    rc = _run_config("RFedAvg", {"step": 0.2, "local_steps": 2}, n=2, rounds=2,
                     participation="Full")
    monkeypatch.setattr(client, "STATE_MAX_BYTES", 1000)
    link = FreshProcessLink(rc, [{"partition-id": i} for i in range(2)], names)
    iterates = _federate(link, rc, names)
    assert task.builds == {0: 3, 1: 3}                    # hello + 2 rounds, each a build
    assert set(link.sources) == {"built"}
    assert "more than STATE_MAX_BYTES = 1000 bytes" in link.notes[0]
    assert client.STATE_PROBLEM not in link.states[1000]
    np.testing.assert_array_equal(iterates, _engine(rc))


@needs_flwr
def test_context_state_of_another_run_or_task_arguments_is_not_used():
    from flwr.app import RecordDict

    from rfl_fast.flower.client import STATE_PROBLEM, StateProblems
    state, task = RecordDict(), CountedTask()
    key = ProblemKey("a" * 32, "counted", '{"d": 6}', (("partition-id", "0"),), task)
    build = lambda: task(0, {}, n_clients=2, samples=10, d=6, r=2)   # noqa: E731
    first = StateProblems(state, LocalProblems()).get(key, build)
    fresh = StateProblems(state, LocalProblems())
    same = fresh.get(key, build)
    assert fresh.source == "state" and task.builds[0] == 1
    np.testing.assert_array_equal(same._flat, first._flat)
    for changed in (key._replace(run="b" * 32), key._replace(task_kwargs='{"d": 7}'),
                    key._replace(node_config=(("partition-id", "1"),))):
        other = StateProblems(state, LocalProblems())
        other.get(changed, build)
        assert other.source == "built"
    assert task.builds[0] == 4
    # a state record that does not decode is rebuilt, never an error
    state[STATE_PROBLEM] = state[STATE_PROBLEM].__class__({})
    broken = StateProblems(state, LocalProblems())
    broken.get(key._replace(node_config=(("partition-id", "1"),)), build)
    assert broken.source == "built"


# ---------------------------------------------------------------------------- the caches

def _key(run="r" * 32, task="t", kwargs="{}", node=(("partition-id", "0"),), builder=len):
    return ProblemKey(run, task, kwargs, node, builder)


def test_local_problems_is_bounded_and_drops_a_runs_old_key():
    cache, built = LocalProblems(maxsize=2), []

    def build(tag):
        built.append(tag)
        return tag
    assert cache.get(_key(), lambda: build("a")) == "a"
    assert cache.get(_key(), lambda: build("x")) == "a" and built == ["a"]
    cache.get(_key(kwargs='{"d": 7}'), lambda: build("b"))   # the run's arguments changed
    assert len(cache) == 1                                    # its old problem is gone
    cache.get(_key(run="s" * 32), lambda: build("c"))
    cache.get(_key(run="u" * 32), lambda: build("d"))
    assert len(cache) == 2                                    # the least recently used went
    cache.get(_key(kwargs='{"d": 7}'), lambda: build("e"))
    assert built == ["a", "b", "c", "d", "e"]
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(ValueError, match="maxsize"):
        LocalProblems(0)


def test_the_run_token_lives_in_the_store_and_keys_the_problem():
    rc = _run_config("RFedAvg", {"step": 0.1, "local_steps": 1}, n=2)
    task = CountedTask()
    names, cache = AppNames(tasks={"counted": task}), LocalProblems()
    store, other = {}, {}
    hello = {"config": {"phase": "hello"}}
    handle(hello, store, {"partition-id": 0}, rc, names, problems=cache)
    token = store["status"]["run.token"]
    assert len(token) == 32
    handle(hello, store, {"partition-id": 0}, rc, names, problems=cache)
    assert task.builds[0] == 1 and store["status"]["run.token"] == token
    handle(hello, other, {"partition-id": 0}, rc, names, problems=cache)   # another run
    assert task.builds[0] == 2 and other["status"]["run.token"] != token
    handle(hello, store, {"partition-id": 0, "data-path": "x"}, rc, names, problems=cache)
    assert task.builds[0] == 3                              # the node config changed


# ---------------------------------------------------------------------------- plain data

def _problems():
    rng = np.random.default_rng(4)
    S, L = SPD(3), Lorentz(2)
    a = rng.standard_normal((5, 5))
    return [KPCA([rng.standard_normal((20, 6))], 2),
            KPCA([rng.standard_normal((20, 6))], 2, manifold="grassmann"),
            KPCA.from_covariances([np.eye(6)], 2),
            SpherePCA([rng.standard_normal((15, 5))], weighting="samples"),
            SPDMean([S.random_point(6, rng=rng)]),
            Brockett([(a + a.T)[None]], 2),
            HyperbolicPrediction.from_weights([L.random_point(7, rng=rng)], [np.ones(7)])]


@pytest.mark.parametrize("problem", _problems(), ids=lambda p: type(p).__name__)
def test_encode_decode_returns_the_same_problem_bit_for_bit(problem):
    arrays, meta = encode_problem(problem)
    back = decode_problem({k: np.array(v) for k, v in arrays.items()}, meta)
    assert type(back) is type(problem) and type(back.manifold) is type(problem.manifold)
    assert vars(back).keys() == vars(problem).keys()
    for k, v in vars(problem).items():
        if isinstance(v, np.ndarray):
            assert back.__dict__[k].dtype == v.dtype
            np.testing.assert_array_equal(back.__dict__[k], v)
    x = problem.manifold.random_point(1, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(back.rgrad([0], x), problem.rgrad([0], x))
    np.testing.assert_array_equal(back.loss([0], x), problem.loss([0], x))


def test_encode_keeps_shared_arrays_shared_fortran_order_scalars_and_nested_manifolds():
    p = KPCA([np.random.default_rng(0).standard_normal((10, 4))], 2)
    p.extra = {"same": (p._flat, p._flat), "f": np.asfortranarray(np.ones((3, 2))),
               "s": np.float32(1.5), "i": [1, 2.5, None, True, "x"],
               "M": Product(SPD(2), Sphere(3))}
    arrays, meta = encode_problem(p)
    back = decode_problem(arrays, meta)
    e = back.extra
    assert e["same"][0] is e["same"][1] is back._flat
    assert e["f"].flags.f_contiguous and not e["f"].flags.c_contiguous
    assert type(e["s"]) is np.float32 and e["s"] == 1.5
    assert e["i"] == [1, 2.5, None, True, "x"] and type(e["i"][0]) is int
    assert e["M"] == Product(SPD(2), Sphere(3)) and e["M"].factors[1] == Sphere(3)


@pytest.mark.parametrize("extra", [lambda x: x, open, np.array([object()]), {1: "int key"},
                                   threading.Lock(), np.ma.array([1.0])],
                         ids=["lambda", "builtin", "object-array", "int-key", "lock", "masked"])
def test_a_problem_holding_anything_but_data_is_not_encoded(extra):
    p = KPCA([np.ones((4, 3))], 1)
    p.extra = {"nested": [extra]}
    why = []
    assert encode_problem(p, why) is None
    assert why[0].startswith("extra.nested.0: ")


@pytest.mark.parametrize("meta, arrays, match", [
    ({"format": "pickle"}, {}, "format"),
    ({"format": "rfl_fast.problem/1", "outline": "{"}, {}, "outline"),
    ({"format": "rfl_fast.problem/1", "outline": '{"o": "os:system", "v": []}'}, {},
     "not a loaded Problem"),
    ({"format": "rfl_fast.problem/1",
      "outline": '{"o": "json.decoder:JSONDecoder", "v": []}'}, {}, "not a loaded Problem"),
    ({"format": "rfl_fast.problem/1", "outline": '{"a": "a0"}'}, {}, "without its array"),
    ({"format": "rfl_fast.problem/1", "outline": '{"l": [1, 2]}'}, {}, "not a Problem"),
    ({"format": "rfl_fast.problem/1",
      "outline": '{"o": "rfl_fast.manifolds.sphere:Sphere", "v": []}'}, {}, "not a Problem"),
    ({"format": "rfl_fast.problem/1", "outline": '{"l": [' * 20 + "1" + "]}" * 20}, {},
     "too deep"),
    ({"format": "rfl_fast.problem/1", "outline": '{"o": "x", "v": [[1, 2]]}'}, {}, "a value"),
])
def test_decode_refuses_what_is_not_an_encoded_problem(meta, arrays, match):
    with pytest.raises(ValueError, match=match):
        decode_problem(arrays, meta)


# ---------------------------------------------------------------------------- flwr versions

def test_the_flwr_range_is_declared_once_for_the_extras_and_the_written_app():
    """The ``flower`` and ``test`` extras and the app ``new-app`` writes declare one range."""
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path

    from rfl_fast.flower.app import FLWR_REQUIREMENT
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.exists():
        pytest.skip("no pyproject.toml beside the tests")
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    for extra in ("flower", "test"):
        pins = [r.split(";")[0].strip() for r in extras[extra] if r.startswith("flwr")]
        assert pins == [FLWR_REQUIREMENT], (extra, pins)
    if HAS_FLWR:                              # the flwr installed here is one of the range
        import flwr
        lo, hi = (tuple(int(p) for p in v.split(".")) for v in
                  FLWR_REQUIREMENT.removeprefix("flwr>=").split(",<"))
        assert lo <= tuple(int(p) for p in flwr.__version__.split(".")[:2]) < hi
