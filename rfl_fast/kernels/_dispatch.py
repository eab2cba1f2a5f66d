"""Backends and the choice among them: the only code that loads ``rfl_fast._core``.

Every kernel (``rfl_fast.kernels.registry``) has a NumPy/SciPy reference
(``rfl_fast.kernels.reference``); compiled versions live in the C++ extension
(``rfl_fast._core``) and in Numba (``rfl_fast.kernels._numba``). A backend is a module whose
attributes are kernels with the reference's names and calling convention. The choice, from
strongest to weakest: the ``backend=`` argument of a call, the innermost
``with rfl_fast.backend(...)`` block (per thread/context), the environment variable
``RFL_FAST_BACKEND``, then ``"auto"``: the first installed backend of the kernel's declared
order at the call's size (:func:`rfl_fast.kernels.registry.declared_order`: C++, Numba, the
reference, except where the registry declares a route for a band of sizes).
"""

import contextlib
import contextvars
import ctypes
import importlib
import math
import os
import sys
from collections.abc import Iterator

from .._validation import env_reader
from ..errors import BackendUnavailableError
from ._threads import default_threads
from .registry import KERNELS, REGISTRY, declared_order, handles, size_limit

__all__ = ["BACKENDS", "backend", "get_backend", "is_available", "available_backends", "load",
           "resolve", "resolve_checked", "auto_order", "backend_kernels", "backend_error",
           "set_threads", "get_threads", "forget_choices", "check_choice"]

BACKENDS = ("cpp", "numba", "numpy")
_CHOICES = BACKENDS + ("auto",)
_MODULES = {
    "cpp": "rfl_fast._core",
    "numba": "rfl_fast.kernels._numba",
    "numpy": "rfl_fast.kernels.reference",
}
_ENV = "RFL_FAST_BACKEND"
#: Resolved choices kept per (kernel, choice, size); cleared when it grows past this.
_CACHE_MAX = 4096

_current = contextvars.ContextVar("rfl_fast_backend", default=None)
_modules = {}
_errors = {}
_resolved = {}
_checked = {}
_threads = None  # the C++ kernels' thread count in force (set_threads)


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
                module.set_threads(_threads_in_force())
                _give_blas(module)
                _give_blas_threads(module)
            _modules[name] = module
    return _modules[name]


def _give_blas(core):
    """Hand ``_core`` SciPy's BLAS dgemm and LAPACK dgesv, dsyevd, dgees and dtrsyl for its
    large-size paths (Stiefel p >= 9, SPD n >= 128). A SciPy without them leaves the kernels on
    their own loops: slower there, and the polar inverse answers fewer items above p = 32."""
    try:
        cython_blas, cython_lapack = _scipy_capsules("cython_blas"), _scipy_capsules("cython_lapack")
        lapack = cython_lapack.__pyx_capi__
        routines = (cython_blas.__pyx_capi__["dgemm"],
                    *(lapack[f] for f in ("dgesv", "dsyevd", "dgees", "dtrsyl")))
    except (ImportError, AttributeError, KeyError):
        return
    core.set_blas(*routines)


