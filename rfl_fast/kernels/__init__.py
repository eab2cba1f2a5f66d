"""Hot kernels and the batched call convention shared by every backend.

Kernel contract (all backends): every array argument is C-contiguous float64 with one leading
batch axis ``N`` followed by the core shape listed in ``KERNELS``; the result has the same
leading axis. Kernels never validate: ``call`` (and the public API above it) does. An item for
which a kernel has no answer (e.g. the log of a matrix that is not positive definite) comes back
as NaN; the public function turns that into an error naming the argument. The C++ kernels with a
BLAS route also take ``parallel=`` (``"auto"``, ``"items"``, ``"blas"``: how a batch whose items
call BLAS uses the threads; :func:`batch_modes`); ``auto`` leaves it to the binding's rule.
"""

import functools
import math
from collections.abc import Callable

import numpy as np

from .._validation import FLOAT64, broadcast_batch, check_dtype
from . import _dispatch
from ._dispatch import (BACKENDS, available_backends, backend, get_backend, get_threads,
                        is_available, set_threads)
from ._threads import limit_blas_threads
from .registry import DEFAULT_ORDER, KERNELS, REGISTRY

__all__ = ["KERNELS", "REGISTRY", "BACKENDS", "call", "resolve", "fast_lane", "backend",
           "get_backend", "available_backends", "is_available", "describe_backends",
           "compiled_version", "set_threads", "get_threads", "limit_blas_threads",
           "numba_cache_note", "auto_order", "route_rules", "batch_modes", "warm_up"]


def warm_up(names=()) -> list[str]:
    """Load every available backend now (the C++ extension; Numba's import, ~0.3 s) and call
    every available backend of each kernel of ``names`` once at a tiny shape (Numba compiles a
    kernel family on its first call, or loads it from its cache), so that no timed round or
    benchmark pays for it. Later calls cost little: backends load once.

    Parameters
    ----------
    names : iterable of str, optional
        Kernels of ``KERNELS`` to call once on every available backend.

    Returns
    -------
    list of str
        The available backends, fastest first (:func:`available_backends`).
    """
    backends = available_backends()
    from .registry import sweep_grid
    from .testing import kernel_inputs
    for name in dict.fromkeys(names):
        dims = sweep_grid(name, quick=True)[0][1:]
        args = tuple(np.ascontiguousarray(a) for a in
                     kernel_inputs(name, np.random.default_rng(0), 1, *dims))
        for b in backends:
            resolve(name, b)[1](*args)
    return backends


def resolve(name: str, backend: str | None = None, shape: tuple[int, ...] | None = None
            ) -> tuple[str, Callable[..., np.ndarray]]:
    """The raw kernel ``name`` of a backend (arrays of the kernel contract, no checks). For
    benchmarks and callers that validate themselves.

    Parameters
    ----------
    name : str
        A kernel of ``KERNELS``.
    backend : {"auto", "cpp", "numba", "numpy"}, optional
        Default: the choice in force (:func:`get_backend`).
    shape : tuple of int, optional
        Shape of the first argument, for ``"auto"``'s choice.

    Returns
    -------
    backend_name : str
        The backend that provides the kernel.
    fn : callable
        The kernel: C-contiguous float64 arrays with one leading batch axis in and out.

    Raises
    ------
    BackendUnavailableError
        No backend of the choice provides ``name``.
    """
    return _dispatch.resolve(name, backend, shape)


