"""rfl_fast on Flower (rfl_fast.flower).

* Fast tests (no Flower process): the wire format and arrival checks, the run config, and the
  whole protocol in one process (``InProcessLink``) against ``rfl_fast.federation.run`` for
  every algorithm, with dropouts, rejected uploads and a silent node.
* ``test_deployment_*``: a real Flower deployment -- one ``flower-superlink`` and four
  ``flower-supernode`` processes on 127.0.0.1 (free ports, temporary ``FLWR_HOME``) -- running
  RFedSVRG on kPCA (each client's task built once in the run, though every message is a fresh
  ClientApp process) and RFedAGS with a client that drops out and one whose upload is
  rejected, checked against the simulation engine bit for bit. Skipped when ``flwr`` (the
  ``flower`` extra) is not installed. Every process started is stopped by the fixture's
  finalizer.
"""

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manifold_cases import MANIFOLDS
from rfl_fast.algorithms import RFedAGS, RFedSVRG
from rfl_fast.federation import Full, run
from rfl_fast.algorithms.participation import Participation
from rfl_fast.flower import (InProcessLink, check_arrays, manifold_from_spec, manifold_spec,
                             pack, run_federation)
from rfl_fast.flower.client import handle
from rfl_fast.flower.codec import MAX_MODEL_FLOATS
from rfl_fast.flower.spec import (FederationConfig, build_algorithm, build_participation,
                                  parse_faults)
from rfl_fast.flower.tasks import synthetic_kpca
from rfl_fast.manifolds import Euclidean, Sphere, Stiefel

#: The loopback deployments run in one test process, one at a time (pytest-xdist's loadgroup):
#: each starts a SuperLink and SuperNodes that want the cores for themselves.
LOOPBACK = pytest.mark.xdist_group("flower-loopback")

HAS_FLWR = importlib.util.find_spec("flwr") is not None
HAS_DP = importlib.util.find_spec("dp_accounting") is not None
needs_flwr = pytest.mark.skipif(not HAS_FLWR, reason="flwr not installed: pip install "
                                "'.[flower]' to test the Flower link")

TASK = "synthetic_kpca"
TIMING = ("cpu_server", "cpu_clients_max", "wall", "wall_metrics")


def _task_kwargs(n):
    return {"n_clients": n, "samples": 30, "d": 6, "r": 2, "seed": 1}


def _run_config(algorithm, kwargs, n=4, rounds=3, seed=5, participation="Full", **extra):
    return {"algorithm": algorithm, "algorithm-kwargs": json.dumps(kwargs),
            "participation": participation, "rounds": rounds, "seed": seed, "num-clients": n,
            "task": TASK, "task-kwargs": json.dumps(_task_kwargs(n)), **extra}


@dataclass(frozen=True, eq=False)
class Scripted(Participation):
    """The participants of each round given in advance (draws nothing, like ``Full``)."""

    sets: tuple
    _t: list = field(default_factory=lambda: [0])

    def sample(self, rng, n):
        s = np.asarray(self.sets[self._t[0]], dtype=np.int64)
        self._t[0] += 1
        return s


def _engine(rc, participation=None):
    """Iterates of rfl_fast.federation.run for the run config ``rc``: (rounds + 1, *shape)."""
    cfg = FederationConfig.from_run_config(rc)
    its = []
    res = run(synthetic_kpca.full(**cfg.task_kwargs), cfg.build_algorithm(), cfg.rounds,
              participation=participation or cfg.participation, seed=cfg.seed, metrics=False,
              callback=lambda t, x, row: its.append(np.array(x)))
    return np.stack([res.x0] + its), res


@pytest.fixture
def gathered(monkeypatch):
    """The simulation without its one speed route a deployment cannot take: RFedSVRG's all-n
    exchange from the pooled gradient (one product with sum_i w_i A_i, a reordered sum;
    tests/test_fused_pca.py compares it with the gathered exchange). With the exchange gathered
    as the clients send it, the engine and a deployment do the same arithmetic: bit for bit."""
    monkeypatch.setattr(RFedSVRG, "_pooled_exchange", lambda self, problem, idx: False)


