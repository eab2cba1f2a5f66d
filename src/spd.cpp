// Symmetric matrix functions (sym_expm, sym_logm, sym_sqrtm, sym_invsqrtm) and the SPD
// kernels (spd_exp, spd_log, spd_dist).
#include <cstddef>
#include <string>
#include <vector>

#include "binding.hpp"
#include "rfl/spd.hpp"

namespace {

// Whether the wide-vector code path runs here: the lockstep Jacobi (rfl::spd::sym_fun_lanes)
// beats Householder + QL per item only with 4-wide vectors (AVX2 + FMA; with SSE2 it is slower
// than QL). Never in a baseline build
// (RFL_FAST_BASELINE), which runs what a CPU without AVX2 runs.
bool wide_simd() {
#if defined(RFL_FAST_BASELINE)
    return false;
#elif defined(__AVX2__) && defined(__FMA__)
    return true;
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return yes;
#else
    return false;
#endif
}

// The least input per loop thread: an SPD item of small n is a few microseconds of work in a
// few hundred bytes (n = 9: ~4 us per 648 bytes), so the memory-bound kernels' 512 KB would keep
// a batch of a thousand matrices (~4 ms) on one thread; 32 KB is ~200 us of work at n = 9.
constexpr std::size_t kMinBytesPerThread = 32 * 1024;

// the multiply-adds (n^3) of a BLAS call of an item of core shape (n, n) when the items run on
// BLAS, which threads such calls (from n = FROM), else 0 (binding.hpp: for_chunks)
template <int FROM>
std::size_t on_blas_work(const py::ssize_t* c) {
    const int n = static_cast<int>(c[0]);
    return rfl::spd::uses_blas(n, FROM) ? static_cast<std::size_t>(n) * n * n : 0;
}
constexpr auto exp_log_on_blas = on_blas_work<rfl::spd::kBlasMinExpLog>;  // spd_exp, spd_log
constexpr auto eig_on_blas = on_blas_work<rfl::spd::kBlasMinEig>;         // sym_*, spd_dist

// lockstep Jacobi up to this n (Jacobi's sweeps grow with n: from about 16 QL per matrix is
// faster), above it Householder + QL in lockstep over 4 matrices (with SSE2 only that is slower
// than QL per matrix, so that case keeps QL per matrix)
constexpr int kJacobiMaxN = 12;

template <double (*F)(double)>
RFL_CLONES void sym_loop(const double* ps, double* po, py::ssize_t N, int n) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    // items on LAPACK (rfl/spd.hpp) go one at a time, below
    const bool lanes = N >= 2 && wide_simd() && !rfl::spd::uses_blas(n, rfl::spd::kBlasMinEig);
    if (lanes && n <= kJacobiMaxN) {
        std::vector<double> work(rfl::spd::sym_lanes_work(n));
        return rfl::spd::sym_fun_lanes(ps, po, N, n, F, work.data());
    }
#if RFL_SIMD_VECTOR_EXT
    if (lanes) {
        std::vector<double> work(rfl::spd::sym_ql_lanes_work(n));
        return rfl::spd::sym_fun_ql_lanes(ps, po, N, n, F, work.data());
    }
#endif
    std::vector<double> work(rfl::spd::sym_work(n));
    for (py::ssize_t i = 0; i < N; ++i)
        rfl::spd::sym_fun(ps + i * item, po + i * item, n, F, work.data());
}

template <double (*F)(double)>
Arr sym_unary(const Arr& s, const char* kernel, const std::string& parallel) {
    const Parallel par = parallel_arg(parallel, kernel);
    check_ndim(s, 3, kernel, "s", "(N, n, n)");
    if (s.shape(1) != s.shape(2)) fail(kernel, "expected square matrices, got " + shape_str(s));
    const py::ssize_t N = s.shape(0);
    const int n = static_cast<int>(s.shape(1));
    Arr out({N, static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(n)});
    const double* ps = s.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(n) * n;
        const py::ssize_t core[1] = {n};
        for_chunks(N, item * sizeof(double), 1, [&](py::ssize_t i0, py::ssize_t i1) {
            sym_loop<F>(ps + i0 * item, po + i0 * item, i1 - i0, n);
            return true;
        }, eig_on_blas(core), par, kMinBytesPerThread);
    }
    return out;
}

template <void (*F)(const double*, const double*, double*, int, double*)>
RFL_CLONES void spd_loop(const double* px, const double* pb, double* po, py::ssize_t N, int n) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    std::vector<double> work(rfl::spd::spd_work(n));
    for (py::ssize_t i = 0; i < N; ++i) F(px + i * item, pb + i * item, po + i * item, n, work.data());
}

RFL_CLONES void spd_dist_loop(const double* px, const double* py_, double* po, py::ssize_t N,
                              int n) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    std::vector<double> work(rfl::spd::spd_work(n));
    for (py::ssize_t i = 0; i < N; ++i)
        po[i] = rfl::spd::spd_dist(px + i * item, py_ + i * item, n, work.data());
}

template <void (*F)(const double*, const double*, double*, int, double*)>
void spd_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    spd_loop<F>(a, b, o, N, static_cast<int>(c[0]));
}

void spd_dist_run(const double* a, const double* b, double* o, py::ssize_t N,
                  const py::ssize_t* c) {
    spd_dist_loop(a, b, o, N, static_cast<int>(c[0]));
}


