"""One round driver (rfl_fast.federation.driver) for the simulation and for Flower.

The simulation (:func:`rfl_fast.federation.run`) and the Flower server
(:func:`rfl_fast.flower.run_federation`, here over the in-process link) play their rounds with
the same :class:`RoundDriver`; only the transport differs. The transports give the same
history, and one failure rule holds on each: a client that raises is left out with its
reason, and the round goes on with the others.
"""

import json

import numpy as np
import pytest

from rfl_fast.algorithms import RFedAvg, RFedProj, RFedSVRG
from rfl_fast.federation import Full, Uniform, run
from rfl_fast.federation.driver import InProcess, RoundDriver, initial_point, specialize
from rfl_fast.algorithms.participation import Participation
from rfl_fast.flower import InProcessLink, MessageLink, run_federation
from rfl_fast.flower.tasks import synthetic_kpca

TIMING = ("cpu_server", "cpu_clients_max", "wall", "wall_metrics")
METRICS = ("grad_norm", "f_gap", "angle", "dist", "feasibility")
TASK = {"n_clients": 4, "samples": 30, "d": 6, "r": 2, "seed": 1}
ALGS = {"RFedAvg": {"step": 0.2, "local_steps": 3, "batch_size": 5},
        "RFedSVRG": {"step": 0.2, "local_steps": 3},
        "RFedProj": {"step": 0.2, "local_steps": 3, "batch_size": 5}}
MAKE = {"RFedAvg": RFedAvg, "RFedSVRG": RFedSVRG, "RFedProj": RFedProj}


def _problem():
    return synthetic_kpca.full(**TASK)


def _run_config(name, rounds=3, seed=5, participation="Full"):
    return {"algorithm": name, "algorithm-kwargs": json.dumps(ALGS[name]),
            "participation": participation, "rounds": rounds, "seed": seed, "num-clients": 4,
            "task": "synthetic_kpca", "task-kwargs": json.dumps(TASK)}


def _flower(name, **kw):
    rc = _run_config(name, **kw)
    link = InProcessLink(rc, [{"partition-id": i} for i in range(4)])
    return run_federation(link, rc, log=lambda s: None)


def _drive(name, per_client, participation, rounds=3, seed=2):
    """The driver over an in-process transport, built by hand: (history, x, client states)."""
    P = _problem()
    alg = specialize(P, MAKE[name](**ALGS[name]), participation, rounds)
    x0 = initial_point(P.manifold, None, seed)
    cstore = {k: np.array(v) for k, v in alg.init_clients(P, x0).items()}
    clients = InProcess(P, alg, seed, cstore, per_client=per_client)
    driver = RoundDriver(P, alg, participation, clients, seed=seed, rounds=rounds, metrics=P)
    driver.start(x0)
    return driver.run(), alg.output(P, driver.state), cstore


def test_simulation_and_flower_play_their_rounds_with_the_same_driver(monkeypatch):
    seen = []
    play = RoundDriver.play

    def spy(self, t):
        seen.append(type(self.link))
        return play(self, t)

    monkeypatch.setattr(RoundDriver, "play", spy)
    run(_problem(), RFedAvg(0.2, 2), 2)
    run(_problem(), RFedAvg(0.2, 2), 2, check_uploads=True)
    _flower("RFedAvg", rounds=2)
    assert seen == [InProcess] * 4 + [MessageLink] * 2


@pytest.mark.parametrize("name", list(ALGS))
def test_batched_and_per_client_transports_give_the_same_history(name):
    """RFedAvg draws mini-batches, RFedSVRG's prepare exchange reaches all n clients while 2
    take part, RFedProj notifies the participants (finalize) and keeps their corrections."""
    part = Uniform(2)
    h_batch, x_batch, c_batch = _drive(name, False, part)
    h_each, x_each, c_each = _drive(name, True, part)
    assert h_batch.equal(h_each, ignore=TIMING + METRICS)       # participants, accounting
    assert h_batch["n_rejected"].tolist() == [0, 0, 0, 0]
    for col in METRICS:
        np.testing.assert_allclose(h_each[col], h_batch[col], atol=1e-12)
    np.testing.assert_allclose(x_each, x_batch, atol=1e-12)
    for k in c_batch:
        np.testing.assert_allclose(c_each[k], c_batch[k], atol=1e-12)
    if name == "RFedProj":
        assert np.abs(c_batch["c"]).max() > 0


class _Without(Participation):
    """Every client but ``out`` takes part (draws nothing, like ``Full``)."""

    def __init__(self, out):
        self.out = out

    def sample(self, rng, n):
        return np.array([i for i in range(n) if i != self.out], dtype=np.int64)


def _raising(monkeypatch, cls, hook, bad=2):
    """Make ``cls.<hook>`` raise for client ``bad`` (whose stream the context holds, in the
    simulation's batches and on a Flower client alike)."""
    original = getattr(cls, hook)

    def failing(self, problem, idx, msg, *args):
        if bad in args[-1].rng.idx:
            raise RuntimeError("boom")
        return original(self, problem, idx, msg, *args)

    monkeypatch.setattr(cls, hook, failing)


#: The screened transports: a client that raises is left out, its reason recorded.
SCREENED = {
    "per-client": lambda name: run(_problem(), MAKE[name](**ALGS[name]), 3, seed=5,
                                   check_uploads=True),
    "flower": lambda name: _flower(name),
}


@pytest.mark.parametrize("transport", list(SCREENED))
def test_a_client_raising_in_its_update_is_left_out_with_its_reason(transport, monkeypatch):
    _raising(monkeypatch, RFedAvg, "client_update")
    res = SCREENED[transport]("RFedAvg")
    assert res.history.meta["rejected"] == [[t, 2, "client error: RuntimeError: boom"]
                                            for t in (1, 2, 3)]
    assert res.history["n_rejected"].tolist() == [0, 1, 1, 1]
    monkeypatch.undo()
    # the round went on with the others: as if client 2 had not taken part
    alone = run(_problem(), RFedAvg(**ALGS["RFedAvg"]), 3, _Without(2), seed=5)
    np.testing.assert_allclose(res.x, alone.x, atol=1e-10)
    assert np.abs(res.x - res.x0).max() > 1e-3


def test_a_client_raising_in_the_prepare_exchange_is_left_out_on_every_screened_transport(
        monkeypatch):
    _raising(monkeypatch, RFedSVRG, "client_prepare")
    results = {name: make("RFedSVRG") for name, make in SCREENED.items()}
    for res in results.values():
        assert res.history.meta["rejected"] == [
            [t, 2, "prepare: client error: RuntimeError: boom"] for t in (1, 2, 3)]
        assert res.history["n_rejected"].tolist() == [0, 1, 1, 1]
        assert res.participation == Full()
        assert np.isfinite(res.x).all()
    assert results["flower"].history.equal(results["per-client"].history,
                                           ignore=TIMING + METRICS)
    np.testing.assert_allclose(results["flower"].x, results["per-client"].x, atol=1e-10)


@pytest.mark.parametrize("cls, hook", [(RFedAvg, "client_update"),
                                       (RFedSVRG, "client_prepare")])
def test_an_unscreened_simulation_raises_a_client_error(cls, hook, monkeypatch):
    """Without check_uploads/faults/client_deadline the clients are trusted code: a hook that
    raises is a bug, raised to the caller, never a client quietly left out."""
    _raising(monkeypatch, cls, hook)
    with pytest.raises(RuntimeError, match="boom"):
        run(_problem(), cls(**ALGS[cls.__name__]), 3, seed=5)
