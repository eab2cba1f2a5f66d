"""Docstring coverage of the public API (tools/doc_coverage.py): every public callable that
takes arguments has a numpydoc ``Parameters`` section, new ones included."""

import importlib.util
import inspect
import os

import pytest

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                    "doc_coverage.py")
if not os.path.isfile(TOOL):                        # tests run outside a source checkout
    pytest.skip("tools/doc_coverage.py not found next to the tests", allow_module_level=True)

def _tool():
    spec = importlib.util.spec_from_file_location("doc_coverage", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_callable_has_a_parameters_section():
    missing = _tool().missing()
    assert missing == [], (
        f"{len(missing)} public callables lack a numpydoc Parameters section; document "
        f"them:\n" + "\n".join(missing))


def test_the_tool_tells_a_documented_from_an_undocumented_function():
    tool = _tool()
    names = tool._callables()
    assert "rfl_fast.federation.tangent_mean" in names        # has a Parameters section
    missing = tool.missing()
    assert "rfl_fast.federation.tangent_mean" not in missing
    assert all(name in names for name in missing)

    def undocumented(x):
        """Only a summary line."""

    def documented(x):
        """Summary.

        Parameters
        ----------
        x : int
            A value.
        """

    assert not tool._SECTION.search(inspect.getdoc(undocumented))
    assert tool._SECTION.search(inspect.getdoc(documented))
    assert tool._takes_arguments(undocumented) and not tool._takes_arguments(lambda: None)


def test_an_override_is_documented_by_its_base_class():
    """Documentation is written once, in the base class: an override without a docstring
    inherits it (``inspect.getdoc``), one whose docstring says only what differs gets the
    base's numpydoc sections after its own text."""
    from rfl_fast.manifolds import Sphere

    class Quiet(Sphere):
        def exp(self, x, u, *, backend=None):
            return super().exp(x, u, backend=backend)

        def log(self, x, y, *, backend=None):
            """What differs."""
            return super().log(x, y, backend=backend)

    tool = _tool()
    assert Quiet.exp.__doc__ is None    # inspect.getdoc misses it too: Quiet has no module path
    assert tool._inherited_doc(Quiet, "exp") == inspect.getdoc(Sphere.exp)
    assert inspect.getdoc(Quiet.log).startswith("What differs.\n\nParameters\n----------\n")
    assert all(tool._SECTION.search(tool._inherited_doc(Quiet, f)) for f in ("exp", "log"))
