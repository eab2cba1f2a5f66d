"""Build of the C++ extension ``rfl_fast._core`` (pybind11) and shipping of the C++ headers.

Portable optimisation flags by default; set ``RFL_FAST_NATIVE=1`` at build time for
``-march=native`` (faster on the build machine, not portable to other CPUs),
``RFL_FAST_BASELINE=1`` for the baseline code path only (no AVX2 clones) or
``RFL_FAST_NO_VECTOR_EXT=1`` for the scalar fallback of the SIMD type (both to test those
paths). Translation units compile in parallel (``RFL_FAST_BUILD_JOBS``, default: all cores),
each announced with its time (``pip install -v .`` shows the lines; pip hides a build's output
otherwise); an object file is compiled again when it is older than its source or any header, or
was compiled with other flags (a build folder left by an earlier build is reused safely).
The extension is optional: without a working C++17 compiler the install goes on with a one-line
warning and the package runs on its Numba and NumPy backends (``rfl-fast info`` says why C++ is
missing); ``RFL_FAST_REQUIRE_CXX=1`` makes a failed C++ build an error (CI sets it).
"""

import hashlib
import os
import re
import shutil
import sys
import time
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


def build_jobs():
    """Translation units compiled at once: ``RFL_FAST_BUILD_JOBS``, else every core."""
    value = os.environ.get("RFL_FAST_BUILD_JOBS", "").strip()
    try:
        jobs = int(value) if value else 0
    except ValueError:
        raise SystemExit(f"RFL_FAST_BUILD_JOBS: expected a whole number, got {value!r}") from None
    return jobs if jobs > 0 else (os.cpu_count() or 1)


def _say(msg):
    """A build message (pip shows them with ``pip install -v``), one write per line: units
    compile on several threads at once."""
    sys.stderr.write(f"rfl_fast: {msg}\n")
    sys.stderr.flush()


#: What an object file was compiled with: a change (RFL_FAST_BASELINE=1, another compiler
#: flag) compiles every unit again instead of linking objects of the old flags.
SIGNATURE = hashlib.sha256(repr((compile_flags(), define_macros())).encode()).hexdigest()[:16]
DEPENDS = sorted([*HEADERS.rglob("*.hpp"), *(HERE / "src").glob("*.hpp")])


def needs_recompile(obj, src):
    """Whether an existing object file is stale: older than its source or any header, or
    compiled with another :data:`SIGNATURE` (pybind11's default reuses every existing object,
    so a build folder left by an earlier build would link objects of old headers or flags)."""
    stamp = Path(f"{obj}.flags")
    try:
        if stamp.read_text(encoding="utf-8") != SIGNATURE:
            return True
    except OSError:
        return True
    built = os.path.getmtime(obj)
    return any(os.path.getmtime(p) > built for p in [src, *DEPENDS])


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
        units, jobs = len(ext.sources), min(build_jobs(), len(ext.sources))
        _say(f"compiling the C++ core {ext.name}: {units} translation units, {jobs} at a time "
             f"(RFL_FAST_BUILD_JOBS=n sets it), {BUILD_TIME}")
        self._announce_units()
        t0 = time.perf_counter()
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            self._skip(ext, exc)
        else:
            note.unlink(missing_ok=True)  # a stale note from an earlier failed in-place build
            _say(f"C++ core built in {time.perf_counter() - t0:.0f} s")

    def _announce_units(self):
        """Each translation unit's start and time (``compiler._compile`` is the per-unit step
        that pybind11's parallel ``compile`` calls), and its flags stamp for
        :func:`needs_recompile`."""
        compiler = self.compiler
        if getattr(compiler, "_rfl_fast_announced", False) or not hasattr(compiler, "_compile"):
            return
        compile_one = compiler._compile

        def _compile(obj, src, *args, **kwargs):
            _say(f"  compiling {src}")
            t0 = time.perf_counter()
            Path(f"{obj}.flags").unlink(missing_ok=True)
            compile_one(obj, src, *args, **kwargs)
            Path(f"{obj}.flags").write_text(SIGNATURE, encoding="utf-8")
            _say(f"  {src}: {time.perf_counter() - t0:.0f} s")

        compiler._compile = _compile
        compiler._rfl_fast_announced = True

    def _skip(self, ext, exc):
        if REQUIRE_CXX:
            raise exc
        # a failed command is quoted as its whole argument list: keep the program's name
        reason = re.sub(r"\['([^']*)'(?:, '[^']*')*\]", r"\1 ...", f"{type(exc).__name__}: {exc}")
        note = Path(self.get_ext_fullpath(ext.name)).parent / BUILD_NOTE
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(reason + "\n", encoding="utf-8")
        print(f"WARNING: rfl_fast: C++ core not built ({reason}); installing without it, on the "
              f"Numba and NumPy kernels (`rfl-fast info` says how to add it)",
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

#: What the build announces about its time. Measured (``pip wheel -v .``, GCC 12, -O3, the
#: project's 2-core AMD EPYC VM): the units take 9, 28, 20, 21, 14, 11 and 0.4 CPU seconds
#: (_core, pca, spd, stiefel_polar, stiefel_qr, vectors, normal), 100 s in all, so two at a
#: time end after about 55 s.
BUILD_TIME = "about 1 minute on 2 cores (100 CPU seconds in all)"

ParallelCompile("RFL_FAST_BUILD_JOBS", default=0, needs_recompile=needs_recompile).install()

setup(
    ext_modules=[ext],
    # typed stub, PEP 561 marker
    package_data={"rfl_fast": ["_core.pyi", "py.typed"]},
    cmdclass={"build_ext": optional_build_ext, "build_py": build_py_with_headers},
)
