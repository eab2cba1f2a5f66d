"""The build says what it does (setup.py): the translation units compile in parallel, each
announced with its time; a unit is compiled again only when stale; a build without a working
compiler says so in one line and installs without the core. A stand-in compiler (a script that
writes the object file it is asked for) replaces g++, so this takes seconds."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# tests run outside a source checkout (CI's copy of them) skip, collected (tests/test_tiers.py)
pytestmark = pytest.mark.skipif(not (ROOT / "setup.py").is_file(),
                                reason="setup.py not found next to the tests")

FAKE = textwrap.dedent('''\
    #!{python}
    """A compiler: writes the file after -o; a compile (-c) logs its start and end."""
    import os, sys, time
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    if os.environ.get("FAKE_CXX_FAIL"):
        sys.exit("fake-c++: cannot compile")
    src = next((a for a in args if a.endswith(".cpp")), None)
    log = os.environ["FAKE_CXX_LOG"]
    if src is not None:
        with open(log, "a") as fh:
            fh.write(f"start {{src}} {{time.time()}}\\n")
        time.sleep(0.4)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "wb") as fh:
        fh.write(b"fake")
    if src is not None:
        with open(log, "a") as fh:
            fh.write(f"end {{src}} {{time.time()}}\\n")
''')


@pytest.fixture
def tree(tmp_path):
    """A copy of what setup.py builds from, and a stand-in compiler."""
    src = tmp_path / "tree"
    src.mkdir()
    shutil.copy(ROOT / "setup.py", src / "setup.py")
    # the project table setup.py reads its version from (the real one needs the setuptools of
    # the build's isolated environment, which this environment may not have)
    version = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))
    (src / "pyproject.toml").write_text(f'[project]\nname = "rfl_fast"\n{version}\n'
                                        f'[tool.setuptools]\npackages = []\n')
    for name in ("src", "cpp"):
        shutil.copytree(ROOT / name, src / name)
    fake = tmp_path / "fake-c++"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    return src, fake, tmp_path / "compile.log"


def _build(tree, **env):
    src, fake, log = tree
    env = {**os.environ, "CC": str(fake), "CXX": str(fake), "LDSHARED": f"{fake} -shared",
           "LDCXXSHARED": f"{fake} -shared", "FAKE_CXX_LOG": str(log),
           "RFL_FAST_BUILD_JOBS": "2", **env}
    env.pop("RFL_FAST_REQUIRE_CXX", None)
    return subprocess.run([sys.executable, "setup.py", "-q", "build_ext"], cwd=src, env=env,
                          capture_output=True, text=True, timeout=300)


def _compiled(log):
    return sorted(line.split()[1] for line in log.read_text().splitlines()
                  if line.startswith("end ")) if log.exists() else []


def test_units_compile_in_parallel_each_announced(tree):
    src, _, log = tree
    out = _build(tree)
    assert out.returncode == 0, out.stderr[-3000:]
    units = sorted(f"src/{p.name}" for p in (src / "src").glob("*.cpp"))
    assert _compiled(log) == units
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("rfl_fast: ")]
    assert lines[0].startswith(f"rfl_fast: compiling the C++ core rfl_fast._core: {len(units)} "
                               f"translation units, 2 at a time")
    assert "about 1 minute on 2 cores" in lines[0]
    for unit in units:
        assert f"rfl_fast:   compiling {unit}" in lines, lines
        assert any(ln.startswith(f"rfl_fast:   {unit}: ") for ln in lines), lines
    assert lines[-1].startswith("rfl_fast: C++ core built in ")
    # two units at a time: some compile starts before another one ends
    events = [ln.split() for ln in log.read_text().splitlines()]
    running = peak = 0
    for kind, _, _ in sorted(events, key=lambda e: float(e[2])):
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak == 2, events


def test_a_unit_is_compiled_again_only_when_stale(tree):
    src, _, log = tree
    assert _build(tree).returncode == 0
    log.unlink()
    (src / "src" / "spd.cpp").touch()
    for so in (src / "build").glob("lib*/**/_core*.so"):   # older than a source: build again
        os.utime(so, (0, 0))
    out = _build(tree)
    assert out.returncode == 0
    assert _compiled(log) == ["src/spd.cpp"], out.stderr[-3000:]   # not the others
    log.unlink()
    header = next((src / "cpp" / "include" / "rfl").glob("*.hpp"))
    header.touch()
    for so in (src / "build").glob("lib*/**/_core*.so"):
        os.utime(so, (0, 0))
    assert _build(tree).returncode == 0
    units = len(list((src / "src").glob("*.cpp")))
    assert len(_compiled(log)) == units                 # a header: every unit
    log.unlink()
    for so in (src / "build").glob("lib*/**/_core*.so"):
        os.utime(so, (0, 0))
    assert _build(tree, RFL_FAST_BASELINE="1").returncode == 0
    assert len(_compiled(log)) == units                 # other flags: every unit


def test_a_build_without_a_compiler_says_so_in_one_line(tree):
    src, _, _ = tree
    out = _build(tree, FAKE_CXX_FAIL="1")
    assert out.returncode == 0, out.stderr[-3000:]
    warnings = [ln for ln in out.stderr.splitlines() if "WARNING" in ln]
    assert len(warnings) == 1, out.stderr[-3000:]
    assert warnings[0].startswith("WARNING: rfl_fast: C++ core not built (")
    assert warnings[0].endswith("installing without it, on the Numba and NumPy kernels "
                                "(`rfl-fast info` says how to add it)")
    note = next(src.glob("build/**/rfl_fast/_core_not_built.txt"), None) or \
        next(src.glob("**/_core_not_built.txt"))
    assert note.read_text().strip()
