"""The five source papers are named the same way in rfl_fast.app.experiments.PAPERS, CITATION.cff
and docs/references.rst; the page lists the experiments each one backs (one place, so adding an
experiment touches its module, the experiments' registry and that page)."""

import re
from pathlib import Path

import pytest

from rfl_fast.app.experiments import EXPERIMENTS, PAPERS, SOURCES

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "CITATION.cff").is_file():          # tests run outside a source checkout
    pytest.skip("CITATION.cff not found next to the tests", allow_module_level=True)


def _title(citation):
    return citation.split(": ", 1)[1].split(" (")[0]


def _flat(text):
    return re.sub(r"\s+", " ", text).replace("–", "-")


def test_every_experiment_has_papers_and_every_paper_an_experiment():
    assert set(SOURCES) == set(EXPERIMENTS)
    assert {s for seeds in SOURCES.values() for s in seeds} == set(PAPERS)


def test_citation_cff_and_references_page_name_every_paper_with_its_experiments():
    cff = _flat((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    raw = (ROOT / "docs" / "references.rst").read_text(encoding="utf-8")
    page = _flat(raw)
    for seed, citation in PAPERS.items():
        title = _title(citation)
        assert title in cff and title in page, title
        ids = ", ".join(e for e, seeds in SOURCES.items() if seed in seeds)
        assert f"seed {seed}" in cff       # (which experiments it backs: the docs page alone)
        row = re.search(rf"\* - {seed} (.*?)(?=\* - \d{{3}} |The experiments)", page).group(1)
        assert row.rstrip().endswith(f"- {ids}"), (seed, ids, row)
    for exp, seeds in SOURCES.items():              # the experiments table
        assert re.search(rf"^{exp} +{' '.join(seeds)} ", raw, re.M), exp


def test_users_read_papers_by_authors_and_year_never_by_number():
    """The numbers ("seed 001", "004 Fig. 3") stay on the references page: the README, the
    other doc pages, what the experiments show (titles, sources, notes, claims, plots, tables)
    and the package's docstrings name a paper as ``CITES`` does ("Li & Ma 2022"), which the
    page lists too."""
    from rfl_fast.app.experiments import CITES

    assert set(CITES) == set(PAPERS)
    page = _flat((ROOT / "docs" / "references.rst").read_text(encoding="utf-8"))
    for key, name in CITES.items():
        assert name in page and name.split(" et al.")[0].split(" & ")[0] in PAPERS[key], name
    # "seed 001", "001's", "(004)"; not 0.001 or "100 000"
    number = re.compile(r"(?i)\bseeds? 00\d\b|(?<![\d.])(?<!\d )\b00[0-4]\b(?!\.\d)")
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    texts.update({str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                  for p in sorted((ROOT / "docs").glob("*.*"))
                  if p.suffix in (".rst", ".md") and p.name != "references.rst"})
    experiments = Path(__import__("rfl_fast.app.experiments").app.experiments.__file__).parent
    texts.update({f"rfl_fast/app/experiments/{p.name}": p.read_text(encoding="utf-8")
                  for p in sorted(experiments.glob("*.py")) if p.name != "__init__.py"})
    package = experiments.parent.parent       # every docstring users read through help() / docs
    texts.update({str(p.relative_to(package.parent)): p.read_text(encoding="utf-8")
                  for p in sorted(package.rglob("*.py")) if p.parent != experiments})
    found = {name: sorted(set(number.findall(text))) for name, text in texts.items()}
    assert not {k: v for k, v in found.items() if v}, found
