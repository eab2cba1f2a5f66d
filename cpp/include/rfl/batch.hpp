// Batch loops over the one-item kernels, split across threads (header-only, C++17).
//
//   for_chunks(N, item_bytes, inputs, threads, body)   body(i0, i1) over [0, N) in fixed chunks
//   run_threads(T, work)                               work() on the caller and T - 1 threads
//   stiefel_retr_polar / stiefel_inv_retr_polar / stiefel_proj / stiefel_retr_qr
//   spd_exp / spd_log / spd_dist
//
// Every batch function takes N consecutive row-major float64 items (Stiefel: n x p, SPD:
// n x n; spd_dist writes N doubles) and `threads`, the most threads to use (1: the calling
// thread only; hardware_threads() for every core). The chunks are fixed by the data, never by
// the thread count, so results are the same bits for every `threads`. Items without an answer
// come back as NaN, as in the one-item kernels. This is the loop rfl_fast._core runs (its
// binding adds compile-time p = 1..8 specialisations and AVX2 clones of the loops).
//
// What the system refuses never takes the process down: a thread it will not start is not
// started (the threads that did start, the caller at least, take every chunk, and the result is
// the same), and an exception in a chunk (std::bad_alloc) is rethrown to the caller after every
// thread joined.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "spd.hpp"
#include "stiefel.hpp"

