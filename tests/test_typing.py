"""The wheel ships ``py.typed`` and the public API's hints reach a user's type checker: mypy
on ``tests/typing/public_api.py`` sees ndarrays and floats (not ``Any``) from the manifolds,
linalg, problems, ``federation.run``, privacy and the backend choice, and flags wrong
arguments."""

import os
import re
import subprocess
import sys

import pytest

import rfl_fast

HERE = os.path.dirname(os.path.abspath(__file__))


def test_package_is_marked_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(rfl_fast.__file__), "py.typed"))


@pytest.mark.full
def test_mypy_sees_real_types(tmp_path):
    pytest.importorskip("mypy", reason="mypy not installed (pip install mypy)")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(rfl_fast.__file__)))
    env = dict(os.environ)
    if os.path.basename(package_root) not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = package_root              # a source tree (mypy refuses site-packages)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), os.path.join(HERE, "typing", "public_api.py")],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    revealed = [t.replace("builtins.", "") for t in re.findall(r'Revealed type is "(.+)"', out)]
    assert len(revealed) == 12, out
    array = "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.floating[Any]]]"
    assert revealed[0] == revealed[1] == revealed[3] == array, out
    assert "numpy.floating[Any]" in revealed[2] and "numpy.ndarray" in revealed[2], out
    assert revealed[4] == "str", out
    assert re.search(r'public_api.py:\d+: error: Argument "method" to "retr" of "Stiefel" has '
                     r'incompatible type "int"', out), out
    # problems, federation.run, privacy and the backend choice
    run_x, f_value, rgrad, factors, sigma, chosen, threads = revealed[5:]
    assert run_x == rgrad == factors == array, out
    assert f_value == sigma == "float", out
    assert chosen == "str" and threads == "int", out
    assert re.search(r'public_api.py:\d+: error: Argument "local_steps" to "dp_rsgd_sigma" has '
                     r'incompatible type "str"; expected "int"', out), out