def auto_order(name: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """``auto``'s backend order for kernel ``name`` when its first argument has shape ``shape``:
    the registry's declared rule (:func:`rfl_fast.kernels.registry.declared_order`)."""
    return _dispatch.auto_order(name, shape)


def route_rules() -> list[str]:
    """``auto``'s declared rules, one line each: the default order, every declared route (with
    the kernels that declare it) and every size limit."""
    rules = {}
    for name, k in REGISTRY.items():
        for r in k.routes:
            batch = "" if r.max_items is None else f", batches of at most {r.max_items} items"
            rules.setdefault(f"{' > '.join(r.order)} from size {r.min_size}{batch} ({r.why})",
                             []).append(name)
        for b, n in k.max_size:
            rules.setdefault(f"{b} only up to size {n}", []).append(name)
    return ([f"default: {' > '.join(DEFAULT_ORDER)}"]
            + [f"{', '.join(names)}: {rule}" for rule, names in rules.items()])


def batch_modes(name: str, shape: tuple[int, ...]) -> dict[str, Callable[..., np.ndarray]] | None:
    """The C++ kernel ``name`` in its two batch modes, ``{"items": fn, "blas": fn}``, when at
    ``shape`` (``(items, *core)``) its items call BLAS that threads each call, so the modes
    differ (the binding's own rule, ``_core.item_blas_work``); ``None`` elsewhere, or without
    C++ or BLAS's thread setting."""
    core = _dispatch.load("cpp")
    if core is None or not core.can_hold_blas_threads():
        return None
    if core.item_blas_work(name, tuple(int(v) for v in shape[1:])) == 0:  # 0 without BLAS too
        return None
    fn = getattr(core, name)
    return {mode: functools.partial(fn, parallel=mode) for mode in ("items", "blas")}


def compiled_version() -> str | None:
    """The C++ extension's version (``None`` if it is not built)."""
    core = _dispatch.load("cpp")
    return None if core is None else core.__version__


def numba_cache_note() -> str:
    """One line: where Numba caches the compiled kernels (or why Numba is unavailable)."""
    mod = _dispatch.load("numba")
    if mod is None:
        return f"Numba unavailable ({_dispatch.backend_error('numba')})"
    return mod.cache_note()


def describe_backends() -> list[str]:
    """One line per backend: available (version, kernels provided) or why not."""
    lines = []
    for name in _dispatch.BACKENDS:
        mod = _dispatch.load(name)
        if mod is None:
            lines.append(f"  {name:6s} unavailable ({_dispatch.backend_error(name)})")
            continue
        version = getattr(mod, "__version__", None)
        if name == "numba":
            import numba

            version = f"numba {numba.__version__}, {numba.get_num_threads()} threads"
        n = len(_dispatch.backend_kernels(name))
        lines.append(f"  {name:6s} available   {n}/{len(KERNELS)} kernels  {version or ''}")
    return lines


def fast_lane(name: str, backend: str | None = None, shape: tuple[int, ...] | None = None
              ) -> Callable[..., np.ndarray | None] | None:
    """The C++ checked form of kernel ``name`` when C++ is the backend in force for it.

    Parameters
    ----------
    name : str
        A kernel of ``KERNELS``.
    backend : {"auto", "cpp", "numba", "numpy"}, optional
        Default: the choice in force (:func:`get_backend`).
    shape : tuple of int, optional
        Shape of the first argument, for ``"auto"``'s choice.

    Returns
    -------
    callable or None
        ``fn(a, b, core_shape)``: the result, or ``None`` when it does not take the arrays as
        they are; ``None`` when the kernel has no fast lane or C++ is not the backend chosen.
    """
    return _dispatch.resolve_checked(name, backend, shape)


def _check_cores(name, arrays, core_ndims):
    """Refuse core shapes a kernel would read past: every argument of a registered kernel has
    one core shape (a point and its tangent vector, two points), and a ``square`` family's is
    ``(n, n)``. The compiled kernels trust the first argument's shape for all of them."""
    for j, (a, k) in enumerate(zip(arrays, core_ndims)):
        if a.ndim < k:
            raise ValueError(f"{name}: argument {j}: expected at least {k} axes (its core), got "
                             f"shape {a.shape}")
    cores = [a.shape[a.ndim - k:] for a, k in zip(arrays, core_ndims)]
    if any(c != cores[0] for c in cores[1:]):
        raise ValueError(f"{name}: expected every argument with one core shape, got core "
                         f"shapes {', '.join(map(str, cores))}")
    core = cores[0]
    if REGISTRY[name].family == "square" and len(core) == 2 and core[0] != core[1]:
        raise ValueError(f"{name}: expected square (n, n) matrices, got core shape {core}")


def call(name: str, *arrays: np.ndarray, backend: str | None = None) -> np.ndarray:
    """Run kernel ``name`` on arrays with any broadcastable leading axes.

    Flattens the batch axes to one, makes the inputs C-contiguous float64, calls the kernel of
    the chosen backend and restores the batch axes. The result is float32 only when every input
    is float32 (computed in float64, rounded at the end).

    Parameters
    ----------
    name : str
        A kernel of ``KERNELS``.
    *arrays : ndarray, shape (..., *core)
        The kernel's arguments (core shapes as ``KERNELS[name]``), batch axes broadcastable;
        float64, float32 or integer (any other dtype -- complex, float16, longdouble, ... --
        raises ``TypeError``).
    backend : {"auto", "cpp", "numba", "numpy"}, optional
        Default: the choice in force (:func:`get_backend`).

    Returns
    -------
    ndarray, shape (..., *core_out)
        The kernel's result with the broadcast batch axes.

    Raises
    ------
    ValueError
        Batch axes that do not broadcast, an argument with fewer axes than its core,
        arguments of different core shapes, or a non-square matrix for a kernel of square
        matrices.
    """
    core_ndims, _ = KERNELS[name]
    _, fn = _dispatch.resolve(name, backend, arrays[0].shape)
    if len(arrays) == 2 and core_ndims[0] == core_ndims[1]:  # fast path: one item, each ready
        a, b = arrays
        if (a.ndim == core_ndims[0] and b.shape == a.shape and a.dtype is FLOAT64
                and (REGISTRY[name].family != "square" or a.shape[-1] == a.shape[-2])
                and b.dtype is FLOAT64 and a.flags.c_contiguous and b.flags.c_contiguous):
            out = fn(a[None], b[None])
            return out.reshape(out.shape[1:])
    _check_cores(name, arrays, core_ndims)
    # fast path (the common case: equal batch axes) skips np.broadcast_shapes (~2-4 us)
    batch = None
    for a, k in zip(arrays, core_ndims):
        b = a.shape[: a.ndim - k]
        if batch is None:
            batch = b
        elif b != batch:
            batch = broadcast_batch(arrays, ("argument",) * len(arrays), core_ndims)
            break
    count = math.prod(batch)
    flat = []
    all32 = True
    for a, k in zip(arrays, core_ndims):
        dt = a.dtype
        all32 = all32 and dt == np.float32
        core = a.shape[a.ndim - k:]
        if a.shape[: a.ndim - k] != batch:
            a = np.broadcast_to(a, batch + core)
        a = a.reshape((count,) + core)
        if dt.char not in "fd" and dt.kind not in "iu":  # would be changed silently
            check_dtype(dt, f"{name}: argument {len(flat)}")
        if dt != np.float64 or not a.flags.c_contiguous:
            a = np.ascontiguousarray(a, dtype=np.float64)
        flat.append(a)
    if count and not all(a.size for a in flat):
        # empty items (a zero in a core axis): every item's answer is the same, but a loop
        # would still walk every item of the batch (a zero-stride batch may claim 2^40 of
        # them): one item by the reference, repeated (a MemoryError where they do not fit)
        one = getattr(_dispatch.load("numpy"), name)(*(a[:1] for a in flat))
        out = np.array(np.broadcast_to(one, (count,) + one.shape[1:]))
    else:
        out = fn(*flat)
    out = out.reshape(batch + out.shape[1:])
    if all32:
        out = out.astype(np.float32)
    return out
