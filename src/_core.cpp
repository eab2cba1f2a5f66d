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
//
// This file holds the module, the argument checks and the fast lanes; the kernel families are
// in their own translation units (see binding.hpp), which a build compiles in parallel.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "rfl/blas.hpp"
#include "rfl/simd.hpp"

#ifndef RFL_FAST_VERSION
#define RFL_FAST_VERSION "0+unknown"
#endif

// ---------------------------------------------------------------- argument checks

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

// ---------------------------------------------------------------- checked calls (fast lane)

// `<kernel>_checked(a, b, core)`: the public API's fast lane for small inputs. It takes the
// arrays only as they are: exact ndarrays, float64, C-contiguous and aligned, both of one shape
// (..., *core) with at least one item (the leading axes are one batch axis in memory). It checks
// that every input entry is finite, runs the kernel, and returns its result (shape (..., *core),
// or (...) for a distance) when every output entry is finite too, and the 1-tuple (result,) when
// some is not (an item without an answer: the caller raises from it, or returns it, as its
// general route would from the same kernel's result, without computing it again). Anything else
// gives None: the caller then takes the general route, which converts, checks and raises the
// named errors, so errors and results never depend on which route answered. On one 784x5
// Stiefel matrix this replaces ~6 us of Python checks and glue with ~0.5 us.

namespace {

// Whether every entry of a[0, n) is finite: x * 0 is 0 for finite x and NaN for inf or NaN, so
// the sums stay 0 exactly when every entry is finite. One multiply-add per 4 entries
// (rfl::simd::v4d; not folded to 0 without -ffinite-math-only), 4 sums to hide its latency.
RFL_CLONES bool all_finite(const double* a, std::size_t n) {
    using rfl::simd::v4d;
    v4d s0 = {}, s1 = {}, s2 = {}, s3 = {};
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += rfl::simd::load(a + i) * 0.0;
        s1 += rfl::simd::load(a + i + 4) * 0.0;
        s2 += rfl::simd::load(a + i + 8) * 0.0;
        s3 += rfl::simd::load(a + i + 12) * 0.0;
    }
    double s = 0.0;
    for (; i < n; ++i) s += a[i] * 0.0;
    return s + rfl::simd::hsum((s0 + s1) + (s2 + s3)) == 0.0;
}

template <int CORE, bool SCALAR_OUT>
py::object checked_binary(py::handle a, py::handle b, py::handle core, Run2 run,
                          bool (*core_ok)(const py::ssize_t*), BlasWork blas_work,
                          Parallel parallel, std::size_t min_bytes, Grouping group) {
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
    bool taken;
    std::atomic<bool> unsolved{false};
    {
        py::gil_scoped_release release;  // each chunk checked, computed, checked again in cache
        taken = for_chunks(N, item * sizeof(double), 2, [&](py::ssize_t i0, py::ssize_t i1) {
            const std::size_t at = static_cast<std::size_t>(i0) * item;
            const std::size_t count = static_cast<std::size_t>(i1 - i0) * item;
            double* o = po + static_cast<std::size_t>(i0) * out_item;
            if (!all_finite(xa + at, count) || !all_finite(xb + at, count)) return false;
            run(xa + at, xb + at, o, i1 - i0, c);
            if (!all_finite(o, static_cast<std::size_t>(i1 - i0) * out_item))
                unsolved.store(true, std::memory_order_relaxed);
            return true;
        }, blas_work != nullptr ? blas_work(c) : 0, parallel, min_bytes,
           group != nullptr ? group(c) : 8);
    }
    if (!taken) return py::none();
    if (unsolved.load()) return py::make_tuple(std::move(out));  // computed: no second call
    return std::move(out);
}

// a * b + c compiled as the batch loops are: one rounding where the running clone contracts it
// to a fused multiply-add (the x86-64-v3 clone; a native or aarch64 build), two where it has no
// FMA (the baseline clone; a RFL_FAST_BASELINE build). build_info calls it on operands whose
// two answers differ, so it reports the code path that really runs.
RFL_CLONES double multiply_add(double a, double b, double c) { return a * b + c; }

