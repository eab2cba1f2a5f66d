"""Data sources of experiment files that are no library loader (registered in
:data:`rfl_fast.app.names.DATA_SOURCES`)."""

import os

import numpy as np

from ..data import normalize_features
from .config import ConfigError

__all__ = ["load_npy"]


def load_npy(path, labels=None, normalize="none"):
    """Sample rows from a local ``.npy`` file (or ``.npz`` with ``X`` and optionally ``y``).

    Parameters
    ----------
    path : str
        The array of shape ``(m, d)``, one sample per row.
    labels : str, optional
        An ``.npy`` file of ``m`` labels (replaces an ``.npz`` file's ``y``).
    normalize : str
        :func:`rfl_fast.data.normalize_features` method.

    Returns
    -------
    X : ndarray, shape (m, d)
    y : ndarray, shape (m,), or None
    """
    if not os.path.isfile(path):
        raise ConfigError("data.path", f"no such file: {path!r}")
    y = None
    loaded = np.load(path, allow_pickle=False)
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if "X" not in loaded.files:
                raise ConfigError("data.path", f"{path!r}: an .npz file needs an array "
                                  f"named X (and optionally y); found {loaded.files}")
            X = loaded["X"]
            y = loaded["y"] if "y" in loaded.files else None
    else:
        X = loaded
    if labels is not None:
        if not os.path.isfile(labels):
            raise ConfigError("data.labels", f"no such file: {labels!r}")
        y = np.load(labels, allow_pickle=False)
    if X.ndim != 2:
        raise ConfigError("data.path", f"{path!r}: expected an array of shape (m, d) "
                          f"(one sample per row), got shape {X.shape}")
    if y is not None and (y.ndim != 1 or y.shape[0] != X.shape[0]):
        raise ConfigError("data.labels", f"expected {X.shape[0]} labels (one per row of X), "
                          f"got shape {y.shape}")
    return normalize_features(X, normalize), y
