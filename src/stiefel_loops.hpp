// The Stiefel kernels' batch loop and binding, shared by stiefel_polar.cpp and stiefel_qr.cpp
// (each instantiates its own operations: the compile-time p specialisations and clones of the
// six operations are the largest part of the build, so they are split over two units).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "binding.hpp"
#include "rfl/stiefel.hpp"
#include "rfl/stiefel_exp.hpp"

namespace {  // each unit's loops (and their clones) are its own

enum class StOp { proj, retr_polar, inv_retr_polar, retr_qr, inv_retr_qr, polar, exp };

template <StOp OP, int P>
RFL_INLINE void stiefel_items(const double* px, const double* pb, double* po, py::ssize_t N, int n,
                              int p, double* work) {
    if constexpr (OP == StOp::retr_polar) {  // the polar kernels take the whole batch (p = 5
        rfl::stiefel::retr_polar<P>(px, pb, po, N, n, p, work);  // groups items: rfl/stiefel.hpp)
    } else if constexpr (OP == StOp::polar) {
        rfl::stiefel::polar<P>(px, po, N, n, p, work);
    } else if constexpr (OP == StOp::exp) {  // its own scratch: O(p^2), not work_size's O(n p)
        std::unique_ptr<double[]> scratch(new double[rfl::stiefel::exp_work_size(p)]);
        const std::size_t item = static_cast<std::size_t>(n) * p;
        for (py::ssize_t i = 0; i < N; ++i)
            rfl::stiefel::exp<P>(px + i * item, pb + i * item, po + i * item, n, p, scratch.get());
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

// the core shapes of the fast lanes: (n, p) with n >= p
inline bool stiefel_core(const py::ssize_t* c) { return c[0] >= c[1]; }

// the multiply-adds of a BLAS call of an item of core shape (n, p) that BLAS threads, else 0
// (binding.hpp: for_chunks)
inline std::size_t stiefel_blas_work(const py::ssize_t* c) {
    const int n = static_cast<int>(c[0]), p = static_cast<int>(c[1]);
    return rfl::stiefel::blas_threaded(n, p) ? static_cast<std::size_t>(n) * p * p : 0;
}

// items per lockstep group: the polar kernels take p = 5 in groups of 8 (rfl/stiefel.hpp), the
// others one item at a time (so a batch of large items splits into one-item chunks)
template <StOp OP>
py::ssize_t stiefel_group(const py::ssize_t* c) {
    return (OP == StOp::retr_polar || OP == StOp::polar) && c[1] == 5 ? 8 : 1;
}

template <StOp OP>
Arr stiefel_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname,
                   const std::string& parallel) {
    const Parallel par = parallel_arg(parallel, kernel);
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
        run2_chunked(stiefel_run<OP>, px, pb, po, N, core, item, item,
                     stiefel_blas_work(core), par, rfl::batch::kMinBytesPerThread,
                     stiefel_group<OP>(core));
    }
    return out;
}



}  // namespace