def _dp_node(i, folder, sigma, clip, seed=None, eps=1e3, delta=1e-5):
    """Node config of a private client: its own noise, clip, budget, ledger (and seed)."""
    cfg = {"partition-id": i, "dp-sigma": sigma, "dp-clip": clip, "dp-epsilon": eps,
           "dp-delta": delta, "dp-ledger": str(folder / f"ledger{i}.json")}
    return cfg if seed is None else {**cfg, "dp-seed": seed}


def _in_process(rc, folder=None):
    """The in-process deployment of ``rc`` and its iterates (x0, then the model after every
    round); a PriRFed client gets its own privacy settings, the run's sigma / clip / seed
    given to it through its node config (``folder``: ledgers), so it draws what the engine
    draws."""
    n = int(rc["num-clients"])
    nodes = [{"partition-id": i} for i in range(n)]
    if rc["algorithm"] == "PriRFed":
        kw = json.loads(rc["algorithm-kwargs"])
        nodes = [_dp_node(i, folder, kw["sigma"], kw["clip"], seed=int(rc["seed"]))
                 for i in range(n)]
    its = []
    res = run_federation(InProcessLink(rc, nodes), rc, log=lambda s: None,
                         callback=lambda t, x, row: its.append(np.array(x)))
    return res, np.stack([res.x0] + its)


def _left_out(history):
    """``{(round, client)}`` of the clients left out, and the rejections as text lines."""
    rejected = history.meta["rejected"]
    return ({(t, c) for t, c, _ in rejected},
            "\n".join(f"round {t}: client {c}: {why}" for t, c, why in rejected))


# ---------------------------------------------------------------------------- wire format

@pytest.mark.parametrize("M", MANIFOLDS, ids=repr)    # every registered manifold class
def test_manifold_spec_round_trip(M):
    spec = manifold_spec(M)
    assert manifold_from_spec(spec) == M
    assert manifold_from_spec(spec).shape == M.shape
    assert manifold_from_spec(f"  {spec.replace(', ', ',')} ") == M


@pytest.mark.parametrize("bad", [
    "Stiefel(4; 2)", "os.system(1)", "", "Manifold(3)", "Sphere", "Sphere(3)x", "Sphere(3",
    "Sphere(3,,4)", "Product(Sphere(3),)", "Product(Sphere(3) Sphere(4))", "Product()",
    "Product(3)", "Stiefel(Sphere(3), 2)", "Sphere(-3)", "Product(" * 5 + "Sphere(3)" + ")" * 5,
    "Product(" + ", ".join(["Sphere(3)"] * 30) + ")", None, 3])
def test_manifold_spec_refuses_malformed(bad):
    with pytest.raises(ValueError, match="cannot rebuild"):
        manifold_from_spec(bad)


def test_manifold_spec_refuses_a_point_too_large_at_any_depth():
    for spec in ("Euclidean(67108865)", "Euclidean(8192, 8193)",
                 "Product(Sphere(3), Euclidean(8192, 8193))",
                 "Product(Euclidean(67108864), Sphere(3))"):
        with pytest.raises(ValueError, match="larger than"):
            manifold_from_spec(spec)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="PSERodlcpuxthiD(), 0123456789", max_size=80))
def test_manifold_spec_fuzz_is_a_manifold_or_a_value_error(spec):
    try:
        M = manifold_from_spec(spec)
    except ValueError:
        return
    assert manifold_from_spec(manifold_spec(M)) == M
    assert int(np.prod(M.shape, dtype=object)) <= MAX_MODEL_FLOATS


def _upload(M, rng, k=1):
    x = M.random_point(k, rng=rng)
    return {"x": x}


def test_pack_names_the_manifold_and_checks_pass():
    M, rng = Stiefel(6, 2), np.random.default_rng(0)
    arrays, meta = pack(_upload(M, rng), M)
    assert meta["manifold"] == "Stiefel(6, 2)"
    assert meta["x.kind"] == "point" and meta["x.shape"] == "1x6x2"
    assert meta["x.dtype"] == "float64"
    assert check_arrays(arrays, meta, M, rows=1) == (True, "")