def _scipy_capsules(name):
    """SciPy's Cython BLAS or LAPACK module ``name`` (``"cython_blas"``, ``"cython_lapack"``):
    the one imported already, else loaded from its file alone. Its function capsules need
    nothing else of ``scipy.linalg``, whose import costs about 0.2 s of CPU per process (a
    Flower ClientApp is a fresh process per message); ``ImportError`` without it."""
    full = f"scipy.linalg.{name}"
    if full in sys.modules:
        return sys.modules[full]
    import importlib.machinery
    import importlib.util

    import scipy

    folder = os.path.join(os.path.dirname(os.path.abspath(scipy.__file__)), "linalg")
    found = importlib.machinery.PathFinder.find_spec(name, [folder])
    if found is None or not isinstance(found.loader, importlib.machinery.ExtensionFileLoader):
        raise ImportError(f"{full}: not found in {folder}")
    spec = importlib.util.spec_from_file_location(full, found.origin)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _give_blas_threads(core):
    """Hand ``_core`` the thread setting of the BLAS its routines come from (OpenBLAS with its
    own pthreads pool: ``openblas_get_num_threads`` / ``openblas_set_num_threads``), so a batch
    of items on BLAS can run on the loop's threads with BLAS held to one thread. Another BLAS
    (or an OpenMP build, whose pools are per thread) leaves the kernels one item at a time on
    BLAS's threads, as before."""
    try:
        import scipy
        from threadpoolctl import ThreadpoolController

        libs = [c for c in ThreadpoolController().lib_controllers
                if c.user_api == "blas" and c.internal_api == "openblas"]
        here = os.path.dirname(os.path.dirname(os.path.abspath(scipy.__file__)))
        own = [c for c in libs if os.path.basename(os.path.dirname(c.filepath)).startswith(
            ("scipy.libs", ".dylibs")) and c.filepath.startswith(here)]
        lib = own[0] if len(own) == 1 else libs[0] if len(libs) == 1 else None
        if lib is None or getattr(lib, "threading_layer", None) != "pthreads":
            return
        dynlib = ctypes.CDLL(lib.filepath)  # loaded already: the same library, any threadpoolctl
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                get = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    address = [ctypes.cast(f, ctypes.c_void_p).value for f in (get, put)]
                    return core.set_blas_threads(*address)
    except (ImportError, AttributeError, OSError):
        return


def check_choice(name, where):
    if name not in _CHOICES:
        raise ValueError(f"{where}: unknown backend {name!r}; expected one of {_CHOICES}")
    return name


def _check_backend(name):
    """``name`` if it names a backend (not ``"auto"``, a choice among them), else ValueError."""
    if name not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {name!r}")
    return name


def is_available(name: str) -> bool:
    """Whether backend ``name`` ("cpp", "numba" or "numpy") can be imported.

    Parameters
    ----------
    name : {"cpp", "numba", "numpy"}
        The backend.

    Returns
    -------
    bool
    """
    return load(_check_backend(name)) is not None


def available_backends() -> list[str]:
    """Names of the importable backends, fastest first."""
    return [b for b in BACKENDS if is_available(b)]


def backend_error(name):
    """Why backend ``name`` is unavailable (``None`` if it is available)."""
    load(_check_backend(name))
    return _errors.get(name)


def backend_kernels(name):
    """Sorted names of the kernels backend ``name`` provides (empty if unavailable)."""
    mod = load(_check_backend(name))
    return sorted(k for k in KERNELS if mod is not None and callable(getattr(mod, k, None)))


def get_backend() -> str:
    """The backend choice in force here: the ``with backend(...)`` block, the environment
    variable ``RFL_FAST_BACKEND``, or ``"auto"``."""
    choice = _current.get()
    if choice is None:
        choice = _env_choice()
    return choice


def _parse_env_choice(raw):
    # a bad value raises here and is not cached, so every call raises until it is fixed
    return check_choice(raw or "auto", _ENV)


_env_choice = env_reader(_ENV, _parse_env_choice)


@contextlib.contextmanager
def backend(name: str) -> Iterator[str]:
    """Context manager: use backend ``name`` for the kernels called in the block.

    The setting is per thread (a context variable), so two threads can use two backends.

    Parameters
    ----------
    name : {"auto", "cpp", "numba", "numpy"}
        The backend.

    Yields
    ------
    str
        ``name``.
    """
    token = _current.set(check_choice(name, "backend"))
    try:
        yield name
    finally:
        _current.reset(token)


def _threads_in_force():
    global _threads
    if _threads is None:
        _threads = default_threads()
    return _threads


def forget_choices():
    """Forget every resolved choice (after a kernel was registered or removed at run time)."""
    _resolved.clear()
    _checked.clear()


def _last_dim(shape):
    return None if not shape else shape[-1]


#: Batches of more items than this are one band for ``auto`` (the declared rules' item bounds
#: lie below it), so the resolver's cache holds a few keys per kernel and size.
_ITEM_BANDS = 16


def _items(kernel, shape):
    """Items in the batch of a first argument of ``shape`` for ``kernel`` (its leading axes;
    ``None``: unknown), capped at ``_ITEM_BANDS + 1``."""
    if not shape or kernel not in REGISTRY:
        return None
    core = REGISTRY[kernel].args[0]
    return min(math.prod(shape[:len(shape) - core]), _ITEM_BANDS + 1)


