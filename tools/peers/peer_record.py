"""pytest plugin (``-p peer_record``) of tools/peer_tests.py: writes every test's outcome to
the JSON file named by ``PEER_TESTS_RECORD``: ``{"outcomes": {nodeid: outcome}, "rfl_fast":
[nodeids]}``, outcome one of passed, failed, error, skipped, xfailed, xpassed (a module that
fails to import is one "error" under its path); "rfl_fast" lists the tests the conftest saw
run on rfl_fast's classes (the ``("rfl_fast", True)`` user property)."""

import json
import os

_OUTCOMES = {}
_OURS = set()


def pytest_collectreport(report):
    if report.failed:
        _OUTCOMES[report.nodeid] = "error"


def pytest_runtest_logreport(report):
    nodeid, previous = report.nodeid, _OUTCOMES.get(report.nodeid)
    if ("rfl_fast", True) in getattr(report, "user_properties", ()):
        _OURS.add(nodeid)
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        _OUTCOMES[nodeid] = "error" if previous == "error" else outcome
    elif report.failed:                               # setup or teardown
        _OUTCOMES[nodeid] = "error"
    elif report.skipped and previous is None:         # skipped at setup
        _OUTCOMES[nodeid] = "xfailed" if hasattr(report, "wasxfail") else "skipped"


def pytest_sessionfinish(session):
    path = os.environ.get("PEER_TESTS_RECORD")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):  # xdist: the controller sees all
        return
    with open(path, "w") as f:
        json.dump({"outcomes": _OUTCOMES, "rfl_fast": sorted(_OURS)}, f, indent=0,
                  sort_keys=True)
