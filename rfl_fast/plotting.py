"""Plots of federated runs in the papers' style: a metric on a log scale against
communication rounds and against CPU time (server + max over clients), one line per run.

Needs matplotlib (the ``cli`` extra); it is imported on first use with the ``Agg`` backend, so
plotting works without a display.
"""

import os

import numpy as np

from ._files import atomic_write

__all__ = ["plot_histories", "plot_metrics", "METRIC_LABELS"]

#: Axis labels of the metrics the problems record.
METRIC_LABELS = {
    "grad_norm": "gradient norm |grad f(x_t)|",
    "angle": "principal angle to the optimum (sum)",
    "f_gap": "optimality gap f(x_t) - f*",
    "dist": "distance to the optimum",
}


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


def _save(fig, path, ext):
    """Save through a temporary file and a rename (a plot file is complete or absent)."""
    return atomic_write(f"{path}.{ext}", lambda tmp: fig.savefig(tmp, dpi=120, format=ext))


def plot_histories(histories, path, y="grad_norm", title=None):
    """Write ``path.png`` and ``path.pdf``: column ``y`` against rounds (left) and against
    cumulative CPU time, server + max over clients (right), one line per run, log scale.

    Parameters
    ----------
    histories : dict of str to History
        Label -> history (columns ``round``, ``cpu_server``, ``cpu_clients_max`` and ``y``).
    path : str
        Output path without extension.
    y : str
        The column to plot; non-finite and non-positive values are left out.
    title : str, optional

    Returns
    -------
    list of str
        The two files written.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    try:
        for name, h in histories.items():
            rounds, cpu, values = _plottable(h, y)
            if values.size == 0:
                continue
            line, = axes[0].semilogy(rounds, values, label=name)
            axes[1].semilogy(cpu, values, label=name, color=line.get_color())
        axes[0].set_xlabel("communication round")
        axes[1].set_xlabel("CPU time, server + max over clients (s)")
        for ax in axes:
            ax.set_ylabel(METRIC_LABELS.get(y, y.replace("_", " ")))
            ax.grid(True, which="both", alpha=0.3)
        if axes[0].get_lines():
            axes[0].legend()
        if title:
            fig.suptitle(title)
        return [_save(fig, path, ext) for ext in ("png", "pdf")]
    finally:
        plt.close(fig)


def plot_metrics(histories, folder, metrics=("grad_norm", "angle", "f_gap"), title=None,
                 prefix=""):
    """One figure per metric (:func:`plot_histories`), skipping metrics no history records
    (e.g. ``angle`` outside PCA problems).

    Parameters
    ----------
    histories : dict of str to History
    folder : str
        Existing folder; files are ``<prefix><metric>.png`` and ``.pdf``.
    metrics : sequence of str
    title : str, optional

    Returns
    -------
    list of str
        The files written.
    """
    files = []
    for y in metrics:
        if has_values(histories, y):
            files += plot_histories(histories, os.path.join(folder, f"{prefix}{y}"), y=y,
                                    title=title)
    return files
