"""Sphinx configuration of the rfl_fast documentation (``sphinx-build -W -b html docs out``).

The API pages are written here from each public module's ``__all__`` (``api/<module>.rst``,
not committed), so the reference follows the code. No network access: intersphinx is off.
"""

import importlib
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tools"))

import rfl_fast  # noqa: E402  (the installed package, or the checkout's with the extension built)
from doc_coverage import PUBLIC_MODULES  # noqa: E402  (the public modules, in reading order)

project = "rfl_fast"
author = "The rfl_fast developers"
copyright = "the rfl_fast developers, BSD-3-Clause"
release = version = rfl_fast.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
templates_path = ["_templates"]             # classes: every documented member in full
suppress_warnings = ["myst.header"]                  # README sections start at level 2

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"                           # numpydoc's Parameters carry the types
numpydoc_show_class_members = False
numpydoc_validation_checks = set()                   # coverage is tools/doc_coverage.py's job
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"rfl_fast {release}"



#: Subpackages listed in ``rfl_fast.__all__`` that have their own page, and the manifold
#: classes it re-exports (documented under ``rfl_fast.manifolds``).
_OWN_PAGE = {n.rsplit(".", 1)[1] for n in PUBLIC_MODULES if "." in n} | {"kernels", "flower"}
_MANIFOLDS = set(importlib.import_module("rfl_fast.manifolds").__all__)


def _home(name, member):
    """Whether ``member`` of public module ``name`` is documented elsewhere: a re-export from
    another public module (not the root) that defines it and lists it."""
    where = getattr(getattr(importlib.import_module(name), member), "__module__", None) or ""
    for other in PUBLIC_MODULES:
        defined_there = where == other or where.startswith(other + ".")
        if other not in (name, "rfl_fast") and defined_there \
                and member in importlib.import_module(other).__all__:
            return True
    return False


def _write_api_pages():
    out = HERE / "api"
    out.mkdir(exist_ok=True)
    for name, title in PUBLIC_MODULES.items():
        module = importlib.import_module(name)
        members = [m for m in module.__all__ if not m.startswith("__")
                   and not (name == "rfl_fast" and m in _OWN_PAGE | _MANIFOLDS)
                   and not (name != "rfl_fast" and _home(name, m))]
        heading = f"``{name}``: {title}"
        lines = [heading, "=" * len(heading), "", f".. automodule:: {name}", "   :no-members:",
                 "", f".. currentmodule:: {name}", "", ".. autosummary::",
                 "   :toctree: generated", "   :nosignatures:", ""]
        lines += [f"   {m}" for m in members]
        text = "\n".join(lines) + "\n"
        page = out / f"{name}.rst"
        if not page.exists() or page.read_text() != text:   # keep mtimes for incremental builds
            page.write_text(text)


def _skip_foreign(app, what, name, obj, skip, options):
    """Leave out members a base class from another library adds (scikit-learn's generated
    ``set_*_request`` methods): they are documented there."""
    if (getattr(obj, "__module__", None) or "").startswith("sklearn"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)


_write_api_pages()
os.environ.setdefault("MPLBACKEND", "Agg")
