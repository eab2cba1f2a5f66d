"""What an install gives a user: files with the user's umask, a package that works without its
C++ extension (and says so), and a message when Numba compiles a kernel family."""

import os
import subprocess
import sys

import pytest
from subprocess_env import same_package

import rfl_fast as rf
from rfl_fast._files import atomic_write
from rfl_fast.app.cli import main

# ----------------------------------------------------------------------------- umask


@pytest.fixture
def umask():
    """``umask(mask)`` sets the process's umask for the test; the old one comes back after."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def _mode(path):
    return os.stat(path).st_mode & 0o777


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_atomic_write_gives_the_mode_of_a_plain_new_file(tmp_path, umask, mask):
    umask(mask)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    path = atomic_write(tmp_path / "atomic.txt", lambda tmp: open(tmp, "w").close())
    assert _mode(path) == _mode(plain) == 0o666 & ~mask


def test_every_file_of_a_run_follows_the_umask(tmp_path, umask):
    pytest.importorskip("matplotlib")
    config = tmp_path / "exp.toml"
    config.write_text('rounds = 3\nseed = 0\nplots = ["grad_norm"]\n[problem]\ntype = "KPCA"\n'
                      'r = 2\n[data]\nsource = "wine"\n[partition]\nmethod = "equal"\n'
                      'n_clients = 3\n[[algorithm]]\nname = "RFedAvg"\nstep = 0.02\n'
                      'local_steps = 2\n')
    umask(0o027)
    out = tmp_path / "res"
    assert main(["run", str(config), "--out", str(out), "-q"]) == 0
    files = [os.path.join(d, f) for d, _, names in os.walk(out) for f in names]
    assert any(f.endswith(".png") for f in files) and any(f.endswith(".csv") for f in files)
    assert {os.path.relpath(f, out): _mode(f) for f in files} == {
        os.path.relpath(f, out): 0o640 for f in files}


# ----------------------------------------------------------------------------- no C++

WITHOUT_CORE = """
import sys
sys.modules["rfl_fast._core"] = None   # import rfl_fast._core now fails, as when it is not built
import numpy as np
import rfl_fast as rf
from rfl_fast import kernels
from rfl_fast.kernels import KERNELS

assert not kernels.is_available("cpp") and "cpp" not in rf.available_backends()
from test_install import auto_choices
chosen = auto_choices()
print("auto chose:", sorted(chosen))
assert "cpp" not in chosen
assert kernels.fast_lane("stiefel_retr_polar", "auto", (784, 5)) is None
S = rf.Sphere(3)                        # a manifold op under auto: Numba or NumPy
x = S.random_point(4, rng=0)
v = S.proj(x, np.ones((4, 3)))
assert np.allclose(S.log(x, S.exp(x, 0.1 * v)), 0.1 * v)
from rfl_fast.app.cli import main
sys.exit(main(["info"]))
"""


def auto_choices():
    """The backends auto chooses for every kernel at a few shapes of its first argument."""
    import numpy as np

    from rfl_fast import kernels
    from rfl_fast.kernels.testing import kernel_inputs

    rng = np.random.default_rng(0)
    chosen = set()
    for k in kernels.KERNELS:
        sizes = ([(9, 1), (50, 5), (784, 8)] if k.startswith(("stiefel", "polar"))
                 else [(3, None), (9, None), (40, None)])
        for n_items in (1, 200):
            for n, p in sizes:
                shape = kernel_inputs(k, rng, n_items, n, p)[0].shape
                chosen.add(kernels.resolve(k, "auto", shape)[0])
    return chosen


def test_without_the_extension_auto_never_picks_cpp_and_info_says_why():
    if "cpp" in rf.available_backends():  # the same shapes do take C++ when it is there
        assert "cpp" in auto_choices()
    env = same_package()
    tests = os.path.dirname(os.path.abspath(__file__))
    env["env"]["PYTHONPATH"] = os.pathsep.join([env["env"]["PYTHONPATH"], tests])
    proc = subprocess.run([sys.executable, "-c", WITHOUT_CORE], capture_output=True, text=True,
                          timeout=300, **env)
    assert proc.returncode == 0, proc.stderr
    assert "C++ backend not built: the extension rfl_fast._core is missing" in proc.stdout
    assert "cpp    unavailable" in proc.stdout


def test_info_gives_the_reason_the_build_left(tmp_path, monkeypatch):
    note = tmp_path / "_core_not_built.txt"
    note.write_text("CompileError: command '/bin/false' failed with exit code 1\n")
    monkeypatch.setattr(rf, "_CORE_NOTE", str(note))
    text = rf._cpp_missing_note()
    assert "build failed at install time (CompileError: command '/bin/false' failed" in text
    assert "RFL_FAST_REQUIRE_CXX=1" in text


# ----------------------------------------------------------------------------- Numba

FIRST_USE = """
import numpy as np
from rfl_fast import kernels
x = np.zeros((2, 3)); x[:, 0] = 1.0
u = np.zeros((2, 3)); u[:, 1] = 0.5
kernels.call("sphere_exp", x, u, backend="numba")
kernels.call("sphere_exp", x, u, backend="numba")
"""


def test_numba_says_once_that_it_compiles_and_where_the_cache_goes(tmp_path):
    pytest.importorskip("numba")
    cache = str(tmp_path / "numba-cache")
    run = dict(capture_output=True, text=True, timeout=300,
               **same_package(NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS="1"))
    first = subprocess.run([sys.executable, "-c", FIRST_USE], **run)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("compiling the Numba kernels of 'sphere' on first use") == 1
    assert f"Numba cache: {cache}" in first.stderr and "(NUMBA_CACHE_DIR)" in first.stderr
    second = subprocess.run([sys.executable, "-c", FIRST_USE], **run)   # loads from the cache
    assert second.returncode == 0 and "compiling" not in second.stderr, second.stderr


def test_numba_cache_note_says_when_the_package_folder_was_not_writable(monkeypatch):
    _runtime = pytest.importorskip("rfl_fast.kernels._numba._runtime")

    class Driver:  # Numba's cache object as far as the note reads it
        class _cache:
            _cache_path = "/home/user/.cache/numba/rfl_fast/kernels/_numba"

    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    note = _runtime.cache_note(Driver)
    assert note.startswith("Numba cache: /home/user/.cache/numba/")
    assert "is not writable; set NUMBA_CACHE_DIR" in note
