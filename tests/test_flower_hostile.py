"""A deployment that trusts no one it need not (issue 29): hostile servers, clients and run
configs against rfl_fast's Flower app.

* The node's own configuration decides what it runs: a node configured for differential
  privacy runs only algorithms that apply its guard, ``accept-algorithms`` restricts it, and a
  run config names algorithms and tasks only by registered name (no import path is resolved).
* Every reply is read through one declared schema on the real record path (Flower
  ``RecordDict`` -> :func:`~rfl_fast.flower.records.from_recorddict` ->
  :func:`~rfl_fast.flower.schema.read_reply`): whatever fails it leaves that client out of the
  round with the reason and the run goes on; an upload holds exactly the declared arrays.
* Property-based fuzzing of replies (hypothesis) against that record path, in a subprocess.
* One loopback deployment (a SuperLink and three SuperNodes on 127.0.0.1) with a hostile
  ServerApp and then a hostile client among private nodes.

The in-process tests drive :class:`~rfl_fast.flower.FlowerLink` through a ``FakeGrid`` that
hands every message to :func:`~rfl_fast.flower.client.handle` as Flower would (``Message``
objects holding ``RecordDict``\\ s both ways, a raising client an error reply).
"""

import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rfl_fast.federation import run
from rfl_fast.flower import FlowerLink, InProcessLink, pack, run_federation
from rfl_fast.flower.client import handle
from rfl_fast.flower.spec import AppNames, FederationConfig
from rfl_fast.flower.tasks import synthetic_kpca
from rfl_fast.manifolds import Stiefel

from subprocess_env import same_package

HAS_FLWR = importlib.util.find_spec("flwr") is not None
HAS_DP = importlib.util.find_spec("dp_accounting") is not None
needs_flwr = pytest.mark.skipif(not HAS_FLWR, reason="flwr not installed (flower extra)")
needs_dp = pytest.mark.skipif(not HAS_DP, reason="dp-accounting not installed")

N = 3
TASK_KWARGS = {"n_clients": N, "samples": 20, "d": 5, "r": 2, "seed": 1}


def _rc(algorithm="RFedAvg", kwargs=None, rounds=2, **extra):
    kwargs = {"step": 0.2, "local_steps": 2} if kwargs is None else kwargs
    return {"algorithm": algorithm, "algorithm-kwargs": json.dumps(kwargs), "rounds": rounds,
            "seed": 3, "num-clients": N, "task": "synthetic_kpca",
            "task-kwargs": json.dumps(TASK_KWARGS), **extra}


def _dp(i, folder, **extra):
    return {"partition-id": i, "dp-sigma": 0.5, "dp-clip": 1.0, "dp-epsilon": 1e3,
            "dp-delta": 1e-5, "dp-ledger": str(folder / f"ledger{i}.json"), **extra}


def _update_request(M, x, client=0, t=0, memo="no"):
    init, init_meta = pack({"x0": x}, M)
    msg, meta = pack({"x": x}, M)
    config = {"phase": "update", "round": t, "client": client, "seed": 3, "rounds": 2,
              "rng": "fresh", "memo": memo}
    return {"config": config, "msg": msg, "msg.meta": meta, "init": init,
            "init.meta": init_meta}


# ---------------------------------------------------------------------------- the node decides

@needs_dp
def test_a_private_node_runs_only_algorithms_that_apply_its_guard(tmp_path):
    """Before issue 29 a node started with dp-sigma/dp-clip/dp-epsilon/dp-delta/dp-ledger
    answered ``algorithm="RFedAvg"`` with its exact local iterate (the server read the gradient
    off it to 7.5e-16) and never charged its ledger. Now it refuses, at hello and at every
    exchange, naming why, before it loads any data; PriRFed still runs."""
    M = Stiefel(5, 2)
    x = M.random_point(rng=np.random.default_rng(0))
    node = _dp(0, tmp_path)
    for algorithm in ("RFedAvg", "RFedSVRG", "RFedProj", "RFedAGS", "rfedavg"):
        for content in ({"config": {"phase": "hello"}}, _update_request(M, x)):
            with pytest.raises(PermissionError, match="configured for differential privacy "
                                                      r"\(node config dp-clip, dp-delta"):
                handle(content, {}, node, _rc(algorithm))
    assert not (tmp_path / "ledger0.json").exists()              # nothing released
    up = handle(_update_request(M, x), {}, node,
                _rc("PriRFed", {"step": 0.2, "local_steps": 1, "sigma": 0.0, "clip": 1.0}))
    assert up["up"]["x"].shape == (1, 5, 2)
    assert json.loads((tmp_path / "ledger0.json").read_text())["releases"] == 1
    # a partial DP configuration is still a private node: it fails closed
    with pytest.raises(PermissionError, match="dp-seed"):
        handle({"config": {"phase": "hello"}}, {}, {"partition-id": 0, "dp-seed": 7},
               _rc("RFedAvg"))


