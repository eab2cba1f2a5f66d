// What the translation units of rfl_fast._core share: array arguments, their checks, the thread
// setting, the instruction-set clone attributes and each unit's registration function.
//
// The module is split by kernel family so that a build compiles the units in parallel
// (setup.py: ParallelCompile): _core.cpp (the module, the fast lanes), stiefel_polar.cpp,
// stiefel_qr.cpp (and stiefel_exp), spd.cpp, vectors.cpp (sphere, Lorentz), pca.cpp, brockett.cpp,
// seeds.cpp (the clients' seeds) and normal.cpp (NumPy's normals, reached through ctypes).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "rfl/batch.hpp"

namespace py = pybind11;

// Runtime CPU dispatch for a portable build: every batch loop is compiled twice, for
// x86-64-v3 (AVX2 + FMA) and for the baseline, and the dynamic loader picks the clone once
// (GNU ifunc) from the CPU it runs on. The hot item functions of the headers are RFL_INLINE
// (always_inline), so they are compiled into each clone with its instruction set; cold paths
// (SVD / Householder fallbacks) stay out of line, baseline only. (`flatten` would inline them
// too, but made the build several times longer for no gain.) A -march=native build
// (RFL_FAST_NATIVE=1 at build time) needs no clones. The lockstep Jacobi (spd.cpp) depends on
// the AVX2 clone (it is only used where AVX2 is present). A build with
// RFL_FAST_BASELINE=1 (setup.py) has no clones and takes the code path of a CPU without AVX2
// everywhere (CI tests it); _core.build_info() says which path runs.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(RFL_FAST_NATIVE) && !defined(RFL_FAST_BASELINE)
#define RFL_HAVE_CLONES 1
#define RFL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// the fused PCA pass also gets an AVX-512 clone: its register blocking (4 rows x r columns of
// dot-product accumulators) fits the 32 vector registers of x86-64-v4 and spills with 16
#define RFL_CLONES_V4 \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RFL_HAVE_CLONES 0
#define RFL_CLONES
#define RFL_CLONES_V4
#endif

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
    KernelArray(py::handle src);  // implicit: a bound function's argument (see below)
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

// The bound functions take their array arguments as py::handle and convert them here (no
// pybind11 type caster is specialised): a handle converts to a KernelArray as take_array does.
template <class T>
KernelArray<T>::KernelArray(py::handle src) : KernelArray(take_array<T>(src)) {}

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

// Defined in _core.cpp: the shape of a as "(2, 3)", a ValueError "<kernel>: <what>", and the
// checks that a has `ndim` axes (core shape `core`, e.g. "(N, n, p)") and that a and b have one
// shape.
std::string shape_str(const Arr& a);
[[noreturn]] void fail(const char* kernel, const std::string& what);
void check_ndim(const Arr& a, int ndim, const char* kernel, const char* arg, const char* core);
void check_same(const Arr& a, const Arr& b, const char* kernel, const char* an, const char* bn);

// ---------------------------------------------------------------- threads

// Threads of the batch loops: _core.set_threads (rfl_fast.set_threads, RFL_FAST_THREADS).
inline std::atomic<int> g_threads{1};

// How a batch whose items call BLAS that threads each call runs (the `parallel` argument of the
// kernels with BLAS routes): "items", on the loop's threads with BLAS held to one thread
// (rfl::blas::OneThread), whatever the batch; "blas", one item at a time in the calling thread,
// each call on BLAS's threads (their count can change the last bits); "auto", items below
// kItemsMaxWork multiply-adds per BLAS call of an item, else blas. The mode is a function of the
// core shape alone, never of the batch or the thread count, so neither changes an item's bits.
// Without BLAS's thread setting (_core.set_blas_threads) every such batch runs as "blas".
enum class Parallel { automatic, items, blas };

// Multiply-adds (n p^2, n^3) of an item's BLAS call from which "auto" leaves the item to BLAS's
// threads: the calls of smaller items thread poorly; a call of 16 M multiply-adds gives every
// one of 16 threads 1 M (auto's policy, or `rfl-fast tune`, may choose per core shape).
constexpr std::size_t kItemsMaxWork = std::size_t(1) << 24;

inline Parallel parallel_arg(const std::string& value, const char* kernel) {
    if (value == "auto") return Parallel::automatic;
    if (value == "items") return Parallel::items;
    if (value == "blas") return Parallel::blas;
    throw py::value_error(std::string(kernel) + ": parallel: expected 'auto', 'items' or 'blas', "
                          "got '" + value + "'");
}

