"""Backends and the choice among them: the only code that loads ``rfl_fast._core``.

Every kernel (``rfl_fast.kernels.registry``) has a NumPy/SciPy reference
(``rfl_fast.kernels.reference``); compiled versions live in the C++ extension
(``rfl_fast._core``) and in Numba (``rfl_fast.kernels._numba``). A backend is a module whose
attributes are kernels with the reference's names and calling convention. The choice, from
strongest to weakest: the ``backend=`` argument of a call, the innermost
``with rfl_fast.backend(...)`` block (per thread/context), the environment variable
``RFL_FAST_BACKEND``, then ``"auto"``: the first installed backend of the kernel's order at the
call's shape (``_auto_table.AUTO``, measured by the shape sweep), keyed on the last dimension of
the first argument (p of a Stiefel matrix, n of a square matrix, d of a vector).
"""

import bisect
import contextlib
import contextvars
import importlib

from .._validation import env_reader
from ..errors import BackendUnavailableError
from ._auto_table import AUTO
from ._threads import default_threads
from .registry import KERNELS, REGISTRY, handles

__all__ = ["BACKENDS", "backend", "get_backend", "is_available", "available_backends", "load",
           "resolve", "resolve_checked", "auto_order", "backend_kernels", "backend_error",
           "set_threads", "get_threads"]

BACKENDS = ("cpp", "numba", "numpy")
_CHOICES = BACKENDS + ("auto",)
_MODULES = {
    "cpp": "rfl_fast._core",
    "numba": "rfl_fast.kernels._numba",
    "numpy": "rfl_fast.kernels.reference",
}
_ENV = "RFL_FAST_BACKEND"
#: Order for a kernel or size the auto table does not list.
DEFAULT_ORDER = ("cpp", "numba", "numpy")
# AUTO's bands as sorted upper bounds, for bisect: kernel -> (uppers, orders)
_BANDS = {k: ([u for u, _ in bands[:-1]], [o for _, o in bands]) for k, bands in AUTO.items()}

_current = contextvars.ContextVar("rfl_fast_backend", default=None)
_modules = {}
_errors = {}
_resolved = {}
_checked = {}


def load(name):
    """The backend's module, or ``None`` if it cannot be imported (the reason is kept)."""
    if name not in _modules:
        try:
            module = importlib.import_module(_MODULES[name])
        except ImportError as exc:  # not built, or numba missing
            _modules[name] = None
            _errors[name] = f"{type(exc).__name__}: {exc}"
        else:
            if name == "cpp":  # its threads: RFL_FAST_THREADS or all cores (see set_threads)
                module.set_threads(default_threads())
            _modules[name] = module
    return _modules[name]


def _check_choice(name, where):
    if name not in _CHOICES:
        raise ValueError(f"{where}: unknown backend {name!r}; expected one of {_CHOICES}")
    return name


def is_available(name):
    """Whether backend ``name`` ("cpp", "numba" or "numpy") can be imported."""
    return load(_check_choice(name, "backend")) is not None


def available_backends():
    """Names of the importable backends, fastest first."""
    return [b for b in BACKENDS if is_available(b)]


def backend_error(name):
    """Why backend ``name`` is unavailable (``None`` if it is available)."""
    load(_check_choice(name, "backend"))
    return _errors.get(name)


def backend_kernels(name):
    """Sorted names of the kernels backend ``name`` provides (empty if unavailable)."""
    mod = load(_check_choice(name, "backend"))
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


def auto_order(kernel, size):
    """``auto``'s backend order for ``kernel`` when the first argument's last dimension is
    ``size`` (``None``: the order of the smallest sizes)."""
    bands = _BANDS.get(kernel)
    if bands is None:
        return DEFAULT_ORDER
    uppers, orders = bands
    return orders[0 if size is None else bisect.bisect_left(uppers, size)]


def resolve(kernel, choice=None, size=None):
    """``(backend_name, function)`` for ``kernel`` under ``choice`` (default: in force) at a
    shape whose first argument ends in dimension ``size`` (see ``auto_order``)."""
    choice = get_backend() if choice is None else choice
    key = (kernel, choice, size)
    hit = _resolved.get(key)
    if hit is not None:
        return hit
    _check_choice(choice, "backend")
    order = auto_order(kernel, size) if choice == "auto" else (choice,)
    if choice == "auto":
        order = [b for b in order if handles(kernel, b, size)]
    for name in order:
        fn = getattr(load(name), kernel, None) if load(name) is not None else None
        if callable(fn):
            _resolved[key] = (name, fn)
            return name, fn
    if choice == "auto":
        raise BackendUnavailableError(f"no backend provides kernel {kernel!r}")
    reason = _errors.get(choice) or f"it provides {backend_kernels(choice)}"
    raise BackendUnavailableError(f"backend {choice!r} has no kernel {kernel!r} ({reason})")


def resolve_checked(kernel, choice=None, size=None):
    """The C++ fast lane ``_core.<kernel>_checked`` (see ``Manifold._compiled``) when the registry
    declares one and C++ is the backend ``resolve`` picks for ``kernel`` under ``choice`` at
    ``size``, else ``None``."""
    choice = get_backend() if choice is None else choice
    key = (kernel, choice, size)
    try:
        return _checked[key]
    except KeyError:
        name, _ = resolve(kernel, choice, size)
        declared = name == "cpp" and REGISTRY[kernel].fast_lane
        fn = getattr(_modules["cpp"], kernel + "_checked") if declared else None
        _checked[key] = fn
        return fn


def set_threads(threads):
    """Use at most ``threads`` threads in the compiled C++ kernels (their batch loops and the
    fused PCA sums); ``None``: back to the default, ``RFL_FAST_THREADS`` (read when the
    extension loads) or else all cores.

    Small batches use fewer threads (each thread must get ~0.5 MB of input). Results never
    depend on the thread count: the work is split into fixed chunks that threads take in turn,
    so a thread on a busy core simply takes fewer. The setting is process-wide. Numba kernels
    follow Numba's own setting (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``).
    """
    if threads is None:
        threads = default_threads()
    elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected an int >= 1 or None, got {threads!r}")
    core = load("cpp")
    if core is not None:
        core.set_threads(threads)


def get_threads():
    """Threads the compiled kernels use at most (see ``set_threads``)."""
    core = load("cpp")
    return core.get_threads() if core is not None else default_threads()
