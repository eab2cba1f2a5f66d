"""Sphinx configuration of the rfl_fast documentation (``sphinx-build -W -b html docs out``).

The API pages are written here from each public module's ``__all__`` (``api/<module>.rst``,
not committed), so the reference follows the code. The scripts of ``examples/`` run at build
time (sphinx-gallery, their small settings: ``RFL_FAST_EXAMPLE_SMALL=1``) and their pages show
their output and figures (``auto_examples/``, not committed). Math is rendered by MathJax,
shipped with the pages (sphinx-mathjax-offline). No network access: intersphinx is off.
"""

import importlib
import os
import sys
import tempfile
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
    "sphinx-mathjax-offline",            # MathJax in _static: the pages render math offline
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "sg_execution_times.rst"]
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
html_static_path = ["_static"]
html_css_files = ["custom.css"]                      # code lines scroll, never wrap
html_theme_options = {"page_width": "1180px", "sidebar_width": "250px",
                      "description": "Riemannian federated learning with a compiled core"}

#: The examples run at build time, in their small form, writing their files to a temporary
#: folder (not next to the scripts); each page shows the printed output and the figures.
_EXAMPLE_OUT = tempfile.mkdtemp(prefix="rfl_fast_docs_examples_")
os.environ["RFL_FAST_EXAMPLE_SMALL"] = "1"
os.environ["RFL_FAST_EXAMPLE_OUT"] = _EXAMPLE_OUT
sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",                  # run every script
    "ignore_pattern": r"(setup|__init__)\.py$",       # cpp_extension's build script
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "write_computation_times": False,
    "show_signature": False,
}

#: Modules documented with their own API page besides PUBLIC_MODULES (those the docstring
#: coverage covers): the Flower deployment and the adapters for pymanopt and geomstats.
_EXTRA_API = {
    "rfl_fast.flower": "Flower deployment (server and client apps, wire format)",
    "rfl_fast.interop.pymanopt": "rfl_fast manifolds as pymanopt manifolds",
    "rfl_fast.interop.geomstats": "rfl_fast maps behind geomstats metrics",
}



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
    for name, title in {**PUBLIC_MODULES, **_EXTRA_API}.items():
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


def _foreign_docstring(app, what, name, obj, options, lines):
    """A method of ours without a docstring of its own inherits one: from rfl_fast's base class
    (kept: documentation is written once there), or from the peer library an adapter
    subclasses (pymanopt's Google style, geomstats' own pages): replaced by a pointer."""
    if what != "method" or getattr(obj, "__doc__", "") is not None:
        return
    owner_name, _, attr = name.rpartition(".")
    owner = importlib.import_module(owner_name.rpartition(".")[0]) if "." in owner_name else None
    cls = getattr(owner, owner_name.rpartition(".")[2], None)
    for base in getattr(cls, "__mro__", ())[1:]:
        member = base.__dict__.get(attr)
        if getattr(member, "__doc__", None):
            where = base.__module__ or ""
            if not where.startswith("rfl_fast"):
                lines[:] = [f"As ``{where}.{base.__qualname__}.{attr}``."]
            return


def _skip_foreign(app, what, name, obj, skip, options):
    """Leave out members a base class from another library adds (scikit-learn's generated
    ``set_*_request`` methods): they are documented there."""
    if (getattr(obj, "__module__", None) or "").startswith("sklearn"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)
    app.connect("autodoc-process-docstring", _foreign_docstring)


_write_api_pages()
os.environ.setdefault("MPLBACKEND", "Agg")
