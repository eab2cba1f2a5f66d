"""Input checks at the public boundary. Kernels never validate; these functions do it once.

Arrays: :func:`as_array`, :func:`check_finite`, :func:`check_core_shape`,
:func:`broadcast_batch`. Scalar arguments (shared by the data, federation and algorithm
layers): :func:`check_int`, :func:`check_real`, :func:`check_float`, :func:`check_positive`,
:func:`check_nonnegative`, :func:`check_reals`, :func:`check_bool`, :func:`check_choice`;
random generators: :func:`as_rng`.
Argument dataclasses declare their field constraints (:class:`Int`, :class:`Real`,
:class:`Reals`, :class:`Choice`, :class:`Bool`, :class:`Optional`) in ``CHECKS`` and inherit
:class:`Checked`, whose ``__post_init__`` checks them once. Every check names the offending
argument and says what was expected, as attributes of its error
(:class:`rfl_fast.errors.ParameterError`) as well as in its text.
"""

import numbers
import os
import reprlib

import numpy as np

from .errors import InvalidParameterError, ParameterError, ParameterTypeError

__all__ = ["as_array", "check_dtype", "check_finite", "check_core_shape", "validation_enabled",
           "broadcast_batch",
           "check_int", "check_real", "check_float", "check_positive", "check_nonnegative",
           "check_reals", "check_bool", "check_choice", "FLOAT64",
           "Int", "Real", "Reals", "Choice", "Bool", "Optional", "POSITIVE", "NONNEGATIVE", "COUNT",
           "validate_fields", "Checked", "brief", "by_name", "as_rng", "Streams"]

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
# One rule everywhere: an int is a Python or NumPy integer (never a bool, never a float); a
# real is a Python or NumPy real number (never a bool or a string), and NaN is refused; inf
# only where a check allows it. Wrong type: ``ParameterTypeError``; wrong value:
# ``InvalidParameterError``; the message is always "<name>: expected ..., got ...".

_INF = float("inf")


class _Brief(reprlib.Repr):
    """``reprlib`` with tight limits, and ints longer than 60 digits by their size (their full
    text costs time quadratic in their length, and Python refuses past 4300 digits)."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 2, 200, 200, 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4
        self.maxdeque = self.maxarray = 4

    def repr_int(self, x, level):
        if x.bit_length() > 199:
            return f"<an int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_BRIEF = _Brief()


class Streams:
    """The base of a stacked random source whose item ``j`` is drawn from its own generator
    (:class:`rfl_fast.kernels.streams.ItemStreams`, which knows the package's threads): what
    :func:`as_rng` passes through as it passes a ``Generator``."""


def as_rng(rng, name="rng"):
    """A ``numpy.random.Generator`` from ``rng`` (what ``rng=`` arguments accept,
    ``rfl_fast._typing.RNGLike``).

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence, numpy.random.Generator or Streams
        ``None`` draws fresh OS entropy (not reproducible); an int (>= 0) or a
        ``SeedSequence`` seeds a new PCG64 generator; a ``Generator`` (or the per-item
        :class:`Streams` of a batched draw) is used as is (its state advances). A bool, a negative int or anything else is refused, naming ``name``.
    name : str
        The argument's name, for the error.
    """
    if isinstance(rng, (np.random.Generator, Streams)):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if _is_bool(rng) or not isinstance(rng, numbers.Integral):
        raise ParameterTypeError(name, expected="None, an int seed >= 0, a SeedSequence or a "
                                 "numpy.random.Generator", got=type(rng).__name__)
    if rng < 0:
        raise InvalidParameterError(name, expected="an int seed >= 0", got=brief(rng))
    return np.random.default_rng(int(rng))


def by_name(entries, name_of, what):
    """A registry: ``{name_of(e): e}`` of ``entries``; a name given twice raises ``ValueError``
    (a dict built from a sequence would keep the last entry and lose the other silently)."""
    table = {}
    for e in entries:
        name = name_of(e)
        if name in table:
            raise ValueError(f"{what}: {name!r} is registered twice")
        table[name] = e
    return table


def brief(value):
    """A short text showing ``value`` in an error message: at most a few hundred characters
    whatever ``value`` holds (a string cut to 200 characters, nested containers to 2
    levels of 4 items, huge ints by their size). Every message that shows a value it was
    given uses it, so a crafted value cannot make an error text large or slow.

    Parameters
    ----------
    value : object

    Returns
    -------
    str
    """
    if isinstance(value, numbers.Integral) and not _is_bool(value) and \
            not isinstance(value, int):
        value = int(value)                      # NumPy ints: shown as numbers
    try:
        return _BRIEF.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails: its type only
        return f"<{type(value).__name__}>"


def _is_bool(value):
    return isinstance(value, (bool, np.bool_))


def check_int(value, name, *, min_value=None, max_value=None):
    """``value`` as a Python int within ``[min_value, max_value]`` (bools are refused)."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(name, expected="an int",
                                 got=f"{type(value).__name__} ({brief(value)})")
    value = int(value)
    if min_value is not None and value < min_value:
        raise InvalidParameterError(name, expected=f"an int >= {min_value}", got=brief(value))
    if max_value is not None and value > max_value:
        raise InvalidParameterError(name, expected=f"an int <= {max_value}", got=brief(value))
    return value


