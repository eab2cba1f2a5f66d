"""Plots of federated runs in the papers' style: a metric on a log scale against
communication rounds and against CPU time (server + max over clients), one line per run.

Needs matplotlib (the ``cli`` extra); it is imported on first use with the ``Agg`` backend, so
plotting works without a display. Each figure is one file, PNG by default (``formats=("png",
"pdf")`` adds a PDF; a PDF costs about as much again as the PNG). Every line of a panel has
its own colour, line style and marker (lines that coincide stay visible), legends sit outside
the axes, and the layout keeps titles and legends whole.
"""

import math
import os
import textwrap

import numpy as np

from .._files import atomic_write

__all__ = ["plot_histories", "plot_metrics", "plot_panels", "histories_figure", "panels_figure",
           "METRIC_LABELS", "X_AXES"]

#: Axis labels of the metrics the problems record.
METRIC_LABELS = {
    "grad_norm": "gradient norm |grad f(x_t)|",
    "angle": "principal angle to the optimum (sum)",
    "f_gap": "optimality gap f(x_t) - f*",
    "dist": "distance to the optimum",
}

#: The x axes of a plot: communication rounds, or cumulative CPU seconds.
X_AXES = {"round": "communication round", "cpu": "CPU time, server + max over clients (s)"}

_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
_MAX_MARKS = 12          # markers per line


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'rfl_fast[cli]'") from exc
    return plt


def _plottable(h, y):
    """Rounds, cumulative CPU seconds and values of column ``y`` where it is finite and > 0
    (a log scale cannot show the rest)."""
    if y not in h:
        empty = np.empty(0)
        return empty, empty, empty
    values = np.asarray(h[y], dtype=float)
    cpu = np.cumsum(np.asarray(h["cpu_server"], dtype=float)
                    + np.asarray(h["cpu_clients_max"], dtype=float))
    keep = np.isfinite(values) & (values > 0)
    return np.asarray(h["round"])[keep], cpu[keep], values[keep]


def has_values(histories, y):
    """Whether any history has a finite positive value of column ``y``."""
    return any(_plottable(h, y)[2].size for h in histories.values())


def series_style(i, n):
    """Colour, line style and marker of line ``i`` of ``n`` in one panel: distinct colours
    (tab10 up to 10 lines, tab20 up to 20, then evenly spaced on a colour wheel), line styles
    and markers cycling at other periods so lines drawn over each other stay distinguishable."""
    plt = _pyplot()
    if n <= 10:
        color = plt.get_cmap("tab10")(i)
    elif n <= 20:
        color = plt.get_cmap("tab20")(i)
    else:
        color = plt.get_cmap("hsv")(i / n)
    return {"color": color, "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
            "marker": _MARKERS[i % len(_MARKERS)]}