// The batch loop of the headers (rfl/batch.hpp: fixed chunks, so results never depend on the
// thread count) on up to g_threads threads. Items that call BLAS which threads each call
// (`blas_work`: the multiply-adds of such a call, 0 if none) run as `parallel` says (see
// Parallel): loop threads each driving BLAS's threads on the same cores oversubscribe them, so
// the loop's threads run only with BLAS held to one thread. `min_bytes`: the least input per thread
// (rfl::batch::kMinBytesPerThread unless the items are costly); `group`: items per lockstep
// group (rfl::batch::chunk_items; 1 where items are computed one by one).
template <class Body>
bool for_chunks(py::ssize_t N, std::size_t item_bytes, std::size_t inputs, Body&& body,
                std::size_t blas_work = 0, Parallel parallel = Parallel::automatic,
                std::size_t min_bytes = rfl::batch::kMinBytesPerThread, py::ssize_t group = 8) {
    const int threads = g_threads.load();
    if (blas_work == 0)
        return rfl::batch::for_chunks(N, item_bytes, inputs, threads, body, min_bytes, group);
    const bool items = parallel == Parallel::items ||
                       (parallel == Parallel::automatic && blas_work < kItemsMaxWork);
    if (!items || !rfl::blas::can_hold_threads())
        return rfl::batch::for_chunks(N, item_bytes, inputs, 1, body, min_bytes, group);
    const rfl::blas::OneThread one_blas_thread;
    return rfl::batch::for_chunks(N, item_bytes, inputs, threads, body, min_bytes, group);
}

// A batch loop on raw pointers: N items of core shape `core` from a and b into o.
using Run2 = void (*)(const double*, const double*, double*, py::ssize_t, const py::ssize_t*);

// run over the batch in for_chunks' chunks: `item` doubles per item of a and b, `out_item` of o
inline void run2_chunked(Run2 run, const double* a, const double* b, double* o, py::ssize_t N,
                         const py::ssize_t* core, std::size_t item, std::size_t out_item,
                         std::size_t blas_work = 0, Parallel parallel = Parallel::automatic,
                         std::size_t min_bytes = rfl::batch::kMinBytesPerThread,
                         py::ssize_t group = 8) {
    for_chunks(N, item * sizeof(double), 2, [&](py::ssize_t i0, py::ssize_t i1) {
        run(a + i0 * item, b + i0 * item, o + i0 * out_item, i1 - i0, core);
        return true;
    }, blas_work, parallel, min_bytes, group);
}

// Items per lockstep group of a kernel's items of core shape `core` (for_chunks); nullptr: 8.
using Grouping = py::ssize_t (*)(const py::ssize_t*);

// The multiply-adds of one BLAS call of an item of core shape `core` when BLAS threads such
// calls (see for_chunks), else 0; nullptr: never.
using BlasWork = std::size_t (*)(const py::ssize_t*);

// ---------------------------------------------------------------- registration

// `<kernel>_checked`, the fast lane of a two-argument kernel with CORE core axes (_core.cpp);
// core_ok says which core shapes the kernel takes.
template <int CORE, bool SCALAR_OUT>
void def_checked(py::module_& m, const char* kernel, Run2 run,
                 bool (*core_ok)(const py::ssize_t*), BlasWork blas_work = nullptr,
                 std::size_t min_bytes = rfl::batch::kMinBytesPerThread,
                 Grouping group = nullptr);

// Declares that kernel `kernel`'s items call BLAS as `blas_work` says (the rule the batch loop
// follows); _core.item_blas_work reads it back, so Python never restates the C++ thresholds.
void declare_blas_work(const char* kernel, BlasWork blas_work);

// Each family's kernels and their fast lanes, defined in the file of the same name.
void register_stiefel_polar(py::module_& m);
void register_stiefel_qr(py::module_& m);
void register_spd(py::module_& m);
void register_vectors(py::module_& m);
void register_pca(py::module_& m);
void register_brockett(py::module_& m);
void register_seeds(py::module_& m);

// The Stiefel batch loops pca_local_steps reuses (stiefel_polar.cpp, stiefel_qr.cpp): N items
// (n, p) of x and u (y) into o, as in stiefel_proj, stiefel_retr_polar, stiefel_inv_retr_polar
// and polar (of a alone).
void stiefel_proj_loop(const double* x, const double* u, double* o, py::ssize_t N, int n, int p);
void stiefel_retr_polar_loop(const double* x, const double* u, double* o, py::ssize_t N, int n,
                             int p);
void stiefel_inv_retr_polar_loop(const double* x, const double* y, double* o, py::ssize_t N,
                                 int n, int p);
void stiefel_polar_loop(const double* a, double* o, py::ssize_t N, int n, int p);
