"""Shared fixtures and the two test tiers. The tiers: plain ``pytest`` runs the fast tier
(every module, at small counts: minutes on 2 cores); ``pytest --full`` (or ``-m full``, or
``RFL_FAST_FULL_TESTS=1``) adds the tests marked ``full`` (fuzzing at full counts, loopback
Flower deployments, the compiler and peer suites, long runs), as ``.ci/run`` does. A test
belongs to the full tier only where a faster test of the fast tier covers its module
(``tests/test_tiers.py`` checks that no module is left to the full tier alone).

Then, which rfl_fast the tests import: ``python -m pytest`` puts the
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


FULL_ENV = "RFL_FAST_FULL_TESTS"
#: ``config.stash`` entries: ``{module file name: (tests collected, tests in the fast tier)}``
#: and how many tests the fast tier left out
TIERS, LEFT = pytest.StashKey[dict](), pytest.StashKey[int]()


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="rfl_fast: run the full tier too (the tests marked 'full': fuzzing at "
                          "full counts, loopback Flower deployments, compiler and peer suites)")


def full_tier(config):
    """Whether this session runs the full tier (``--full``, ``-m`` naming ``full`` or
    ``slow``, or ``RFL_FAST_FULL_TESTS=1``)."""
    marks = config.getoption("markexpr", "") or ""
    return (config.getoption("--full") or "full" in marks or "slow" in marks
            or os.environ.get(FULL_ENV, "") not in ("", "0"))


def pytest_configure(config):
    if full_tier(config):  # subprocesses of the tests (fuzz workers) see the tier too
        os.environ[FULL_ENV] = "1"


def _in_full_tier_only(item):
    return item.get_closest_marker("full") is not None or \
        item.get_closest_marker("slow") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The fast tier leaves out the tests marked ``full`` (reported as deselected), unless
    the session runs the full tier. The tests that read the experiments' small runs share one
    test process (pytest-xdist's loadgroup), so each small form runs once, not once per
    process."""
    tiers = {}
    for item in items:
        counts = tiers.setdefault(item.path.name, [0, 0])
        counts[0] += 1
        counts[1] += not _in_full_tier_only(item)
        if "small_runs" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("small-runs"))
    config.stash[TIERS] = {name: tuple(c) for name, c in tiers.items()}
    if full_tier(config):
        return
    left = [item for item in items if _in_full_tier_only(item)]
    config.stash[LEFT] = len(left)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if not _in_full_tier_only(item)]


def pytest_report_header(config):
    if full_tier(config):
        return "rfl_fast: the full tier (the tests marked 'full' included)"
    return "rfl_fast: the fast tier (pytest --full adds the tests marked 'full'; .ci/run runs both)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The last line before pytest's own says which tier ran (under pytest-xdist the workers
    collect, so the count is known only in a single process)."""
    if full_tier(config):
        return
    left = config.stash.get(LEFT, None)
    count = f"{left} tests of the full tier left out" if left is not None else \
        "the full tier's tests left out"
    terminalreporter.write_line(f"rfl_fast: the fast tier ran ({count}; pytest --full adds "
                                f"them)")


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