def test_a_node_may_restrict_the_algorithms_it_accepts():
    M = Stiefel(5, 2)
    x = M.random_point(rng=np.random.default_rng(0))
    node = {"partition-id": 1, "accept-algorithms": "RFedSVRG, RFedAvg"}
    handle({"config": {"phase": "hello"}}, {}, node, _rc("rfedavg"))       # canonical match
    with pytest.raises(PermissionError, match="accepts only RFedSVRG, RFedAvg.*RFedProj "
                                              "refused"):
        handle(_update_request(M, x, client=1), {}, node, _rc("RFedProj"))
    with pytest.raises(ValueError, match="unknown 'Nope'"):
        handle({"config": {"phase": "hello"}}, {}, {**node, "accept-algorithms": "Nope"},
               _rc("RFedAvg"))


@pytest.mark.parametrize("key, value, kwargs", [
    ("algorithm", "subprocess:run", {"args": ["touch", "{marker}"]}),
    ("algorithm", "os:system", {"command": "touch {marker}"}),
    ("algorithm", "rfl_fast.algorithms:RFedAvg", {"step": 0.1, "local_steps": 1}),
    ("task", "builtins:print", None),
    ("task", "rfl_fast.flower.tasks:synthetic_kpca", None),
    ("task", "../tasks", None),
])
def test_a_run_config_never_makes_anyone_import_or_call_a_name(key, value, kwargs, tmp_path,
                                                               capsys):
    """Before issue 29 ``algorithm="subprocess:run"`` executed a command on every SuperNode
    (a marker file appeared) and ``task="builtins:print"`` printed the node config, dp-seed
    included, to the node's log. A run config names registered entries only: the client, the
    server and the run config parser refuse anything else before resolving it."""
    marker = tmp_path / "ran"
    rc = _rc(**({key: value} if key == "task" else
                {"algorithm": value,
                 "kwargs": json.loads(json.dumps(kwargs).replace("{marker}", str(marker)))}))
    node = {"partition-id": 0, "dp-seed": 123456789, "note": "secret"}
    with pytest.raises(ValueError, match="not a registered name.*never an import path"):
        handle({"config": {"phase": "hello"}}, {}, node, rc)
    with pytest.raises(ValueError, match="never an import path"):
        FederationConfig.from_run_config(rc)
    with pytest.raises(ValueError):
        run_federation(InProcessLink(rc, [{"partition-id": i} for i in range(N)]), rc,
                       log=lambda s: None)
    assert not marker.exists()
    printed = capsys.readouterr()
    assert "123456789" not in printed.out + printed.err


def test_an_app_registers_its_own_names_in_code_once():
    """Custom tasks and algorithms come from the app's code (``client_app(tasks=...)``),
    which a SuperNode installed or verified, not from a run config; a name is registered
    once."""
    calls = []

    def my_task(client_id, node_config, **kwargs):
        calls.append(client_id)
        return synthetic_kpca(client_id, node_config, **kwargs)

    names = AppNames(tasks={"my_task": my_task})
    rc = _rc(task="my_task")
    res = run_federation(InProcessLink(rc, [{"partition-id": i} for i in range(N)], names),
                         rc, log=lambda s: None, app_names=names)
    assert res.history.meta["rejected"] == [] and calls
    with pytest.raises(ValueError, match="unknown 'my_task'"):
        handle({"config": {"phase": "hello"}}, {}, {"partition-id": 0}, rc)   # not registered
    with pytest.raises(ValueError, match="already a registered name"):
        AppNames(tasks={"synthetic_kpca": my_task})
    with pytest.raises(ValueError, match="letters, digits"):
        AppNames(algorithms={"a:b": object})


