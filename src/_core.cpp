// pybind11 binding of the rfl_fast C++ kernels: the private extension module rfl_fast._core.
//
// Kernel contract (see rfl_fast/kernels/__init__.py): each array argument is float64 with one
// leading batch axis N followed by the kernel's core shape; the result has the same leading
// axis. Arguments are taken as C-contiguous float64 (KernelArray converts real arrays and
// refuses complex ones, float indices and core axes beyond int, so the fast path is the caller
// handing clean arrays). Shapes are checked cheaply here and a mismatch
// raises ValueError, so malformed input never reaches the loops. Items without an answer come
// back as NaN. The batch loop runs with the GIL released: calls from several Python threads
// run in parallel. Inside a call, large batches run on up to set_threads() threads (for_chunks),
// pca_grad_sum and pca_local_steps on their `threads` argument; both split the work into fixed
// units, so results never depend on the thread count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "rfl/batch.hpp"
#include "rfl/lorentz.hpp"
#include "rfl/pca.hpp"
#include "rfl/spd.hpp"
#include "rfl/sphere.hpp"
#include "rfl/stiefel.hpp"

#ifndef RFL_FAST_VERSION
#define RFL_FAST_VERSION "0+unknown"
#endif

namespace py = pybind11;

// Runtime CPU dispatch for a portable build: every batch loop below is compiled twice, for
// x86-64-v3 (AVX2 + FMA) and for the baseline, and the dynamic loader picks the clone once
// (GNU ifunc) from the CPU it runs on. The hot item functions of the headers are RFL_INLINE
// (always_inline), so they are compiled into each clone with its instruction set; cold paths
// (SVD / Householder fallbacks) stay out of line, baseline only. (`flatten` would inline them
// too, but made the build take ~4 minutes for no measured gain.) A -march=native build
// (RFL_FAST_NATIVE=1 at build time) needs no clones. Measured gains of the AVX2 clones on the
// existing scalar loops are modest (~1.1-1.35x on the Stiefel kernels); the lockstep Jacobi
// below depends on them (it is only used where AVX2 is present).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(RFL_FAST_NATIVE)
#define RFL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// the fused PCA pass also gets an AVX-512 clone: its register blocking (4 rows x r columns of
// dot-product accumulators) fits the 32 vector registers of x86-64-v4 and spills with 16
// (measured on Zen 4, d = 784, r = 5, rows in cache: 0.47 -> 0.32 us per row)
#define RFL_CLONES_V4 \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RFL_CLONES
#define RFL_CLONES_V4
#endif

namespace {

// ---------------------------------------------------------------- array arguments

// An array argument of a kernel (Arr: float64, I64: int64 indices), C-contiguous. A float64
// C-contiguous ndarray is taken as it is; anything else is converted only when the conversion
// is exact enough: real floats, integers and bools for Arr (complex would lose its imaginary
// part), integers for I64 (floats would be truncated; uint64 may not fit). A core axis (axis 1
// on) longer than 2^31 - 1 is refused before any copy (the kernels index items with int). A
// refused argument is an empty array carrying the reason; check_arg (called first by every
// kernel for every argument, through check_ndim) raises it naming the argument.
template <class T>
struct KernelArray : py::array_t<T, py::array::c_style | py::array::forcecast> {
    using Base = py::array_t<T, py::array::c_style | py::array::forcecast>;
    using Base::Base;
    KernelArray() = default;
    explicit KernelArray(Base&& b) : Base(std::move(b)) {}
    std::string refused;     // why the argument was not taken ("" when it was)
    bool refused_type = false;  // TypeError (dtype) rather than ValueError (shape)
};

template <class T>
KernelArray<T> take_array(py::handle src) {
    using K = KernelArray<T>;
    if (K::Base::check_(src)) return K(py::reinterpret_borrow<typename K::Base>(src));
    auto refuse = [](bool type, std::string why) {
        K k;
        k.refused = std::move(why);
        k.refused_type = type;
        return k;
    };
    py::array a = py::array::ensure(src);  // any dtype; no copy for an ndarray
    if (!a)
        return refuse(true, std::string("expected an array, got ") + Py_TYPE(src.ptr())->tp_name);
    const char kind = a.dtype().kind();
    const std::string dt = py::str(a.dtype());
    if (std::is_floating_point<T>::value) {
        if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
            return refuse(true, "expected a real (float or integer) array, got dtype " + dt +
                                    (kind == 'c' ? " (the imaginary part would be dropped)" : ""));
    } else if (!(kind == 'i' || (kind == 'u' && a.itemsize() < 8))) {
        return refuse(true, "expected an integer array (int64), got dtype " + dt +
                                (kind == 'f' ? " (float indices are not truncated)" : ""));
    }
    for (py::ssize_t k = 1; k < a.ndim(); ++k)
        if (a.shape(k) > INT_MAX)
            return refuse(false, "axis " + std::to_string(k) + " has length " +
                                     std::to_string(a.shape(k)) + " > 2^31 - 1 = " +
                                     std::to_string(INT_MAX) + ", the compiled kernels' limit");
    K out(K::Base::ensure(a));
    if (!out)
        return refuse(true, "cannot be converted to " + std::string(py::str(py::dtype::of<T>())));
    return out;
}

}  // namespace

namespace pybind11 {
namespace detail {
template <class T>
struct pyobject_caster<KernelArray<T>> {
    pyobject_caster() : value(py::reinterpret_steal<typename KernelArray<T>::Base>(handle())) {}
    bool load(handle src, bool convert) {
        if (!convert && !KernelArray<T>::Base::check_(src)) return false;
        value = take_array<T>(src);
        return true;
    }
    static handle cast(const handle& src, return_value_policy, handle) { return src.inc_ref(); }
    PYBIND11_TYPE_CASTER(KernelArray<T>, handle_type_name<typename KernelArray<T>::Base>::name);
};
}  // namespace detail
}  // namespace pybind11

