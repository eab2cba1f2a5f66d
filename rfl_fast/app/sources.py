"""Data sources of experiment files that are no library loader (registered in
:data:`rfl_fast.app.names.DATA_SOURCES`)."""

import os

from .._files import read_npy, read_npz
from .._validation import brief
from ..data import normalize_features
from .config import ConfigError

__all__ = ["load_npy"]


def _read(path, key, npz):
    """The arrays of ``path`` (``{"": array}`` for an ``.npy`` file), read by the bounded
    readers of :mod:`rfl_fast._files` (declared shapes checked against the file before
    anything is allocated); every failure a ``ConfigError`` on ``key``."""
    if not isinstance(path, str) or not os.path.isfile(path):
        raise ConfigError(key, f"no such file: {brief(path)}")
    try:
        with open(path, "rb") as fh:
            zipped = fh.read(4) == b"PK\x03\x04"
        if zipped and npz:
            return read_npz(path)
        return {"": read_npy(path)}
    except (OSError, ValueError) as exc:
        raise ConfigError(key, f"{brief(path)}: cannot read it as "
                          f"{'.npy or .npz' if npz else '.npy'} ({exc})") from None


def load_npy(path, labels=None, normalize="none"):
    """Sample rows from a local ``.npy`` file (or ``.npz`` with ``X`` and optionally ``y``).

    The files are untrusted: their headers are checked against their sizes before anything is
    allocated and object arrays (pickles) are refused (:func:`rfl_fast._files.read_npy`).

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

    Raises
    ------
    ConfigError
        A missing or unreadable file, or arrays of the wrong shape.
    """
    arrays = _read(path, "data.path", npz=True)
    if "" in arrays:
        X, y = arrays[""], None
    elif "X" not in arrays:
        raise ConfigError("data.path", f"{brief(path)}: an .npz file needs an array named X "
                          f"(and optionally y); found {brief(sorted(arrays))}")
    else:
        X, y = arrays["X"], arrays.get("y")
    if labels is not None:
        y = _read(labels, "data.labels", npz=False)[""]
    if X.ndim != 2 or X.dtype.kind not in "biuf" or X.size == 0:
        raise ConfigError("data.path", f"{brief(path)}: expected a real array of shape (m, d) "
                          f"(one sample per row, m, d >= 1), got shape {X.shape} of {X.dtype}")
    if y is not None and (y.ndim != 1 or y.shape[0] != X.shape[0]):
        raise ConfigError("data.labels", f"expected {X.shape[0]} labels (one per row of X), "
                          f"got shape {y.shape}")
    return normalize_features(X, normalize), y