@pytest.mark.parametrize("M", MANIFOLDS, ids=repr)    # every registered manifold class
def test_every_manifold_crosses_the_wire_and_is_checked_on_arrival(M):
    """A point and a tangent vector packed with their manifold's name arrive at a receiver that
    rebuilds the manifold from that name; a point sent off the manifold (-2x) is refused."""
    rng = np.random.default_rng(0)
    x = M.random_point(rng=rng)
    upload = {"x": M.random_point(1, rng=rng), "grad": M.random_tangent(x[None], rng=rng)}
    arrays, meta = pack(upload, M, kinds={"x": "point", "grad": "tangent"})
    R = manifold_from_spec(meta["manifold"])
    assert R == M
    assert check_arrays(arrays, meta, R, rows=1, base=x) == (True, "")
    if not isinstance(M, Euclidean):                    # every array is a Euclidean point
        off = {**arrays, "x": -2.0 * arrays["x"]}
        ok, reason = check_arrays(off, meta, R, rows=1, base=x)
        assert not ok and "not a point" in reason


def test_pack_keeps_scalars_zero_dimensional():
    arrays, meta = pack({"B": np.float64(0.5).reshape(())}, Sphere(3))
    assert arrays["B"].shape == () and meta["B.shape"] == ""
    assert check_arrays(arrays, meta, Sphere(3))[0]


@pytest.mark.parametrize("case, reason", [
    ("manifold", "manifold mismatch"),
    ("shape", "shape"),
    ("declared", "differs from the declared"),
    ("dtype", "dtype"),
    ("nan", "NaN or inf"),
    ("off", "not a point of Stiefel"),
    ("kind", "declared kind"),
    ("missing", "missing arrays"),
])
def test_arrival_checks_reject_with_a_reason(case, reason):
    M, rng = Stiefel(6, 2), np.random.default_rng(1)
    arrays, meta = pack(_upload(M, rng), M)
    expect = None
    if case == "manifold":
        meta["manifold"] = "Stiefel(6, 3)"
    elif case == "shape":
        arrays, meta = pack({"x": M.random_point(2, rng=rng)}, M)
    elif case == "declared":
        meta["x.shape"] = "1x2x6"
    elif case == "dtype":
        arrays["x"] = arrays["x"].astype(np.float32)
    elif case == "nan":
        arrays["x"][0, 0, 0] = np.nan
    elif case == "off":
        arrays["x"] = 2.0 * arrays["x"]
    elif case == "kind":
        meta["x.kind"] = "ambient"
    elif case == "missing":
        expect = ("x", "g")
    ok, why = check_arrays(arrays, meta, M, rows=1, expect=expect)
    assert not ok and reason in why


def test_arrival_checks_tangent_vectors_at_the_base_point():
    M, rng = Sphere(5), np.random.default_rng(2)
    x = M.random_point(rng=rng)
    u = M.random_tangent(x, rng=rng)[None]
    arrays, meta = pack({"zeta": u}, M)
    assert check_arrays(arrays, meta, M, rows=1, base=x)[0]
    arrays["zeta"] = arrays["zeta"] + 0.1 * x            # a normal component
    ok, why = check_arrays(arrays, meta, M, rows=1, base=x)
    assert not ok and "not tangent" in why
    # RFedProj's ambient variables are off the manifold by design: shape and finiteness only
    z, zm = pack({"zhat": 3.0 * x[None]}, M)
    assert check_arrays(z, zm, M, rows=1)[0]