py::dict build_info() {
    py::dict info;
    info["simd"] = RFL_SIMD_VECTOR_EXT ? "gnu-vector" : "scalar";
#if RFL_HAVE_CLONES
    info["clones"] = py::make_tuple("x86-64-v3", "default");
#else
    info["clones"] = py::tuple();
#endif
#if defined(RFL_FAST_BASELINE)
    info["baseline"] = true;
#else
    info["baseline"] = false;
#endif
#if defined(RFL_FAST_NATIVE)
    info["native"] = true;
#else
    info["native"] = false;
#endif
    // (1 + 2^-30)(1 - 2^-30) - 1 = -2^-60 exactly; rounded to 1 before the subtraction: 0
    volatile double a = 1.0 + 0x1p-30, b = 1.0 - 0x1p-30, c = -1.0;
    info["fused_multiply_add"] = multiply_add(a, b, c) != 0.0;
    return info;
}

}  // namespace

namespace {
std::map<std::string, BlasWork>& blas_works() {
    static std::map<std::string, BlasWork> table;
    return table;
}
}  // namespace

void declare_blas_work(const char* kernel, BlasWork blas_work) { blas_works()[kernel] = blas_work; }

template <int CORE, bool SCALAR_OUT>
void def_checked(py::module_& m, const char* kernel, Run2 run,
                 bool (*core_ok)(const py::ssize_t*), BlasWork blas_work,
                 std::size_t min_bytes, Grouping group) {
    const std::string name = kernel;
    m.def((name + "_checked").c_str(),
          [run, core_ok, blas_work, min_bytes, group, name](py::handle a, py::handle b,
                                                                py::handle core,
                                                                const std::string& parallel) {
              return checked_binary<CORE, SCALAR_OUT>(a, b, core, run, core_ok, blas_work,
                                                      parallel_arg(parallel, name.c_str()),
                                                      min_bytes, group);
          },
          py::arg("a"), py::arg("b"), py::arg("core"), py::arg("parallel") = "auto",
          (std::string("Fast lane of ") + kernel +
           ": the result for ready, finite float64 arrays of shape (..., *core) with a finite "
           "answer, (result,) when an item has none, else None (see src/_core.cpp); parallel "
           "as in the kernel.").c_str());
}

template void def_checked<1, false>(py::module_&, const char*, Run2,
                                   bool (*)(const py::ssize_t*), BlasWork, std::size_t, Grouping);
template void def_checked<2, false>(py::module_&, const char*, Run2,
                                   bool (*)(const py::ssize_t*), BlasWork, std::size_t, Grouping);
