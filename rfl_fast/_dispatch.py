"""Backend registry.

Every kernel has a NumPy/SciPy reference (``rfl_fast.kernels.reference``); compiled versions
live in the C++ extension (``rfl_fast._core``) and in Numba (``rfl_fast.kernels._numba``).
A backend is a module whose attributes are kernels with the reference's names and calling
convention. The choice, from strongest to weakest: the ``backend=`` argument of a call, the
innermost ``with rfl_fast.backend(...)`` block (per thread/context), the environment variable
``RFL_FAST_BACKEND``, then ``"auto"``: the first backend in the kernel's preference order that
is installed and has the kernel.
"""

import contextlib
import contextvars
import importlib

from ._validation import env_reader
from .errors import BackendUnavailableError

__all__ = ["BACKENDS", "backend", "get_backend", "is_available", "available_backends",
           "resolve", "resolve_checked", "backend_kernels", "backend_error"]

BACKENDS = ("cpp", "numba", "numpy")
_CHOICES = BACKENDS + ("auto",)
_MODULES = {
    "cpp": "rfl_fast._core",
    "numba": "rfl_fast.kernels._numba",
    "numpy": "rfl_fast.kernels.reference",
}
_ENV = "RFL_FAST_BACKEND"
_DEFAULT_ORDER = ("cpp", "numba", "numpy")
# Per-kernel order for "auto", set from the side-by-side benchmarks (``rfl-fast bench``, the
# papers' shapes, one process, medians of 7; AMD EPYC, 2 shared cores, load average 1.6-3,
# OpenBLAS SkylakeX kernel, C++ built portable with its AVX2 clones active). C++ was the fastest
# backend on every row (1.2x-22x over NumPy), so it leads everywhere (_DEFAULT_ORDER). The
# entries below only order the fallbacks when the extension is missing: Numba lost to the NumPy
# reference on these kernels (speed-up over NumPy: stiefel_proj 0.3x at 200x784x5 and
# 1000x200x5, stiefel_retr_qr 0.5x, sphere_dist 0.5x at 1e5 x 10, lorentz_dist 0.3x,
# lorentz_exp / lorentz_log 0.6x and lorentz_transport 0.8x at 1e5 x 3, only 1.1-1.4x at
# 1e5 x 11). Everywhere else Numba beat NumPy (up to 8.6x) and keeps second place.
_CPP_NUMPY_NUMBA = ("cpp", "numpy", "numba")
PREFERENCE = {
    "stiefel_proj": _CPP_NUMPY_NUMBA,
    "stiefel_retr_qr": _CPP_NUMPY_NUMBA,
    "sphere_dist": _CPP_NUMPY_NUMBA,
    "lorentz_exp": _CPP_NUMPY_NUMBA,
    "lorentz_log": _CPP_NUMPY_NUMBA,
    "lorentz_dist": _CPP_NUMPY_NUMBA,
    "lorentz_transport": _CPP_NUMPY_NUMBA,
}

_current = contextvars.ContextVar("rfl_fast_backend", default=None)
_modules = {}
_errors = {}
_resolved = {}
_checked = {}


def _load(name):
    """The backend's module, or ``None`` if it cannot be imported (the reason is kept)."""
    if name not in _modules:
        try:
            module = importlib.import_module(_MODULES[name])
        except ImportError as exc:  # not built, or numba missing
            _modules[name] = None
            _errors[name] = f"{type(exc).__name__}: {exc}"
        else:
            if name == "cpp":  # its threads: RFL_FAST_THREADS or all cores (see set_threads)
                from ._threads import default_threads

                module.set_threads(default_threads())
            _modules[name] = module
    return _modules[name]


def _check_choice(name, where):
    if name not in _CHOICES:
        raise ValueError(f"{where}: unknown backend {name!r}; expected one of {_CHOICES}")
    return name


def is_available(name):
    """Whether backend ``name`` ("cpp", "numba" or "numpy") can be imported."""
    return _load(_check_choice(name, "backend")) is not None


def available_backends():
    """Names of the importable backends, fastest first."""
    return [b for b in BACKENDS if is_available(b)]


def backend_error(name):
    """Why backend ``name`` is unavailable (``None`` if it is available)."""
    _load(_check_choice(name, "backend"))
    return _errors.get(name)


def backend_kernels(name):
    """Sorted names of the kernels backend ``name`` provides (empty if unavailable)."""
    from .kernels import KERNELS

    mod = _load(_check_choice(name, "backend"))
    return sorted(k for k in KERNELS if mod is not None and callable(getattr(mod, k, None)))


def get_backend():
    """The backend choice in force here: the ``with backend(...)`` block, the environment
    variable ``RFL_FAST_BACKEND``, or ``"auto"``."""
    choice = _current.get()
    if choice is None:
        choice = _env_choice()
    return choice


def _parse_env_choice(raw):
    # a bad value raises here and is not cached, so every call raises until it is fixed
    return _check_choice(raw or "auto", _ENV)


_env_choice = env_reader(_ENV, _parse_env_choice)


@contextlib.contextmanager
def backend(name):
    """Use backend ``name`` ("auto", "cpp", "numba", "numpy") for kernels called in the block.

    The setting is per thread (a context variable), so two threads can use two backends.
    """
    token = _current.set(_check_choice(name, "backend"))
    try:
        yield name
    finally:
        _current.reset(token)


def resolve(kernel, choice=None):
    """Return ``(backend_name, function)`` for ``kernel`` under ``choice`` (default: in force)."""
    choice = get_backend() if choice is None else choice
    key = (kernel, choice)
    hit = _resolved.get(key)
    if hit is not None:
        return hit
    _check_choice(choice, "backend")
    order = PREFERENCE.get(kernel, _DEFAULT_ORDER) if choice == "auto" else (choice,)
    for name in order:
        fn = getattr(_load(name), kernel, None) if _load(name) is not None else None
        if callable(fn):
            _resolved[key] = (name, fn)
            return name, fn
    if choice == "auto":
        raise BackendUnavailableError(f"no backend provides kernel {kernel!r}")
    reason = _errors.get(choice) or f"it provides {backend_kernels(choice)}"
    raise BackendUnavailableError(f"backend {choice!r} has no kernel {kernel!r} ({reason})")


def resolve_checked(kernel, choice=None):
    """The C++ fast lane ``_core.<kernel>_checked`` (see ``Manifold._compiled``) when C++ is the
    backend ``resolve`` picks for ``kernel`` under ``choice``, else ``None``."""
    choice = get_backend() if choice is None else choice
    key = (kernel, choice)
    try:
        return _checked[key]
    except KeyError:
        name, _ = resolve(kernel, choice)
        fn = getattr(_modules["cpp"], kernel + "_checked", None) if name == "cpp" else None
        _checked[key] = fn
        return fn