@needs_flwr
def test_flower_records_round_trip_bit_exact():
    from rfl_fast.flower.records import from_recorddict, load_store, save_store, to_recorddict
    M, rng = Stiefel(6, 2), np.random.default_rng(3)
    arrays, meta = pack({"x": M.random_point(1, rng=rng), "B": np.float64(0.25).reshape(())},
                        M)
    content = {"config": {"phase": "update", "round": 3, "client": 2, "seed": 7,
                          "cpu": 0.5, "flag": True},
               "up": arrays, "up.meta": meta}
    back = from_recorddict(to_recorddict(content))
    assert back["config"] == content["config"]
    assert back["up.meta"] == meta
    for k, v in arrays.items():
        assert back["up"][k].dtype == v.dtype and back["up"][k].shape == v.shape
        assert np.array_equal(back["up"][k], v)
    from flwr.app import RecordDict
    state = RecordDict()
    store = {"cstate": {"c": np.arange(6.0).reshape(1, 3, 2)}, "memo": {},
             "status": {"initialized": True, "rng.state": "{}", "memo.round": 2}}
    save_store(state, store)
    again = load_store(state)
    assert np.array_equal(again["cstate"]["c"], store["cstate"]["c"])
    assert again["status"] == store["status"]


# ---------------------------------------------------------------------------- run config

def test_participation_and_schedule_specs():
    assert build_participation("Full") == Full()
    assert build_participation("Uniform(3)").k == 3
    assert float(build_participation("Bernoulli(0.5)").p) == 0.5
    assert build_participation('{"Bernoulli": {"p": [0.5, 1.0]}}').p.tolist() == [0.5, 1.0]
    with pytest.raises(ValueError, match="participation"):
        build_participation("Sometimes")
    alg = build_algorithm("RFedAGS", {"step": {"Decaying": {"a0": 0.1, "beta": 2.0}},
                                      "local_steps": 2})
    assert alg.step(0) == 0.1 and alg.step(3) == pytest.approx(0.1 / 5)
    with pytest.raises(ValueError, match="unknown"):
        build_algorithm("RFedNope", {})


def test_fault_spec():
    assert parse_faults("drop:3@2,3; corrupt:1@3") == {("drop", 3): {2, 3},
                                                      ("corrupt", 1): {3}}
    with pytest.raises(ValueError, match="fault"):
        parse_faults("explode:1@2")


def test_run_config_requires_the_essentials():
    with pytest.raises(ValueError, match="missing required key 'algorithm'"):
        FederationConfig.from_run_config({"rounds": 2})


# ---------------------------------------------------------------------------- protocol

CASES = [
    ("RFedAvg", {"step": 0.2, "local_steps": 3, "batch_size": 5}, "Uniform(2)"),
    ("RFedProx", {"step": 0.2, "local_steps": 3, "mu": 0.1, "consensus": "karcher"},
     "Uniform(3)"),
    ("RFedSVRG", {"step": 0.2, "local_steps": 3}, "Uniform(2)"),
    ("RFedSVRG", {"step": 0.2, "local_steps": 3, "client_option": 2, "global_option": 2,
                  "full_gradient": "participants"}, "Uniform(2)"),
    ("RFedSVRG2BB", {"step": 0.2, "local_steps": 3}, "Uniform(2)"),
    ("RFedSVRG2BBS", {"step": 0.2, "local_steps": 3, "eta_min": 0.01, "eta_max": 0.5}, "Full"),
    ("RFedProj", {"step": 0.2, "local_steps": 3, "batch_size": 5}, "Uniform(2)"),
    ("RFedAGS", {"step": 0.2, "local_steps": 3, "batch_size": 5, "aggregation": "AP",
                 "q": "frequency"}, "Bernoulli(0.6)"),
    ("RFedAGS", {"step": 0.2, "local_steps": 3, "aggregation": "AP"}, "Bernoulli(0.6)"),
    ("PriRFed", {"step": 0.2, "local_steps": 2, "sigma": 0.3, "clip": 1.0, "batch_size": 10},
     "Uniform(2)"),
]


@pytest.mark.parametrize("algorithm, kwargs, participation", CASES,
                         ids=[f"{a}-{p}" for a, _, p in CASES])