namespace {

using Arr = KernelArray<double>;
using I64 = KernelArray<std::int64_t>;

// raise the reason an argument was refused (see KernelArray), naming it
template <class A>
void check_arg(const A& a, const char* kernel, const char* arg) {
    if (a.refused.empty()) return;
    const std::string what = std::string(kernel) + ": argument " + arg + ": " + a.refused;
    if (a.refused_type) throw py::type_error(what);
    throw py::value_error(what);
}

std::string shape_str(const Arr& a) {
    std::string s = "(";
    for (py::ssize_t k = 0; k < a.ndim(); ++k) {
        if (k) s += ", ";
        s += std::to_string(a.shape(k));
    }
    return s + (a.ndim() == 1 ? ",)" : ")");
}

[[noreturn]] void fail(const char* kernel, const std::string& what) {
    throw py::value_error(std::string(kernel) + ": " + what);
}

void check_ndim(const Arr& a, int ndim, const char* kernel, const char* arg, const char* core) {
    check_arg(a, kernel, arg);
    if (a.ndim() != ndim)
        fail(kernel, std::string("argument ") + arg + " must have shape " + core + ", got " +
                         shape_str(a));
    for (int k = 1; k < ndim; ++k)
        if (a.shape(k) < 1)
            fail(kernel, std::string("argument ") + arg + " has an empty core axis, shape " +
                             shape_str(a));
        else if (a.shape(k) > INT_MAX)
            fail(kernel, std::string("argument ") + arg + " has a core axis longer than 2^31 - 1 "
                             "(the compiled kernels' limit), shape " + shape_str(a));
}

void check_same(const Arr& a, const Arr& b, const char* kernel, const char* an, const char* bn) {
    bool same = a.ndim() == b.ndim();
    for (py::ssize_t k = 0; same && k < a.ndim(); ++k) same = a.shape(k) == b.shape(k);
    if (!same)
        fail(kernel, std::string("arguments ") + an + " and " + bn +
                         " must have the same shape, got " + shape_str(a) + " and " +
                         shape_str(b));
}

// ---------------------------------------------------------------- threads

// Threads of the batch loops: _core.set_threads (rfl_fast.set_threads, RFL_FAST_THREADS).
std::atomic<int> g_threads{1};

// The batch loop of the headers (rfl/batch.hpp: fixed chunks, so results never depend on the
// thread count) on up to g_threads threads.
template <class Body>
bool for_chunks(py::ssize_t N, std::size_t item_bytes, std::size_t inputs, Body&& body) {
    return rfl::batch::for_chunks(N, item_bytes, inputs, g_threads.load(),
                                  std::forward<Body>(body));
}

// A batch loop on raw pointers: N items of core shape `core` from a and b into o.
using Run2 = void (*)(const double*, const double*, double*, py::ssize_t, const py::ssize_t*);

// run over the batch in for_chunks' chunks: `item` doubles per item of a and b, `out_item` of o
void run2_chunked(Run2 run, const double* a, const double* b, double* o, py::ssize_t N,
                  const py::ssize_t* core, std::size_t item, std::size_t out_item) {
    for_chunks(N, item * sizeof(double), 2, [&](py::ssize_t i0, py::ssize_t i1) {
        run(a + i0 * item, b + i0 * item, o + i0 * out_item, i1 - i0, core);
        return true;
    });
}

// ---------------------------------------------------------------- Stiefel

enum class StOp { proj, retr_polar, inv_retr_polar, retr_qr, inv_retr_qr, polar };

template <StOp OP, int P>
RFL_INLINE void stiefel_items(const double* px, const double* pb, double* po, py::ssize_t N, int n,
                              int p, double* work) {
    if constexpr (OP == StOp::retr_polar) {  // the polar kernels take the whole batch (p = 5
        rfl::stiefel::retr_polar<P>(px, pb, po, N, n, p, work);  // groups items: stiefel.hpp)
    } else if constexpr (OP == StOp::polar) {
        rfl::stiefel::polar<P>(px, po, N, n, p, work);
    } else {
        const std::size_t item = static_cast<std::size_t>(n) * p;
        for (py::ssize_t i = 0; i < N; ++i) {
            const double* xi = px + i * item;
            const double* bi = pb + i * item;
            double* oi = po + i * item;
            if constexpr (OP == StOp::proj) rfl::stiefel::proj<P>(xi, bi, oi, n, p, work);
            if constexpr (OP == StOp::inv_retr_polar)
                rfl::stiefel::inv_retr_polar<P>(xi, bi, oi, n, p, work);
            if constexpr (OP == StOp::retr_qr) rfl::stiefel::retr_qr<P>(xi, bi, oi, n, p, work);
            if constexpr (OP == StOp::inv_retr_qr)
                rfl::stiefel::inv_retr_qr<P>(xi, bi, oi, n, p, work);
        }
    }
}

// p = 1..8 get compile-time specialisations (everything inlined into the per-ISA clones)
template <StOp OP>
RFL_CLONES void stiefel_loop(const double* px, const double* pb, double* po, py::ssize_t N, int n,
                             int p) {
    // scratch left uninitialized: zero-filling it (mostly the SVD / Householder fallbacks' part)
    // cost ~0.6 us per call at n = 784; every kernel writes it before reading it (the tests pass
    // with it filled with NaN)
    const std::size_t size = rfl::stiefel::work_size(n, p);
    std::unique_ptr<double[]> work(new double[size]);
    double* w = work.get();
    switch (p) {
        case 1: return stiefel_items<OP, 1>(px, pb, po, N, n, p, w);
        case 2: return stiefel_items<OP, 2>(px, pb, po, N, n, p, w);
        case 3: return stiefel_items<OP, 3>(px, pb, po, N, n, p, w);
        case 4: return stiefel_items<OP, 4>(px, pb, po, N, n, p, w);
        case 5: return stiefel_items<OP, 5>(px, pb, po, N, n, p, w);
        case 6: return stiefel_items<OP, 6>(px, pb, po, N, n, p, w);
        case 7: return stiefel_items<OP, 7>(px, pb, po, N, n, p, w);
        case 8: return stiefel_items<OP, 8>(px, pb, po, N, n, p, w);
        default: return stiefel_items<OP, 0>(px, pb, po, N, n, p, w);
    }
}

template <StOp OP>
void stiefel_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    stiefel_loop<OP>(a, b, o, N, static_cast<int>(c[0]), static_cast<int>(c[1]));
}

template <StOp OP>
Arr stiefel_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname) {
    check_ndim(x, 3, kernel, "x", "(N, n, p)");
    check_ndim(b, 3, kernel, bname, "(N, n, p)");
    check_same(x, b, kernel, "x", bname);
    const py::ssize_t N = x.shape(0);
    const int n = static_cast<int>(x.shape(1)), p = static_cast<int>(x.shape(2));
    if (p > n) fail(kernel, "need n >= p for Stiefel points (n, p), got shape " + shape_str(x));
    Arr out({N, static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(p)});
    const double* px = x.data();
    const double* pb = b.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(n) * p;
        const py::ssize_t core[2] = {n, p};
        run2_chunked(stiefel_run<OP>, px, pb, po, N, core, item, item);
    }
    return out;
}

