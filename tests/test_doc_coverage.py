"""Docstring coverage of the public API (tools/doc_coverage.py) does not get worse: new public
functions come with a numpydoc ``Parameters`` section. Lower MISSING_AT_MOST as sections are
added."""

import importlib.util
import os

import pytest

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools",
                    "doc_coverage.py")
if not os.path.isfile(TOOL):                        # tests run outside a source checkout
    pytest.skip("tools/doc_coverage.py not found next to the tests", allow_module_level=True)

#: Public callables with arguments but no Parameters section when this test was written.
MISSING_AT_MOST = 40


def _tool():
    spec = importlib.util.spec_from_file_location("doc_coverage", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_public_callables_without_parameters_section_do_not_grow():
    missing = _tool().missing()
    assert len(missing) <= MISSING_AT_MOST, (
        f"{len(missing)} public callables lack a numpydoc Parameters section (at most "
        f"{MISSING_AT_MOST}); document the new ones:\n" + "\n".join(missing))


def test_the_tool_sees_a_documented_and_an_undocumented_function():
    tool = _tool()
    names = tool._callables()
    assert "rfl_fast.federation.tangent_mean" in names        # has a Parameters section
    missing = tool.missing()
    assert "rfl_fast.federation.tangent_mean" not in missing
    assert all(name in names for name in missing)