# ---------------------------------------------------------------------------- exact uploads

class _Scripted:
    """A transport whose replies are given: ``{client: upload}``, in that order."""

    def __init__(self, uploads):
        self.uploads = uploads

    def exchange(self, phase, t, ids, msg, fresh):
        from rfl_fast.federation.driver import Replies
        return Replies(ids=list(self.uploads), uploads=list(self.uploads.values()))

    def finish(self, t, ids, fmsg):
        from rfl_fast.federation.driver import Replies
        return Replies(ids.tolist())


@pytest.mark.parametrize("hostile_first", [True, False])
@pytest.mark.parametrize("hostile", ["junk", "extra", "missing"])
def test_an_upload_holds_exactly_the_declared_arrays(hostile, hostile_first):
    """Before issue 29 the uploads were compared with each other (the most common set of names
    won, ties broken by client order): with two participants a client uploading {"junk"} got
    the honest one rejected and server_update raised KeyError 'x'; a valid x plus an extra
    array excluded the honest client. Now each upload is checked against the algorithm's
    declaration (RFedAvg.uploads = {"update": ("x",)}): the hostile client is left out, the
    honest one aggregated, in either order."""
    from rfl_fast.algorithms import RFedAvg
    from rfl_fast.federation.driver import RoundDriver, specialize
    from rfl_fast.federation import Full

    problem = synthetic_kpca.full(**{**TASK_KWARGS, "n_clients": 2})
    M = problem.manifold
    rng = np.random.default_rng(1)
    x0 = M.random_point(rng=rng)
    honest = {"x": M.retr(x0, 0.1 * M.random_tangent(x0, rng=rng))[None]}   # near x0
    bad = {"junk": {"junk": honest["x"].copy()},
           "extra": {"x": honest["x"].copy(), "extra": np.zeros((1, 3))},
           "missing": {}}[hostile]
    uploads = {0: bad, 1: honest} if hostile_first else {1: honest, 0: bad}
    alg = specialize(problem, RFedAvg(0.1, 1), Full(), 1)
    driver = RoundDriver(problem, alg, Full(), _Scripted(uploads), seed=0, rounds=1)
    driver.start(x0)
    hist = driver.run()
    (t, client, why), = hist.meta["rejected"]
    assert (t, client) == (1, 0)
    assert {"junk": "arrays ['junk'] besides the declared ['x']",
            "extra": "arrays ['extra'] besides the declared ['x']",
            "missing": "missing arrays ['x']"}[hostile] in why
    # the honest upload alone: R_x0(R_x0^{-1}(x1)) = x1 up to rounding
    assert np.abs(driver.state.x - honest["x"][0]).max() <= 1e-10


def test_every_algorithm_declares_its_uploads():
    from rfl_fast.algorithms import algorithm_classes
    from rfl_fast.federation.driver import upload_names

    for name, cls in algorithm_classes().items():
        phases = ("prepare", "update") if cls.has_prepare else ("update",)
        assert set(cls.uploads) == set(phases), name
        for phase in phases:
            assert upload_names(cls.__new__(cls), phase), name


# ---------------------------------------------------------------------------- the record path

@pytest.fixture
def flower_task(monkeypatch):
    """Flower's per-process identity, which building a ``Message`` outside a Flower process
    needs."""
    if not HAS_FLWR:
        pytest.skip("flwr not installed (flower extra)")
    from flwr.supercore.task_identity import TaskIdentity

    for attr in ("_run_id", "_node_id", "_task_id"):
        monkeypatch.setattr(TaskIdentity, attr, 1)


