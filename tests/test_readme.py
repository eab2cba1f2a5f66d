"""The README's ```python blocks run, in order, as one session (later blocks may use names
earlier ones defined, as a reader would). Shell, console, TOML and other blocks are not run."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
if not README.is_file():                            # tests run outside a source checkout
    pytest.skip("README.md not found next to the tests", allow_module_level=True)

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def python_blocks(text):
    """``[(line, source)]`` of the ```python fenced blocks of a Markdown text."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in FENCE.finditer(text) if m.group(1).lower() in ("python", "py")]


def test_python_block_extraction_skips_other_languages():
    text = "a\n```bash\nexit 1\n```\n```python\nx = 1\n```\n```console\n$ y\n```\n"
    assert python_blocks(text) == [(6, "x = 1\n")]


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no ```python block"
    monkeypatch.chdir(tmp_path)                     # files the blocks write land here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    session = {"__name__": "__readme__"}
    for line, source in blocks:
        code = compile(source, f"{README}:{line}", "exec")
        try:
            exec(code, session)
        except Exception as exc:
            raise AssertionError(f"README.md block at line {line} failed: {exc!r}") from exc
    assert os.listdir(tmp_path)                     # the quick start wrote its CSVs and plots
