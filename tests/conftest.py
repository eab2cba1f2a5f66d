"""Shared fixtures. First, which rfl_fast the tests import: ``python -m pytest`` puts the
current folder first on ``sys.path``, so from a checkout it would import the source tree (no
compiled core unless built in place) instead of the installed package that plain ``pytest``
tests. The guard below makes both test the installed package, or stops at once saying how to
install it."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest


def _import_the_installed_package(root=Path(__file__).resolve().parent.parent):
    if not (root / "rfl_fast" / "__init__.py").is_file():
        return                       # tests outside a checkout: nothing shadows the package
    here = [p for p in sys.path if Path(p or ".").resolve() == root]
    if not here:
        return                       # plain `pytest`: the checkout is not on sys.path
    rest = [p for p in sys.path if Path(p or ".").resolve() != root]
    saved = sys.path[:]
    sys.path[:] = rest
    try:
        spec = importlib.util.find_spec("rfl_fast")
    finally:
        sys.path[:] = saved
    if spec is not None and spec.origin and \
            Path(spec.origin).resolve().parent != root / "rfl_fast":
        sys.path[:] = rest           # installed elsewhere (or editable from another tree)
        return
    if spec is not None or any((root / "rfl_fast").glob("_core*")):
        return                       # this tree is what is installed (editable) or built
    pytest.exit(f"python -m pytest would test the source tree {root / 'rfl_fast'}, which has "
                f"no compiled core and is not installed: run `pip install \".[test]\"` (or "
                f"`pip install -e \".[test]\"`) in {root} first", returncode=4)


_import_the_installed_package()

import numpy as np  # noqa: E402
import rfl_fast as rf  # noqa: E402


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