Arr polar(const Arr& a) {
    const char* kernel = "polar";
    check_ndim(a, 3, kernel, "a", "(N, n, p)");
    const py::ssize_t N = a.shape(0);
    const int n = static_cast<int>(a.shape(1)), p = static_cast<int>(a.shape(2));
    if (p > n) fail(kernel, "need n >= p, got shape " + shape_str(a));
    Arr out({N, static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(p)});
    const double* pa = a.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(n) * p;
        for_chunks(N, item * sizeof(double), 1, [&](py::ssize_t i0, py::ssize_t i1) {
            const double* ai = pa + i0 * item;
            stiefel_loop<StOp::polar>(ai, ai, po + i0 * item, i1 - i0, n, p);
            return true;
        });
    }
    return out;
}

// ---------------------------------------------------------------- symmetric / SPD

// Whether the wide-vector code path runs here: the lockstep Jacobi (rfl::spd::sym_fun_lanes)
// beats Householder + QL per item only with 4-wide vectors (AVX2 + FMA, measured at n = 9:
// ~2.5 us vs ~3.8 us per matrix; with SSE2 it is slower than QL).
bool wide_simd() {
#if defined(__AVX2__) && defined(__FMA__)
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

// lockstep Jacobi up to this n (measured against QL per matrix: 12x12 ~10% faster, 16x16 ~15%
// slower), above it Householder + QL in lockstep over 4 matrices (n = 20: ~2x faster than QL
// per matrix; with SSE2 only it is ~2x slower, so that case keeps QL per matrix)
constexpr int kJacobiMaxN = 12;

template <double (*F)(double)>
RFL_CLONES void sym_loop(const double* ps, double* po, py::ssize_t N, int n) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    if (n <= kJacobiMaxN && N >= 2 && wide_simd()) {
        std::vector<double> work(rfl::spd::sym_lanes_work(n));
        return rfl::spd::sym_fun_lanes(ps, po, N, n, F, work.data());
    }
#ifdef RFL_HAVE_QL_LANES
    if (N >= 2 && wide_simd()) {
        std::vector<double> work(rfl::spd::sym_ql_lanes_work(n));
        return rfl::spd::sym_fun_ql_lanes(ps, po, N, n, F, work.data());
    }
#endif
    std::vector<double> work(rfl::spd::sym_work(n));
    for (py::ssize_t i = 0; i < N; ++i)
        rfl::spd::sym_fun(ps + i * item, po + i * item, n, F, work.data());
}

template <double (*F)(double)>
Arr sym_unary(const Arr& s, const char* kernel) {
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
        for_chunks(N, item * sizeof(double), 1, [&](py::ssize_t i0, py::ssize_t i1) {
            sym_loop<F>(ps + i0 * item, po + i0 * item, i1 - i0, n);
            return true;
        });
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
Arr spd_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname) {
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
        run2_chunked(spd_run<F>, px, pb, po, N, core, item, item);
    }
    return out;
}

Arr spd_dist(const Arr& x, const Arr& y) {
    const char* kernel = "spd_dist";
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
        run2_chunked(spd_dist_run, px, py_, po, N, core, static_cast<std::size_t>(n) * n, 1);
    }
    return out;
}

// ---------------------------------------------------------------- vector manifolds

// Vector kernels: the point length d gets compile-time values 2..12 (the Lorentz and small
// sphere cases), so the item functions' loops unroll completely; 0 means "runtime d".
#define RFL_SMALL_D(CALL)                                \
    switch (d) {                                         \
        case 2: return CALL(2);                          \
        case 3: return CALL(3);                          \
        case 4: return CALL(4);                          \
        case 5: return CALL(5);                          \
        case 6: return CALL(6);                          \
        case 7: return CALL(7);                          \
        case 8: return CALL(8);                          \
        case 9: return CALL(9);                          \
        case 10: return CALL(10);                        \
        case 11: return CALL(11);                        \
        case 12: return CALL(12);                        \
        default: return CALL(0);                         \
    }

template <void (*F)(const double*, const double*, double*, std::size_t), std::size_t D>
RFL_INLINE void vec2_items(const double* px, const double* pb, double* po, py::ssize_t N,
                           std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) F(px + i * d, pb + i * d, po + i * d, d);
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
RFL_CLONES void vec2_loop(const double* px, const double* pb, double* po, py::ssize_t N,
                          std::size_t d) {
#define RFL_CALL(K) vec2_items<F, K>(px, pb, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <double (*F)(const double*, const double*, std::size_t), std::size_t D>
RFL_INLINE void dist_items(const double* px, const double* py_, double* po, py::ssize_t N,
                           std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) po[i] = F(px + i * d, py_ + i * d, d);
}

template <double (*F)(const double*, const double*, std::size_t)>
RFL_CLONES void dist_loop(const double* px, const double* py_, double* po, py::ssize_t N,
                          std::size_t d) {
#define RFL_CALL(K) dist_items<F, K>(px, py_, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t),
          std::size_t D>
RFL_INLINE void vec3_items(const double* px, const double* py_, const double* pv, double* po,
                           py::ssize_t N, std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) F(px + i * d, py_ + i * d, pv + i * d, po + i * d, d);
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t)>
RFL_CLONES void vec3_loop(const double* px, const double* py_, const double* pv, double* po,
                          py::ssize_t N, std::size_t d) {
#define RFL_CALL(K) vec3_items<F, K>(px, py_, pv, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
void vec_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    vec2_loop<F>(a, b, o, N, static_cast<std::size_t>(c[0]));
}

template <double (*F)(const double*, const double*, std::size_t)>
void dist_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    dist_loop<F>(a, b, o, N, static_cast<std::size_t>(c[0]));
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
Arr vec_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(b, 2, kernel, bname, "(N, d)");
    check_same(x, b, kernel, "x", bname);
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out({N, static_cast<py::ssize_t>(d)});
    const double* px = x.data();
    const double* pb = b.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const py::ssize_t core[1] = {static_cast<py::ssize_t>(d)};
        run2_chunked(vec_run<F>, px, pb, po, N, core, d, d);
    }
    return out;
}

