"""The Python code blocks of the hand-written doc pages (install, interop) run as written."""

import re
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
if not DOCS.is_dir():                               # tests run outside a source checkout
    pytest.skip("docs/ not found next to the tests", allow_module_level=True)

BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:(?:   .*)?\n)+)", re.M)


def _snippets():
    for page in ("install.rst", "interop.rst"):
        for i, m in enumerate(BLOCK.finditer((DOCS / page).read_text())):
            yield pytest.param(textwrap.dedent(m.group(1)), id=f"{page}-{i}")


@pytest.mark.parametrize("code", list(_snippets()))
def test_snippet_runs(code):
    if "pymanopt" in code:
        pytest.importorskip("pymanopt")
    if "geomstats" in code:
        pytest.importorskip("rfl_fast.interop.geomstats")
    exec(compile(code, "<docs>", "exec"), {})


def test_the_docs_building_page_gives_the_command_ci_runs():
    """docs/building_docs.rst shows the build as .ci/docs runs it (warnings as errors, keep
    going), the extra it needs, and the index links it."""
    page = (DOCS / "building_docs.rst").read_text()
    assert 'pip install ".[docs]"' in page
    command = "python -m sphinx -W --keep-going -b html"
    assert f"{command} docs build/docs-html" in page
    ci = DOCS.parent / ".ci" / "docs"
    if ci.is_file():
        assert f'{command} "$ROOT/docs"' in ci.read_text()
    assert "building_docs" in (DOCS / "index.rst").read_text()


def test_code_blocks_keep_their_lines():
    """A code line wider than the page scrolls: wrapping it put the tail of a trailing comment
    in column 0, under the code."""
    css = (DOCS / "_static" / "custom.css").read_text()
    rule = re.search(r"div\.highlight pre[^{]*\{([^}]*)\}", css).group(1)
    assert re.search(r"white-space:\s*pre;", rule) and "overflow-x: auto" in rule, rule
    assert "pre-wrap" not in css and "anywhere" not in css