def test_in_process_protocol_equals_the_engine(algorithm, kwargs, participation, tmp_path,
                                              gathered):
    if algorithm == "PriRFed" and not HAS_DP:
        pytest.skip("dp-accounting not installed (privacy extra)")
    rc = _run_config(algorithm, kwargs, rounds=4, participation=participation)
    res, iterates = _in_process(rc, tmp_path)
    its, sim = _engine(rc)
    assert res.history.meta["rejected"] == []
    np.testing.assert_array_equal(iterates, its)            # bit for bit: the same code runs
    np.testing.assert_array_equal(res.x, sim.x)
    assert np.abs(its[-1] - its[0]).max() > 1e-3            # the iterates moved
    # the same round driver: the same history (participants, accounting, privacy columns)
    assert res.history.equal(sim.history, ignore=TIMING)
    if algorithm == "PriRFed":                              # privacy accounting on the server
        assert res.history["eps_rdp"][-1] == pytest.approx(sim.history["eps_rdp"][-1])
    if algorithm == "RFedProj":                             # corrections live on the clients
        assert np.abs(sim.client_state["c"]).max() > 0


@pytest.mark.parametrize("algorithm, kwargs, participation", CASES,
                         ids=[f"{a}-{p}" for a, _, p in CASES])
def test_every_exchanged_array_has_the_kind_its_algorithm_declares(algorithm, kwargs,
                                                                   participation, monkeypatch,
                                                                   tmp_path):
    if algorithm == "PriRFed" and not HAS_DP:
        pytest.skip("dp-accounting not installed (privacy extra)")
    import rfl_fast.flower.client as client_mod
    import rfl_fast.flower.server as server_mod
    from rfl_fast.federation.arrival import INIT_KINDS, builtin_kinds

    seen = []

    def recording(pack_):
        def pack_recorded(arrays, M, kinds=None):
            out, meta = pack_(arrays, M, kinds)
            seen.extend((name, meta[f"{name}.kind"]) for name in out)
            return out, meta
        return pack_recorded
    monkeypatch.setattr(server_mod, "pack", recording(server_mod.pack))
    monkeypatch.setattr(client_mod, "pack", recording(client_mod.pack))
    rc = _run_config(algorithm, kwargs, rounds=2, participation=participation)
    res, _ = _in_process(rc, tmp_path)
    assert res.history.meta["rejected"] == []
    alg = FederationConfig.from_run_config(rc).build_algorithm()
    declared = {**INIT_KINDS, **type(alg).array_kinds}
    assert dict(seen) == declared                   # all declared arrays travel, as declared
    assert all(builtin_kinds()[name] == kind for name, kind in declared.items())


def test_a_private_client_takes_its_own_sigma_and_clip_and_no_settings_channel():
    """(issue 15) a private client takes its sigma and clip from its node config; (issue 29)
    the server's per-client ``alg.*`` settings, which no client used, are gone from the
    request schema: a request carrying them is refused as a whole."""
    if not HAS_DP:
        pytest.skip("dp-accounting not installed (privacy extra)")
    from rfl_fast.algorithms import PriRFed
    from rfl_fast.flower.schema import REQUEST, Refused, read_request

    local = synthetic_kpca(2, {}, **_task_kwargs(4))
    mine, st = PriRFed(0.1, 2, sigma=0.0, clip=50.0, batch_size=7).for_private_client(
        local, 0.8, 0.5)
    assert mine.ledger.sigma.tolist() == [0.8] and mine.clip == 0.5
    assert mine.ledger.batch.tolist() == [7] and st.batch_size == 7 and st.tau == 0.5
    assert st.clients_per_round == st.n_clients == 1 and st.rounds == 1
    assert not any(key.startswith("alg.") for key in REQUEST)
    M = Stiefel(6, 2)
    msg, meta = pack({"x": M.random_point(rng=np.random.default_rng(0))}, M)
    config = {"phase": "update", "round": 0, "client": 2, "seed": 0, "rounds": 3,
              "rng": "fresh", "memo": "no", "alg.sigma": 0.0}
    with pytest.raises(Refused, match="unknown key 'alg.sigma'"):
        read_request({"config": config, "msg": msg, "msg.meta": meta}, M, {"x": "point"})