def check_real(value, name, *, allow_inf=False):
    """``value`` as a Python float, never NaN, finite unless ``allow_inf`` (bools are refused)."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, expected="a real number",
                                 got=f"{type(value).__name__} ({brief(value)})")
    value = float(value)
    if value != value or (not allow_inf and value in (_INF, -_INF)):
        raise InvalidParameterError(name, expected="a finite number", got=str(value))
    return value


def _interval(low, high, low_open, high_open):
    """The words of an interval: ``"> 0"``, ``"<= 1"``, ``"in (0, 1]"`` (``""``: no bounds)."""
    if low is None and high is None:
        return ""
    if high is None:
        return f"{'>' if low_open else '>='} {low:g}"
    if low is None:
        return f"{'<' if high_open else '<='} {high:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def _outside(v, low, high, low_open, high_open):
    """Whether ``v`` (a float, or an array: elementwise) lies outside the interval."""
    bad = False if isinstance(v, float) else np.zeros(np.shape(v), dtype=bool)
    if low is not None:
        bad |= (v <= low) if low_open else (v < low)
    if high is not None:
        bad |= (v >= high) if high_open else (v > high)
    return bad


def check_float(value, name, *, low=None, high=None, low_open=False, high_open=False,
                allow_inf=False):
    """``value`` as a Python float (see :func:`check_real`) inside the given interval."""
    value = check_real(value, name, allow_inf=allow_inf)
    if _outside(value, low, high, low_open, high_open):
        raise InvalidParameterError(name, expected="a value "
                                    f"{_interval(low, high, low_open, high_open)}",
                                    got=f"{value:g}")
    return value


def check_positive(value, name):
    """``value`` as a finite float > 0."""
    return check_float(value, name, low=0, low_open=True)


def check_nonnegative(value, name):
    """``value`` as a finite float >= 0."""
    return check_float(value, name, low=0)


def check_reals(value, name, *, low=None, high=None, low_open=False, high_open=False):
    """``value`` (a number or a 1-d array of them) as a read-only float64 array of finite
    values inside the given interval, shape () or (n,)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise ParameterTypeError(name, expected="a real number or a 1-d array of them",
                                 got=f"{type(value).__name__} ({brief(value)})")
    arr = np.array(arr, dtype=np.float64)
    if arr.ndim > 1:
        raise InvalidParameterError(name, expected="a scalar or a 1-d array",
                                    got=f"shape {arr.shape}")
    bad = ~np.isfinite(arr) | _outside(arr, low, high, low_open, high_open)
    if bad.any():
        where = "" if arr.ndim == 0 else f" (entry {int(np.flatnonzero(bad)[0])})"
        got = arr if arr.ndim == 0 else arr[bad][0]
        within = _interval(low, high, low_open, high_open)
        raise InvalidParameterError(name, expected=f"finite values{' ' * bool(within)}{within}",
                                    got=f"{float(got):g}{where}")
    arr.setflags(write=False)
    return arr


