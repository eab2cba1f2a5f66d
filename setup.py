"""Build of the C++ extension ``rfl_fast._core`` (pybind11) and shipping of the C++ headers.

Portable optimisation flags by default; set ``RFL_FAST_NATIVE=1`` at build time for
``-march=native`` (faster on the build machine, not portable to other CPUs),
``RFL_FAST_BASELINE=1`` for the baseline code path only (no AVX2 clones) or
``RFL_FAST_NO_VECTOR_EXT=1`` for the scalar fallback of the SIMD type (both to test those
paths). Translation units compile in parallel (``RFL_FAST_BUILD_JOBS``, default: all cores).
The extension is optional: without a working C++17 compiler the install goes on with a warning
and the package runs on its Numba and NumPy backends (``rfl-fast info`` says why C++ is
missing); ``RFL_FAST_REQUIRE_CXX=1`` makes a failed C++ build an error (CI sets it).
"""

import os
import re
import shutil
import sys
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, ExecError, PlatformError

HERE = Path(__file__).parent.resolve()
HEADERS = HERE / "cpp" / "include"
VERSION = re.search(r'^version = "([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M).group(1)


def _flag(name):
    return os.environ.get(name, "0") not in ("", "0")


def compile_flags():
    if sys.platform == "win32":
        return ["/O2"]
    # -std=c++17 turns FMA contraction off; allow it (the AVX2 clones of the batch loops, see
    # src/binding.hpp, then use FMA; the baseline SSE2 code has no FMA and is unchanged).
    # -Wno-psabi: GCC's note on the 32-byte vector ABI of always-inlined helpers (rfl/simd.hpp).
    flags = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast", "-Wno-psabi"]
    if _flag("RFL_FAST_NATIVE"):
        flags += ["-march=native", "-DRFL_FAST_NATIVE=1"]  # no runtime clones needed
    return flags


def define_macros():
    """``RFL_FAST_BASELINE=1``: no instruction-set clones, the baseline code path only (what a
    CPU without AVX2 runs; CI tests it). ``RFL_FAST_NO_VECTOR_EXT=1``: the plain-struct path of
    ``rfl/simd.hpp`` instead of GNU vectors (what MSVC compiles; CI tests it)."""
    macros = [("RFL_FAST_VERSION", f'"{VERSION}"')]
    if _flag("RFL_FAST_BASELINE"):
        macros.append(("RFL_FAST_BASELINE", "1"))
    if _flag("RFL_FAST_NO_VECTOR_EXT"):
        macros.append(("RFL_NO_VECTOR_EXT", "1"))
    return macros


# The file the package reads to say why the C++ backend is missing (see rfl_fast.show_config).
BUILD_NOTE = "_core_not_built.txt"
REQUIRE_CXX = _flag("RFL_FAST_REQUIRE_CXX")


class optional_build_ext(build_ext):
    """``build_ext`` that turns a failed C++ build into a warning (unless ``RFL_FAST_REQUIRE_CXX``)
    and leaves the reason in ``rfl_fast/_core_not_built.txt`` for ``rfl-fast info``."""

    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:  # no compiler at all
            self._skip(self.extensions[0], exc)

    def build_extension(self, ext):
        note = Path(self.get_ext_fullpath(ext.name)).parent / BUILD_NOTE
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            self._skip(ext, exc)
        else:
            note.unlink(missing_ok=True)  # a stale note from an earlier failed in-place build

    def _skip(self, ext, exc):
        if REQUIRE_CXX:
            raise exc
        # a failed command is quoted as its whole argument list: keep the program's name
        reason = re.sub(r"\['([^']*)'(?:, '[^']*')*\]", r"\1 ...", f"{type(exc).__name__}: {exc}")
        note = Path(self.get_ext_fullpath(ext.name)).parent / BUILD_NOTE
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(reason + "\n", encoding="utf-8")
        bar = "*" * 78
        print(f"\n{bar}\nWARNING: rfl_fast's C++ extension ({ext.name}) could not be built:\n"
              f"  {reason}\nrfl_fast is installed without it and runs on its Numba and NumPy "
              f"backends.\nFor the C++ kernels install a C++17 compiler (g++ or clang++), then "
              f"reinstall past pip's\nwheel cache (which keeps this wheel without the core):\n"
              f"  pip install --force-reinstall --no-deps --no-cache-dir rfl_fast   (or the "
              f"source folder)\nSet RFL_FAST_REQUIRE_CXX=1 to make this an error.\n{bar}\n",
              file=sys.stderr, flush=True)


class build_py_with_headers(build_py):
    """Copy ``cpp/include``, ``cpp/cmake`` and ``cpp/pkgconfig`` into the package as
    ``rfl_fast/include`` etc. (see ``get_include()``, ``get_cmake_dir()``, ``get_pkgconfig_dir()``)."""

    def run(self):
        super().run()
        for name in ("include", "cmake", "pkgconfig"):
            target = Path(self.build_lib) / "rfl_fast" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(HERE / "cpp" / name, target)


ext = Pybind11Extension(
    "rfl_fast._core",
    sorted(str(p.relative_to(HERE)) for p in (HERE / "src").glob("*.cpp")),
    include_dirs=[str(HEADERS.relative_to(HERE))],
    depends=sorted(str(p.relative_to(HERE))  # rebuild on edits
                   for p in [*HEADERS.rglob("*.hpp"), *(HERE / "src").glob("*.hpp")]),
    cxx_std=17,
    extra_compile_args=compile_flags(),
    define_macros=define_macros(),
)

ParallelCompile("RFL_FAST_BUILD_JOBS", default=0).install()  # 0: all cores

setup(
    ext_modules=[ext],
    # typed stub, PEP 561 marker
    package_data={"rfl_fast": ["_core.pyi", "py.typed"]},
    cmdclass={"build_ext": optional_build_ext, "build_py": build_py_with_headers},
)