template <double (*F)(const double*, const double*, std::size_t)>
Arr vec_dist(const Arr& x, const Arr& y, const char* kernel) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(y, 2, kernel, "y", "(N, d)");
    check_same(x, y, kernel, "x", "y");
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out(N);
    const double* px = x.data();
    const double* py_ = y.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const py::ssize_t core[1] = {static_cast<py::ssize_t>(d)};
        run2_chunked(dist_run<F>, px, py_, po, N, core, d, 1);
    }
    return out;
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t)>
Arr vec_ternary(const Arr& x, const Arr& y, const Arr& v, const char* kernel) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(y, 2, kernel, "y", "(N, d)");
    check_ndim(v, 2, kernel, "v", "(N, d)");
    check_same(x, y, kernel, "x", "y");
    check_same(x, v, kernel, "x", "v");
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out({N, static_cast<py::ssize_t>(d)});
    const double* px = x.data();
    const double* py_ = y.data();
    const double* pv = v.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        for_chunks(N, d * sizeof(double), 3, [&](py::ssize_t i0, py::ssize_t i1) {
            vec3_loop<F>(px + i0 * d, py_ + i0 * d, pv + i0 * d, po + i0 * d, i1 - i0, d);
            return true;
        });
    }
    return out;
}

// ---------------------------------------------------------------- fused PCA gradient sums

// Work unit of pca_grad_sum: rows [lo, hi) of one selected client, into its own accumulator.
struct PcaUnit {
    std::int64_t item, lo, hi;
    double* St;  // r x d: the output slot of the item, or a private partial
    double q;
};

// Rows per unit: a client with more rows is split into fixed chunks (partials summed in chunk
// order afterwards), so a result never depends on the thread count or on which thread ran a
// unit. Small enough that threads balance well when one of them starts late.
constexpr std::int64_t kPcaChunkRows = 512;
// Multiply-adds (rows * d * r) below which one more thread costs more than it saves.
constexpr double kPcaMinWorkPerThread = 1 << 19;

template <int R>
RFL_INLINE void pca_units_r(PcaUnit* u, std::size_t nu, std::atomic<std::size_t>& next,
                            bool backward, const double* pz, std::size_t d, const double* pxt,
                            int r, const rfl::pca::Weight& wt, double* coef) {
    const std::size_t item = static_cast<std::size_t>(r) * d;
    for (std::size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < nu;) {
        const std::size_t i = backward ? nu - 1 - c : c;
        u[i].q = rfl::pca::client<R>(pz + u[i].lo * d, static_cast<std::size_t>(u[i].hi - u[i].lo),
                                     d, pxt + u[i].item * item, r, wt, u[i].St, coef);
    }
}

// Worker of pca_grad_sum: claims units from `next` until none is left (dynamic schedule: a
// thread that starts late, or shares its core, simply takes fewer units).
RFL_CLONES_V4 void pca_units(PcaUnit* u, std::size_t nu, std::atomic<std::size_t>* next,
                             bool backward, const double* pz, std::size_t d, const double* pxt,
                             int r, rfl::pca::Weight wt) {
    std::vector<double> coef(static_cast<std::size_t>(rfl::pca::kRowsMax) * r);
    double* c = coef.data();
    switch (r) {
        case 1: return pca_units_r<1>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 2: return pca_units_r<2>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 3: return pca_units_r<3>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 4: return pca_units_r<4>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 5: return pca_units_r<5>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 6: return pca_units_r<6>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 7: return pca_units_r<7>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        case 8: return pca_units_r<8>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
        default: return pca_units_r<0>(u, nu, *next, backward, pz, d, pxt, r, wt, c);
    }
}


py::tuple pca_grad_sum(const Arr& z, const I64& offsets, const I64& idx, const Arr& xt,
                       double tau, double c, bool clipped, int threads, const py::object& scale,
                       bool backward) {
    const char* kernel = "pca_grad_sum";
    check_ndim(z, 2, kernel, "z", "(M, d)");
    check_arg(offsets, kernel, "offsets");
    check_arg(idx, kernel, "idx");
    check_ndim(xt, 3, kernel, "xt", "(k, r, d)");
    if (offsets.ndim() != 1 || offsets.shape(0) < 1)
        fail(kernel, "argument offsets must have shape (n + 1,), got " + std::to_string(offsets.ndim()) + " axes");
    if (idx.ndim() != 1 || idx.shape(0) != xt.shape(0))
        fail(kernel, "argument idx must have shape (k,) with k = xt.shape[0] = " +
                         std::to_string(xt.shape(0)));
    const std::size_t d = static_cast<std::size_t>(z.shape(1));
    if (xt.shape(2) != z.shape(1))
        fail(kernel, "xt " + shape_str(xt) + " does not match the row length of z " + shape_str(z));
    if (clipped && !(tau > 0.0)) fail(kernel, "tau must be > 0 (inf: no clipping)");
    const py::ssize_t k = xt.shape(0), n = offsets.shape(0) - 1;
    const int r = static_cast<int>(xt.shape(1));
    const std::int64_t* po = offsets.data();
    const std::int64_t* pi = idx.data();
    const std::int64_t rows = z.shape(0);
    for (py::ssize_t i = 0; i <= n; ++i)
        if (po[i] < 0 || po[i] > rows || (i && po[i] < po[i - 1]))
            fail(kernel, "offsets must be non-decreasing within [0, " + std::to_string(rows) + "]");
    for (py::ssize_t j = 0; j < k; ++j)
        if (pi[j] < 0 || pi[j] >= n)
            fail(kernel, "idx[" + std::to_string(j) + "] = " + std::to_string(pi[j]) +
                             " is not a client index in [0, " + std::to_string(n) + ")");
    // with scale: G[j] = scale[j] St[j]' (k, d, r) out, St in scratch
    const bool gradient = !scale.is_none();
    Arr sc;
    if (gradient) {
        sc = take_array<double>(scale);
        check_arg(sc, kernel, "scale");
        if (sc.ndim() != 1 || sc.shape(0) != k)
            fail(kernel, "argument scale must have shape (k,) with k = " + std::to_string(k));
    }
    const auto R_ = static_cast<py::ssize_t>(r), D_ = static_cast<py::ssize_t>(d);
    Arr out = gradient ? Arr({k, D_, R_}) : Arr({k, R_, D_});
    std::vector<double> st_scratch(gradient ? static_cast<std::size_t>(k) * r * d : 0);
    py::array_t<double> q(k);
    const double* pz = z.data();
    const double* pxt = xt.data();
    double* pout = gradient ? st_scratch.data() : out.mutable_data();
    double* pg = out.mutable_data();
    const double* psc = gradient ? sc.data() : nullptr;
    double* pq = q.mutable_data();
    const rfl::pca::Weight wt{clipped, tau, std::fabs(c)};
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(r) * d;
        // units: fixed row chunks per client; multi-chunk clients get private partials
        std::vector<PcaUnit> units;
        std::vector<std::size_t> first(k + 1);
        std::size_t n_partial = 0;
        for (py::ssize_t j = 0; j < k; ++j) {
            first[j] = units.size();
            const std::int64_t lo = po[pi[j]], hi = po[pi[j] + 1];
            const std::int64_t nc = std::max<std::int64_t>(1, (hi - lo + kPcaChunkRows - 1) / kPcaChunkRows);
            for (std::int64_t s = 0; s < nc; ++s)
                units.push_back({j, lo + s * kPcaChunkRows,
                                 std::min(hi, lo + (s + 1) * kPcaChunkRows), nullptr, 0.0});
            if (nc > 1) n_partial += static_cast<std::size_t>(nc);
        }
        first[k] = units.size();
        std::vector<double> partial(n_partial * item);
        std::size_t slot = 0;
        for (py::ssize_t j = 0; j < k; ++j) {
            const std::size_t nc = first[j + 1] - first[j];
            for (std::size_t s = first[j]; s < first[j + 1]; ++s)
                units[s].St = nc == 1 ? pout + j * item : partial.data() + (slot++) * item;
        }
        const std::size_t nu = units.size();
        std::int64_t all_rows = 0;
        for (const auto& u : units) all_rows += u.hi - u.lo;
        const double work = static_cast<double>(all_rows) * static_cast<double>(d) * r;
        const std::size_t by_work = static_cast<std::size_t>(work / kPcaMinWorkPerThread);
        const int T = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(
            std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), nu), by_work)));
        std::atomic<std::size_t> next{0};
        std::vector<std::thread> pool;
        for (int t = 1; t < T; ++t)
            pool.emplace_back(pca_units, units.data(), nu, &next, backward, pz, d, pxt, r, wt);
        pca_units(units.data(), nu, &next, backward, pz, d, pxt, r, wt);
        for (auto& th : pool) th.join();
        // reduction in chunk order
        for (py::ssize_t j = 0; j < k; ++j) {
            double qj = 0.0;
            const std::size_t nc = first[j + 1] - first[j];
            if (nc > 1) {
                double* o = pout + j * item;
                std::fill(o, o + item, 0.0);
                for (std::size_t s = first[j]; s < first[j + 1]; ++s)
                    for (std::size_t e = 0; e < item; ++e) o[e] += units[s].St[e];
            }
            for (std::size_t s = first[j]; s < first[j + 1]; ++s) qj += units[s].q;
            pq[j] = qj;
            if (gradient) {  // G[j] = scale[j] St[j]'
                const double* st = pout + j * item;
                double* g = pg + j * item;
                for (std::size_t i = 0; i < d; ++i)
                    for (int l = 0; l < r; ++l) g[i * r + l] = psc[j] * st[l * d + i];
            }
        }
    }
    return py::make_tuple(out, q);
}

