"""Faulty clients are left out of the round with a recorded reason; the run continues."""

import numpy as np
import pytest
from fed_toy import heterogeneous_pca

import rfl_fast as rf
from rfl_fast.algorithms import RFedAGS, RFedAvg, RFedProj, RFedSVRG
from rfl_fast.federation import Faults, Full, check_upload, run

ALGS = [RFedAvg(step=0.05, local_steps=2), RFedSVRG(step=0.05, local_steps=2),
        RFedProj(step=0.05, local_steps=2), RFedAGS(step=0.05, local_steps=2)]
TIMING = ("cpu_server", "cpu_clients_max", "wall", "wall_metrics")


def _problem():
    return heterogeneous_pca(n=5, m=20, d=6, r=2, seed=0)


@pytest.mark.parametrize("alg", ALGS, ids=lambda a: a.name)
def test_faulty_clients_are_excluded_with_reasons(alg):
    P = _problem()
    faults = Faults({0: "nan", 1: "off_manifold", 2: "wrong_shape", 3: "drop"})
    res = run(P, alg, 3, faults=faults)
    h = res.history
    assert np.isfinite(res.x).all() and P.manifold.is_point(res.x)
    expected = 4 if alg.name != "RFedProj" else 3      # zhat is ambient: a shift is legal
    np.testing.assert_array_equal(h["n_rejected"], [0] + [expected] * 3)
    reasons = {(c, r.split(":")[0]) for _, c, r in h.meta["rejected"]}
    assert (3, "no upload (dropped)") in reasons
    assert any(c == 0 and "NaN" in r for _, c, r in h.meta["rejected"])
    assert any(c == 2 and "shape" in r for _, c, r in h.meta["rejected"])
    if alg.name != "RFedProj":
        assert any(c == 1 and ("not a point" in r or "not tangent" in r)
                   for _, c, r in h.meta["rejected"])
    assert [row[0] for row in h.meta["rejected"]] == sorted(row[0] for row in h.meta["rejected"])


def test_only_good_client_equals_a_run_with_that_client_alone():
    """Client 4 alone is accepted: the run equals the same algorithm with weights only there."""
    P = _problem()
    alg = RFedAvg(step=0.05, local_steps=2)
    bad = Faults({i: "nan" for i in range(4)})
    res = run(P, alg, 3, faults=bad)
    x = res.x0
    for t in range(3):   # by hand: the server point becomes client 4's last local iterate
        y = x[None]
        for _ in range(2):
            y = P.manifold.retr(y, -0.05 * P.rgrad(np.array([4]), y))
        x = y[0]
    np.testing.assert_allclose(res.x, x, atol=1e-12)


def test_all_rejected_keeps_the_server_state():
    P = _problem()
    res = run(P, RFedAGS(step=0.05, local_steps=2), 2,
              faults=Faults({i: "drop" for i in range(5)}))
    np.testing.assert_array_equal(res.x, res.x0)
    np.testing.assert_array_equal(res.state.counts, 0)
    assert list(res.history["n_rejected"]) == [0, 5, 5]


def test_slow_client_times_out():
    P = _problem()
    res = run(P, RFedAvg(step=0.05, local_steps=1), 2, client_deadline=0.02,
              faults=Faults({2: "slow"}, rounds=[1], delay=0.1))
    assert list(res.history["n_rejected"]) == [0, 0, 1]
    (t, c, reason), = res.history.meta["rejected"]
    assert (t, c) == (2, 2) and reason.startswith("timeout")


def test_screening_without_faults_matches_the_batched_engine():
    P = _problem()
    for alg in ALGS:
        a = run(P, alg, 3, seed=1)
        b = run(P, alg, 3, seed=1, check_uploads=True)
        np.testing.assert_allclose(b.x, a.x, atol=1e-12)
        assert list(b.history["n_rejected"]) == [0, 0, 0, 0]
        assert b.history["bytes_up"].tolist() == a.history["bytes_up"].tolist()


def test_check_upload_reasons():
    M = rf.Sphere(3)
    x = np.array([1.0, 0.0, 0.0])
    assert check_upload(M, {"x": x[None]}, rows=1) is None
    assert check_upload(M, None) == "no upload (dropped)"
    assert "NaN" in check_upload(M, {"x": [[np.nan, 0, 0]]}, rows=1)
    assert "not a point" in check_upload(M, {"x": [[2.0, 0, 0]]}, rows=1)
    assert "shape (1, 2)" in check_upload(M, {"x": [[1.0, 0]]}, rows=1)
    assert "not tangent" in check_upload(M, {"zeta": [[1.0, 0, 0]]}, base=x, rows=1)
    assert check_upload(M, {"zeta": [[0.0, 1, 0]]}, base=x, rows=1) is None
    assert "dtype" in check_upload(M, {"x": np.array([["a", "b", "c"]])}, rows=1)
    assert "missing" in check_upload(M, {}, expect=["x"])
    assert check_upload(M, {"zhat": [[5.0, 0, 0]]}, rows=1) is None      # ambient


def test_faults_bad_input():
    with pytest.raises(ValueError, match="unknown fault 'fire'"):
        Faults({0: "fire"})
    with pytest.raises(ValueError, match="client_deadline"):
        run(_problem(), RFedAvg(step=0.1, local_steps=1), 1, Full(), client_deadline=0)
