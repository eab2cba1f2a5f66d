"""rfl_fast: Riemannian federated learning with a compiled core.

Manifolds (``Sphere``, ``Stiefel``, ``Grassmann``, ``SPD``, ``Lorentz``, ``Euclidean`` and their
``Product``) work on stacked arrays ``(..., n, p)``; their hot kernels run in a C++ extension
or Numba, with a NumPy reference behind every one (see ``backend`` and ``show_config``).
"""

import importlib.util
import os
import platform
import sys
from importlib import metadata

from . import errors, linalg
from .kernels import available_backends, backend, get_backend, get_threads, set_threads
from .manifolds import SPD, Euclidean, Grassmann, Lorentz, Manifold, Product, Sphere, Stiefel

try:
    __version__ = metadata.version("rfl_fast")
except metadata.PackageNotFoundError:  # a source tree with the extension built in place
    from .kernels import compiled_version

    __version__ = compiled_version() or "0+unknown"

__all__ = [
    "Manifold", "Euclidean", "Sphere", "Stiefel", "Grassmann", "SPD", "Lorentz", "Product",
    "linalg", "errors", "backend", "get_backend", "available_backends", "set_threads",
    "get_threads",
    "show_config", "get_include", "get_cmake_dir", "get_pkgconfig_dir", "__version__",
    # subpackages, imported on first use (``rf.federation.run``, ``rf.problems.KPCA``, ...)
    "problems", "algorithms", "federation", "privacy", "data", "app",
]

_LAZY = ("problems", "algorithms", "federation", "privacy", "data", "app")


def __getattr__(name):
    """Import the federated layer's subpackages on first access (keeps ``import rfl_fast``
    light for users of the primitives alone)."""
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _shipped_dir(name):
    """``rfl_fast/<name>`` in an installed wheel, else ``cpp/<name>`` of a source checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, name)
    if os.path.isdir(installed):
        return installed
    return os.path.join(os.path.dirname(here), "cpp", name)


def get_include() -> str:
    """Folder holding the C++ headers (``#include <rfl/stiefel.hpp>``) for other C++ projects.

    Returns
    -------
    str
        Absolute path; pass it as ``-I`` (``examples/cpp_extension/`` shows a pybind11 build).
    """
    return _shipped_dir("include")


def get_cmake_dir() -> str:
    """Folder holding ``rfl_fastConfig.cmake`` (also ``python -m rfl_fast --cmake-dir``).

    Returns
    -------
    str
        Absolute path; pass it as ``-Drfl_fast_DIR=...`` to CMake, then
        ``find_package(rfl_fast CONFIG REQUIRED)`` and link ``rfl_fast::headers``.
    """
    return _shipped_dir("cmake")


def get_pkgconfig_dir() -> str:
    """Folder holding ``rfl_fast.pc`` (also ``python -m rfl_fast --pkgconfig-dir``).

    Returns
    -------
    str
        Absolute path; add it to ``PKG_CONFIG_PATH``, then ``pkg-config --cflags rfl_fast``.
    """
    return _shipped_dir("pkgconfig")


def _pool_line(pool):
    """One thread pool of threadpoolctl as a line: its API and library, threads, and the kernel
    and version where the library reports them (OpenMP runtimes report neither)."""
    path = pool.get("filepath") or ""
    lib = pool.get("prefix") or os.path.basename(path) or "?"
    folder = os.path.basename(os.path.dirname(path))
    if folder.endswith(".libs"):                 # a wheel's vendored copy: numpy's, scipy's
        lib = f"{folder[:-len('.libs')]}'s {lib}"
    parts = [f"{pool.get('num_threads')} threads"]
    if pool.get("architecture"):
        parts.append(f"kernel {pool['architecture']}")
    if pool.get("version"):
        parts.append(f"version {pool['version']}")
    return f"{pool.get('internal_api')} ({lib}): {', '.join(parts)}"


def _thread_settings():
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
             "OPENBLAS_CORETYPE", "RFL_FAST_BACKEND", "RFL_FAST_VALIDATE", "RFL_FAST_THREADS")
    lines = [f"  {n}={os.environ[n]}" for n in names if n in os.environ]
    lines.append(f"  C++ kernels: at most {get_threads()} threads (rfl_fast.set_threads)")
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            lines.append(f"  {_pool_line(pool)}")
    except ImportError:
        lines.append("  (install threadpoolctl to see BLAS threads and kernel)")
    return lines


# setup.py leaves the reason here when the C++ build failed at install time
_CORE_NOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_core_not_built.txt")


#: How to rebuild after installing a compiler: pip's wheel cache would otherwise reinstall the
#: wheel it built without the C++ core ("Using cached rfl_fast-...whl").
_REBUILD_ADVICE = ("install a C++17 compiler (g++ or clang++), then rebuild past pip's wheel "
                  "cache: pip install --force-reinstall --no-deps --no-cache-dir rfl_fast "
                  "(or the source folder instead of rfl_fast)")


def _cpp_missing_note():
    """Why the C++ backend is missing (the build's reason, if it left one) and what to do."""
    try:
        with open(_CORE_NOTE, encoding="utf-8") as fh:
            why = f"its build failed at install time ({fh.read().strip()})"
    except OSError:
        why = "the extension rfl_fast._core is missing"
    return (f"  C++ backend not built: {why}. Every kernel runs on Numba or NumPy; for the C++ "
            f"kernels {_REBUILD_ADVICE} (RFL_FAST_REQUIRE_CXX=1 makes a failed build an error).")


def _warn_if_core_missing():
    """One warning per process, at import, when the package has no C++ core: pip hides the
    build's warning unless run with -v, so a user may not know the core is missing."""
    if importlib.util.find_spec(f"{__name__}._core") is None:
        import warnings

        warnings.warn(f"rfl_fast was installed without its C++ core, so its kernels run on "
                      f"Numba and NumPy (slower); for the C++ kernels {_REBUILD_ADVICE}. "
                      f"`rfl-fast info` says why the build failed.", UserWarning, stacklevel=2)


def show_config(file=None):
    """Print versions, backends (with the kernels each provides) and thread settings.

    Parameters
    ----------
    file : file-like, optional
        Where to print; ``sys.stdout`` by default.
    """
    from .kernels import describe_backends, route_rules

    import numpy
    import scipy

    out = [f"rfl_fast {__version__}", f"  python {platform.python_version()} ({sys.platform})",
           f"  numpy {numpy.__version__}, scipy {scipy.__version__}"]
    out.append(f"backends (auto: per kernel and size, by declared rules; in force: "
               f"{get_backend()!r}):")
    out.extend(describe_backends())
    out.append("auto's rules (rfl_fast.kernels.registry):")
    out.extend(f"  {line}" for line in route_rules())
    if "cpp" not in available_backends():
        out.append(_cpp_missing_note())
    out.append("threads:")
    out.extend(_thread_settings())
    out.append(f"C++ headers: {get_include()}")
    print("\n".join(out), file=file)


_warn_if_core_missing()
