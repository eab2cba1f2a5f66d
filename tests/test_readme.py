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


def _run_blocks(blocks):
    session = {"__name__": "__readme__"}
    for line, source in blocks:
        code = compile(source, f"{README}:{line}", "exec")
        try:
            exec(code, session)
        except Exception as exc:
            raise AssertionError(f"README.md block at line {line} failed: {exc!r}") from exc


@pytest.mark.full
def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no ```python block"
    monkeypatch.chdir(tmp_path)                     # files the blocks write land here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _run_blocks(blocks)
    assert os.listdir(tmp_path)                     # the quick start wrote its CSVs and plots


def _first_part():
    text = README.read_text(encoding="utf-8")
    return text[:text.index("\n## ", text.index("\n## Concepts") + 1)]


def test_readme_first_screen_is_the_commands_what_and_a_short_example():
    """What a newcomer sees first: the two commands with their times, what the package is,
    then an example of at most 10 lines; the concepts after (issue 40)."""
    top = _first_part()
    blocks = FENCE.findall(top)
    assert [lang for lang, _ in blocks[:2]] == ["bash", "python"], blocks[:2]
    commands = blocks[0][1].splitlines()
    assert [c.split("#")[0].strip() for c in commands] == [
        'pip install ".[cli]" && rfl-fast demo', 'pip install ".[test]" && pytest']
    assert all(re.search(r"\babout [\d.]+ (s|min)\b", c) for c in commands), commands
    example = [ln for ln in blocks[1][1].splitlines() if ln.strip()]
    assert len(example) <= 10, example
    prose = top[top.index("```\n", top.index("```bash")) + 4:top.index("```python")]
    assert "Riemannian federated learning" in prose
    assert top.index("```python") < top.index("## Concepts")
    assert "pip install -v" in top and "pytest --full" in top


def test_readme_first_blocks_run(tmp_path, monkeypatch):
    """The first example and the concepts' blocks run in the fast tier (the whole README runs
    in the full tier)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    blocks = python_blocks(_first_part())
    assert len(blocks) >= 2
    _run_blocks(blocks)


def test_arrays_in_arrays_out_lists_everywhere():
    """*Arrays in, arrays out*: a list is converted on every route, including the maps that
    try the compiled fast lane first."""
    import numpy as np
    import rfl_fast as rf

    S = rf.Sphere(3)
    for out in (S.proj([1.0, 0, 0], [0, 1.0, 0]), S.retr([1.0, 0, 0], [0, 0.1, 0]),
                S.exp([1.0, 0, 0], [0, 0.1, 0])):
        assert isinstance(out, np.ndarray) and out.dtype == np.float64