// ---------------------------------------------------------------- fused local steps (kPCA)

// tau steps X <- R_X(-eta P_X(s Z'(Z X))) (R: polar retraction) on the rows [lo, hi) of z
// (row length d) with X (d, r) in place, through the very functions the batched route calls
// (pca_units in the same 512-row chunks summed in the same order, stiefel_loop for the
// projection and the retraction), so the iterates are the batched route's bit for bit; the
// client's rows stay in cache between its steps.
void pca_local_steps_client(const double* pz, std::int64_t lo, std::int64_t hi, std::size_t d,
                            int r, double* X, double s, double neg_eta, int steps) {
    const std::size_t item = static_cast<std::size_t>(r) * d;
    const int n = static_cast<int>(d);
    std::vector<PcaUnit> units;
    for (std::int64_t a = lo; a < hi || units.empty(); a += kPcaChunkRows)
        units.push_back({0, a, std::min(hi, a + kPcaChunkRows), nullptr, 0.0});
    const std::size_t nu = units.size();
    // Xt (r, d), St (r, d), G and U (d, r), then one partial St per chunk when there are several
    std::vector<double> buf((4 + (nu > 1 ? nu : 0)) * item);
    double* Xt = buf.data();
    double* St = Xt + item;
    double* G = St + item;
    double* U = G + item;
    double* partials = U + item;
    for (std::size_t c = 0; c < nu; ++c) units[c].St = nu == 1 ? St : partials + c * item;
    const rfl::pca::Weight plain{false, INFINITY, 1.0};
    for (int step = 0; step < steps; ++step) {
        for (std::size_t i = 0; i < d; ++i)
            for (int l = 0; l < r; ++l) Xt[l * d + i] = X[i * r + l];
        std::atomic<std::size_t> next{0};
        pca_units(units.data(), nu, &next, false, pz, d, Xt, r, plain);
        if (nu > 1) {
            std::fill(St, St + item, 0.0);
            for (std::size_t c = 0; c < nu; ++c)
                for (std::size_t e = 0; e < item; ++e) St[e] += units[c].St[e];
        }
        for (std::size_t i = 0; i < d; ++i)
            for (int l = 0; l < r; ++l) G[i * r + l] = s * St[l * d + i];
        stiefel_loop<StOp::proj>(X, G, U, 1, n, r);
        for (std::size_t e = 0; e < item; ++e) U[e] = neg_eta * U[e];
        stiefel_loop<StOp::retr_polar>(X, U, G, 1, n, r);
        std::copy(G, G + item, X);
    }
}

void pca_local_units(const double* pz, const std::int64_t* po, const std::int64_t* pi,
                     std::size_t k, std::size_t d, int r, double* px, const double* ps,
                     double neg_eta, int steps, std::atomic<std::size_t>* next) {
    const std::size_t item = static_cast<std::size_t>(r) * d;
    for (std::size_t j; (j = next->fetch_add(1, std::memory_order_relaxed)) < k;)
        pca_local_steps_client(pz, po[pi[j]], po[pi[j] + 1], d, r, px + j * item, ps[j], neg_eta,
                               steps);
}