template <void (*F)(const double*, const double*, double*, int, double*)>
Arr spd_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname,
               const std::string& parallel) {
    const Parallel par = parallel_arg(parallel, kernel);
    check_ndim(x, 3, kernel, "x", "(N, n, n)");
    check_ndim(b, 3, kernel, bname, "(N, n, n)");
    check_same(x, b, kernel, "x", bname);
    if (x.shape(1) != x.shape(2)) fail(kernel, "expected square matrices, got " + shape_str(x));
    const py::ssize_t N = x.shape(0);
    const int n = static_cast<int>(x.shape(1));
    Arr out({N, static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(n)});
    const double* px = x.data();
    const double* pb = b.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(n) * n;
        const py::ssize_t core[1] = {n};
        run2_chunked(spd_run<F>, px, pb, po, N, core, item, item, exp_log_on_blas(core), par,
                     kMinBytesPerThread, 1);
    }
    return out;
}

Arr spd_dist(const Arr& x, const Arr& y, const std::string& parallel) {
    const char* kernel = "spd_dist";
    const Parallel par = parallel_arg(parallel, kernel);
    check_ndim(x, 3, kernel, "x", "(N, n, n)");
    check_ndim(y, 3, kernel, "y", "(N, n, n)");
    check_same(x, y, kernel, "x", "y");
    if (x.shape(1) != x.shape(2)) fail(kernel, "expected square matrices, got " + shape_str(x));
    const py::ssize_t N = x.shape(0);
    const int n = static_cast<int>(x.shape(1));
    Arr out(N);
    const double* px = x.data();
    const double* py_ = y.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const py::ssize_t core[1] = {n};
        run2_chunked(spd_dist_run, px, py_, po, N, core, static_cast<std::size_t>(n) * n, 1,
                     eig_on_blas(core), par, kMinBytesPerThread, 1);
    }
    return out;
}

bool square_core(const py::ssize_t* c) { return c[0] == c[1]; }

// spd_exp, spd_log, spd_dist take their items one at a time (no lockstep group)
py::ssize_t one_at_a_time(const py::ssize_t*) { return 1; }

}  // namespace

void register_spd(py::module_& m) {
    // symmetric matrix functions
    m.def("sym_expm", [](py::handle s, const std::string& parallel) {
        return sym_unary<rfl::spd::f_exp>(s, "sym_expm", parallel); }, py::arg("s"),
        py::arg("parallel") = "auto",
        R"pbdoc(Matrix exponential of symmetric s (lower triangle read): (N, n, n).)pbdoc");
    m.def("sym_logm", [](py::handle s, const std::string& parallel) {
        return sym_unary<rfl::spd::f_log>(s, "sym_logm", parallel); }, py::arg("s"),
        py::arg("parallel") = "auto",
        R"pbdoc(Matrix logarithm of SPD s: (N, n, n); NaN items where s is not positive definite.)pbdoc");
    m.def("sym_sqrtm", [](py::handle s, const std::string& parallel) {
        return sym_unary<rfl::spd::f_sqrt>(s, "sym_sqrtm", parallel); }, py::arg("s"),
        py::arg("parallel") = "auto",
        R"pbdoc(Square root of SPD s: (N, n, n); NaN where s is not positive definite.)pbdoc");
    m.def("sym_invsqrtm", [](py::handle s, const std::string& parallel) {
        return sym_unary<rfl::spd::f_invsqrt>(s, "sym_invsqrtm", parallel); }, py::arg("s"),
        py::arg("parallel") = "auto",
        R"pbdoc(Inverse square root of SPD s: (N, n, n); NaN where s is not positive definite.)pbdoc");

    // SPD
    m.def("spd_exp", [](py::handle x, py::handle u, const std::string& parallel) {
        return spd_binary<rfl::spd::spd_exp>(x, u, "spd_exp", "u", parallel); },
        py::arg("x"), py::arg("u"), py::arg("parallel") = "auto",
        R"pbdoc(Affine-invariant Exp ``x^1/2 expm(x^-1/2 u x^-1/2) x^1/2``; (N, n, n).

Computed as ``L expm(L^-1 sym(u) L^-T) L'`` with the Cholesky factor x = L L' (equal in exact
arithmetic); NaN where x is not positive definite.)pbdoc");
    m.def("spd_log", [](py::handle x, py::handle y, const std::string& parallel) {
        return spd_binary<rfl::spd::spd_log>(x, y, "spd_log", "y", parallel); },
        py::arg("x"), py::arg("y"), py::arg("parallel") = "auto",
        R"pbdoc(Affine-invariant Log ``x^1/2 logm(x^-1/2 y x^-1/2) x^1/2``; (N, n, n).

Computed through the Cholesky factor of x; NaN where x or y is not positive definite.)pbdoc");
    m.def("spd_dist", [](py::handle x, py::handle y, const std::string& parallel) {
        return spd_dist(x, y, parallel); }, py::arg("x"), py::arg("y"), py::arg("parallel") = "auto",
        R"pbdoc(Affine-invariant distance ``|logm(x^-1/2 y x^-1/2)|_F``; (N, n, n) -> (N,).)pbdoc");

    for (const char* kernel : {"spd_exp", "spd_log"}) declare_blas_work(kernel, exp_log_on_blas);
    for (const char* kernel : {"sym_expm", "sym_logm", "sym_sqrtm", "sym_invsqrtm", "spd_dist"})
        declare_blas_work(kernel, eig_on_blas);

    // fast lanes (see checked_binary in _core.cpp)
    def_checked<2, false>(m, "spd_exp", spd_run<rfl::spd::spd_exp>, square_core, exp_log_on_blas,
                          kMinBytesPerThread, one_at_a_time);
    def_checked<2, false>(m, "spd_log", spd_run<rfl::spd::spd_log>, square_core, exp_log_on_blas,
                          kMinBytesPerThread, one_at_a_time);
    def_checked<2, true>(m, "spd_dist", spd_dist_run, square_core, eig_on_blas,
                         kMinBytesPerThread, one_at_a_time);
}