class FakeGrid:
    """A Flower ``Grid`` whose nodes run :func:`handle` in this process, messages travelling
    as ``RecordDict``\\ s both ways; ``hostile[node](request, reply) -> reply`` rewrites a
    node's exchange replies (``Message`` objects; not its hello) on the way back."""

    def __init__(self, rc, node_configs, hostile=None):
        self.rc = rc
        self.nodes = {100 + j: dict(c) for j, c in enumerate(node_configs)}
        self.stores = {node: {} for node in self.nodes}
        self.hostile = hostile or {}

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, msgs, timeout=None):
        from flwr.app import Error, Message

        from rfl_fast.flower.records import from_recorddict, to_recorddict

        out = []
        for m in msgs:
            node = m.metadata.dst_node_id
            try:
                reply = Message(to_recorddict(handle(from_recorddict(m.content),
                                                     self.stores[node], self.nodes[node],
                                                     self.rc)), reply_to=m)
            except Exception as exc:  # noqa: BLE001 - Flower sends the client's error back
                reply = Message(Error(code=1, reason=f"{type(exc).__name__}: {exc}"),
                                reply_to=m)
            if node in self.hostile and m.metadata.message_type.startswith("train."):
                reply = self.hostile[node](m, reply)
            out.append(reply)
        return out


def _npy(arr, header_shape=None, truncate=0):
    b = io.BytesIO()
    np.save(b, arr, allow_pickle=True)
    data = b.getvalue()
    if header_shape is not None:
        data = data.replace(repr(arr.shape).encode(), repr(header_shape).encode(), 1)
    return data[:len(data) - truncate]


def _edit(section, fn):
    """A hostile rewrite of the reply's record ``rfl.<section>`` (``fn(record) -> record``)."""
    def rewrite(request, reply):
        from flwr.app import Message

        if reply.has_error() or "rfl.up" not in reply.content:
            return reply
        rd = reply.content
        rd["rfl." + section] = fn(rd["rfl." + section])
        return Message(rd, reply_to=request)
    return rewrite


def _array(fn):
    """Rewrite the upload's array ``x`` as ``fn(x) -> flwr Array``."""
    from flwr.app import ArrayRecord

    return _edit("up", lambda rec: ArrayRecord({"x": fn(rec["x"].numpy())}))


def _config(key, value):
    from flwr.app import ConfigRecord

    return lambda rec: ConfigRecord({**dict(rec), key: value})


def _variants():
    from flwr.app import Array, ArrayRecord, Message, MetricRecord

    def raw(data, stype="numpy.ndarray"):
        return Array(dtype="float64", shape=(1, 5, 2), stype=stype, data=data)

    def error_reply(request, reply):
        from flwr.app import Error
        return Message(Error(code=7, reason="x" * 1_000_000), reply_to=request)

    return {
        # the four of the issue: each aborted the federation through the real record path
        "truncated .npy": (_array(lambda x: raw(_npy(x, truncate=5))), "data holds"),
        'cpu="slow"': (_edit("config", _config("cpu", "slow")), "reply.config.cpu"),
        'round="one"': (_edit("config", _config("round", "one")), "reply.config.round"),
        'shape "1x6xtwo"': (_edit("up.meta", _config("x.shape", "1x6xtwo")),
                            "differs from the declared '1x6xtwo'"),
        # more of the same kind
        "2.9 TiB declared": (_array(lambda x: raw(_npy(x, header_shape=(10**6, 10**6)))),
                             "the header declares shape (1000000, 1000000)"),
        "object dtype": (_array(lambda x: raw(_npy(np.array([{"a": 1}], dtype=object)))),
                         "object dtype"),
        "not numpy": (_array(lambda x: raw(b"\0" * 80, stype="torch.raw")),
                      "not a numpy array record"),
        "junk upload": (_edit("up", lambda rec: ArrayRecord({"junk": rec["x"]})),
                        "arrays ['junk'] besides"),
        "extra array": (_edit("up", lambda rec: ArrayRecord(
            {"x": rec["x"], "extra": Array(np.zeros(3))})), "arrays ['extra'] besides"),
        "float32": (_array(lambda x: Array(x.astype(np.float32))), "dtype float32"),
        "config as metrics": (_edit("config", lambda rec: MetricRecord({"cpu": 1.0})),
                              "expected a ConfigRecord"),
        "unknown key": (_edit("config", _config("evil", "x" * 100_000)), "unknown key 'evil"),
        "unknown section": (_with_section, "unknown section 'evil.meta'"),
        "mislabelled": (_edit("config", _config("client", 0)), "reply labelled client 0"),
        "off the manifold": (_array(lambda x: Array(2.0 * x)), "not a point of Stiefel"),
        "NaN": (_array(lambda x: Array(np.full_like(x, np.nan))), "NaN or inf"),
        "1 MB error": (error_reply, "error 7: xxx"),
    }