Arr pca_local_steps(const Arr& z, const I64& offsets, const I64& idx, const Arr& x0,
                    const Arr& scale, double eta, int steps, int threads) {
    const char* kernel = "pca_local_steps";
    check_ndim(z, 2, kernel, "z", "(M, d)");
    check_arg(offsets, kernel, "offsets");
    check_arg(idx, kernel, "idx");
    check_ndim(x0, 3, kernel, "x0", "(k, d, r)");
    check_arg(scale, kernel, "scale");
    if (offsets.ndim() != 1 || offsets.shape(0) < 2)
        fail(kernel, "offsets must have shape (n + 1,) with n >= 1");
    const py::ssize_t k = x0.shape(0), n = offsets.shape(0) - 1;
    const std::size_t d = static_cast<std::size_t>(z.shape(1));
    const int r = static_cast<int>(x0.shape(2));
    if (x0.shape(1) != z.shape(1) || r > x0.shape(1))
        fail(kernel, "x0 " + shape_str(x0) + " does not match the rows of z " + shape_str(z));
    if (idx.ndim() != 1 || idx.shape(0) != k || scale.ndim() != 1 || scale.shape(0) != k)
        fail(kernel, "idx and scale must have shape (k,) with k = " + std::to_string(k));
    const std::int64_t* po = offsets.data();
    const std::int64_t* pi = idx.data();
    for (py::ssize_t i = 0; i <= n; ++i)
        if (po[i] < 0 || po[i] > z.shape(0) || (i && po[i] < po[i - 1]))
            fail(kernel, "offsets must be non-decreasing within [0, " +
                             std::to_string(z.shape(0)) + "]");
    for (py::ssize_t j = 0; j < k; ++j)
        if (pi[j] < 0 || pi[j] >= n) fail(kernel, "idx has a value outside [0, n)");
    if (steps < 0) fail(kernel, "steps must be >= 0");
    Arr x({k, x0.shape(1), x0.shape(2)});
    std::copy(x0.data(), x0.data() + x0.size(), x.mutable_data());
    const double* pz = z.data();
    const double* ps = scale.data();
    double* px = x.mutable_data();
    {
        py::gil_scoped_release release;
        const int T = std::max(1, std::min<int>(threads, static_cast<int>(k)));
        std::atomic<std::size_t> next{0};
        std::vector<std::thread> pool;
        for (int t = 1; t < T; ++t)
            pool.emplace_back(pca_local_units, pz, po, pi, static_cast<std::size_t>(k), d, r, px,
                              ps, -eta, steps, &next);
        pca_local_units(pz, po, pi, static_cast<std::size_t>(k), d, r, px, ps, -eta, steps, &next);
        for (auto& th : pool) th.join();
    }
    return x;
}

// ---------------------------------------------------------------- checked calls (fast lane)

// `<kernel>_checked(a, b, core)`: the public API's fast lane for small inputs. It takes the
// arrays only as they are: exact ndarrays, float64, C-contiguous and aligned, both of one shape
// (..., *core) with at least one item (the leading axes are one batch axis in memory). It checks
// that every input entry is finite, runs the kernel, and returns its result (shape (..., *core),
// or (...) for a distance) when every output entry is finite too. Anything else gives None: the
// caller then takes the general route, which converts, checks and raises the named errors, so
// errors and results never depend on which route answered. On one 784x5 Stiefel matrix this
// replaces ~6 us of Python checks and glue with ~0.5 us.

// Whether every entry of a[0, n) is finite: x * 0 is 0 for finite x and NaN for inf or NaN, so
// the sums stay 0 exactly when every entry is finite. One multiply-add per 4 entries (GCC vector
// extensions; not folded to 0 without -ffinite-math-only), 4 sums to hide its latency.
RFL_CLONES bool all_finite(const double* a, std::size_t n) {
    typedef double v4 __attribute__((vector_size(32), aligned(8), may_alias));
    v4 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const v4* p = reinterpret_cast<const v4*>(a + i);
        s0 += p[0] * 0.0;
        s1 += p[1] * 0.0;
        s2 += p[2] * 0.0;
        s3 += p[3] * 0.0;
    }
    double s = 0.0;
    for (; i < n; ++i) s += a[i] * 0.0;
    const v4 t = (s0 + s1) + (s2 + s3);
    return s + ((t[0] + t[1]) + (t[2] + t[3])) == 0.0;
}

template <int CORE, bool SCALAR_OUT>
py::object checked_binary(py::handle a, py::handle b, py::handle core, Run2 run,
                          bool (*core_ok)(const py::ssize_t*)) {
    namespace pd = py::detail;
    static PyObject* const f64 = py::dtype::of<double>().release().ptr();  // the builtin descr
    constexpr int kFlags = pd::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | pd::npy_api::NPY_ARRAY_ALIGNED_;
    PyTypeObject* const ndarray = pd::npy_api::get().PyArray_Type_;
    if (Py_TYPE(a.ptr()) != ndarray || Py_TYPE(b.ptr()) != ndarray || !PyTuple_Check(core.ptr()) ||
        PyTuple_GET_SIZE(core.ptr()) != CORE)
        return py::none();
    const pd::PyArray_Proxy* pa = pd::array_proxy(a.ptr());
    const pd::PyArray_Proxy* pb = pd::array_proxy(b.ptr());
    if (pa->descr != f64 || pb->descr != f64 || (pa->flags & kFlags) != kFlags ||
        (pb->flags & kFlags) != kFlags || pa->nd < CORE || pa->nd != pb->nd)
        return py::none();
    const int nd = pa->nd, lead = nd - CORE;
    py::ssize_t c[CORE];
    std::size_t item = 1;
    for (int k = 0; k < CORE; ++k) {
        c[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(core.ptr(), k));
        if (c[k] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return py::none();
        }
        if (c[k] > INT_MAX) return py::none();  // the general route refuses it, naming it
        item *= static_cast<std::size_t>(c[k]);
    }
    py::ssize_t N = 1;
    for (int k = 0; k < nd; ++k) {
        const py::ssize_t dim = pa->dimensions[k];
        if (dim != pb->dimensions[k] || (k >= lead && dim != c[k - lead])) return py::none();
        if (k < lead) N *= pa->dimensions[k];
    }
    if (N < 1 || item < 1 || !core_ok(c)) return py::none();
    std::vector<py::ssize_t> shape(pa->dimensions, pa->dimensions + (SCALAR_OUT ? lead : nd));
    py::array_t<double> out(shape);
    const auto* xa = reinterpret_cast<const double*>(pa->data);
    const auto* xb = reinterpret_cast<const double*>(pb->data);
    double* po = out.mutable_data();
    const std::size_t out_item = SCALAR_OUT ? 1 : item;
    bool good;
    {
        py::gil_scoped_release release;  // each chunk checked, computed, checked again in cache
        good = for_chunks(N, item * sizeof(double), 2, [&](py::ssize_t i0, py::ssize_t i1) {
            const std::size_t at = static_cast<std::size_t>(i0) * item;
            const std::size_t count = static_cast<std::size_t>(i1 - i0) * item;
            double* o = po + static_cast<std::size_t>(i0) * out_item;
            if (!all_finite(xa + at, count) || !all_finite(xb + at, count)) return false;
            run(xa + at, xb + at, o, i1 - i0, c);
            return all_finite(o, static_cast<std::size_t>(i1 - i0) * out_item);
        });
    }
    return good ? py::object(std::move(out)) : py::object(py::none());
}

