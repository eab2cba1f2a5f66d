"""``python -m pytest`` from a checkout tests the installed package, as ``pytest`` does, or
stops at once naming the fix (tests/conftest.py)."""

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import conftest


def _fake_checkout(tmp_path):
    (tmp_path / "rfl_fast").mkdir()
    (tmp_path / "rfl_fast" / "__init__.py").write_text("raise ImportError('the source tree')\n")
    return tmp_path


def test_python_m_pytest_in_a_checkout_imports_the_installed_package(tmp_path):
    root = _fake_checkout(tmp_path)
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(Path(conftest.__file__).read_text())
    (root / "tests" / "test_which.py").write_text(
        "import rfl_fast\n\ndef test_which():\n"
        f"    assert not rfl_fast.__file__.startswith({str(root)!r})\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p",
                           "no:cacheprovider", "-p", "no:xdist", "-o", "addopts="],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_an_uninstalled_checkout_without_its_core_stops_with_the_fix(tmp_path, monkeypatch):
    root = _fake_checkout(tmp_path)
    monkeypatch.setattr(sys, "path", [str(root)] + sys.path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(pytest.exit.Exception, match=r"pip install .*\[test\]"):
        conftest._import_the_installed_package(root)


def test_a_checkout_with_its_core_built_in_place_is_tested_as_it_is(tmp_path, monkeypatch):
    root = _fake_checkout(tmp_path)
    (root / "rfl_fast" / "_core.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    path = [str(root)] + sys.path
    monkeypatch.setattr(sys, "path", path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    conftest._import_the_installed_package(root)
    assert sys.path == path


def test_an_installed_package_elsewhere_is_preferred(tmp_path, monkeypatch):
    root = _fake_checkout(tmp_path)
    elsewhere = types.SimpleNamespace(origin="/site-packages/rfl_fast/__init__.py")
    monkeypatch.setattr(sys, "path", ["", str(root), "/site-packages"])
    monkeypatch.chdir(root)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: elsewhere)
    conftest._import_the_installed_package(root)
    assert sys.path == ["/site-packages"]