def _with_section(request, reply):
    from flwr.app import ConfigRecord, Message

    if reply.has_error():
        return reply
    rd = reply.content
    rd["rfl.evil.meta"] = ConfigRecord({"a": 1})
    return Message(rd, reply_to=request)


VARIANTS = ["truncated .npy", 'cpu="slow"', 'round="one"', 'shape "1x6xtwo"',
            "2.9 TiB declared", "object dtype", "not numpy", "junk upload", "extra array",
            "float32", "config as metrics", "unknown key", "unknown section", "mislabelled",
            "off the manifold", "NaN", "1 MB error"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_hostile_reply_leaves_its_client_out_and_the_run_goes_on(variant, flower_task):
    """Client 1 answers every update with a crafted reply, through Flower's records. Before
    issue 29 the first four variants raised out of FlowerLink.exchange /
    MessageLink._send / codec.check_wire and ended the federation for everyone. Now the
    client is left out of each round with the reason (bounded) and the others' iterates are
    the simulation's with that client absent."""
    rc = _rc(rounds=2)
    fn, reason = _variants()[variant]
    grid = FakeGrid(rc, [{"partition-id": i} for i in range(N)], hostile={101: fn})
    its = []
    res = run_federation(FlowerLink(grid), rc, log=lambda s: None,
                         callback=lambda t, x, row: its.append(np.array(x)))
    rejected = res.history.meta["rejected"]
    assert [(t, c) for t, c, _ in rejected] == [(1, 1), (2, 1)], rejected
    assert all(reason in why and len(why) < 1000 for _, _, why in rejected), rejected
    cfg = FederationConfig.from_run_config(rc)
    from rfl_fast.algorithms.participation import Participation

    class Without1(Participation):
        def sample(self, rng, n):
            return np.array([0, 2])
    sim = run(synthetic_kpca.full(**TASK_KWARGS), cfg.build_algorithm(), 2,
              participation=Without1(), seed=3, metrics=False)
    assert np.abs(res.x - sim.x).max() <= 1e-10


@pytest.mark.parametrize("field, value, reason", [
    ("n_samples", "x", "hello.n_samples: expected an int, got str ('x')"),
    ("n_samples", 10**30, "hello.n_samples: expected a value in"),
    ("n_samples", True, "expected an int, got bool"),
    ("client", -1, "hello.client: expected a value in"),
    ("manifold", "Stiefel(10000000000, 2)", "larger than"),
    ("manifold", "os.system(1)", "cannot rebuild"),
    ("problem", "x" * 10**6, "a string of 1000000 characters"),
])
def test_a_malformed_hello_excludes_the_node_with_its_reason(field, value, reason):
    """Before issue 29 a hello with n_samples="x" or 10**30 stopped the start with a raw
    ValueError / OverflowError. Now that node is excluded with the reason; the run needs every
    client, so it does not start, and says why."""
    rc = _rc()
    link = InProcessLink(rc, [{"partition-id": i} for i in range(N)])
    real = link.exchange

    def exchange(requests, timeout):
        out = real(requests, timeout)
        if requests[0][1] == "hello":
            out[1002]["config"][field] = value
        return out
    link.exchange = exchange
    logged = []
    with pytest.raises(RuntimeError, match=r"no SuperNode answered for clients \[2\]") as info:
        run_federation(link, rc, log=logged.append)
    assert reason in str(info.value) and len(str(info.value)) < 3000
    assert any(reason in line for line in logged)


def test_a_node_claiming_another_clients_id_excludes_both():
    """Two nodes claiming one client id: neither is trusted over the other (no order
    privilege); the start stops naming both."""
    rc = _rc()
    link = InProcessLink(rc, [{"partition-id": i} for i in (0, 1, 2, 1)])
    with pytest.raises(RuntimeError, match=r"clients \[1\].*node 1001: claims client 1, as do "
                                           r"nodes \[1001, 1003\]"):
        run_federation(link, rc, log=lambda s: None)


# ---------------------------------------------------------------------------- fuzzing

FUZZ_REPLIES = textwrap.dedent(r'''
    import io, sys, warnings
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
    from rfl_fast.flower import schema
    from rfl_fast.federation.arrival import kinds_of
    from rfl_fast.flower.codec import pack
    from rfl_fast.flower.records import RecordError, from_recorddict, to_recorddict
    from rfl_fast.algorithms import RFedSVRG
    from rfl_fast.manifolds import Stiefel

    warnings.simplefilter("ignore")
    n_examples = int(sys.argv[1])
    M = Stiefel(5, 2)
    kinds = kinds_of(RFedSVRG(0.1, 1))
    x = M.random_point(1, rng=np.random.default_rng(0))
    up, meta = pack({"x": x}, M, kinds)
    honest = {"config": {"client": 1, "round": 0, "phase": "update", "cpu": 0.1},
              "up": up, "up.meta": meta}
    counts = {"accepted": 0, "refused": 0}

    def npy(a):
        b = io.BytesIO(); np.save(b, a, allow_pickle=True); return b.getvalue()

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
                        st.binary(max_size=40), st.lists(st.integers(0, 3), max_size=3))
    arrays = st.one_of(
        st.just(x), st.just(x[0]), st.just(x.astype(np.float32)), st.just(np.zeros((1, 5, 3))),
        st.just(np.full((1, 5, 2), np.nan)), st.just(2 * x), st.just(np.array([{"a": 1}])),
        st.just(np.array("text")), st.just(np.zeros(0)))
    payloads = st.one_of(
        arrays.map(npy),
        st.tuples(arrays.map(npy), st.integers(0, 200)).map(lambda t: t[0][:len(t[0]) - t[1]]),
        st.tuples(arrays.map(npy), st.integers(0, 120), st.integers(0, 255)).map(
            lambda t: t[0][:t[1]] + bytes([t[2]]) + t[0][t[1] + 1:]),
        st.binary(max_size=200))

    @st.composite
    def replies(draw):
        rd = to_recorddict(honest)
        for _ in range(draw(st.integers(0, 4))):
            what = draw(st.sampled_from(["config", "meta", "array", "section", "drop"]))
            if what == "config":
                key = draw(st.sampled_from(["client", "round", "phase", "cpu", "evil"]))
                value = draw(scalars)
                try:
                    rd["rfl.config"] = ConfigRecord({**dict(rd["rfl.config"]), key: value})
                except Exception:
                    pass                     # a value Flower cannot hold never travels
            elif what == "meta":
                key = draw(st.sampled_from(["manifold", "x.kind", "x.shape", "x.dtype",
                                            "y.kind"]))
                try:
                    rd["rfl.up.meta"] = ConfigRecord({**dict(rd["rfl.up.meta"]),
                                                      key: draw(scalars)})
                except Exception:
                    pass
            elif what == "array":
                name = draw(st.sampled_from(["x", "junk", "grad"]))
                a = Array(dtype=draw(st.sampled_from(["float64", "float32", "object"])),
                          shape=tuple(draw(st.lists(st.integers(0, 9), max_size=3))),
                          stype=draw(st.sampled_from(["numpy.ndarray", "torch.raw"])),
                          data=draw(payloads))
                items = dict(rd["rfl.up"].items()) if "rfl.up" in rd else {}
                if draw(st.booleans()):
                    items = {}
                rd["rfl.up"] = ArrayRecord({**items, name: a})
            elif what == "section":
                name = draw(st.sampled_from(["rfl.up", "rfl.config", "rfl.x.meta", "rfl.y"]))
                rd[name] = draw(st.sampled_from([
                    ConfigRecord({"a": 1}), ArrayRecord({"a": Array(np.zeros(2))}),
                    MetricRecord({"m": 1.0})]))
            else:
                key = draw(st.sampled_from(["rfl.config", "rfl.up", "rfl.up.meta"]))
                if key in rd:
                    del rd[key]
        return rd

    @settings(max_examples=n_examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(replies())
    def fuzz(rd):
        try:
            content = from_recorddict(rd, max_bytes=1 << 16)
            cpu, upload = schema.read_reply(content, "update", 0, 1, M, kinds, ("x",))
        except (schema.Refused, RecordError) as exc:
            assert len(str(exc)) < 1000, str(exc)[:200]
            counts["refused"] += 1
            return
        assert set(upload) == {"x"} and upload["x"].shape == (1, 5, 2)
        assert upload["x"].dtype == np.float64 and 0 <= cpu <= 1e9
        counts["accepted"] += 1

    fuzz()
    print(counts["accepted"], counts["refused"])
''')


@needs_flwr
def test_fuzz_replies_through_the_record_path():
    """Hypothesis builds replies from an honest one by rewriting config values (any type,
    huge ints, NaN, long strings), meta entries, arrays (Flower ``Array``\\ s with arbitrary
    declared dtype/shape/stype and truncated, bit-flipped or random ``.npy`` payloads, object
    arrays), adding and removing sections. Every one is accepted as a well-formed upload of
    exactly the declared array or refused with a bounded reason -- nothing else is raised and
    the process survives (it runs in a subprocess: a crash is a failure, not a dead test
    run)."""
    out = subprocess.run([sys.executable, "-c", FUZZ_REPLIES, "400"], capture_output=True,
                         text=True, timeout=600, **same_package())
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-4000:])
    accepted, refused = map(int, out.stdout.split()[-2:])
    print(f"fuzzed replies: {accepted} accepted, {refused} refused")
    assert refused > 100 and accepted > 0


