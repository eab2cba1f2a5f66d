"""Figures of an experiment's run histories: per metric, one figure against rounds and one
against CPU time, one panel per setting (problem, data set, parameter), one line per run.

A run's label ``<setting>_<series>`` (as the experiment declared it) is split into the panel and
the line: by the experiment module's ``plot_series(label) -> (setting, series)`` if it has one,
else at the first algorithm name (``RFed...``, ``AGS...``, ``Pri...``), else before the last
``_``. Both parts are shown in words (:func:`readable`): ``CPESph_fixed_K1`` is panel "CPE
sphere", line "fixed step, K = 1"; an experiment's ``PLOT_NAMES`` adds its own words.
"""

import os
import re

__all__ = ["plot_experiment", "plotted_figures", "experiment_panels", "readable",
           "split_label"]

#: Words of run labels and how figures show them.
NAMES = {"fixed": "fixed step", "decaying": "decaying step", "fullbatch": "full batch",
         "pca": "PCA", "kpca": "kPCA", "mnist": "MNIST", "sigma0": "σ = 0 (non-private)"}
_SYMBOLS = {"tau": "τ", "eps": "ε", "sigma": "σ"}
_PARAMETER = re.compile(r"^(K|k|n|r|b|tau|eps|sigma)(\d[\d.e+-]*)$")
_FIGURE = re.compile(r"^fig(\d\w*)$")
_ALGORITHM = re.compile(r"^(RFed|AGS|Pri)")
METRICS = ("grad_norm", "angle", "f_gap")


def readable(label, names=None):
    """``label`` (``_``-separated tokens) in words: known words and ``names`` replaced,
    parameters as ``K = 1``, figures as ``Fig. 1a``; lowercase words run together
    (``breast_cancer`` -> "breast cancer"), other parts are separated by commas."""
    names = {**NAMES, **(names or {})}
    parts = []
    for token in str(label).split("_"):
        if token in names:
            parts.append(names[token])
        elif m := _PARAMETER.match(token):
            parts.append(f"{_SYMBOLS.get(m[1], m[1])} = {m[2]}")
        elif m := _FIGURE.match(token):
            parts.append(f"Fig. {m[1]}")
        elif token.isalpha() and token.islower() and parts and parts[-1].isalpha() \
                and parts[-1].islower():
            parts[-1] += f" {token}"
        elif token:
            parts.append(token)
    return ", ".join(parts)


def split_label(label):
    """``(setting, series)`` of a run label: the series starts at the first algorithm name
    after the first token, else it is the last token; a one-token label has no setting."""
    tokens = label.split("_")
    for i in range(1, len(tokens)):
        if _ALGORITHM.match(tokens[i]):
            return "_".join(tokens[:i]), "_".join(tokens[i:])
    return "_".join(tokens[:-1]), tokens[-1]


def experiment_panels(exp_id, res):
    """``{panel title: {line label: History}}`` from the history CSVs listed in ``res["files"]``,
    in the order the experiment recorded them."""
    from ...federation import History
    from . import get_experiment

    module = get_experiment(exp_id)
    split = getattr(module, "plot_series", split_label)
    names = getattr(module, "PLOT_NAMES", {})
    labels = res.get("runs", {}).get("labels", {})
    panels = {}
    for path in res.get("files", []):
        if not path.endswith(".csv"):
            continue
        slug = os.path.splitext(os.path.basename(path))[0][len(exp_id) + 1:]
        setting, series = split(labels.get(slug, slug))
        panel = readable(setting, names) if setting else exp_id
        panels.setdefault(panel, {})[readable(series, names)] = History.from_csv(path)
    return panels


def _figures(panels, metrics):
    """The ``(metric, x axis, file suffix)`` of each figure some run has values for."""
    from ..plotting import has_values

    return [(y, x, suffix) for y in metrics
            if any(has_values(histories, y) for histories in panels.values())
            for x, suffix in (("round", ""), ("cpu", "_cpu"))]


def plotted_figures(exp_id, res, metrics=METRICS):
    """How many figures :func:`plot_experiment` draws for ``res`` (one file per figure and
    format)."""
    return len(_figures(experiment_panels(exp_id, res), metrics))


def plot_experiment(exp_id, res, out, metrics=METRICS, formats=("png",)):
    """Write ``<out>/<id>_plot_<metric>.png`` (against rounds) and ``..._cpu.png`` (against CPU
    time) for each metric some run recorded, each figure one file per format (``formats=("png",
    "pdf")`` adds PDFs); returns the files written."""
    from ..plotting import plot_panels

    panels = experiment_panels(exp_id, res)
    files = []
    for y, x, suffix in _figures(panels, metrics):
        files += plot_panels(panels, os.path.join(out, f"{exp_id}_plot_{y}{suffix}"), y=y, x=x,
                             title=f"{exp_id}: {res['title']} ({res['source']})",
                             formats=formats)
    return files