def check_bool(value, name):
    """``value`` as a Python bool (only ``True``/``False``, NumPy's included)."""
    if not _is_bool(value):
        raise ParameterTypeError(name, expected="True or False",
                                 got=f"{type(value).__name__} ({brief(value)})")
    return bool(value)


def _same_kind(value, choice):
    """Whether ``value`` may equal ``choice``: a str for a str, an int (not a bool, not a
    float) for an int, a bool for a bool."""
    if isinstance(choice, str):
        return isinstance(value, str)
    if isinstance(choice, bool):
        return _is_bool(value)
    if isinstance(choice, numbers.Integral):
        return isinstance(value, numbers.Integral) and not _is_bool(value)
    return not isinstance(value, np.ndarray)


def check_choice(value, name, choices):
    """The one of ``choices`` that ``value`` equals (of the same kind: ``True`` is not ``1``,
    ``1.0`` is not ``1``)."""
    for choice in choices:
        if _same_kind(value, choice) and value == choice:
            return choice
    raise InvalidParameterError(name, expected=f"one of {', '.join(map(repr, choices))}",
                                got=brief(value))


# ---------------------------------------------------------------------------- declarative checks
# A dataclass of arguments declares its field constraints in a class attribute
# ``CHECKS = {"field": constraint, ...}``; a constraint is any callable
# ``(value, name) -> value`` (the objects below, or e.g. ``as_schedule``). :class:`Checked`'s
# ``__post_init__`` runs them once, in order, naming the field as "<Class>: <field>", and stores
# the normalized values; cross-field checks follow in the subclass's ``__post_init__`` after
# ``super().__post_init__()``.

class Int:
    """An int (not a bool) in ``[min, max]``."""

    def __init__(self, min=None, max=None):
        self.min, self.max = min, max

    def __call__(self, value, name):
        return check_int(value, name, min_value=self.min, max_value=self.max)


class Real:
    """A real number (not a bool, never NaN; finite unless ``allow_inf``) in an interval."""

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False, allow_inf=False):
        self.kw = dict(low=low, high=high, low_open=low_open, high_open=high_open,
                       allow_inf=allow_inf)

    def __call__(self, value, name):
        return check_float(value, name, **self.kw)


class Reals:
    """A number or 1-d array of finite reals in an interval (a read-only float64 array)."""

    def __init__(self, low=None, high=None, *, low_open=False, high_open=False):
        self.kw = dict(low=low, high=high, low_open=low_open, high_open=high_open)

    def __call__(self, value, name):
        return check_reals(value, name, **self.kw)


class Choice:
    """One of the given options."""

    def __init__(self, *options):
        self.options = options

    def __call__(self, value, name):
        return check_choice(value, name, self.options)


class Bool:
    """``True`` or ``False``."""

    def __call__(self, value, name):
        return check_bool(value, name)


class Optional:
    """``None``, or a value meeting ``inner``."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, value, name):
        return None if value is None else self.inner(value, name)


#: Common constraints.
POSITIVE = Real(0, low_open=True)
NONNEGATIVE = Real(0)
COUNT = Int(min=1)


def validate_fields(obj):
    """Run ``type(obj).CHECKS`` on the fields of the (frozen) dataclass ``obj``, in order,
    storing each normalized value; an error names the field (``param``) and the class
    (``owner``): "<Class>: <field>: ..."."""
    cls = type(obj)
    for field, check in cls.CHECKS.items():
        try:
            value = check(getattr(obj, field), field)
        except ParameterError as exc:
            raise exc.within(cls.__name__) from None
        object.__setattr__(obj, field, value)


class Checked:
    """Base of the argument dataclasses: ``__post_init__`` checks the fields by ``CHECKS``."""

    #: Field name -> constraint ``(value, name) -> value`` (see the section comment above).
    CHECKS = {}

    def __post_init__(self):
        validate_fields(self)