# ---------------------------------------------------------------------------- loopback

LOOPBACK = pytest.mark.xdist_group("flower-loopback")

HOSTILE_APP = textwrap.dedent(r'''
    """A hostile ServerApp (and the honest rfl_fast ClientApp) for the loopback test."""
    import json, os, time

    import numpy as np
    from flwr.app import Message
    from flwr.serverapp import ServerApp

    from rfl_fast.flower import client_app, pack
    from rfl_fast.flower.records import to_recorddict
    from rfl_fast.manifolds import Stiefel

    client = client_app()
    server = ServerApp()


    @server.main()
    def main(grid, context):
        out = context.run_config["output-dir"]
        os.makedirs(out, exist_ok=True)
        deadline = time.monotonic() + 60
        while len(list(grid.get_node_ids())) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        nodes = sorted(int(n) for n in grid.get_node_ids())
        M = Stiefel(5, 2)
        x = M.random_point(rng=np.random.default_rng(0))
        init, init_meta = pack({"x0": x}, M)
        msg, meta = pack({"x": x}, M)
        found = {}
        for phase in ("hello", "update"):
            mtype = "query.rfl_hello" if phase == "hello" else "train.rfl_update"
            msgs = []
            for j, node in enumerate(nodes):
                c = {"config": {"phase": "hello"}}
                if phase == "update":        # straight to an update, whatever hello said
                    c = {"config": {"phase": "update", "round": 0, "client": j, "seed": 3,
                                    "rounds": 2, "rng": "fresh", "memo": "no"},
                         "msg": msg, "msg.meta": meta, "init": init, "init.meta": init_meta}
                msgs.append(Message(to_recorddict(c), dst_node_id=node, message_type=mtype,
                                    group_id=phase))
            for r in grid.send_and_receive(msgs, timeout=60):
                found.setdefault(phase, []).append(
                    r.error.reason if r.has_error() else "answered")
        with open(os.path.join(out, "findings.json"), "w") as fh:
            json.dump(found, fh)
''')

