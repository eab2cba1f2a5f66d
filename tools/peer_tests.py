"""Run the peers' own test suites against rfl_fast's adapters (not part of the default suite).

    python tools/peer_tests.py [--peer pymanopt|geomstats] [--work DIR] [-n N] [--json FILE]

The strongest check of an adapter is the peer's own test suite. For each peer this script

1. downloads the pinned source release from PyPI (``pip download --no-binary :all: --no-deps
   pymanopt==2.2.1 geomstats==2.8.0``; kept in ``WORK/dist`` and checked against the SHA-256
   recorded here) and installs it, with ``autograd`` (pymanopt's tests differentiate with it),
   into ``WORK/site`` (``pip install --no-deps --target``), which goes first on ``PYTHONPATH``:
   the pinned versions run whatever this environment has installed. The environment needs
   rfl_fast with the ``test`` extra (pytest, pytest-xdist and the peers' dependencies);
2. takes the tests: pymanopt's sdist ships them (``tests/manifolds/`` and ``tests/optimizers/``
   are run); geomstats' sdist does not, so the test and data modules of the SPD, hypersphere,
   hyperboloid, Stiefel and Grassmannian spaces are vendored from the release's commit in
   ``tools/peers/geomstats-2.8.0/`` (its README says how; checked against ``SHA256SUMS``);
3. runs them twice with pytest, with a conftest written next to them
   (``tools/peers/<peer>_conftest.py``): with the peer's own classes (``PEER_MODE=theirs``, the
   baseline) and with the peer's classes replaced by rfl_fast's adapters (``PEER_MODE=ours``);
   ``tools/peers/peer_record.py`` records every test's outcome;
4. compares the two runs test by test against ``tools/peers/differences.toml`` and prints the
   counts per file, the intended differences and every unexpected one.

Exit status 0 when every test that passes with the peer's classes passes with the adapters
too, except the listed differences, which must still fail (a listed difference that passes is
stale); 1 otherwise; 2 when a peer could not be fetched or installed.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: the cli/test extras install tomli there
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"

#: name -> (pinned version, SHA-256 of the sdist on PyPI)
PINS = {
    "pymanopt": ("2.2.1", "c784929a436eb06d73371b53ae5db3cdc19c5e60280f8131553bc805cbf7a1da"),
    "geomstats": ("2.8.0", "d34df1ed96354859f694dfea2f58080d34f6e82bb0a5e49061d49ec213ef48a0"),
}
#: installed beside the peers: what pymanopt's tests import (pymanopt.tools.testing)
TEST_REQUIREMENTS = ["autograd==1.9.1"]
#: the test paths run, relative to the peer's test folder's parent
TEST_PATHS = {
    "pymanopt": ["tests/manifolds", "tests/optimizers"],
    "geomstats": [f"tests/tests_geomstats/test_geometry/test_{name}.py"
                  for name in ("spd_matrices", "hypersphere", "hyperboloid", "stiefel",
                               "grassmannian")],
}
PYTEST_INI = {
    "pymanopt": "[pytest]\n",                      # pymanopt 2.2.1 has no pytest settings
    "geomstats": "[pytest]\nmarkers =\n" + "".join(  # geomstats' pyproject.toml markers
        f"    {m}\n" for m in ("smoke", "random", "validation", "ignore", "vec", "shape", "type",
                              "mathprop", "slow", "redundant")),
}
OK = frozenset({"passed", "skipped", "xfailed", "xpassed"})


# ---------------------------------------------------------------------------- comparison


@dataclass
class Comparison:
    """Test ids by how the two runs went (``theirs``: the peer's classes, ``ours``: the
    adapters)."""

    regressions: list = field(default_factory=list)     # ok theirs, failing ours, not listed
    expected: list = field(default_factory=list)        # listed, ok theirs, failing ours
    stale: list = field(default_factory=list)           # listed, but ok ours (or not failing)
    both_fail: list = field(default_factory=list)       # failing with the peer's classes too
    improved: list = field(default_factory=list)        # failing theirs, ok ours
    only_theirs: list = field(default_factory=list)     # collected in one run only
    only_ours: list = field(default_factory=list)

    @property
    def ok(self):
        return not (self.regressions or self.stale or self.only_theirs)


def load_differences(path):
    """``(differences, behaviours)`` of a differences file, each entry checked."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    unknown = set(data) - {"difference", "behaviour"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}; expected [[difference]] "
                         f"and [[behaviour]]")
    required = {"difference": ("peer", "test", "reason"), "behaviour": ("peer", "what", "reason")}
    for table, fields in required.items():
        for i, entry in enumerate(data.get(table, [])):
            missing = [k for k in fields if not str(entry.get(k, "")).strip()]
            extra = set(entry) - set(fields)
            if missing or extra:
                raise ValueError(f"{path}: {table}[{i}] needs non-empty {list(fields)} and no "
                                 f"other keys; missing {missing}, unknown {sorted(extra)}")
            if entry["peer"] not in PINS:
                raise ValueError(f"{path}: {table}[{i}].peer: expected one of {list(PINS)}, "
                                 f"got {entry['peer']!r}")
    return data.get("difference", []), data.get("behaviour", [])


