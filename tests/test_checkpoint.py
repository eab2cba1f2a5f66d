"""Checkpoint/resume: an interrupted run resumed from its checkpoint is bit-identical."""

import json

import numpy as np
import pytest
from fed_toy import heterogeneous_pca

import rfl_fast as rf
from rfl_fast.algorithms import RFedAGS, RFedAvg, RFedProj, RFedSVRG
from rfl_fast.federation import Bernoulli, Uniform, resume, run
from rfl_fast.federation import checkpoint as ckpt

TIMING = ("cpu_server", "cpu_clients_max", "wall", "wall_metrics")
ROUNDS = 7

CASES = {
    # step 0.02: at 0.05 a client's iterate leaves the region the polar retraction reaches
    # from the server point, whose inverse (the tangent mean's) refuses it since issue 38
    "RFedAvg": (RFedAvg(step=0.02, local_steps=3, batch_size=10), Uniform(3)),
    "RFedSVRG": (RFedSVRG(step=0.05, local_steps=3, client_option=2, global_option=2),
                 Uniform(3)),
    "RFedProj": (RFedProj(step=0.05, local_steps=3, batch_size=10), Uniform(3)),
    "RFedAGS": (RFedAGS(step=0.05, local_steps=3, aggregation="AP", q="frequency",
                        batch_size=10), Bernoulli(0.6)),
}


def _same(a, b):
    np.testing.assert_array_equal(a.x, b.x)
    assert a.rounds == b.rounds
    assert a.history.equal(b.history, ignore=TIMING)
    assert set(a.client_state) == set(b.client_state)
    for name in a.client_state:
        np.testing.assert_array_equal(a.client_state[name], b.client_state[name])
    for field in vars(a.state):
        va, vb = getattr(a.state, field), getattr(b.state, field)
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            np.testing.assert_array_equal(va, vb)
        else:
            assert va == vb, field


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("stop,every", [(5, 2), (4, 2), (3, 1)])
def test_interrupted_run_resumes_bit_identically(name, stop, every, tmp_path):
    alg, part = CASES[name]
    P = heterogeneous_pca(n=6, m=30, d=6, r=2, seed=1)
    full = run(P, alg, ROUNDS, part, seed=3)
    path = tmp_path / "run.ckpt"
    cut = run(P, alg, ROUNDS, part, seed=3, checkpoint=path, checkpoint_every=every,
              callback=lambda t, x, row: t == stop)
    assert cut.rounds == stop
    saved = ckpt.load(path)
    assert saved["round"] == stop - stop % every      # lost: the rounds since the last one
    res = resume(path, P)
    _same(res, full)
    assert repr(res.algorithm) == repr(full.algorithm)
    # the checkpoint now holds the finished run; resuming it again changes nothing
    assert ckpt.load(path)["round"] == ROUNDS
    _same(resume(path, P), full)


def test_resume_extends_a_finished_run(tmp_path):
    alg, part = CASES["RFedAvg"]
    P = heterogeneous_pca(n=6, m=30, d=6, r=2, seed=1)
    long = run(P, alg, 6, part, seed=3, metrics_every=3)
    path = tmp_path / "run.ckpt"
    run(P, alg, 3, part, seed=3, checkpoint=path, metrics_every=3)
    res = resume(path, P, rounds=6)
    np.testing.assert_array_equal(res.x, long.x)
    assert res.history.equal(long.history, ignore=TIMING + ("grad_norm", "f_gap", "angle",
                                                           "dist"))
    assert res.history.meta["rounds"] == 6


def test_checkpoint_file_is_npz_with_json_and_no_pickle(tmp_path):
    alg, part = CASES["RFedAGS"]
    P = heterogeneous_pca(n=6, m=30, d=6, r=2, seed=1)
    path = tmp_path / "run.ckpt"
    run(P, alg, 2, part, seed=3, checkpoint=path)
    with np.load(path, allow_pickle=False) as data:
        doc = json.loads(str(data["__json__"]))
    payload = doc["payload"]
    assert payload["round"] == 2 and payload["seed"] == 3
    assert payload["state"]["__dataclass__"] == "rfl_fast.algorithms.ags:AGSState"
    assert "state" in payload["prng"]["__dict__"]
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"]   # no temp files left


def test_atomic_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"
    ckpt.save(path, {"round": 1, "x": np.arange(3.0)})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save(path, {"round": 2, "x": np.arange(3.0)})
    assert ckpt.load(path)["round"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]


def test_untrusted_classes_are_not_rebuilt(tmp_path):
    """Only the classes a run builds are rebuilt (issue 38): an rfl_fast class a run never
    checkpoints (Faults) is refused as a foreign one is; the table is not a module search."""
    path = tmp_path / "c.npz"
    ckpt.save(path, {"obj": rf.federation.Uniform(2)})
    assert ckpt.load(path)["obj"] == rf.federation.Uniform(2)
    ckpt.save(path, {"obj": rf.federation.Faults({0: "nan"})})
    with pytest.raises(ValueError, match="refusing to rebuild 'rfl_fast.federation.faults:Fau"):
        ckpt.load(path)
    doc = {"version": ckpt.FORMAT_VERSION,
           "payload": {"obj": {"__dataclass__": "os:PathLike", "fields": {}}}}
    np.savez(path, __json__=np.array(json.dumps(doc)))
    with pytest.raises(ValueError, match="refusing to rebuild 'os:PathLike'"):
        ckpt.load(path)


def test_unstorable_state_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="cannot store a function"):
        ckpt.save(tmp_path / "c.npz", {"f": lambda: 0})


def test_checkpoint_every_is_checked(tmp_path):
    alg, part = CASES["RFedAvg"]
    P = heterogeneous_pca(n=6, m=30, d=6, r=2, seed=1)
    with pytest.raises(ValueError, match="checkpoint_every"):
        run(P, alg, 2, part, checkpoint=tmp_path / "c", checkpoint_every=0)
