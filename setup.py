"""Build of the C++ extension ``rfl_fast._core`` (pybind11) and shipping of the C++ headers.

Portable optimisation flags by default; set ``RFL_FAST_NATIVE=1`` at build time for
``-march=native`` (faster on the build machine, not portable to other CPUs).
"""

import os
import re
import shutil
import sys
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent.resolve()
HEADERS = HERE / "cpp" / "include"
VERSION = re.search(r'^version = "([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M).group(1)


def compile_flags():
    if sys.platform == "win32":
        return ["/O2"]
    # -std=c++17 turns FMA contraction off; allow it (the AVX2 clones of the batch loops, see
    # src/_core.cpp, then use FMA; the baseline SSE2 code has no FMA and is unchanged)
    flags = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast"]
    if os.environ.get("RFL_FAST_NATIVE", "0") not in ("", "0"):
        flags += ["-march=native", "-DRFL_FAST_NATIVE=1"]  # no runtime clones needed
    return flags


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
    depends=sorted(str(p.relative_to(HERE)) for p in HEADERS.rglob("*.hpp")),  # rebuild on edits
    cxx_std=17,
    extra_compile_args=compile_flags(),
    define_macros=[("RFL_FAST_VERSION", f'"{VERSION}"')],
)

setup(
    ext_modules=[ext],
    package_data={"rfl_fast": ["_core.pyi", "py.typed"]},  # typed stub, PEP 561 marker
    cmdclass={"build_ext": build_ext, "build_py": build_py_with_headers},
)