def _listed(test_id, patterns):
    return any(test_id == p or (p.endswith("*") and test_id.startswith(p[:-1]))
               for p in patterns)


def compare(theirs, ours, listed):
    """Compare ``{test id: outcome}`` of the two runs; ``listed``: the differences' test
    patterns (exact ids, or prefixes ending in ``*``)."""
    c = Comparison()
    for test_id in sorted(set(theirs) | set(ours)):
        if test_id not in ours:
            c.only_theirs.append(test_id)
            continue
        if test_id not in theirs:
            c.only_ours.append(test_id)
            continue
        ok_theirs, ok_ours = theirs[test_id] in OK, ours[test_id] in OK
        is_listed = _listed(test_id, listed)
        if is_listed:
            (c.expected if ok_theirs and not ok_ours else c.stale).append(test_id)
        elif ok_theirs and not ok_ours:
            c.regressions.append(test_id)
        elif not ok_theirs and not ok_ours:
            c.both_fail.append(test_id)
        elif not ok_theirs and ok_ours:
            c.improved.append(test_id)
    for pattern in listed:          # a listed test no run collected is stale too
        if not any(_listed(t, [pattern]) for t in set(theirs) | set(ours)):
            c.stale.append(pattern)
    return c


def counts_by_file(outcomes):
    """``{file: {outcome: count}}`` of ``{test id: outcome}``."""
    table = {}
    for test_id, outcome in outcomes.items():
        row = table.setdefault(test_id.split("::")[0], {})
        row[outcome] = row.get(outcome, 0) + 1
    return table


def _fmt_counts(row):
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    return ", ".join(f"{row[k]} {k}" for k in order if row.get(k)) or "none"


# ---------------------------------------------------------------------------- fetching


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def fetch(peer, dist):
    """The pinned sdist of ``peer`` in ``dist`` (downloaded once), its hash checked."""
    version, digest = PINS[peer]
    path = dist / f"{peer}-{version}.tar.gz"
    if not path.exists():
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
              "--no-deps", f"{peer}=={version}", "-d", str(dist)])
    if _sha256(path) != digest:
        raise RuntimeError(f"{path}: SHA-256 {_sha256(path)} is not the pinned {digest}")
    return path


def install(sdists, site):
    """The sdists and the test requirements installed into ``site`` (no dependencies)."""
    if site.exists():
        shutil.rmtree(site)
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
          *map(str, sdists), *TEST_REQUIREMENTS])


def _check_vendored(root):
    sums = (root / "SHA256SUMS").read_text().split("\n")
    for line in filter(None, sums):
        digest, name = line.split(maxsplit=1)
        if _sha256(root / name) != digest:
            raise RuntimeError(f"{root / name}: differs from SHA256SUMS (the vendored copy of "
                               f"geomstats' tests was edited)")


def prepare(peer, sdist, work):
    """The peer's test folder in ``work/peer`` with the harness's conftest and pytest.ini."""
    target = work / peer
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if peer == "pymanopt":
        with tarfile.open(sdist) as tar:
            top = tar.getnames()[0].split("/")[0]
            members = [m for m in tar.getmembers()
                       if m.name.startswith(f"{top}/tests/") and m.isfile()]
            if not members:
                raise RuntimeError(f"{sdist}: the sdist has no tests/ folder")
            for m in members:
                m.name = m.name[len(top) + 1:]
                tar.extract(m, target, filter="data") if hasattr(tarfile, "data_filter") \
                    else tar.extract(m, target)
    else:
        vendored = PEERS_DIR / f"geomstats-{PINS['geomstats'][0]}"
        _check_vendored(vendored)
        shutil.copytree(vendored / "tests", target / "tests")
    shutil.copy(PEERS_DIR / f"{peer}_conftest.py", target / "tests" / "conftest.py")
    (target / "pytest.ini").write_text(PYTEST_INI[peer])
    return target


