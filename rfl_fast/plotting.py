"""Plots of federated runs in the papers' style (log-scale metric against rounds / CPU time)."""

import numpy as np

__all__ = ["plot_histories"]


def plot_histories(histories, path, y="grad_norm", title=None):
    """Write ``path.png`` and ``path.pdf``: ``y`` against rounds and against cumulative CPU
    time (server + max over clients), one line per run, log scale.

    Parameters
    ----------
    histories : dict of str to History
    path : str
        Output path without extension.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'rfl_fast[cli]'") from exc
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for name, h in histories.items():
        values = np.asarray(h[y], dtype=float)
        keep = np.isfinite(values)
        cpu = np.cumsum(np.asarray(h["cpu_server"]) + np.asarray(h["cpu_clients_max"]))
        axes[0].semilogy(np.asarray(h["round"])[keep], values[keep], label=name)
        axes[1].semilogy(cpu[keep], values[keep], label=name)
    axes[0].set_xlabel("communication round")
    axes[1].set_xlabel("CPU time, server + max over clients (s)")
    for ax in axes:
        ax.set_ylabel(y.replace("_", " "))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    if title:
        fig.suptitle(title)
    for ext in ("png", "pdf"):
        fig.savefig(f"{path}.{ext}", dpi=120)
    plt.close(fig)
    return [f"{path}.png", f"{path}.pdf"]