bool stiefel_core(const py::ssize_t* c) { return c[0] >= c[1]; }
bool square_core(const py::ssize_t* c) { return c[0] == c[1]; }
bool any_core(const py::ssize_t*) { return true; }

template <int CORE, bool SCALAR_OUT>
void def_checked(py::module_& m, const char* kernel, Run2 run,
                 bool (*core_ok)(const py::ssize_t*)) {
    m.def((std::string(kernel) + "_checked").c_str(),
          [run, core_ok](py::handle a, py::handle b, py::handle core) {
              return checked_binary<CORE, SCALAR_OUT>(a, b, core, run, core_ok);
          },
          py::arg("a"), py::arg("b"), py::arg("core"),
          (std::string("Fast lane of ") + kernel +
           ": the result for ready, finite float64 arrays of shape (..., *core) with a finite "
           "answer, else None (see src/_core.cpp).").c_str());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = R"pbdoc(
        rfl_fast._core: compiled kernels (C++17, header-only core in rfl_fast.get_include()).

        Private backend module: use the public API (rfl_fast.linalg, the manifolds) or
        rfl_fast.kernels.call. Every kernel takes C-contiguous float64 arrays with one leading
        batch axis N and returns an array with the same leading axis; items without an answer
        are NaN. The GIL is released during the computation.
    )pbdoc";
    m.attr("__version__") = RFL_FAST_VERSION;

    g_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m.def("set_threads", [](int threads) {
        if (threads < 1)
            throw py::value_error("threads: expected an int >= 1, got " + std::to_string(threads));
        g_threads = threads; }, py::arg("threads"),
        R"pbdoc(Threads of the batch loops (at most; fewer for small batches); results do not
depend on it.)pbdoc");
    m.def("get_threads", [] { return g_threads.load(); },
        R"pbdoc(Threads of the batch loops (see set_threads).)pbdoc");

    // Stiefel
    m.def("stiefel_proj", [](const Arr& x, const Arr& u) {
        return stiefel_binary<StOp::proj>(x, u, "stiefel_proj", "u"); }, py::arg("x"), py::arg("u"),
        R"pbdoc(Tangent projection ``u - x sym(x'u)``; x, u: (N, n, p) -> (N, n, p).)pbdoc");
    m.def("stiefel_retr_polar", [](const Arr& x, const Arr& u) {
        return stiefel_binary<StOp::retr_polar>(x, u, "stiefel_retr_polar", "u"); },
        py::arg("x"), py::arg("u"),
        R"pbdoc(Polar retraction ``polar(x + u)``; x, u: (N, n, p) -> (N, n, p).

p x p Gram route with a refinement step when x + u is ill-conditioned, a one-sided Jacobi SVD
beyond cond 1e5; NaN for rank-deficient x + u.)pbdoc");
    m.def("stiefel_inv_retr_polar", [](const Arr& x, const Arr& y) {
        return stiefel_binary<StOp::inv_retr_polar>(x, y, "stiefel_inv_retr_polar", "y"); },
        py::arg("x"), py::arg("y"),
        R"pbdoc(Inverse polar retraction ``y S - x``, S symmetric with ``(x'y)S + S(y'x) = 2I``.

x, y: (N, n, p) -> (N, n, p). The Lyapunov equation is solved as a p(p+1)/2 linear system;
NaN where it is singular.)pbdoc");
    m.def("stiefel_retr_qr", [](const Arr& x, const Arr& u) {
        return stiefel_binary<StOp::retr_qr>(x, u, "stiefel_retr_qr", "u"); },
        py::arg("x"), py::arg("u"),
        R"pbdoc(QR retraction ``qf(x + u)`` with a positive diagonal of R; (N, n, p) -> (N, n, p).

CholeskyQR2 (Householder QR when (x+u)'(x+u) is not numerically positive definite).)pbdoc");
    m.def("stiefel_inv_retr_qr", [](const Arr& x, const Arr& y) {
        return stiefel_binary<StOp::inv_retr_qr>(x, y, "stiefel_inv_retr_qr", "y"); },
        py::arg("x"), py::arg("y"),
        R"pbdoc(Inverse QR retraction ``y R - x``, R upper triangular, ``(x'y)R + R'(y'x) = 2I``.

x, y: (N, n, p) -> (N, n, p); NaN where a leading minor of x'y vanishes.)pbdoc");
    m.def("polar", &polar, py::arg("a"),
        R"pbdoc(Polar factor ``a (a'a)^(-1/2)`` (nearest Stiefel point); a: (N, n, p), n >= p.

NaN for rank-deficient items (s_min <= s_max * eps * n).)pbdoc");

    // symmetric matrix functions
    m.def("sym_expm", [](const Arr& s) { return sym_unary<rfl::spd::f_exp>(s, "sym_expm"); },
        py::arg("s"), R"pbdoc(Matrix exponential of symmetric s (lower triangle read): (N, n, n).)pbdoc");
    m.def("sym_logm", [](const Arr& s) { return sym_unary<rfl::spd::f_log>(s, "sym_logm"); },
        py::arg("s"), R"pbdoc(Matrix logarithm of SPD s: (N, n, n); NaN items where s is not positive definite.)pbdoc");
    m.def("sym_sqrtm", [](const Arr& s) { return sym_unary<rfl::spd::f_sqrt>(s, "sym_sqrtm"); },
        py::arg("s"), R"pbdoc(Square root of SPD s: (N, n, n); NaN where s is not positive definite.)pbdoc");
    m.def("sym_invsqrtm", [](const Arr& s) {
        return sym_unary<rfl::spd::f_invsqrt>(s, "sym_invsqrtm"); }, py::arg("s"),
        R"pbdoc(Inverse square root of SPD s: (N, n, n); NaN where s is not positive definite.)pbdoc");

    // SPD
    m.def("spd_exp", [](const Arr& x, const Arr& u) {
        return spd_binary<rfl::spd::spd_exp>(x, u, "spd_exp", "u"); }, py::arg("x"), py::arg("u"),
        R"pbdoc(Affine-invariant Exp ``x^1/2 expm(x^-1/2 u x^-1/2) x^1/2``; (N, n, n).

Computed as ``L expm(L^-1 sym(u) L^-T) L'`` with the Cholesky factor x = L L' (equal in exact
arithmetic); NaN where x is not positive definite.)pbdoc");
    m.def("spd_log", [](const Arr& x, const Arr& y) {
        return spd_binary<rfl::spd::spd_log>(x, y, "spd_log", "y"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Affine-invariant Log ``x^1/2 logm(x^-1/2 y x^-1/2) x^1/2``; (N, n, n).

Computed through the Cholesky factor of x; NaN where x or y is not positive definite.)pbdoc");
    m.def("spd_dist", &spd_dist, py::arg("x"), py::arg("y"),
        R"pbdoc(Affine-invariant distance ``|logm(x^-1/2 y x^-1/2)|_F``; (N, n, n) -> (N,).)pbdoc");

    // sphere
    m.def("sphere_exp", [](const Arr& x, const Arr& u) {
        return vec_binary<rfl::sphere::exp>(x, u, "sphere_exp", "u"); }, py::arg("x"), py::arg("u"),
        R"pbdoc(Sphere Exp ``cos|u| x + sin|u| u/|u|``; (N, d) -> (N, d).)pbdoc");
    m.def("sphere_log", [](const Arr& x, const Arr& y) {
        return vec_binary<rfl::sphere::log>(x, y, "sphere_log", "y"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Sphere Log ``theta v/|v|``, ``v = y - <x,y>x``; (N, d); NaN at antipodal points.)pbdoc");
    m.def("sphere_dist", [](const Arr& x, const Arr& y) {
        return vec_dist<rfl::sphere::dist>(x, y, "sphere_dist"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Great-circle distance ``2 asin(|x - y|/2)``; (N, d) -> (N,).)pbdoc");
    m.def("sphere_transport", [](const Arr& x, const Arr& y, const Arr& v) {
        return vec_ternary<rfl::sphere::transport>(x, y, v, "sphere_transport"); },
        py::arg("x"), py::arg("y"), py::arg("v"),
        R"pbdoc(Parallel transport ``v - <y,v>/(1+<x,y>) (x+y)``; (N, d) -> (N, d).)pbdoc");

    // Lorentz
    m.def("lorentz_exp", [](const Arr& x, const Arr& v) {
        return vec_binary<rfl::lorentz::exp>(x, v, "lorentz_exp", "v"); }, py::arg("x"), py::arg("v"),
        R"pbdoc(Hyperboloid Exp ``cosh|v| x + sinh|v| v/|v|``; (N, d+1) -> (N, d+1).)pbdoc");
    m.def("lorentz_log", [](const Arr& x, const Arr& y) {
        return vec_binary<rfl::lorentz::log>(x, y, "lorentz_log", "y"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Hyperboloid Log ``acosh(a) (y - a x)/sqrt(a^2-1)``, ``a = -<x,y>_L``; (N, d+1).)pbdoc");
    m.def("lorentz_dist", [](const Arr& x, const Arr& y) {
        return vec_dist<rfl::lorentz::dist>(x, y, "lorentz_dist"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Hyperboloid distance ``acosh(-<x,y>_L)``; (N, d+1) -> (N,).)pbdoc");
    m.def("lorentz_transport", [](const Arr& x, const Arr& y, const Arr& v) {
        return vec_ternary<rfl::lorentz::transport>(x, y, v, "lorentz_transport"); },
        py::arg("x"), py::arg("y"), py::arg("v"),
        R"pbdoc(Parallel transport ``v + <y,v>_L/(1-<x,y>_L) (x+y)``; (N, d+1) -> (N, d+1).)pbdoc");

    // fast lanes of the public API (see checked_binary)
    def_checked<2, false>(m, "stiefel_proj", stiefel_run<StOp::proj>, stiefel_core);
    def_checked<2, false>(m, "stiefel_retr_polar", stiefel_run<StOp::retr_polar>, stiefel_core);
    def_checked<2, false>(m, "stiefel_inv_retr_polar", stiefel_run<StOp::inv_retr_polar>,
                          stiefel_core);
    def_checked<2, false>(m, "stiefel_inv_retr_qr", stiefel_run<StOp::inv_retr_qr>, stiefel_core);
    def_checked<2, false>(m, "spd_exp", spd_run<rfl::spd::spd_exp>, square_core);
    def_checked<2, false>(m, "spd_log", spd_run<rfl::spd::spd_log>, square_core);
    def_checked<2, true>(m, "spd_dist", spd_dist_run, square_core);
    def_checked<1, false>(m, "sphere_exp", vec_run<rfl::sphere::exp>, any_core);
    def_checked<1, false>(m, "sphere_log", vec_run<rfl::sphere::log>, any_core);
    def_checked<1, false>(m, "lorentz_exp", vec_run<rfl::lorentz::exp>, any_core);

    m.def("pca_local_steps", &pca_local_steps, py::arg("z"), py::arg("offsets"), py::arg("idx"),
          py::arg("x0"), py::arg("scale"), py::arg("eta"), py::arg("steps"),
          py::arg("threads") = 1,
          R"pbdoc(RFedAvg's local steps on kPCA, client by client: for each j, ``steps`` times
``X <- polar(X - eta P_X(scale[j] Z_i'(Z_i X)))`` from ``x0[j]`` (k, d, r) on the rows of client
``idx[j]``; returns the last iterates (k, d, r), NaN where a retraction had no solution. The
same arithmetic as the batched kernels (pca_grad_sum with scale, stiefel_proj,
stiefel_retr_polar), so the same bits; all steps of one client run while its rows are in
cache. ``threads`` threads take whole clients.)pbdoc");

    // fused PCA-type gradient sums (not a KERNELS entry: clients of different sizes)
    m.def("pca_grad_sum", &pca_grad_sum, py::arg("z"), py::arg("offsets"), py::arg("idx"),
        py::arg("xt"), py::arg("tau"), py::arg("c"), py::arg("clipped"), py::arg("threads") = 1,
        py::arg("scale") = py::none(), py::arg("backward") = false,
        R"pbdoc(One streaming pass over the rows of each selected client: ``(St, q)``.

z: (M, d) all clients' rows; offsets: (n + 1,) int64, client i owns rows offsets[i]:offsets[i+1];
idx: (k,) int64 selected clients; xt: (k, r, d) the points X_j transposed (orthonormal
columns of X_j when clipped). For each j: ``y = X_j' z`` per row z of client idx[j], weight
``w = 1`` (plain) or ``min(1, tau / (|c| sqrt(|z|^2 - |y|^2) |y|))`` (clipped), and
``St[j] = sum w y z'`` (r, d), i.e. ``(Z'(w o ZX))'``; ``q[j] = sum |y|^2``. ``threads``
threads (at most; fewer for small work) claim the work in units of one client's fixed
512-row chunk; the result does not depend on the thread count. With ``scale`` ((k,)
float64) the first output is the gradient form ``G[j] = scale[j] St[j]'`` (k, d, r).
``backward``: take the work from the last client to the first (a caller alternating directions
reads first what the previous call read last, still in cache); same result.)pbdoc");
}