def run_suite(peer, folder, site, mode, jobs):
    """``({test id: outcome}, [ids of the tests that ran on rfl_fast's classes])`` of one
    pytest run of ``peer``'s tests in ``mode``."""
    record = folder / f"outcomes-{mode}.json"
    record.unlink(missing_ok=True)
    env = dict(os.environ, PEER_MODE=mode, PEER_TESTS_RECORD=str(record),
               PYTHONPATH=os.pathsep.join([str(site), str(PEERS_DIR)]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("RFL_FAST_VALIDATE", None)
    cmd = [sys.executable, "-m", "pytest", *TEST_PATHS[peer], "-q", "-p", "no:cacheprovider",
           "-p", "peer_record", "-c", "pytest.ini", "--rootdir", str(folder), "-o",
           "console_output_style=classic", "--tb=line"]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    start = time.monotonic()
    print(f"\n=== {peer}, {mode} classes", flush=True)
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    print(f"    pytest exit {proc.returncode} in {time.monotonic() - start:.0f} s: "
          f"{' '.join(tail)}", flush=True)
    if not record.exists():
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
        raise RuntimeError(f"{peer} ({mode}): pytest wrote no outcomes (exit {proc.returncode})")
    data = json.loads(record.read_text())
    return data["outcomes"], data["rfl_fast"]


# ---------------------------------------------------------------------------- report


def report(peer, theirs, ours, on_ours, comparison, differences):
    print(f"\n--- {peer} {PINS[peer][0]}: per file, with the peer's classes (theirs), with "
          f"rfl_fast's (ours), and the tests of the second run that used rfl_fast's classes")
    t_counts, o_counts = counts_by_file(theirs), counts_by_file(ours)
    r_counts = counts_by_file({t: ours[t] for t in on_ours if t in ours})
    for name in sorted(set(t_counts) | set(o_counts)):
        print(f"  {name}\n      theirs: {_fmt_counts(t_counts.get(name, {}))}\n"
              f"      ours:   {_fmt_counts(o_counts.get(name, {}))}\n"
              f"        on rfl_fast's classes: {_fmt_counts(r_counts.get(name, {}))}")
    total = {}
    for row in r_counts.values():
        for k, v in row.items():
            total[k] = total.get(k, 0) + v
    print(f"  all tests on rfl_fast's classes: {_fmt_counts(total)}")
    reasons = {d["test"]: d["reason"] for d in differences}
    sections = [
        ("intended differences (listed, failing as expected)", comparison.expected),
        ("REGRESSIONS (pass with the peer's classes, fail with ours)", comparison.regressions),
        ("STALE differences (listed, but pass or were not collected)", comparison.stale),
        ("COLLECTED WITH THE PEER'S CLASSES ONLY", comparison.only_theirs),
        ("collected with ours only", comparison.only_ours),
        ("failing with the peer's classes too", comparison.both_fail),
        ("failing with the peer's classes, passing with ours", comparison.improved),
    ]
    for title, ids in sections:
        if ids:
            print(f"  {title}: {len(ids)}")
            for test_id in ids:
                reason = next((r for p, r in reasons.items() if _listed(test_id, [p])), "")
                print(f"    {test_id}" + (f"\n        {reason.split(chr(10))[0]}" if reason
                                           else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", action="append", choices=sorted(PINS),
                        help="run only this peer (repeatable; default: both)")
    parser.add_argument("--work", type=Path, default=None,
                        help="working folder (kept; default: a temporary one, removed)")
    parser.add_argument("-n", "--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="pytest-xdist processes per run (default: cores, at most 4)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every test's outcome in both runs and the comparison here")
    args = parser.parse_args(argv)
    peers = args.peer or sorted(PINS)
    differences, behaviours = load_differences(PEERS_DIR / "differences.toml")
    start = time.monotonic()
    work = args.work or Path(tempfile.mkdtemp(prefix="rfl_fast_peers_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        try:
            dist = work / "dist"
            dist.mkdir(exist_ok=True)
            sdists = {peer: fetch(peer, dist) for peer in sorted(PINS)}
            install(sdists.values(), work / "site")
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            print(f"peer_tests: could not fetch or install the peers: {exc}", file=sys.stderr)
            return 2
        results, ok = {}, True
        for peer in peers:
            folder = prepare(peer, sdists[peer], work)
            theirs, _ = run_suite(peer, folder, work / "site", "theirs", args.jobs)
            ours, on_ours = run_suite(peer, folder, work / "site", "ours", args.jobs)
            listed = [d["test"] for d in differences if d["peer"] == peer]
            comparison = compare(theirs, ours, listed)
            report(peer, theirs, ours, on_ours, comparison,
                   [d for d in differences if d["peer"] == peer])
            ok &= comparison.ok and bool(theirs) and bool(on_ours)
            results[peer] = {"theirs": theirs, "ours": ours, "on_rfl_fast": on_ours,
                             "comparison": comparison.__dict__}
        print("\nbehaviour that differs and no peer test sees (tools/peers/differences.toml):")
        for b in behaviours:
            if b["peer"] in peers:
                print(f"  {b['peer']}: {b['what']}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
        print(f"\npeer_tests: {'OK' if ok else 'FAILED'} in {time.monotonic() - start:.0f} s")
        return 0 if ok else 1
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
