"""The C++ consumer path: the shipped headers, version macro, CMake and pkg-config files, and
``examples/cpp_extension/`` (a pybind11 extension and a CMake program of another project)
built here with the same compiler and checked against rfl_fast's Python API."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import rfl_fast as rf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "cpp_extension")
if not os.path.isdir(EXAMPLE):                      # tests run outside a source checkout
    pytest.skip("examples/cpp_extension not found next to the tests", allow_module_level=True)
CXX = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


def _header_version():
    text = Path(rf.get_include(), "rfl", "version.hpp").read_text()
    part = {k: int(re.search(rf"#define RFL_FAST_VERSION_{k} (\d+)", text).group(1))
            for k in ("MAJOR", "MINOR", "PATCH")}
    string = re.search(r'#define RFL_FAST_VERSION_STRING "([^"]+)"', text).group(1)
    return part, string


def test_version_header_matches_pyproject_and_the_shipped_files():
    pyproject = Path(ROOT, "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    part, string = _header_version()
    assert string == version
    assert f"{part['MAJOR']}.{part['MINOR']}.{part['PATCH']}" == version
    pc = Path(rf.get_pkgconfig_dir(), "rfl_fast.pc").read_text()
    assert re.search(r"^Version: (.+)$", pc, re.M).group(1) == version
    assert os.path.isfile(os.path.join(rf.get_cmake_dir(), "rfl_fastConfig.cmake"))


def test_python_m_prints_the_folders():
    for flag, expected in (("--include-dir", rf.get_include()),
                           ("--cmake-dir", rf.get_cmake_dir()),
                           ("--pkgconfig-dir", rf.get_pkgconfig_dir())):
        out = subprocess.run([sys.executable, "-m", "rfl_fast", flag], capture_output=True,
                             text=True, timeout=120, cwd=os.path.dirname(rf.__path__[0]))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config not installed")
def test_pkg_config_gives_the_include_folder():
    env = dict(os.environ, PKG_CONFIG_PATH=rf.get_pkgconfig_dir())
    flags = subprocess.run(["pkg-config", "--cflags", "rfl_fast"], env=env, capture_output=True,
                           text=True, timeout=60, check=True).stdout.split()
    includes = [os.path.realpath(f[2:]) for f in flags if f.startswith("-I")]
    assert includes == [os.path.realpath(rf.get_include())]
    assert "-std=c++17" in flags


@pytest.fixture(scope="module")
def rfl_example(tmp_path_factory):
    """examples/cpp_extension/rfl_example.cpp compiled like its setup.py would (one g++ call)."""
    if CXX is None:
        pytest.skip("no C++ compiler (g++/c++) on PATH")
    pybind11 = pytest.importorskip("pybind11")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = tmp_path_factory.mktemp("cpp_ext") / ("rfl_example" + suffix)
    cmd = [CXX, "-O2", "-std=c++17", "-shared", "-fPIC", "-pthread", "-Wall", "-Wextra",
           "-fvisibility=hidden", "-I", pybind11.get_include(),
           "-I", sysconfig.get_paths()["include"], "-I", rf.get_include(),
           os.path.join(EXAMPLE, "rfl_example.cpp"), "-o", str(out)]
    if sys.platform == "darwin":
        cmd += ["-undefined", "dynamic_lookup"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    spec = importlib.util.spec_from_file_location("rfl_example", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.full
def test_extension_matches_the_python_api(rfl_example):
    assert rfl_example.headers_version == _header_version()[1]
    M = rf.Stiefel(30, 5)
    rng = np.random.default_rng(0)
    X = M.random_point(40, rng=rng)
    U = M.proj(X, 0.3 * rng.standard_normal(X.shape))
    Y = rfl_example.stiefel_retr_polar(X, U)
    np.testing.assert_allclose(Y, M.retr(X, U), atol=1e-13)
    np.testing.assert_allclose(rfl_example.stiefel_inv_retr_polar(X, Y), U, atol=1e-12)

    S = rf.SPD(6)
    P = S.random_point(40, rng=1)
    V = S.proj(P, 0.05 * rng.standard_normal(P.shape))
    E = rfl_example.spd_exp(P, V)
    np.testing.assert_allclose(E, S.exp(P, V), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(rfl_example.spd_dist(P, E), S.dist(P, E), rtol=1e-11)


@pytest.mark.full
def test_extension_results_do_not_depend_on_threads_and_errors_name_the_argument(rfl_example):
    M = rf.Stiefel(50, 3)
    X = M.random_point(3000, rng=2)                  # 3.6 MB per input: several threads start
    U = M.proj(X, 0.1 * np.random.default_rng(3).standard_normal(X.shape))
    one = rfl_example.stiefel_retr_polar(X, U, threads=1)
    assert np.array_equal(one, rfl_example.stiefel_retr_polar(X, U, threads=4))
    with pytest.raises(ValueError, match="u: expected the shape of x"):
        rfl_example.stiefel_retr_polar(X, U[:-1])
    S = rf.SPD(4).random_point(2, rng=0)
    S[1, 0, 0] = -5.0                                # not positive definite: no answer -> NaN
    assert np.isnan(rfl_example.spd_dist(S, S)).tolist() == [False, True]


@pytest.mark.full
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_consumer_finds_the_package_and_runs(tmp_path):
    build = tmp_path / "build"
    configure = subprocess.run(
        ["cmake", "-S", EXAMPLE, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
         f"-Drfl_fast_DIR={rf.get_cmake_dir()}"], capture_output=True, text=True, timeout=300)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    compiled = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True,
                              timeout=600)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    run = subprocess.run([str(build / "roundtrip")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"rfl_fast {_header_version()[1]}: max |inv_retr" in run.stdout


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_cmake_refuses_an_incompatible_major_version(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.15)\nproject(p NONE)\n"
        "find_package(rfl_fast 99 CONFIG REQUIRED)\n")
    proc = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "b"),
                           f"-Drfl_fast_DIR={rf.get_cmake_dir()}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "rfl_fast" in proc.stderr and "version" in proc.stderr.lower()


PCA_STEPS_PROGRAM = r"""
#include <rfl/pca.hpp>  // alone: the header compiles standalone
#include <cstdio>
#include <cstdlib>
#include <vector>
int main(int argc, char** argv) {  // a 10th argument: an offset (d x r) follows x in the input
    if (argc != 9 && argc != 10) return 2;
    const std::size_t m = std::strtoul(argv[3], nullptr, 10);
    const std::size_t d = std::strtoul(argv[4], nullptr, 10);
    const int r = std::atoi(argv[5]), steps = std::atoi(argv[8]);
    const double s = std::atof(argv[6]), eta = std::atof(argv[7]);
    std::vector<double> z(m * d), x(d * r), off(argc == 10 ? d * r : 0);
    std::FILE* in = std::fopen(argv[1], "rb");
    if (!in || std::fread(z.data(), 8, z.size(), in) != z.size() ||
        std::fread(x.data(), 8, x.size(), in) != x.size() ||
        std::fread(off.data(), 8, off.size(), in) != off.size()) return 1;
    std::fclose(in);
    rfl::pca::local_steps(z.data(), m, d, r, x.data(), s, eta, steps,
                          argc == 10 ? off.data() : nullptr);
    std::FILE* out = std::fopen(argv[2], "wb");
    return out && std::fwrite(x.data(), 8, x.size(), out) == x.size() && !std::fclose(out) ? 0 : 1;
}
"""


@pytest.mark.full  # compiles a C++ program per case
@pytest.mark.parametrize("m,d,r,offset", [(1300, 20, 3, False), (40, 12, 1, False),
                                          (0, 6, 2, False), (300, 20, 3, True)])
def test_header_local_steps_match_the_reference(tmp_path, m, d, r, offset):
    """``rfl::pca::local_steps`` with the header's own operations (what a C++ user gets) gives
    the iterates of the kernel's NumPy reference to rounding.

    Tolerance: both sides compute each step's gradient ``s Z'(ZX)`` to a relative error of
    gamma_(m d) = m d eps (sums of m d products, any order) of ``|s| |Z|^2 |X|``, and the
    projection and the polar retraction (backward stable, well conditioned: X + U has singular
    values >= 1) add a few ``r eps``; a step maps a perturbation of X to one at most
    ``1 + eta |s| |Z|^2`` times larger, so ``steps`` steps differ by at most
    ``steps (1 + eta |s| |Z|^2)^steps (eta |s| |Z|^2 (m d) + 10 r) eps``. With an offset
    (RFedSVRG's steps, ``s Z'(ZX) - offset``) its entries, at most ``|offset|``, add
    ``eta |offset|`` to the gradient term's scale.
    """
    if CXX is None:
        pytest.skip("no C++ compiler (g++/c++) on PATH")
    from rfl_fast.kernels import fused
    exe = tmp_path / "pca_steps"
    src = tmp_path / "pca_steps.cpp"
    src.write_text(PCA_STEPS_PROGRAM)
    proc = subprocess.run([CXX, "-O2", "-std=c++17", "-pthread", "-Wall", "-Wextra", "-Wno-psabi",
                           "-I", rf.get_include(), str(src), "-o", str(exe)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    rng = np.random.default_rng(m + d)
    z = rng.standard_normal((m, d))
    x0 = rf.Stiefel(d, r).random_point(rng=1)
    s, eta, steps = -2.0 / max(m, 1), 0.05, 4
    off = rng.standard_normal((d, r)) if offset else np.zeros((0,))
    np.concatenate([z.ravel(), x0.ravel(), off.ravel()]).tofile(tmp_path / "in.bin")
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), str(m),
                    str(d), str(r), repr(s), repr(eta), str(steps)] + ["offset"] * offset,
                   check=True, timeout=60)
    got = np.fromfile(tmp_path / "out.bin").reshape(d, r)
    want = fused.pca_local_steps_reference(z, np.array([0, m]), np.array([0]), x0[None],
                                           np.array([s]), eta, steps,
                                           off[None] if offset else None)[0]
    a = eta * abs(s) * np.linalg.norm(z, 2) ** 2
    b = eta * np.linalg.norm(off, 2) if offset else 0.0
    bound = steps * (1 + a) ** steps * ((a + b) * max(m * d, 1) + 10 * r) * \
        np.finfo(float).eps
    assert np.max(np.abs(got - want)) <= bound
    assert not np.array_equal(want, x0) or m == 0


@pytest.mark.full  # compiles a C++ program
def test_header_local_steps_refuse_coef_without_anchor(tmp_path):
    """``rfl::pca::local_steps`` with ``Terms.coef`` (2BB's term ``c R_anchor^{-1}(X)``) but no
    ``Terms.anchor`` throws ``std::invalid_argument`` before any work, instead of reading
    scratch it never wrote (the extension's binding refuses the same call by name)."""
    if CXX is None:
        pytest.skip("no C++ compiler (g++/c++) on PATH")
    src = tmp_path / "refuse.cpp"
    src.write_text(r"""
#include <rfl/pca.hpp>
#include <cstdio>
#include <stdexcept>
int main() {
    double X[2] = {1.0, 0.0}, s = 1.0, c = 0.5, work[64];
    rfl::pca::Terms t;
    t.coef = &c;
    auto none = [](auto...) {};
    try {
        rfl::pca::local_steps(1, 2, 1, X, &s, 0.1, 1, t, work, none, none, none, none, none);
    } catch (const std::invalid_argument& e) {
        std::puts(e.what());
        return 0;
    }
    return 1;
}
""")
    exe = tmp_path / "refuse"
    proc = subprocess.run([CXX, "-O1", "-std=c++17", "-Wall", "-Wno-psabi", "-I",
                           rf.get_include(), str(src), "-o", str(exe)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Terms.coef needs Terms.anchor" in out.stdout
