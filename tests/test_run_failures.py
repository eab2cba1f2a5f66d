"""Failures are recorded where a user looks: a faulty client is left out with its reason, a run
that fails is marked ``failed`` on disk, data that would overflow is refused up front."""

import json

import numpy as np
import pytest
from fed_toy import heterogeneous_pca

from rfl_fast.algorithms import RFedAvg, RFedSVRG
from rfl_fast.app.config import load_plan
from rfl_fast.app.runner import execute
from rfl_fast.federation import run
from rfl_fast.problems import KPCA

TINY = """\
name = "tiny"
rounds = 3
seed = 1
plots = []

[problem]
type = "KPCA"
r = 2

[data]
source = "wine"

[partition]
method = "equal"
n_clients = 4

[[algorithm]]
name = "RFedAvg"
step = 0.01
local_steps = 2
"""


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("k"), MemoryError()],
                         ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("alg", [RFedAvg(step=0.05, local_steps=2),
                                 RFedSVRG(step=0.05, local_steps=2)], ids=lambda a: a.name)
def test_a_client_raising_any_error_is_left_out_and_the_run_goes_on(error, alg, monkeypatch):
    """With screened uploads, one rule for every error a client raises (as under Flower): the
    client is excluded, the reason recorded, the round goes on with the others."""
    P = heterogeneous_pca(n=5, m=20, d=6, r=2, seed=0)
    calls = {"bad": 0}
    client_update = type(alg).client_update

    def failing(self, problem, idx, *args):
        if 2 in idx:
            calls["bad"] += 1
            raise error
        return client_update(self, problem, idx, *args)

    monkeypatch.setattr(type(alg), "client_update", failing)
    res = run(P, alg, 2, check_uploads=True)
    assert calls["bad"] > 0
    assert list(res.history["n_rejected"]) == [0, 1, 1]
    assert all(c == 2 and f"client error: {type(error).__name__}" in r
               for _, c, r in res.history.meta["rejected"])
    assert P.manifold.is_point(res.x)


def test_samples_whose_covariance_overflows_are_refused_naming_the_data():
    z = np.random.default_rng(0).standard_normal((60, 5)) * 1e160
    with pytest.raises(ValueError, match=r"data: entries up to .* overflow float64"):
        KPCA([z[:30], z[30:]], r=2)
    KPCA([z[:30] * 1e-10, z[30:] * 1e-10], r=2)  # large but safe


def test_a_run_that_fails_outside_an_algorithm_is_marked_failed_on_disk(tmp_path, monkeypatch):
    """The metrics fail (inside the algorithm's run and again when the runner rebuilds its
    history): the exception reaches the caller and the results folder says ``failed``."""
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    plan = load_plan(str(cfg), overrides={"out": str(tmp_path / "res")})

    def broken(*args, **kwargs):
        raise ValueError("array must not contain infs or NaNs")

    monkeypatch.setattr(type(plan.problem), "metrics", broken)
    with pytest.raises(ValueError, match="infs or NaNs"):
        execute(plan, quiet=True, progress=False)
    resolved = json.loads((tmp_path / "res" / "config_resolved.json").read_text())
    assert resolved["status"] == "failed"
    assert resolved["error"] == "ValueError: array must not contain infs or NaNs"