@pytest.fixture(scope="module")
def private_federation(tmp_path_factory):
    """A SuperLink and three private SuperNodes (dp-* node configs, dp-seed = the run's
    seed), node 2 flagged hostile; every process stopped at the end."""
    if not HAS_FLWR or not HAS_DP:
        pytest.skip("flwr and dp-accounting needed (flower and privacy extras)")
    import shutil
    if not all(shutil.which(b) or os.path.exists(os.path.join(os.path.dirname(sys.executable),
                                                               b))
               for b in ("flower-superlink", "flower-supernode", "flwr")):
        pytest.skip("Flower's scripts not found")
    from rfl_fast.flower.local import LocalFederation

    folder = tmp_path_factory.mktemp("ledgers")
    nodes = [_dp(i, folder, **{"dp-seed": 3}) for i in range(N)]
    nodes[2]["hostile"] = 1
    fed = LocalFederation(N, node_configs=[{k: v for k, v in c.items() if k != "partition-id"}
                                           for c in nodes])
    yield fed, folder
    fed.close()


@pytest.mark.full
@LOOPBACK
def test_loopback_hostile_server_then_hostile_client(private_federation, tmp_path):
    """Three private SuperNodes. (1) A hostile ServerApp sends hello and update requests
    under a run config asking RFedAvg and ``task="builtins:print"``-style names: every node
    refuses every message (never importing a name), no ledger is charged. (2) The honest
    ServerApp runs PriRFed; node 2's ClientApp corrupts every upload (a truncated .npy
    payload): it is left out of each round with the reason, the run finishes with the other
    two."""
    fed, folder = private_federation
    for algorithm, task, reason in (("RFedAvg", "synthetic_kpca",
                                     "configured for differential privacy"),
                                    ("subprocess:run", "synthetic_kpca",
                                     "never an import path")):
        rc = {**_rc(algorithm), "task": task}
        rc["algorithm-kwargs"] = json.dumps({"args": ["touch", str(tmp_path / "ran")]})
        out = fed.run(rc, timeout=240, module=HOSTILE_APP, wait_for="findings.json")
        with open(os.path.join(out["out"], "findings.json")) as fh:
            found = json.load(fh)
        assert set(found) == {"hello", "update"}
        assert all(reason in r for rs in found.values() for r in rs), found
    assert not (tmp_path / "ran").exists()
    assert not any(p.name.startswith("ledger") for p in folder.iterdir())
    rc = _rc("PriRFed", {"step": 0.2, "local_steps": 1, "sigma": 0.5, "clip": 1.0},
             rounds=2, timeout=90.0, **{"node-wait": 60.0})
    out = fed.run(rc, timeout=300, module=HOSTILE_CLIENT)
    rejected = out["history"].meta["rejected"]
    assert [(t, c) for t, c, _ in rejected] == [(1, 2), (2, 2)], rejected
    assert all("undecodable reply" in why for _, _, why in rejected), rejected
    assert out["history"]["n_participants"].tolist() == [0, 3, 3]
    assert np.isfinite(out["x"]).all() and np.abs(out["x"] - out["x0"]).max() > 1e-3


HOSTILE_CLIENT = textwrap.dedent(r'''
    """The honest rfl_fast ServerApp, and a ClientApp that turns hostile on the node whose
    node config sets `hostile`: every upload's .npy payload truncated."""
    from flwr.app import Array, ArrayRecord, Message
    from flwr.clientapp import ClientApp

    from rfl_fast.flower import server_app
    from rfl_fast.flower.client import handle
    from rfl_fast.flower.records import from_recorddict, load_store, save_store, to_recorddict

    server = server_app()
    client = ClientApp()


    def _serve(msg, context):
        store = load_store(context.state)
        reply = handle(from_recorddict(msg.content), store, context.node_config,
                       context.run_config)
        save_store(context.state, store)
        rd = to_recorddict(reply)
        if context.node_config.get("hostile") and "rfl.up" in rd:
            rd["rfl.up"] = ArrayRecord({k: Array(dtype=a.dtype, shape=a.shape, stype=a.stype,
                                                 data=a.data[:-5])
                                        for k, a in rd["rfl.up"].items()})
        return Message(rd, reply_to=msg)


    @client.query("rfl_hello")
    def hello(msg, context):
        return _serve(msg, context)


    @client.train("rfl_update")
    def update(msg, context):
        return _serve(msg, context)
''')