def test_in_process_dropouts_and_rejections_match_the_engine_on_the_respondents():
    rc = _run_config("RFedAGS", {"step": 0.2, "local_steps": 3, "aggregation": "AP",
                                 "q": "frequency"}, rounds=4,
                     fault="drop:3@2,3;corrupt:1@3;offmanifold:2@4")
    res, iterates = _in_process(rc)
    left_out, text = _left_out(res.history)
    assert left_out == {(2, 3), (3, 3), (3, 1), (4, 2)}
    answered = [[i for i in range(4) if (t, i) not in left_out] for t in range(1, 5)]
    assert "round 2: client 3: client error: RuntimeError: fault injection" in text
    assert "drops out" in text
    assert "round 3: client 1: zeta: 6 entries are NaN" in text \
        or "round 3: client 1: zeta: 12 entries are NaN" in text
    assert "round 4: client 2: zeta: not tangent" in text
    assert res.history["n_rejected"].tolist() == [0, 0, 1, 2, 1]
    assert res.history["n_participants"].tolist() == [0, 4, 4, 4, 4]
    its, _ = _engine(rc, Scripted(tuple(answered)))
    np.testing.assert_array_equal(iterates, its)


def test_in_process_silent_node_and_failed_prepare():
    rc = _run_config("RFedSVRG", {"step": 0.2, "local_steps": 2}, rounds=2, timeout=1.0)
    n = 4
    link = InProcessLink(rc, [{"partition-id": i} for i in range(n)])
    link.exchange_orig = link.exchange
    calls = []

    def exchange(requests, timeout):          # node of client 2 goes silent after the hello
        calls.append(requests[0][1])
        if len(calls) == 2:
            link.silence(1002)
        return link.exchange_orig(requests, timeout)
    link.exchange = exchange
    res = run_federation(link, rc, log=lambda s: None)
    # client 2 misses both rounds' prepare exchange: the main exchange goes on with 0, 1, 3
    assert res.history.meta["rejected"] == [[1, 2, "prepare: no reply within 1 s"],
                                            [2, 2, "prepare: no reply within 1 s"]]
    assert res.history["n_rejected"].tolist() == [0, 1, 1]
    # the prepare exchange reaches 4 clients, the main one the 3 left (12 floats each way)
    assert res.history["floats_down"].tolist() == [0, 4 * 12 + 3 * 12, 4 * 12 + 3 * 12]
    assert res.history["floats_up"].tolist() == [0, 3 * 12 + 3 * 12, 3 * 12 + 3 * 12]
    assert np.isfinite(res.x).all() and np.abs(res.x - res.x0).max() > 1e-3


def test_client_refuses_messages_for_another_client_and_bad_models():
    rc = _run_config("RFedAvg", {"step": 0.1, "local_steps": 1})
    M = Stiefel(6, 2)
    x0 = M.random_point(rng=np.random.default_rng(0))
    init, init_meta = pack({"x0": x0}, M)
    msg, meta = pack({"x": x0}, M)
    base = {"phase": "update", "round": 0, "client": 1, "seed": 0, "rounds": 3,
            "rng": "fresh", "memo": "no"}
    content = {"config": base, "msg": msg, "msg.meta": meta, "init": init,
               "init.meta": init_meta}
    with pytest.raises(ValueError, match="addressed client 1 but this SuperNode holds "
                                         "client 0"):
        handle(content, {}, {"partition-id": 0}, rc)
    bad = dict(content, msg={"x": 2.0 * x0}, config=dict(base, client=0))
    with pytest.raises(ValueError, match="server message refused: x: not a point"):
        handle(bad, {}, {"partition-id": 0}, rc)
    ok = handle(dict(content, config=dict(base, client=0)), {}, {"partition-id": 0}, rc)
    assert ok["up"]["x"].shape == (1, 6, 2) and ok["up.meta"]["manifold"] == "Stiefel(6, 2)"


# ---------------------------------------------------------------------------- deployment

def _flower_binaries():
    return all(shutil.which(b) for b in ("flower-superlink", "flower-supernode", "flwr"))


