"""The two test tiers (``tests/conftest.py``): plain ``pytest`` runs the fast tier, ``pytest
--full`` adds the tests marked ``full``. The fast tier must still touch every module: a test
module whose tests are all marked ``full`` would leave its code untested by the command a
newcomer runs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TIERS

HERE = Path(__file__).resolve().parent


def _modules():
    return sorted(p.name for p in HERE.glob("test_*.py"))


def _tiers_of_the_whole_suite(config):
    """``{module: (collected, fast)}`` for every test module: this session's collection when it
    collected the whole suite, else a collection of the whole suite in a subprocess."""
    tiers = config.stash.get(TIERS, {})
    if set(_modules()) <= set(tiers):
        return tiers
    script = ("import collections, sys, pytest\n"
              "class Grab:\n"
              "    @pytest.hookimpl(trylast=True)\n"
              "    def pytest_collection_modifyitems(self, items):\n"
              "        tiers = collections.defaultdict(lambda: [0, 0])\n"
              "        for item in items:\n"
              "            full = any(item.get_closest_marker(m) for m in ('full', 'slow'))\n"
              "            tiers[item.path.name][0] += 1\n"
              "            tiers[item.path.name][1] += not full\n"
              "        for name, (n, fast) in sorted(tiers.items()):\n"
              "            print('TIER', name, n, fast)\n"
              "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', "
              "'-o', 'addopts=--strict-markers', sys.argv[1]], plugins=[Grab()]))\n")
    env = dict(os.environ, RFL_FAST_FULL_TESTS="1")   # nothing deselected: Grab counts
    out = subprocess.run([sys.executable, "-c", script, str(HERE)], capture_output=True,
                         text=True, timeout=300, cwd=HERE.parent, env=env)
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("TIER ")]
    assert rows, out.stdout[-2000:] + out.stderr[-2000:]
    return {name: (int(n), int(fast)) for _, name, n, fast in rows}


def test_every_test_module_runs_in_the_fast_tier(request):
    """Every ``tests/test_*.py`` has tests in the fast tier: a module may leave its slow tests
    (full fuzz counts, deployments, compilers) to ``--full``, never all of them."""
    tiers = _tiers_of_the_whole_suite(request.config)
    missing = sorted(set(_modules()) - set(tiers))
    assert not missing, f"modules that collected no test: {missing}"
    full_only = sorted(name for name, (n, fast) in tiers.items() if n and not fast)
    assert not full_only, (f"modules whose tests are all in the full tier (mark only the slow "
                           f"ones 'full'): {full_only}")


def test_the_full_tier_is_one_flag_away():
    """``--full`` (or ``-m full``, or RFL_FAST_FULL_TESTS=1) selects the full tier, and the
    full tier is what ``.ci/run``'s whole-suite pass runs."""
    from conftest import full_tier

    class Config:
        def __init__(self, full=False, marks=""):
            self.options = {"--full": full, "markexpr": marks}

        def getoption(self, name, default=None):
            return self.options.get(name, default)

    saved = os.environ.pop("RFL_FAST_FULL_TESTS", None)
    try:
        assert not full_tier(Config())
        assert full_tier(Config(full=True)) and full_tier(Config(marks="full"))
        os.environ["RFL_FAST_FULL_TESTS"] = "1"
        assert full_tier(Config())
    finally:
        os.environ.pop("RFL_FAST_FULL_TESTS", None)
        if saved is not None:
            os.environ["RFL_FAST_FULL_TESTS"] = saved
    ci = HERE.parent / ".ci" / "run"
    if not ci.is_file():
        pytest.skip(".ci/run not found next to the tests")
    whole = [line for line in ci.read_text().splitlines() if '"whole suite' in line]
    assert whole and all("--full" in line for line in whole), whole
