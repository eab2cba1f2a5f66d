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
