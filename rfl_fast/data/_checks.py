"""Argument checks of the data modules (private): data and label arrays.

Every check names the offending argument and says what was expected; the scalar checks
(``check_int``, ``check_float``, ``check_choice``) and ``as_rng`` are
:mod:`rfl_fast._validation`'s.
"""

import numpy as np

__all__ = ["as_data_array", "as_labels"]


def as_data_array(x, name="X", *, min_ndim=1):
    """``x`` as a numeric (bool/int/uint/float) ndarray with at least ``min_ndim`` axes."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name}: expected at least {min_ndim} dimension(s), got shape {arr.shape}"
        )
    return arr


def as_labels(y, name="labels", *, length=None):
    """``y`` as a 1-d int64 array (integer dtype required), optionally of a given length."""
    arr = np.asarray(y)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of class labels, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise ValueError(f"{name}: expected {length} labels (one per sample), got {arr.shape[0]}")
    return arr.astype(np.int64, copy=False)