template void def_checked<2, true>(py::module_&, const char*, Run2,
                                   bool (*)(const py::ssize_t*), BlasWork, std::size_t, Grouping);

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

    m.def("set_blas", [](py::object dgemm, py::object dgesv, py::object dsyevd, py::object dgees,
                         py::object dtrsyl) {
        auto pointer = [](py::object f, const char* arg) -> void* {
            if (f.is_none()) return nullptr;
            if (!PyCapsule_CheckExact(f.ptr()))
                throw py::type_error(std::string("set_blas: ") + arg +
                                     ": expected a capsule (scipy.linalg.cython_blas / "
                                     "cython_lapack __pyx_capi__) or None");
            return py::reinterpret_borrow<py::capsule>(f).get_pointer();
        };
        void* g = pointer(dgemm, "dgemm");
        void* s = pointer(dgesv, "dgesv");
        void* e = pointer(dsyevd, "dsyevd");
        void* h = pointer(dgees, "dgees");
        void* t = pointer(dtrsyl, "dtrsyl");
        rfl::blas::set_routines(reinterpret_cast<rfl::blas::dgemm_fn>(g),
                                reinterpret_cast<rfl::blas::dgesv_fn>(s),
                                reinterpret_cast<rfl::blas::dsyevd_fn>(e),
                                reinterpret_cast<rfl::blas::dgees_fn>(h),
                                reinterpret_cast<rfl::blas::dtrsyl_fn>(t)); },
        py::arg("dgemm"), py::arg("dgesv"), py::arg("dsyevd"), py::arg("dgees"), py::arg("dtrsyl"),
        R"pbdoc(Hand the kernels the Fortran BLAS dgemm and LAPACK dgesv, dsyevd, dgees and dtrsyl
(capsules holding the function pointers, 32-bit integers, as scipy.linalg.cython_blas /
cython_lapack export them), or None to stop using them. The large-size paths (rfl/blas.hpp:
Stiefel p >= 9, SPD n >= 128) run on them; set once, at import, before any kernel runs.)pbdoc");
    m.def("has_blas", [] { return rfl::blas::available(); },
        R"pbdoc(Whether set_blas gave the kernels BLAS / LAPACK.)pbdoc");
    m.def("set_blas_threads", [](std::uintptr_t get, std::uintptr_t set) {
        rfl::blas::set_thread_routines(reinterpret_cast<rfl::blas::get_threads_fn>(get),
                                       reinterpret_cast<rfl::blas::set_threads_fn>(set)); },
        py::arg("get"), py::arg("set"),
        R"pbdoc(Hand the kernels the addresses of the BLAS's ``int get_num_threads(void)`` and
``void set_num_threads(int)`` (OpenBLAS's openblas_get_num_threads / openblas_set_num_threads of
the library set_blas's routines come from; 0, 0 to stop using them): with them a batch of items
on BLAS runs on the loop's threads with BLAS held to one thread (the kernels' ``parallel``
argument). Set once, at import, before any kernel runs.)pbdoc");
    m.def("can_hold_blas_threads", [] { return rfl::blas::can_hold_threads(); },
        R"pbdoc(Whether set_blas_threads gave the kernels BLAS's thread setting.)pbdoc");
    m.def("_refuse_thread_starts", &rfl::batch::refuse_thread_starts, py::arg("n"),
        py::arg("after") = 0,
        R"pbdoc(Test hook: after the next `after` thread starts of the batch loops, the n following
ones fail as if the system refused them (the loops then run on the threads they have); returns
the refusals that were still pending.)pbdoc");
    m.def("build_info", &build_info,
        R"pbdoc(How the core was built and which code path runs: simd ('gnu-vector' or 'scalar',
rfl/simd.hpp), clones (the instruction-set clones of the batch loops, empty for none), baseline
(built with RFL_FAST_BASELINE=1), native (RFL_FAST_NATIVE=1), fused_multiply_add (whether the
running batch-loop code contracts a * b + c to one FMA: the x86-64-v3 clone, not the baseline
one).)pbdoc");

    register_stiefel_qr(m);     // stiefel_proj, stiefel_retr_qr, stiefel_inv_retr_qr
    register_stiefel_polar(m);  // stiefel_retr_polar, stiefel_inv_retr_polar, polar
    register_spd(m);            // sym_expm, sym_logm, sym_sqrtm, sym_invsqrtm, spd_*
    register_vectors(m);        // sphere_*, lorentz_*
    register_pca(m);            // pca_local_steps, pca_grad_sum
    register_brockett(m);       // brockett_clipped_sum
    register_seeds(m);          // SpawnedSeed (rfl_fast.kernels.streams)

    m.def("item_blas_work", [](const std::string& kernel, const py::tuple& core) {
        py::ssize_t c[2] = {0, 0};  // the longest core shape a rule reads: (n, p)
        if (core.size() < 1 || core.size() > 2)
            throw py::value_error("item_blas_work: core: expected (n,) or (n, p), got " +
                                  std::string(py::repr(core)));
        for (std::size_t i = 0; i < core.size(); ++i) {
            c[i] = core[i].cast<py::ssize_t>();
            if (c[i] < 0 || c[i] > INT_MAX)
                throw py::value_error("item_blas_work: core: expected sizes in [0, 2^31), got " +
                                      std::string(py::repr(core)));
        }
        const auto it = blas_works().find(kernel);
        return it == blas_works().end() || it->second == nullptr ? std::size_t(0)
                                                                  : it->second(c); },
        py::arg("kernel"), py::arg("core"),
        R"pbdoc(The multiply-adds of one BLAS call of an item of core shape ``core`` of ``kernel``
when BLAS threads that call (so that the kernel's ``parallel`` modes differ), else 0: the
binding's own rule (rfl/stiefel.hpp blas_threaded, rfl/spd.hpp kBlasMin*), given BLAS as set.)pbdoc");
}
