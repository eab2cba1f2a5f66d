// Batch loops over the one-item kernels, split across threads (header-only, C++17).
//
//   for_chunks(N, item_bytes, inputs, threads, body)   body(i0, i1) over [0, N) in fixed chunks
//   stiefel_retr_polar / stiefel_inv_retr_polar / stiefel_proj / stiefel_retr_qr
//   spd_exp / spd_log / spd_dist
//
// Every batch function takes N consecutive row-major float64 items (Stiefel: n x p, SPD:
// n x n; spd_dist writes N doubles) and `threads`, the most threads to use (1: the calling
// thread only; hardware_threads() for every core). The chunks are fixed by the data, never by
// the thread count, so results are the same bits for every `threads`. Items without an answer
// come back as NaN, as in the one-item kernels. This is the loop rfl_fast._core runs (its
// binding adds compile-time p = 1..8 specialisations and AVX2 clones of the loops).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "spd.hpp"
#include "stiefel.hpp"

namespace rfl {
namespace batch {

// Input bytes per argument in one chunk of a batch (three arrays' chunks stay in a 1 MB L2),
// and the least input a thread must get before one more is started (a thread costs ~20-40 us).
constexpr std::size_t kChunkBytes = 256 * 1024;
constexpr std::size_t kMinBytesPerThread = 512 * 1024;

inline int hardware_threads() {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Runs body(i0, i1) over the batch [0, N) in chunks of whole groups of 8 items (the lockstep
// group of the Stiefel and SPD kernels) and about kChunkBytes of each input (`item_bytes`: one
// item of one input). The chunks are fixed by the data, not by the thread count, so results never
// depend on it; up to `threads` threads claim them in turn (a thread on a busy core simply takes
// fewer). body returns false to stop: the chunks not yet started are skipped and the result is
// false. An exception in a worker (std::bad_alloc) is rethrown here after every thread joined.
template <class Body>
bool for_chunks(std::ptrdiff_t N, std::size_t item_bytes, std::size_t inputs, int threads,
                Body&& body) {
    using idx = std::ptrdiff_t;
    const idx grain = static_cast<idx>(std::max<std::size_t>(1, kChunkBytes / (8 * item_bytes)) * 8);
    const idx chunks = (N + grain - 1) / grain;
    const std::size_t bytes = static_cast<std::size_t>(N) * item_bytes * inputs;
    const idx T = std::max<idx>(1, std::min<idx>({static_cast<idx>(threads), chunks,
                                                  static_cast<idx>(bytes / kMinBytesPerThread)}));
    if (T == 1) {
        for (idx i = 0; i < N; i += grain)
            if (!body(i, std::min(N, i + grain))) return false;
        return true;
    }
    std::atomic<idx> next{0};
    std::atomic<bool> go{true};
    std::exception_ptr error;
    std::mutex error_lock;
    auto worker = [&] {
        try {
            for (idx c; go.load(std::memory_order_relaxed) &&
                        (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
                if (!body(c * grain, std::min(N, (c + 1) * grain))) go = false;
        } catch (...) {
            go = false;
            std::lock_guard<std::mutex> hold(error_lock);
            error = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    for (idx t = 1; t < T; ++t) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
    return go.load();
}

namespace detail {

// out_i = F(a_i, b_i) over N items of `item` doubles, `out_item` doubles out, one scratch
// buffer of `work` doubles per chunk
template <class F>
void run2(const double* a, const double* b, double* out, std::ptrdiff_t N, std::size_t item,
          std::size_t out_item, std::size_t work, int threads, F f) {
    for_chunks(N, item * sizeof(double), 2, threads, [&](std::ptrdiff_t i0, std::ptrdiff_t i1) {
        std::unique_ptr<double[]> scratch(new double[work]);
        for (std::ptrdiff_t i = i0; i < i1; ++i)
            f(a + i * item, b + i * item, out + i * out_item, scratch.get());
        return true;
    });
}

}  // namespace detail

// ---- Stiefel St(n, p), n >= p: N items of n x p

inline void stiefel_retr_polar(const double* x, const double* u, double* out, std::ptrdiff_t N,
                               int n, int p, int threads) {
    const std::size_t item = static_cast<std::size_t>(n) * p;
    for_chunks(N, item * sizeof(double), 2, threads, [&](std::ptrdiff_t i0, std::ptrdiff_t i1) {
        std::unique_ptr<double[]> work(new double[stiefel::work_size(n, p)]);
        stiefel::retr_polar<0>(x + i0 * item, u + i0 * item, out + i0 * item, i1 - i0, n, p,
                               work.get());
        return true;
    });
}

namespace detail {

using ItemFn = void (*)(const double*, const double*, double*, int, int, double*);

template <ItemFn F>
void stiefel_map(const double* x, const double* b, double* out, std::ptrdiff_t N, int n, int p,
                 int threads) {
    const std::size_t item = static_cast<std::size_t>(n) * p;
    run2(x, b, out, N, item, item, stiefel::work_size(n, p), threads,
         [n, p](const double* xi, const double* bi, double* oi, double* w) {
             F(xi, bi, oi, n, p, w);
         });
}

}  // namespace detail

inline void stiefel_inv_retr_polar(const double* x, const double* y, double* out,
                                   std::ptrdiff_t N, int n, int p, int threads) {
    detail::stiefel_map<stiefel::inv_retr_polar<0>>(x, y, out, N, n, p, threads);
}

inline void stiefel_proj(const double* x, const double* u, double* out, std::ptrdiff_t N, int n,
                         int p, int threads) {
    detail::stiefel_map<stiefel::proj<0>>(x, u, out, N, n, p, threads);
}

inline void stiefel_retr_qr(const double* x, const double* u, double* out, std::ptrdiff_t N,
                            int n, int p, int threads) {
    detail::stiefel_map<stiefel::retr_qr<0>>(x, u, out, N, n, p, threads);
}

// ---- SPD(n), affine-invariant metric: N items of n x n

namespace detail {

template <void (*F)(const double*, const double*, double*, int, double*)>
void spd_map(const double* x, const double* b, double* out, std::ptrdiff_t N, int n,
             int threads) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    run2(x, b, out, N, item, item, spd::spd_work(n), threads,
         [n](const double* xi, const double* bi, double* oi, double* w) { F(xi, bi, oi, n, w); });
}

}  // namespace detail

inline void spd_exp(const double* x, const double* u, double* out, std::ptrdiff_t N, int n,
                    int threads) {
    detail::spd_map<spd::spd_exp>(x, u, out, N, n, threads);
}

inline void spd_log(const double* x, const double* y, double* out, std::ptrdiff_t N, int n,
                    int threads) {
    detail::spd_map<spd::spd_log>(x, y, out, N, n, threads);
}

// out: N doubles
inline void spd_dist(const double* x, const double* y, double* out, std::ptrdiff_t N, int n,
                     int threads) {
    const std::size_t item = static_cast<std::size_t>(n) * n;
    detail::run2(x, y, out, N, item, 1, spd::spd_work(n), threads,
                 [n](const double* a, const double* b, double* o, double* w) {
                     *o = spd::spd_dist(a, b, n, w);
                 });
}

}  // namespace batch
}  // namespace rfl