namespace rfl {
namespace batch {

// Input bytes per argument in one chunk of a batch (three arrays' chunks stay in a 1 MB L2):
// long enough runs for the memory-bound kernels' streams. Kernels whose items are costly (a
// smaller least input per thread, below) take chunks of twice that least input, so that a
// batch of a few MB still has tens of chunks to balance over the threads.
constexpr std::size_t kChunkBytes = 256 * 1024;
// The least input a thread must get before one more is started (a thread costs ~20-40 us to
// start and join): about 100 us of work for the memory-bound kernels. Compute-bound ones (the
// SPD kernels of small n: ~4 us per 648-byte item at n = 9) pass less (for_chunks' last
// argument).
constexpr std::size_t kMinBytesPerThread = 512 * 1024;

inline int hardware_threads() {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace detail {

struct RefusedStarts {
    std::mutex lock;
    int allowed = 0;  // starts still allowed before the refusals
    int refused = 0;  // refusals still pending
};

inline RefusedStarts& refused_starts() {
    static RefusedStarts r;
    return r;
}

// whether the next thread start is to fail (the test hook below), counting it
inline bool refuse_start() {
    RefusedStarts& r = refused_starts();
    std::lock_guard<std::mutex> hold(r.lock);
    if (r.refused == 0) return false;
    if (r.allowed > 0) {
        --r.allowed;
        return false;
    }
    --r.refused;
    return true;
}

}  // namespace detail

// Test hook: after the next `after` thread starts of run_threads, the `n` following ones fail as
// if the system refused them (std::system_error, EAGAIN), so a test can show what a refusal does
// on any system. Returns the refusals still pending before the call.
inline int refuse_thread_starts(int n, int after = 0) {
    detail::RefusedStarts& r = detail::refused_starts();
    std::lock_guard<std::mutex> hold(r.lock);
    const int pending = r.refused;
    r.refused = std::max(0, n);
    r.allowed = std::max(0, after);
    return pending;
}

// Runs work() on the calling thread and on up to T - 1 more threads, and returns once all
// have finished. A thread the system refuses to start (std::system_error; std::bad_alloc for
// its bookkeeping) is not started: work() must claim its units dynamically, so the threads that
// run take them all. An exception thrown by work() on any thread is rethrown here, after every
// thread joined (the first one, if several threw). Returns the threads that ran.
template <class Work>
int run_threads(int T, Work&& work) {
    std::exception_ptr error;
    std::mutex error_lock;
    auto guarded = [&]() noexcept {
        try {
            work();
        } catch (...) {
            std::lock_guard<std::mutex> hold(error_lock);
            if (!error) error = std::current_exception();
        }
    };
    std::vector<std::thread> pool;
    try {
        pool.reserve(static_cast<std::size_t>(std::max(0, T - 1)));
        for (int t = 1; t < T; ++t) {
            if (detail::refuse_start())
                throw std::system_error(
                    std::make_error_code(std::errc::resource_unavailable_try_again),
                    "thread start refused (rfl::batch::refuse_thread_starts)");
            pool.emplace_back(guarded);
        }
    } catch (const std::system_error&) {  // the system's limit on threads: run with those we have
    } catch (const std::bad_alloc&) {
    }
    guarded();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
    return static_cast<int>(pool.size()) + 1;
}

// Items per chunk for items of `item_bytes` bytes: about min(kChunkBytes, 2 min_bytes) per
// input, in whole groups of `group` items (8: the lockstep group of the Stiefel p = 5 polar
// kernels and the SPD lanes, which compute a partial group at the cost of a full one; 1 for
// items computed one by one). A function of the data alone.
inline std::ptrdiff_t chunk_items(std::size_t item_bytes, std::ptrdiff_t group = 8,
                                  std::size_t min_bytes = kMinBytesPerThread) {
    const std::ptrdiff_t g = std::max<std::ptrdiff_t>(1, group);
    const std::size_t bytes = std::min(kChunkBytes, 2 * min_bytes);
    const std::ptrdiff_t per = static_cast<std::ptrdiff_t>(
        bytes / std::max<std::size_t>(1, item_bytes));
    return std::max(g, per / g * g);
}

// Chunks of a batch of N items of `grain` = chunk_items(...) items: N / grain, at least one; the
// last one also takes the remainder, so no chunk but a batch of one item holds a lone item (the
// lockstep kernels take another route for one item alone).
inline std::ptrdiff_t chunk_count(std::ptrdiff_t N, std::ptrdiff_t grain) {
    return std::max<std::ptrdiff_t>(1, N / grain);
}

// Threads for_chunks starts for N items in `chunks` chunks: at most `threads`, one per chunk,
// and one per `min_bytes` of input.
inline int chunk_threads(std::ptrdiff_t N, std::ptrdiff_t chunks, std::size_t item_bytes,
                         std::size_t inputs, int threads, std::size_t min_bytes) {
    using idx = std::ptrdiff_t;
    const std::size_t bytes = static_cast<std::size_t>(N) * item_bytes * inputs;
    const idx by_bytes = static_cast<idx>(bytes / std::max<std::size_t>(1, min_bytes));
    return static_cast<int>(
        std::max<idx>(1, std::min<idx>({static_cast<idx>(threads), chunks, by_bytes})));
}

// Runs body(i0, i1) over the batch [0, N) in chunk_count(...) chunks of chunk_items(...) items
// (the last with the remainder). The chunks are fixed by the data, not by the thread
// count, so results never depend on it; up to chunk_threads(...) threads claim them in turn
// (run_threads: a thread the system refuses is not started). body returns false to stop: the
// chunks not yet started are skipped and the result is false. An exception in body
// (std::bad_alloc) is rethrown here after every thread joined.
template <class Body>
bool for_chunks(std::ptrdiff_t N, std::size_t item_bytes, std::size_t inputs, int threads,
                Body&& body, std::size_t min_bytes = kMinBytesPerThread,
                std::ptrdiff_t group = 8) {
    using idx = std::ptrdiff_t;
    if (N <= 0) return true;
    const idx grain = chunk_items(item_bytes, group, min_bytes);
    const idx chunks = chunk_count(N, grain);
    auto end = [&](idx c) { return c + 1 == chunks ? N : (c + 1) * grain; };
    const int T = chunk_threads(N, chunks, item_bytes, inputs, threads, min_bytes);
    if (T == 1) {
        for (idx c = 0; c < chunks; ++c)
            if (!body(c * grain, end(c))) return false;
        return true;
    }
    std::atomic<idx> next{0};
    std::atomic<bool> go{true};
    run_threads(T, [&] {
        try {
            for (idx c; go.load(std::memory_order_relaxed) &&
                        (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
                if (!body(c * grain, end(c))) go = false;
        } catch (...) {
            go = false;
            throw;
        }
    });
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
    }, kMinBytesPerThread, 1);  // one item at a time: no lockstep group
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
