"""Figures: one panel per setting, lines told apart, labels in words (structure, not pixels)."""

import re

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from rfl_fast.app.experiments._common import Recorder  # noqa: E402
from rfl_fast.app.experiments.plots import experiment_panels, readable, split_label  # noqa: E402
from rfl_fast.app.plotting import histories_figure, panels_figure, plot_panels  # noqa: E402
from rfl_fast.federation import History  # noqa: E402


def _history(rate, rounds=20):
    t = np.arange(rounds + 1)
    return History({"round": t, "cpu_server": np.full(t.size, 1e-3),
                    "cpu_clients_max": np.full(t.size, 2e-3), "grad_norm": np.exp(-rate * t)})


def _styles(ax):
    return [(line.get_color(), line.get_linestyle(), line.get_marker())
            for line in ax.get_lines()]


def _legend_labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _check_axes(ax, labels):
    """Every line of ``ax`` in the legend under its label, colours all different."""
    assert _legend_labels(ax) == labels
    colors = [to_rgba(c) for c, _, _ in _styles(ax)]
    assert len(set(colors)) == len(colors) == len(labels)


def _recorded(exp_id, labels, tmp_path):
    """A result dict as an experiment writes it: one history CSV per declared label."""
    rec = Recorder(exp_id, "title", "source", True, 0, tmp_path)
    rec.declare(*labels)
    for i, label in enumerate(labels):
        rec.history(label, _history(0.1 + 0.05 * i))
    return rec.finish()


def test_readable_labels_use_words_not_keys():
    assert readable("fixed_K1") == "fixed step, K = 1"
    assert readable("fixed_K1_fullbatch") == "fixed step, K = 1, full batch"
    assert readable("breast_cancer_r3") == "breast cancer, r = 3"
    assert readable("kpca_tau5") == "kPCA, τ = 5"
    assert readable("fig1b_tau2") == "Fig. 1b, τ = 2"
    assert readable("eps0.15") == "ε = 0.15"
    assert readable("CPESph", {"CPESph": "CPE sphere"}) == "CPE sphere"
    assert split_label("wine_r3_RFedSVRG-2BB") == ("wine_r3", "RFedSVRG-2BB")
    assert split_label("sphere_DP-RSGD_K5_eps2") == ("sphere_DP-RSGD_K5", "eps2")


def test_e5_figure_has_one_panel_per_problem_with_readable_unique_lines(tmp_path):
    from rfl_fast.app.experiments.e5 import PLOT_NAMES, TABLE1

    series = ("fixed_K1", "fixed_K5", "decaying_K1", "decaying_K5", "fixed_K1_fullbatch")
    res = _recorded("E5", [f"{p}_{s}" for p in TABLE1 for s in series], tmp_path)
    panels = experiment_panels("E5", res)
    assert list(panels) == [PLOT_NAMES[p] for p in TABLE1]
    fig = panels_figure(panels, "grad_norm", title="E5: " + "a long title " * 20)
    try:
        assert len(fig.axes) == len(TABLE1)
        want = ["fixed step, K = 1", "fixed step, K = 5", "decaying step, K = 1",
                "decaying step, K = 5", "fixed step, K = 1, full batch"]
        for ax, name in zip(fig.axes, panels):
            assert ax.get_title() == name
            _check_axes(ax, want)
        assert "\n" in fig._suptitle.get_text()            # long titles are wrapped, not cut
    finally:
        plt.close(fig)


def test_e7_figure_has_one_panel_per_configuration(tmp_path):
    from rfl_fast.app.experiments.e7 import CONFIGS

    eps = ("eps0.15", "eps2", "sigma0")
    res = _recorded("E7", [f"{c}_{e}" for c in CONFIGS for e in eps], tmp_path)
    panels = experiment_panels("E7", res)
    assert len(panels) == len(CONFIGS)
    assert "sphere PCA, DP-RSGD, K = 5" in panels
    fig = panels_figure(panels, "grad_norm")
    try:
        assert len(fig.axes) == len(CONFIGS)
        for ax in fig.axes:
            _check_axes(ax, ["ε = 0.15", "ε = 2", "σ = 0 (non-private)"])
            assert not any(re.search(r"_|eps\d|sigma\d", t) for t in _legend_labels(ax))
    finally:
        plt.close(fig)


def test_experiment_labels_come_back_as_declared(tmp_path):
    """Labels with characters a file name drops (E6's "AGS-AP(true p)") are shown as
    declared."""
    res = _recorded("E6", ["A_AGS-AP(true p)", "A_AGS-RS", "B_RFedAGS(AP, frequency)"],
                    tmp_path)
    panels = experiment_panels("E6", res)
    assert [list(v) for v in panels.values()] == [["AGS-AP(true p)", "AGS-RS"],
                                                  ["RFedAGS(AP, frequency)"]]


def test_coinciding_lines_stay_distinguishable():
    """Identical histories (the demo's RFedAvg under RFedProx) differ in colour, line style
    and marker, and the legend sits outside the axes."""
    same = _history(0.1)
    names = ["RFedAvg", "RFedProx", "RFedSVRG", "RFedProj", "RFedAGS"]
    fig = histories_figure({n: same for n in names}, "grad_norm", title="demo")
    try:
        rounds_ax, cpu_ax = fig.axes
        styles = _styles(rounds_ax)
        assert len(styles) == len(names)
        for k in range(3):
            assert len({s[k] for s in styles[:4]}) == 4      # colour, style, marker
        _check_axes(cpu_ax, names)
        fig.canvas.draw()
        legend = cpu_ax.get_legend().get_window_extent()
        assert legend.x0 >= cpu_ax.get_window_extent().x1   # right of the data, not on it
    finally:
        plt.close(fig)


def test_plot_panels_writes_files_and_rejects_bad_arguments(tmp_path):
    panels = {"a": {"x": _history(0.1)}, "b": {"y": _history(0.2)}}
    files = plot_panels(panels, str(tmp_path / "p"), "grad_norm")
    assert [f.rsplit(".", 1)[1] for f in files] == ["png"]            # PNG unless asked
    files = plot_panels(panels, str(tmp_path / "p"), "grad_norm", formats=("png", "pdf"))
    assert [f.rsplit(".", 1)[1] for f in files] == ["png", "pdf"]
    with pytest.raises(ValueError, match="formats: expected"):
        plot_panels(panels, str(tmp_path / "p"), formats=("jpeg",))
    assert plot_panels(panels, str(tmp_path / "q"), "angle") == []   # nothing recorded
    with pytest.raises(ValueError, match="x: expected one of round, cpu"):
        plot_panels(panels, str(tmp_path / "p"), x="time")
    with pytest.raises(ValueError, match="ncols: expected an int >= 1"):
        plot_panels(panels, str(tmp_path / "p"), ncols=0)