def _draw(ax, histories, y, x):
    """One line per history with values on ``ax`` (x = ``"round"`` or ``"cpu"``)."""
    series = [(name, _plottable(h, y)) for name, h in histories.items()]
    series = [(name, xy) for name, xy in series if xy[2].size]
    for i, (name, (rounds, cpu, values)) in enumerate(series):
        xs = rounds if x == "round" else cpu
        style = series_style(i, len(series))
        # markers every `step` points, offset per line, so coinciding lines show theirs
        step = max(3, xs.size // _MAX_MARKS)
        every = (i % 3 * step // 3, step)
        # later lines on top: a dashed line over an equal solid one leaves both visible
        ax.semilogy(xs, values, label=name, markevery=every, markersize=4, linewidth=1.4,
                    **style)
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel(METRIC_LABELS.get(y, y.replace("_", " ")))
    ax.grid(True, which="both", alpha=0.3)


def _legend(ax):
    """The axes' legend to the right of it, outside the data."""
    if ax.get_lines():
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                  fontsize="small", frameon=False)


def _title(fig, title):
    """``title`` above the figure, wrapped to its width (never cut off)."""
    if title:
        fig.suptitle(textwrap.fill(str(title), width=int(12 * fig.get_figwidth()),
                                   break_on_hyphens=False))


#: The file formats a figure is written in unless a call names others.
FORMATS = ("png",)


def _formats(formats):
    formats = (formats,) if isinstance(formats, str) else tuple(formats)
    if not formats or any(f not in ("png", "pdf", "svg") for f in formats):
        raise ValueError(f"formats: expected a non-empty sequence of 'png', 'pdf', 'svg', got "
                         f"{formats!r}")
    return formats


def _save_all(fig, path, formats=FORMATS):
    """``path.<format>`` for each format, each through a temporary file and a rename (a plot
    file is complete or absent). The figures are laid out by ``constrained_layout`` with their
    legends inside the figure, so no ``bbox_inches="tight"`` pass (an extra draw) is needed."""
    return [atomic_write(f"{path}.{ext}", lambda tmp, ext=ext: fig.savefig(
        tmp, dpi=110, format=ext)) for ext in _formats(formats)]


def histories_figure(histories, y="grad_norm", title=None):
    """The figure of :func:`plot_histories` (a matplotlib Figure; close it when done)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, x in zip(axes, X_AXES):
        _draw(ax, histories, y, x)
    _legend(axes[1])
    _title(fig, title)
    return fig


def plot_histories(histories, path, y="grad_norm", title=None, formats=FORMATS):
    """Write ``path.png`` (and ``path.pdf`` where ``formats`` asks): column ``y`` against rounds
    (left) and against cumulative CPU time, server + max over clients (right), one line per
    run, log scale.

    Parameters
    ----------
    histories : dict of str to History
        Label -> history (columns ``round``, ``cpu_server``, ``cpu_clients_max`` and ``y``).
    path : str
        Output path without extension.
    y : str
        The column to plot; non-finite and non-positive values are left out.
    title : str, optional
    formats : sequence of {"png", "pdf", "svg"}
        One file per format (default PNG alone).

    Returns
    -------
    list of str
        The files written.
    """
    fig = histories_figure(histories, y, title)
    try:
        return _save_all(fig, path, formats)
    finally:
        _pyplot().close(fig)


def panels_figure(panels, y="grad_norm", x="round", title=None, ncols=2):
    """The figure of :func:`plot_panels` (``None`` when no panel has values; close it when
    done): one axes per shown panel, in order."""
    if x not in X_AXES:
        raise ValueError(f"x: expected one of {', '.join(X_AXES)}, got {x!r}")
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols: expected an int >= 1, got {ncols!r}")
    shown = {k: v for k, v in panels.items() if has_values(v, y)}
    if not shown:
        return None
    plt = _pyplot()
    cols = min(ncols, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 3.4 * rows), squeeze=False,
                             constrained_layout=True)
    for ax, (name, histories) in zip(axes.flat, shown.items()):
        _draw(ax, histories, y, x)
        ax.set_title(name)
        _legend(ax)
    for ax in axes.flat[len(shown):]:
        ax.remove()
    _title(fig, title)
    return fig


def plot_panels(panels, path, y="grad_norm", x="round", title=None, ncols=2, formats=FORMATS):
    """Write ``path.png`` (and ``path.pdf`` where ``formats`` asks): one panel per setting,
    column ``y`` (log scale) against ``x`` (``"round"`` or ``"cpu"``), one line per run, each
    panel with its legend.

    Parameters
    ----------
    panels : dict of str to dict of str to History
        Panel title -> (line label -> history); panels without a plottable ``y`` are left out.
    path : str
        Output path without extension.
    y : str
    x : {"round", "cpu"}
    title : str, optional
    ncols : int
        Panels per row.
    formats : sequence of {"png", "pdf", "svg"}
        One file per format (default PNG alone).

    Returns
    -------
    list of str
        The files written (none if no panel has values).
    """
    formats = _formats(formats)
    fig = panels_figure(panels, y, x, title, ncols)
    if fig is None:
        return []
    try:
        return _save_all(fig, path, formats)
    finally:
        _pyplot().close(fig)


def plot_metrics(histories, folder, metrics=("grad_norm", "angle", "f_gap"), title=None,
                 prefix="", formats=FORMATS):
    """One figure per metric (:func:`plot_histories`), skipping metrics no history records
    (e.g. ``angle`` outside PCA problems).

    Parameters
    ----------
    histories : dict of str to History
    folder : str
        Existing folder; files are ``<prefix><metric>.png`` (and ``.pdf``, ...).
    metrics : sequence of str
    title : str, optional
    prefix : str
    formats : sequence of {"png", "pdf", "svg"}

    Returns
    -------
    list of str
        The files written.
    """
    files = []
    for y in metrics:
        if has_values(histories, y):
            files += plot_histories(histories, os.path.join(folder, f"{prefix}{y}"), y=y,
                                    title=title, formats=formats)
    return files
