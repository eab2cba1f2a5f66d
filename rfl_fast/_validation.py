"""Input checks at the public boundary. Kernels never validate; these functions do it once.

Arrays: :func:`as_array`, :func:`check_finite`, :func:`check_core_shape`,
:func:`broadcast_batch`. Scalar arguments (shared by the data, federation and algorithm
layers): :func:`check_int`, :func:`check_real`, :func:`check_float`, :func:`check_positive`,
:func:`check_nonnegative`, :func:`check_choice`. Every check names the offending argument and
says what was expected.
"""

import numbers
import os

import numpy as np

__all__ = ["as_array", "check_dtype", "check_finite", "check_core_shape", "validation_enabled",
           "broadcast_batch",
           "check_int", "check_real", "check_float", "check_positive", "check_nonnegative",
           "check_choice", "FLOAT64"]

_ENV_VALIDATE = "RFL_FAST_VALIDATE"

#: The working dtype; ``a.dtype is FLOAT64`` is the cheapest test for it (fast paths).
FLOAT64 = np.dtype(np.float64)


# Reading an environment variable per call: ``os.environ.get`` encodes the key and decodes the
# value (~0.4-1 us, more on a busy machine). ``env_reader(name, parse)`` returns a function giving
# ``parse(os.environ.get(name))`` that looks the raw value up in the mapping behind ``os.environ``
# (the key encoded once; a plain dict lookup) and caches the parsed result keyed on that raw
# value, so a change at run time (``os.environ[...] = ...``, ``monkeypatch.setenv``) takes effect
# at the next call. Without that mapping (another Python), it falls back to ``os.environ.get``.
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_ENCODE = getattr(os.environ, "encodekey", None)
_ENV_DECODE = getattr(os.environ, "decodevalue", None)


def env_reader(name, parse):
    """A function returning ``parse(os.environ.get(name))``, cached on the raw value."""
    cache = {}
    if isinstance(_ENV_DATA, dict) and callable(_ENV_ENCODE) and callable(_ENV_DECODE):
        key = _ENV_ENCODE(name)
        get = _ENV_DATA.get

        def read():
            raw = get(key)
            try:
                return cache[raw]
            except KeyError:
                value = parse(None if raw is None else _ENV_DECODE(raw))
                if len(cache) > 64:
                    cache.clear()
                cache[raw] = value
                return value
    else:  # pragma: no cover - CPython always has os.environ._data
        def read():
            raw = os.environ.get(name)
            try:
                return cache[raw]
            except KeyError:
                value = cache[raw] = parse(raw)
                return value
    return read


def _parse_validate(raw):
    return (raw or "0").lower() not in ("", "0", "false", "no")


_validate_env = env_reader(_ENV_VALIDATE, _parse_validate)


def validation_enabled(flag=None):
    """Whether on-manifold checks run: an explicit ``flag`` wins, else ``RFL_FAST_VALIDATE``."""
    if flag is not None:
        return bool(flag)
    return _validate_env()


def as_array(a, name, *, min_ndim=1):
    """Return ``a`` as a finite float ndarray (float32 stays float32, ints become float64).

    Accepted dtypes: float64, float32 and integers (see :func:`check_dtype`). Raises
    ``TypeError`` for any other dtype (complex, object, bool, float16, longdouble) and
    ``ValueError`` for NaN/inf or too few dimensions, naming ``name``.
    """
    arr = np.asarray(a)
    kind = arr.dtype.kind
    if kind in "iu":
        arr = arr.astype(np.float64)
    else:
        check_dtype(arr.dtype, name)
    if arr.ndim < min_ndim:
        raise ValueError(f"{name}: expected at least {min_ndim} dimensions, got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def check_dtype(dtype, name):
    """Raise ``TypeError`` naming ``name`` unless ``dtype`` is float64 or float32.

    The kernels compute in float64 and return float32 for float32 input. float16 and longdouble
    are refused rather than silently changed: float64 results would not be float16, and a
    longdouble input would lose its extra digits (convert explicitly with ``.astype``).
    """
    if dtype.char in "fd":
        return
    if dtype.kind != "f":
        raise TypeError(f"{name}: expected a real floating-point array, got dtype {dtype} "
                        "(accepted: float64, float32, integers)")
    hint = "np.float32" if dtype.itemsize < 4 else "np.float64 (the kernels compute in float64)"
    raise TypeError(f"{name}: expected a float64 or float32 array (or integers), got dtype "
                    f"{dtype}; convert it with .astype({hint})")


def check_finite(arr, name):
    """Raise ``ValueError`` naming ``name`` if ``arr`` holds NaN or inf."""
    if not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name}: contains {bad}; expected finite values")


def check_core_shape(arr, name, core_shape):
    """Check the trailing axes of ``arr`` equal ``core_shape`` (``None`` entries match any size)."""
    k = len(core_shape)
    trailing = arr.shape[arr.ndim - k:] if arr.ndim >= k else None
    if trailing is None or any(c is not None and c != t for c, t in zip(core_shape, trailing)):
        want = ", ".join("?" if c is None else str(c) for c in core_shape)
        raise ValueError(f"{name}: expected shape (..., {want}), got {arr.shape}")


def broadcast_batch(arrays, names, core_ndims):
    """Broadcast the leading (batch) axes of ``arrays``; return the batch shape.

    ``core_ndims[i]`` is the number of trailing manifold axes of ``arrays[i]``.
    """
    batches = [a.shape[: a.ndim - k] for a, k in zip(arrays, core_ndims)]
    try:
        return np.broadcast_shapes(*batches)
    except ValueError:
        desc = ", ".join(f"{n} {a.shape}" for n, a in zip(names, arrays))
        raise ValueError(f"batch axes do not broadcast: {desc}") from None


# ---------------------------------------------------------------------------- scalar arguments

def check_int(value, name, *, min_value=None, max_value=None):
    """``value`` as a Python int within ``[min_value, max_value]`` (bools are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} ({value!r})")
    value = int(value)
    if min_value is not None and value < min_value:
        raise ValueError(f"{name}: expected an int >= {min_value}, got {value}")
    if max_value is not None and value > max_value:
        raise ValueError(f"{name}: expected an int <= {max_value}, got {value}")
    return value


def check_real(value, name):
    """``value`` as a finite Python float (bools are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} ({value!r})")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value}")
    return value


def check_float(value, name, *, low=None, high=None, low_open=False, high_open=False):
    """``value`` as a finite Python float inside the given interval."""
    value = check_real(value, name)
    bad_low = low is not None and (value <= low if low_open else value < low)
    bad_high = high is not None and (value >= high if high_open else value > high)
    if bad_low or bad_high:
        lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
        hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
        raise ValueError(f"{name}: expected a value in {lo}, {hi}, got {value:g}")
    return value


def check_positive(value, name):
    """``value`` as a finite float > 0."""
    value = check_real(value, name)
    if value <= 0:
        raise ValueError(f"{name}: expected a value > 0, got {value:g}")
    return value


def check_nonnegative(value, name):
    """``value`` as a finite float >= 0."""
    value = check_real(value, name)
    if value < 0:
        raise ValueError(f"{name}: expected a value >= 0, got {value:g}")
    return value


def check_choice(value, name, choices):
    """``value`` itself, after checking it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value
