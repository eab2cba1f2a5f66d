"""Small real data sets shipped with scikit-learn (no download), normalized as the papers do.

Li & Ma 2022 (section 5.3) and Xiao et al. 2024 (section 5.2) run kPCA on iris
(``d = 4``), wine (``d = 13``), breast cancer (``d = 30``) and MNIST. Xiao et al. 2024 says "we first
normalize the four datasets" without saying how; Li & Ma 2022 says nothing. The default here is
``normalize="standardize"``: every feature centered and scaled to unit standard deviation
(population std, ``ddof = 0``), the usual reading, which makes the kPCA a correlation-matrix
PCA. Features with zero variance (three pixels of digits) are only centered. Client
covariances are then ``A_i = D_i' D_i`` over the client's rows ``D_i`` (Xiao et al. 2024, eq. 55).

scikit-learn is an optional dependency (the ``test`` extra); it is imported on first use.
"""

import numpy as np

from .._validation import check_choice
from ._checks import as_data_array

__all__ = [
    "NORMALIZATIONS",
    "normalize_features",
    "load_iris",
    "load_wine",
    "load_breast_cancer",
    "load_digits",
    "load_sklearn",
]

NORMALIZATIONS = ("standardize", "center", "unit", "none")

_LOADERS = {
    "iris": "load_iris",
    "wine": "load_wine",
    "breast_cancer": "load_breast_cancer",
    "digits": "load_digits",
}


def normalize_features(X, method="standardize", *, scale=None):
    """Normalize the columns (features) of ``X``.

    Parameters
    ----------
    X : array_like, shape (m, d)
        One sample per row; integer input is converted to float64.
    method : {"standardize", "center", "unit", "none"}
        ``"standardize"``: ``(X - mean) / std`` per feature (``ddof = 0``; zero-variance
        features are only centered). ``"center"``: ``X - mean``. ``"unit"``: ``X / scale``
        (e.g. pixel values / 255). ``"none"``: unchanged (as float64).
    scale : float, optional
        Divisor for ``"unit"``; defaults to the largest absolute entry (1 if all are zero).

    Returns
    -------
    Xn : ndarray, shape (m, d), float64
        A new array.
    """
    check_choice(method, "method", NORMALIZATIONS)
    x = as_data_array(X, "X", min_ndim=2)
    if x.ndim != 2:
        raise ValueError(f"X: expected shape (m, d), got {x.shape}")
    x = np.array(x, dtype=np.float64)  # copy
    if not np.isfinite(x).all():
        raise ValueError("X: contains NaN or inf; expected finite values")
    if method == "none":
        return x
    if method == "unit":
        if scale is None:
            scale = float(np.abs(x).max()) if x.size else 1.0
            scale = scale if scale > 0 else 1.0
        elif not np.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale: expected a finite number > 0, got {scale}")
        x /= scale
        return x
    x -= x.mean(axis=0)
    if method == "standardize":
        std = x.std(axis=0)
        std[std == 0] = 1.0
        x /= std
    return x


def load_sklearn(name, *, normalize="standardize", dtype=np.float64):
    """Load one of scikit-learn's bundled data sets as ``(X, y)``.

    Parameters
    ----------
    name : {"iris", "wine", "breast_cancer", "digits"}
    normalize : {"standardize", "center", "unit", "none"}
        See :func:`normalize_features`.
    dtype : numpy float dtype
        ``float64`` (default) or ``float32``.

    Returns
    -------
    X : ndarray, shape (m, d)
        iris (150, 4), wine (178, 13), breast_cancer (569, 30), digits (1797, 64).
    y : ndarray of int64, shape (m,)
        Class labels.
    """
    check_choice(name, "name", tuple(_LOADERS))
    check_choice(normalize, "normalize", NORMALIZATIONS)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"dtype: expected a floating-point dtype, got {dtype}")
    try:
        import sklearn.datasets as skd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"load_sklearn('{name}') needs scikit-learn (pip install scikit-learn); "
            "the data ship with it, nothing is downloaded"
        ) from exc
    bunch = getattr(skd, _LOADERS[name])()
    x = normalize_features(bunch.data, normalize).astype(dtype, copy=False)
    y = np.asarray(bunch.target, dtype=np.int64)
    return np.ascontiguousarray(x), y


def load_iris(*, normalize="standardize", dtype=np.float64):
    """Iris (scikit-learn's copy; nothing is downloaded). See :func:`load_sklearn`.

    Parameters
    ----------
    normalize : {"standardize", "center", "unit", "none"}
        See :func:`normalize_features`.
    dtype : numpy float dtype
        ``float64`` (default) or ``float32``.

    Returns
    -------
    X : ndarray, shape (150, 4)
    y : ndarray of int64, shape (150,)
        Class labels, 3 classes.
    """
    return load_sklearn("iris", normalize=normalize, dtype=dtype)


def load_wine(*, normalize="standardize", dtype=np.float64):
    """Wine (scikit-learn's copy; nothing is downloaded). See :func:`load_sklearn`.

    Parameters
    ----------
    normalize : {"standardize", "center", "unit", "none"}
        See :func:`normalize_features`.
    dtype : numpy float dtype
        ``float64`` (default) or ``float32``.

    Returns
    -------
    X : ndarray, shape (178, 13)
    y : ndarray of int64, shape (178,)
        Class labels, 3 classes.
    """
    return load_sklearn("wine", normalize=normalize, dtype=dtype)


def load_breast_cancer(*, normalize="standardize", dtype=np.float64):
    """Breast cancer (Wisconsin diagnostic; scikit-learn's copy). See :func:`load_sklearn`.

    Parameters
    ----------
    normalize : {"standardize", "center", "unit", "none"}
        See :func:`normalize_features`.
    dtype : numpy float dtype
        ``float64`` (default) or ``float32``.

    Returns
    -------
    X : ndarray, shape (569, 30)
    y : ndarray of int64, shape (569,)
        Class labels, 2 classes.
    """
    return load_sklearn("breast_cancer", normalize=normalize, dtype=dtype)


def load_digits(*, normalize="standardize", dtype=np.float64):
    """Digits (8x8 images; scikit-learn's copy). See :func:`load_sklearn`.

    Parameters
    ----------
    normalize : {"standardize", "center", "unit", "none"}
        See :func:`normalize_features`.
    dtype : numpy float dtype
        ``float64`` (default) or ``float32``.

    Returns
    -------
    X : ndarray, shape (1797, 64)
    y : ndarray of int64, shape (1797,)
        Class labels, 10 classes.
    """
    return load_sklearn("digits", normalize=normalize, dtype=dtype)
