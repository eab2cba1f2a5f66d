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