def _key(kernel, choice, shape):
    """The resolver caches' key: what the declared rules read of ``shape``."""
    return (kernel, choice, _last_dim(shape), _items(kernel, shape))


def auto_order(kernel, shape):
    """``auto``'s backend order for ``kernel`` when its first argument has shape ``shape``
    (``None``: unknown): the registry's declared order at its size, the last dimension, and
    its batch's item count."""
    return declared_order(kernel, _last_dim(shape), _items(kernel, shape))


def resolve(kernel, choice=None, shape=None):
    """``(backend_name, function)`` for ``kernel`` under ``choice`` (default: in force) when its
    first argument has shape ``shape`` (see ``auto_order``)."""
    choice = get_backend() if choice is None else choice
    key = _key(kernel, choice, shape)
    hit = _resolved.get(key)
    if hit is not None:
        return hit
    check_choice(choice, "backend")
    order = auto_order(kernel, shape) if choice == "auto" else (choice,)
    if choice == "auto":
        order = [b for b in order if handles(kernel, b, _last_dim(shape))]
    elif kernel in REGISTRY and not handles(kernel, choice, _last_dim(shape)):
        limit = size_limit(kernel, choice)
        raise BackendUnavailableError(
            f"backend {choice!r} handles kernel {kernel!r} only up to size {limit} (the last "
            f"dimension of the first argument), got shape {tuple(shape)}: use 'auto', or "
            f"{', '.join(repr(b) for b in BACKENDS if handles(kernel, b, _last_dim(shape)))}")
    for name in order:
        fn = getattr(load(name), kernel, None) if load(name) is not None else None
        if fn is None and name == "numpy" and kernel in REGISTRY:
            fn = REGISTRY[kernel].reference
        if callable(fn):
            if len(_resolved) >= _CACHE_MAX:
                _resolved.clear()
            _resolved[key] = (name, fn)
            return name, fn
    if choice == "auto":
        raise BackendUnavailableError(f"no backend provides kernel {kernel!r}")
    reason = _errors.get(choice) or f"it provides {backend_kernels(choice)}"
    raise BackendUnavailableError(f"backend {choice!r} has no kernel {kernel!r} ({reason})")


def resolve_checked(kernel, choice=None, shape=None):
    """The C++ fast lane ``_core.<kernel>_checked`` (see ``Manifold._compiled``) when the registry
    declares one and C++ is the backend ``resolve`` picks for ``kernel`` under ``choice`` at
    ``shape``, else ``None``."""
    choice = get_backend() if choice is None else choice
    key = _key(kernel, choice, shape)
    try:
        return _checked[key]
    except KeyError:
        name, _ = resolve(kernel, choice, shape)
        declared = name == "cpp" and REGISTRY[kernel].fast_lane
        fn = getattr(_modules["cpp"], kernel + "_checked") if declared else None
        if len(_checked) >= _CACHE_MAX:
            _checked.clear()
        _checked[key] = fn
        return fn


def set_threads(threads: int | None) -> None:
    """Use at most ``threads`` threads in the compiled C++ kernels (their batch loops and the
    fused PCA sums) and in the stacked noise draws (:class:`rfl_fast.kernels.streams.ItemStreams`:
    each item still drawn from its own generator, so the numbers never change).

    Small batches use fewer threads (each thread must get ~0.5 MB of input). Results never
    depend on the thread count: the work is split into fixed chunks that threads take in turn,
    so a thread on a busy core simply takes fewer. The setting is process-wide. Numba kernels
    follow Numba's own setting (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``).

    Parameters
    ----------
    threads : int or None
        At most this many threads (>= 1); ``None``: back to the default, ``RFL_FAST_THREADS``
        (read when the extension loads) or else all cores.
    """
    global _threads
    if threads is None:
        threads = default_threads()
    elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected an int >= 1 or None, got {threads!r}")
    core = load("cpp")
    if core is not None:
        core.set_threads(threads)
    _threads = threads


def get_threads() -> int:
    """Threads the compiled kernels use at most (see ``set_threads``)."""
    core = load("cpp")
    return core.get_threads() if core is not None else _threads_in_force()
