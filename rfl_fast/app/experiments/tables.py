"""Results tables of the experiments: ours next to the paper's reported numbers (where the
paper has them) or its claims, with a verdict computed from our results.

``results_table(res)`` turns an experiment's results dict into Markdown;
``write_table(res, out)`` writes it to ``<out>/<ID>.md``. Verdicts: *reproduced*, *partly*,
*not reproduced*, *paper inconsistent* (the paper's own numbers contradict each other or its
theory), *setting* (a row of the paper's settings, ours next to it).
"""

import os

from . import get_experiment

__all__ = ["results_table", "write_table"]


def results_table(res):
    """Markdown: header, the table (setting | quantity | ours | paper | verdict), notes."""
    lines = [f"# {res['experiment']}: {res['title']}", "",
             f"Source: {res['source']}. {'Small' if res['small'] else 'Full'} form, seed "
             f"{res['seed']}, {res['elapsed_s']:.1f} s.", "",
             "| setting | quantity | ours | paper | verdict |", "|---|---|---|---|---|"]
    for row in get_experiment(res["experiment"]).table_rows(res):
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    claims = {k: v for k, v in res.get("paper", {}).items() if isinstance(v, str)}
    if claims:
        lines += ["", "Paper's claims:"] + [f"- {k}: {v}" for k, v in claims.items()]
    if res.get("notes"):
        lines += ["", "Notes (deviations and why):"] + [f"- {n}" for n in res["notes"]]
    return "\n".join(lines) + "\n"


def write_table(res, out):
    """Write :func:`results_table` to ``<out>/<ID>.md``; returns the path."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(os.fspath(out), f"{res['experiment']}.md")
    with open(path, "w") as fh:
        fh.write(results_table(res))
    return path