@pytest.fixture(scope="module")
def federation(request):
    """One SuperLink and 4 SuperNodes on 127.0.0.1, stopped (with their descendants) at the
    end of the module; the finalizer checks that none of the started processes survives."""
    if not HAS_FLWR or not _flower_binaries():
        pytest.skip("flwr not installed (pip install '.[flower]'): the deployment "
                    "test needs flower-superlink, flower-supernode and flwr")
    from rfl_fast.flower.local import LocalFederation, _alive, _descendants

    # started with no folder holding Flower's scripts on PATH, as from a venv that is not
    # activated: Flower's own `flower-superexec` must still be found
    scripts = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join(
        p for p in path.split(os.pathsep)
        if not os.path.exists(os.path.join(p, "flower-superexec")))
    try:
        fed = LocalFederation(4)
    finally:
        os.environ["PATH"] = path
    assert fed.env["PATH"].split(os.pathsep)[0] == scripts
    started = []

    def stop():
        for p in list(fed.procs.values()):
            started.extend([p.pid] + _descendants(p.pid))
        fed.close()
        alive = [pid for pid in started if _alive(pid)]
        assert not alive, f"processes still running after close: {alive}"
    request.addfinalizer(stop)
    return fed


#: The app module of a deployment whose task (``synthetic_kpca``) writes a line per build into
#: ``{folder}/builds<client id>.txt`` (the ClientApp's process id).
COUNTED_APP = '''"""rfl_fast's app with a task that counts its builds."""
import os

from rfl_fast.flower import client_app, server_app
from rfl_fast.flower.tasks import synthetic_kpca


def counted_kpca(client_id, node_config=None, **kwargs):
    with open(os.path.join({folder!r}, f"builds{{client_id}}.txt"), "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    return synthetic_kpca(client_id, node_config, **kwargs)


server = server_app(tasks={{"counted_kpca": counted_kpca}})
client = client_app(tasks={{"counted_kpca": counted_kpca}})
'''


@pytest.mark.full
@LOOPBACK
def test_deployment_rfedsvrg_kpca_equals_the_engine(federation, gathered, tmp_path):
    """Also: every message runs in a fresh ClientApp process, yet each client's task is built
    once in the run (its problem decoded from the run's ``context.state`` afterwards)."""
    rc = _run_config("RFedSVRG", {"step": 0.2, "local_steps": 3}, rounds=2, timeout=90.0,
                     task="counted_kpca", **{"node-wait": 60.0})
    out = federation.run(rc, timeout=240, module=COUNTED_APP.format(folder=str(tmp_path)))
    builds = {i: (tmp_path / f"builds{i}.txt").read_text().split() for i in range(4)}
    assert all(len(pids) == 1 for pids in builds.values()), builds   # hello + 4 exchanges
    its, sim = _engine(rc)
    np.testing.assert_array_equal(out["iterates"], its)   # bit for bit across processes
    np.testing.assert_array_equal(out["x"], sim.x)
    h = out["history"]
    assert h.meta["rejected"] == [] and h["n_rejected"].tolist() == [0, 0, 0]
    # the full gradient is gathered from all 4 clients: prepare downloads x (12 floats) to 4
    # clients and g to 4 participants; uploads 4 gradients and 4 points
    assert h["floats_down"][1] == 2 * 4 * 12
    assert h["floats_up"][1] == 2 * 4 * 12
    assert h.equal(sim.history, ignore=TIMING)            # the simulation's round driver


@pytest.mark.full
@LOOPBACK
def test_deployment_rfedags_with_a_dropout_and_a_rejected_upload(federation):
    rc = _run_config("RFedAGS", {"step": 0.2, "local_steps": 3, "aggregation": "AP",
                                 "q": "frequency"}, rounds=3, seed=11, timeout=90.0,
                     fault="drop:3@2,3;corrupt:1@3", **{"node-wait": 60.0})
    out = federation.run(rc, timeout=240)
    left_out, text = _left_out(out["history"])
    assert left_out == {(2, 3), (3, 3), (3, 1)}
    answered = [[i for i in range(4) if (t, i) not in left_out] for t in range(1, 4)]
    assert "round 2: client 3: " in text
    assert "round 3: client 1: zeta:" in text and "NaN" in text
    assert out["history"]["n_rejected"].tolist() == [0, 0, 1, 2]
    its, _ = _engine(rc, Scripted(tuple(answered)))
    np.testing.assert_array_equal(out["iterates"], its)
