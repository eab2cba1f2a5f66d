"""Importing an interop adapter without its library says what to install."""

import importlib
import sys

import pytest


@pytest.mark.parametrize("adapter, library", [("pymanopt", "pymanopt.manifolds.manifold"),
                                              ("geomstats", "geomstats.backend")])
def test_adapter_without_its_library_names_what_to_install(monkeypatch, adapter, library):
    monkeypatch.setitem(sys.modules, library, None)  # makes `import library` raise ImportError
    monkeypatch.delitem(sys.modules, f"rfl_fast.interop.{adapter}", raising=False)
    with pytest.raises(ImportError, match=rf"rfl_fast.interop.{adapter} needs {adapter}.*"
                                          r"pip install 'rfl_fast\[interop\]'"):
        importlib.import_module(f"rfl_fast.interop.{adapter}")


def test_interop_package_imports_without_either_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymanopt", None)
    monkeypatch.setitem(sys.modules, "geomstats", None)
    monkeypatch.delitem(sys.modules, "rfl_fast.interop", raising=False)
    assert importlib.import_module("rfl_fast.interop").__doc__
