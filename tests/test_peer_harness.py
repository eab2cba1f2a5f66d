"""The logic of tools/peer_tests.py (the harness that runs pymanopt's and geomstats' own tests
against the adapters; CI runs it, the default suite does not): reading the differences file,
comparing two runs, and the integrity of the vendored geomstats tests. Nothing is downloaded."""

import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
if not (TOOLS / "peer_tests.py").is_file():          # tests run outside a source checkout
    pytest.skip("tools/peer_tests.py not found next to the tests", allow_module_level=True)


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("peer_tests", TOOLS / "peer_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_differences_file_is_valid(harness):
    differences, behaviours = harness.load_differences(TOOLS / "peers" / "differences.toml")
    assert all(d["peer"] in harness.PINS for d in differences + behaviours)
    assert behaviours, "the defaults that differ from the peers' are written down"


@pytest.mark.parametrize("text, match", [
    ('[[difference]]\npeer = "pymanopt"\ntest = "t"\n', r"missing \['reason'\]"),
    ('[[difference]]\npeer = "pymanopt"\ntest = "t"\nreason = "r"\nwhy = 1\n', r"unknown \['why'\]"),
    ('[[behaviour]]\npeer = "geoopt"\nwhat = "w"\nreason = "r"\n', "peer: expected one of"),
    ('[[differences]]\npeer = "pymanopt"\n', "unknown tables"),
])
def test_differences_file_errors_name_the_entry(harness, tmp_path, text, match):
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        harness.load_differences(path)


def test_compare_sorts_every_test_into_one_category(harness):
    theirs = {"a": "passed", "b": "passed", "c": "failed", "d": "failed", "e": "passed",
              "f[1]": "passed", "f[2]": "passed", "g": "skipped", "h": "passed"}
    ours = {"a": "passed", "b": "failed", "c": "failed", "d": "passed", "e": "error",
            "f[1]": "failed", "f[2]": "passed", "g": "xfailed", "i": "passed"}
    c = harness.compare(theirs, ours, ["e", "f[*", "gone"])
    assert c.regressions == ["b"]
    assert c.expected == ["e", "f[1]"]
    assert c.stale == ["f[2]", "gone"]            # listed but passing; listed, never collected
    assert c.both_fail == ["c"] and c.improved == ["d"]
    assert c.only_theirs == ["h"] and c.only_ours == ["i"]
    assert not c.ok
    assert harness.compare({"a": "passed"}, {"a": "xpassed"}, []).ok


def test_counts_by_file(harness):
    counts = harness.counts_by_file({"x.py::A::t1": "passed", "x.py::A::t2": "error",
                                     "y.py::t": "passed"})
    assert counts == {"x.py": {"passed": 1, "error": 1}, "y.py": {"passed": 1}}
    assert harness._fmt_counts(counts["x.py"]) == "1 passed, 1 error"


def test_vendored_geomstats_tests_match_their_checksums():
    root = TOOLS / "peers" / "geomstats-2.8.0"
    listed = {}
    for line in filter(None, (root / "SHA256SUMS").read_text().split("\n")):
        digest, name = line.split(maxsplit=1)
        listed[name] = digest
    on_disk = {str(p.relative_to(root)) for p in (root / "tests").rglob("*.py")}
    assert on_disk == set(listed)
    for name, digest in listed.items():
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name
    assert (root / "LICENSE.md").is_file()
    assert os.path.isfile(TOOLS / "peers" / "pymanopt_conftest.py")
