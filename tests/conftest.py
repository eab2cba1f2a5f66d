import os

# auto follows the shipped policy in the tests, never a policy ``rfl-fast tune`` left in this
# machine's cache (tests/test_policy.py plants its own)
os.environ.setdefault("RFL_FAST_POLICY", "shipped")

import numpy as np
import pytest

import rfl_fast as rf


@pytest.fixture(autouse=True)
def _seeded():
    """Legacy global RNG seeded for any code that uses it; tests pass explicit rngs."""
    np.random.seed(0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The tests that read the experiments' small runs share one test process (pytest-xdist's
    loadgroup), so each small form runs once, not once per process."""
    for item in items:
        if "small_runs" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("small-runs"))


@pytest.fixture(scope="session")
def small_runs(tmp_path_factory):
    """``get(exp_id) -> (result, folder)``: each experiment's ``small=True`` run (seed 0, files
    in a temporary folder), run once per session and shared by every test that reads it (the
    small forms take seconds to a minute each; results are read, never changed)."""
    from rfl_fast.app.experiments import run_experiment

    cache = {}

    def get(exp_id):
        if exp_id not in cache:
            out = tmp_path_factory.mktemp(exp_id)
            cache[exp_id] = (run_experiment(exp_id, small=True, seed=0, out=out), out)
        return cache[exp_id]
    return get


@pytest.fixture(params=rf.available_backends())
def backend(request):
    """Run the test under every importable backend ("cpp", "numba", "numpy")."""
    with rf.backend(request.param):
        yield request.param


@pytest.fixture
def policy_cache(tmp_path, monkeypatch):
    """An empty cache folder for auto's per-machine policy in this test (``rfl-fast tune``
    writes there), the environment leaving the choice to it; the policy is read again before
    and after."""
    from rfl_fast import kernels
    from rfl_fast.kernels import policy

    monkeypatch.delenv(policy.ENV, raising=False)
    monkeypatch.setattr(policy, "cache_dir", lambda: str(tmp_path))
    kernels.reload_policy()
    yield tmp_path
    monkeypatch.undo()
    kernels.reload_policy()
