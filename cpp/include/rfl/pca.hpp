// Fused gradient sums of PCA-type losses over a client's rows: one streaming pass over Z.
//
// For client rows z_j (Z: m x d, row-major, contiguous) and a point X (d x r, given TRANSPOSED
// as Xt: r x d, row-major, so every access runs along d) one pass computes, row by row,
//
//   y_j = X' z_j                                   (r dot products of length d)
//   St[l] += y_jl z_j                              (plain: S' with S = Z'ZX)
//   q     += |y_j|^2                               (unweighted: m f for the PCA loss)
//
// Clipped (DP per-sample clipping, rows_clipped): the residual res_j = z_j - X y_j is formed
// explicitly and the row adds min(c |res_j| |y_j|, tau) (res_j/|res_j|)(y_j/|y_j|)' to S
// (scaled norms), so one row's contribution is at most tau in floating point (the former
// w z_j y_j' with |res|^2 = |z|^2 - |y|^2 cancelled for z almost in span(X)); S is then the
// clipped sum of -sign(c) g_j, already tangent. A non-finite row makes St NaN. For a
// compile-time r (rows_clipped_blocked) a row with |res|^2 >= |z|^2 / 4 takes |res|^2 = |z|^2 -
// |y|^2 (no cancellation there) and joins the plain pass's blocks as a y z' - a y y' X' (the
// second term summed as C = sum a y y', subtracted once as C X'), still at most tau per row up
// to O((d + r) eps) tau; the other rows take the explicit residual one at a time.
//
// So Z is read from memory once; Xt and St (r d doubles each) stay in L1/L2. The caller
// finishes with -c (S - X (X'S)) or the Euclidean scaling (plain), -sign(c) S (clipped).
//
// Vectorization: the length-d loops work on 4-wide vectors (simd::v4d; the
// binding compiles the loops once for x86-64-v3, where they become AVX2 FMAs, and once for the
// baseline, where each vector op becomes two SSE2 ops), with a scalar tail for d % 4. Rows are
// taken in blocks of kRows(R): their dot products share each load of Xt, and their updates run
// with a strip of St (2 x 4 columns of every l) held in registers, so St is loaded and stored
// once per block. The rows a few blocks ahead are prefetched into L2 (several concurrent
// streams hide the memory latency better than the hardware prefetcher alone; RFL_PREFETCH).
// Summation order is fixed (lane partials, then lanes 0+1+2+3, then the tail), so a result
// depends only on the inputs and on the compiled clone, never on timing or threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "simd.hpp"  // RFL_INLINE, simd::v4d
#include "stiefel.hpp"  // local_steps' default projection and retraction

namespace rfl {
namespace pca {

using simd::v4d;

#if defined(__GNUC__) || defined(__clang__)
// into L2 only (locality 1): an L1 prefetch evicts the rows of Xt and St the loops reuse
#define RFL_PREFETCH(p) __builtin_prefetch((p), 0, 1)
#else
#define RFL_PREFETCH(p) ((void)0)
#endif

//! Rows per block (their dot products keep B*R vector accumulators in registers).
constexpr int kRows(int R) { return R == 0 ? 1 : (R <= 5 ? 4 : 2); }
//! Prefetch distance in rows (the time is flat over a wide range; none is slower).
constexpr int kPrefetchRows = 16;

//! Weighting of the rows.
struct Weight {
    bool clipped;  // false: w = 1
    double tau;    // > 0, may be inf
    double c;      // |c|, scale of the per-sample gradient norm
};

RFL_INLINE double clip_weight(double z2, double a2, double tau, double c) {
    double res2 = z2 - a2;
    if (res2 < 0.0) res2 = 0.0;
    const double nrm = c * std::sqrt(res2) * std::sqrt(a2);
    return nrm > tau ? tau / nrm : 1.0;
}

// y[b * r + l] = <Xt[l], z_b> for B rows z_b = Z + b*d (and z2[b] = |z_b|^2 when CLIP);
// R = compile-time r (0: runtime r, one l at a time).
template <int R, int B, bool CLIP>
RFL_INLINE void dots(const double* Z, const double* Xt, std::size_t d, int r_, double* y,
                     double* z2) {
    const std::size_t d4 = d & ~static_cast<std::size_t>(3);
    if constexpr (R == 0) {
        for (int b = 0; b < B; ++b) {
            const double* z = Z + b * d;
            for (int l = 0; l < r_; ++l) {
                const double* x = Xt + l * d;
                v4d s = simd::splat(0.0);
                for (std::size_t k = 0; k < d4; k += 4) s += simd::load(z + k) * simd::load(x + k);
                double t = simd::hsum(s);
                for (std::size_t k = d4; k < d; ++k) t += z[k] * x[k];
                y[b * r_ + l] = t;
            }
            if constexpr (CLIP) {
                v4d s = simd::splat(0.0);
                for (std::size_t k = 0; k < d4; k += 4) s += simd::load(z + k) * simd::load(z + k);
                double t = simd::hsum(s);
                for (std::size_t k = d4; k < d; ++k) t += z[k] * z[k];
                z2[b] = t;
            }
        }
    } else {
        v4d s[B][R];
        v4d q[B];
        for (int b = 0; b < B; ++b) {
            q[b] = simd::splat(0.0);
            for (int l = 0; l < R; ++l) s[b][l] = simd::splat(0.0);
        }
        for (std::size_t k = 0; k < d4; k += 4) {
            if ((k & 7) == 0)  // one prefetch per 64-byte line of each row, kPrefetchRows ahead
                for (int b = 0; b < B; ++b) RFL_PREFETCH(Z + (b + kPrefetchRows) * d + k);
            v4d zk[B];
            for (int b = 0; b < B; ++b) zk[b] = simd::load(Z + b * d + k);
            for (int l = 0; l < R; ++l) {
                const v4d xk = simd::load(Xt + l * d + k);
                for (int b = 0; b < B; ++b) s[b][l] += zk[b] * xk;
            }
            if constexpr (CLIP)
                for (int b = 0; b < B; ++b) q[b] += zk[b] * zk[b];
        }
        for (int b = 0; b < B; ++b) {
            const double* z = Z + b * d;
            for (int l = 0; l < R; ++l) {
                double t = simd::hsum(s[b][l]);
                const double* x = Xt + l * d;
                for (std::size_t k = d4; k < d; ++k) t += z[k] * x[k];
                y[b * R + l] = t;
            }
            if constexpr (CLIP) {
                double t = simd::hsum(q[b]);
                for (std::size_t k = d4; k < d; ++k) t += z[k] * z[k];
                z2[b] = t;
            }
        }
    }
}

// St[l] += sum_b coef[b * r + l] z_b for B rows (B fixed, R as in dots): a strip of KT
// columns of every St[l] stays in registers while the B rows stream through.
template <int R, int B>
RFL_INLINE void axpys(const double* Z, const double* coef, std::size_t d, int r_, double* St) {
    if constexpr (R == 0) {
        const int r = r_;
        for (int l = 0; l < r; ++l) {
            double* acc = St + l * d;
            for (int b = 0; b < B; ++b) {
                const double cb = coef[b * r + l];
                const double* z = Z + b * d;
                for (std::size_t k = 0; k < d; ++k) acc[k] += cb * z[k];
            }
        }
    } else {
        constexpr int KV = R <= 5 ? 2 : 1;  // 4-vectors per strip: 2 R accumulators
        constexpr std::size_t KT = 4 * KV;
        const std::size_t dt = d - d % KT;
        for (std::size_t k = 0; k < dt; k += KT) {
            v4d a[R][KV];
            for (int l = 0; l < R; ++l)
                for (int v = 0; v < KV; ++v) a[l][v] = simd::load(St + l * d + k + 4 * v);
            for (int b = 0; b < B; ++b) {
                v4d zb[KV];
                for (int v = 0; v < KV; ++v) zb[v] = simd::load(Z + b * d + k + 4 * v);
                for (int l = 0; l < R; ++l) {
                    const v4d cb = simd::splat(coef[b * R + l]);
                    for (int v = 0; v < KV; ++v) a[l][v] += cb * zb[v];
                }
            }
            for (int l = 0; l < R; ++l)
                for (int v = 0; v < KV; ++v) simd::store(St + l * d + k + 4 * v, a[l][v]);
        }
        for (std::size_t k = dt; k < d; ++k)
            for (int l = 0; l < R; ++l) {
                double acc = St[l * d + k];
                for (int b = 0; b < B; ++b) acc += coef[b * R + l] * Z[b * d + k];
                St[l * d + k] = acc;
            }
    }
}

// B rows: dots, weights, coefficients coef = w y, q += |y|^2.
template <int R, int B, bool CLIP>
RFL_INLINE void block_coef(const double* Z, const double* Xt, std::size_t d, int r_,
                           const Weight& wt, double* coef, double& q) {
    const int r = R ? R : r_;
    double z2[B];
    dots<R, B, CLIP>(Z, Xt, d, r_, coef, z2);
    for (int b = 0; b < B; ++b) {
        double a2 = 0.0;
        for (int l = 0; l < r; ++l) a2 += coef[b * r + l] * coef[b * r + l];
        q += a2;
        if constexpr (CLIP) {
            const double w = clip_weight(z2[b], a2, wt.tau, wt.c);
            for (int l = 0; l < r; ++l) coef[b * r + l] *= w;
        }
    }
}

// |v| for n doubles without overflow or underflow in the squares: max |v_k| times the norm
// of v / max (the scaling of LAPACK's dnrm2, in two passes).
RFL_INLINE double scaled_norm(const double* v, std::size_t n) {
    double s = 0.0, chk = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
        s = std::fmax(s, std::fabs(v[k]));
        chk += v[k] * 0.0;  // NaN when some v_k is inf or NaN
    }
    if (chk != 0.0) return NAN;
    if (!(s > 0.0)) return 0.0;
    const double inv = 1.0 / s;
    double t = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
        const double u = v[k] * inv;
        t += u * u;
    }
    return s * std::sqrt(t);
}

// Clipped rows [0, m): per row, y = X'z, the residual res = z - X y formed explicitly (never
// |z|^2 - |y|^2, which cancels for z almost in span(X)), scaled norms |res| and |y|, and the
// contribution s (res/|res|)(y/|y|)' with s = min(c |res| |y|, tau) accumulated into St, so a
// row adds at most tau (1 + O((d + r) eps)) in floating point whatever its size (finite rows
// up to ~1e300). Rows one at a time: rows_clipped_blocked sends it the rows whose residual
// norm |z|^2 - |y|^2 would not give.
template <int R>
RFL_INLINE double rows_clipped(const double* Z, std::size_t m, std::size_t d, const double* Xt,
                               int r_, const Weight& wt, double* St, double* coef) {
    const int r = R ? R : r_;
    std::vector<double> res(d);
    double q = 0.0;
    for (std::size_t j = 0; j < m; ++j) {
        const double* z = Z + j * d;
        double unused;
        dots<R, 1, false>(z, Xt, d, r_, coef, &unused);
        // res = z - X y and |res|^2 in one vectorized pass (a sum of squares: no
        // cancellation); the scaled norm only where the squares may over/underflow
        const std::size_t d4 = d & ~static_cast<std::size_t>(3);
        v4d ss = simd::splat(0.0);
        for (std::size_t k = 0; k < d4; k += 4) {
            v4d rk = simd::load(z + k);
            for (int l = 0; l < r; ++l) rk = rk - simd::splat(coef[l]) * simd::load(Xt + l * d + k);
            simd::store(res.data() + k, rk);
            ss += rk * rk;
        }
        double nr2 = simd::hsum(ss);
        for (std::size_t k = d4; k < d; ++k) {
            double rk = z[k];
            for (int l = 0; l < r; ++l) rk -= coef[l] * Xt[l * d + k];
            res[k] = rk;
            nr2 += rk * rk;
        }
        const double nr = (nr2 > 1e-280 && nr2 < 1e280) ? std::sqrt(nr2)
                                                        : scaled_norm(res.data(), d);
        const double ny = scaled_norm(coef, static_cast<std::size_t>(r));
        for (int l = 0; l < r; ++l) q += coef[l] * coef[l];
        if (!(nr > 0.0) || !(ny > 0.0) || !std::isfinite(nr) || !std::isfinite(ny)) {
            // zero contribution, or non-finite input: make it visible in St
            const double bad = (std::isfinite(nr) && std::isfinite(ny)) ? 0.0 : NAN;
            for (int l = 0; l < r; ++l) coef[l] = bad;
        } else {
            double g = wt.c * nr * ny;  // may overflow to inf: then clipped to tau
            const double s = g > wt.tau ? wt.tau : g;
            for (int l = 0; l < r; ++l) coef[l] = (s * (coef[l] / ny)) / nr;
        }
        axpys<R, 1>(res.data(), coef, d, r_, St);
    }
    return q;
}

// |res|^2 = |z|^2 - |y|^2 is trusted (relative error O(d eps)) where |res|^2 >= |z|^2 / 4;
// there the row's contribution a y res' (a = s / (|res| |y|)) is formed as a y z' - a y y' X'
// with |a y| |z| <= 2 s, so its rounding is O((d + r) eps) s, as the explicit residual's.
constexpr double kClipTrust = 0.25;
constexpr double kClipLo = 1e-280, kClipHi = 1e280;  // squares in range: no scaled norms needed

// B clipped rows sharing each load of Xt (R > 0): dots and |z|^2 in one pass; a row whose
// |res|^2 = |z|^2 - |y|^2 is trusted (kClipTrust, squares in range) adds coef = a y to the
// block's axpys and a y y' to C (R x R; the caller subtracts C X' from St once); any other row
// (almost in span(X), |y| = 0, tiny or huge norms, non-finite) goes rows_clipped alone.
template <int R, int B>
RFL_INLINE void clipped_block(const double* Z, std::size_t d, const double* Xt, const Weight& wt,
                              double* St, double* coef, double* C, double& q) {
    double z2[B];
    dots<R, B, true>(Z, Xt, d, R, coef, z2);
    bool slow[B];
    bool any_slow = false;
    for (int b = 0; b < B; ++b) {
        double* y = coef + b * R;
        double a2 = 0.0;
        for (int l = 0; l < R; ++l) a2 += y[l] * y[l];
        const double res2 = z2[b] - a2;
        slow[b] = !(z2[b] < kClipHi && a2 > kClipLo && res2 >= kClipTrust * z2[b]);
        if (slow[b]) {
            any_slow = true;
            for (int l = 0; l < R; ++l) y[l] = 0.0;
            continue;
        }
        q += a2;
        const double nr = std::sqrt(res2), ny = std::sqrt(a2);
        const double g = wt.c * nr * ny;
        const double s = g > wt.tau ? wt.tau : g;
        const double a = (s / ny) / nr;
        for (int l = 0; l < R; ++l) {
            const double ay = a * y[l];
            for (int n = 0; n < R; ++n) C[l * R + n] += ay * y[n];
        }
        for (int l = 0; l < R; ++l) y[l] *= a;
    }
    axpys<R, B>(Z, coef, d, R, St);
    if (any_slow) {
        double one[R];
        for (int b = 0; b < B; ++b)
            if (slow[b]) q += rows_clipped<R>(Z + b * d, 1, d, Xt, R, wt, St, one);
    }
}

// Clipped rows [0, m) for a compile-time r (R > 0): blocks of kRows(R) rows (clipped_block),
// then St -= C X'. Each row adds at most tau (1 + O((d + r) eps)) as in rows_clipped.
template <int R>
RFL_INLINE double rows_clipped_blocked(const double* Z, std::size_t m, std::size_t d,
                                       const double* Xt, const Weight& wt, double* St,
                                       double* coef) {
    constexpr int B = kRows(R);
    double C[R * R] = {};
    double q = 0.0;
    std::size_t j = 0;
    for (; j + B <= m; j += B) clipped_block<R, B>(Z + j * d, d, Xt, wt, St, coef, C, q);
    for (; j < m; ++j) clipped_block<R, 1>(Z + j * d, d, Xt, wt, St, coef, C, q);
    for (int l = 0; l < R; ++l) {
        double* acc = St + l * d;
        for (int n = 0; n < R; ++n) {
            const double cn = C[l * R + n];
            if (cn == 0.0) continue;
            const double* x = Xt + n * d;
            for (std::size_t k = 0; k < d; ++k) acc[k] -= cn * x[k];
        }
    }
    return q;
}

//! Rows [0, m) of one client into St (r x d, accumulated into, caller zeroes it); returns
//! q = sum_j |X'z_j|^2. coef: scratch of kRowsMax * r doubles. Clipped: rows_clipped_blocked
//! (compile-time r), rows_clipped (runtime r).
template <int R, bool CLIP>
RFL_INLINE double rows(const double* Z, std::size_t m, std::size_t d, const double* Xt, int r_,
                       const Weight& wt, double* St, double* coef) {
    if constexpr (CLIP) {
        // the blocked pass's C X' costs r^2 d once: fewer than r rows (DP-RSVRG's one-sample
        // sums) take the explicit residual
        if constexpr (R > 0)
            if (m >= static_cast<std::size_t>(R))
                return rows_clipped_blocked<R>(Z, m, d, Xt, wt, St, coef);
        return rows_clipped<R>(Z, m, d, Xt, r_, wt, St, coef);
    } else {
        constexpr int B = kRows(R);
        double q = 0.0;
        std::size_t j = 0;
        for (; j + B <= m; j += B) {
            const double* zb = Z + j * d;
            block_coef<R, B, false>(zb, Xt, d, r_, wt, coef, q);
            axpys<R, B>(zb, coef, d, r_, St);
        }
        for (; j < m; ++j) {
            block_coef<R, 1, false>(Z + j * d, Xt, d, r_, wt, coef, q);
            axpys<R, 1>(Z + j * d, coef, d, r_, St);
        }
        return q;
    }
}

//! Scratch doubles per r for rows(): the largest block.
constexpr int kRowsMax = 4;

//! One client's rows with a runtime mode: St (r x d) zeroed and filled, returns q.
template <int R>
RFL_INLINE double client(const double* Z, std::size_t m, std::size_t d, const double* Xt,
                         int r, const Weight& wt, double* St, double* coef) {
    std::memset(St, 0, sizeof(double) * static_cast<std::size_t>(r) * d);
    return wt.clipped ? rows<R, true>(Z, m, d, Xt, r, wt, St, coef)
                      : rows<R, false>(Z, m, d, Xt, r, wt, St, coef);
}

//! Rows per chunk of local_steps' gradient: a client's rows are summed in chunks of this many
//! (each chunk's St from zero, then the chunks in order), the order of the Python extension's
//! batched gradient (pca_grad_sum), so both give the same bits.
constexpr std::size_t kChunkRows = 512;

//! Doubles of scratch local_steps needs for a client of m rows (d x r points).
inline std::size_t local_steps_work_size(std::size_t m, std::size_t d, int r) {
    const std::size_t chunks = std::max<std::size_t>(1, (m + kChunkRows - 1) / kChunkRows);
    return (4 + (chunks > 1 ? chunks : 0)) * static_cast<std::size_t>(r) * d;
}

//! RFedAvg's local steps on kPCA for one client: `steps` times
//!   X <- R_X(-eta P_X(s Z'(Z X)))
//! from X (d x r, row-major, overwritten with the last iterate), Z (m x d) the client's rows,
//! s its gradient scale (kPCA: -2/m). The client's rows stay in cache over its steps. The
//! operations are the caller's (the extension passes its per-ISA clones, so the iterates are
//! its batched route's bits):
//!   chunk(rows, count, Xt, St): St (r x d) = (Z_c' Z_c X)' of `count` rows (Xt: X', r x d);
//!   proj(X, G, U): U = P_X(G) (d x r);   retr(X, U, Y): Y = R_X(U) (d x r; NaN: no solution).
//! work: local_steps_work_size(m, d, r) doubles. With `offset` (d x r, row-major; nullptr:
//! none) every step is X <- R_X(-eta P_X(s Z'(Z X) - offset)): RFedSVRG's variance-reduced
//! steps, whose correction P_X(offset) is the projection transport of a constant vector.
template <class Chunk, class Proj, class Retr>
void local_steps(const double* z, std::size_t m, std::size_t d, int r, double* X, double s,
                 double eta, int steps, double* work, Chunk&& chunk, Proj&& proj, Retr&& retr,
                 const double* offset = nullptr) {
    const std::size_t item = static_cast<std::size_t>(r) * d;
    const std::size_t nc = std::max<std::size_t>(1, (m + kChunkRows - 1) / kChunkRows);
    double* Xt = work;          // r x d
    double* St = Xt + item;     // r x d
    double* G = St + item;      // d x r
    double* U = G + item;       // d x r
    double* partials = U + item;  // one St per chunk when there are several
    for (int step = 0; step < steps; ++step) {
        for (std::size_t i = 0; i < d; ++i)
            for (int l = 0; l < r; ++l) Xt[l * d + i] = X[i * r + l];
        for (std::size_t c = 0; c < nc; ++c) {
            const std::size_t lo = c * kChunkRows;
            chunk(z + lo * d, std::min(m, lo + kChunkRows) - lo, Xt,
                  nc == 1 ? St : partials + c * item);
        }
        if (nc > 1) {
            std::fill(St, St + item, 0.0);
            for (std::size_t c = 0; c < nc; ++c)
                for (std::size_t e = 0; e < item; ++e) St[e] += partials[c * item + e];
        }
        if (offset == nullptr) {
            for (std::size_t i = 0; i < d; ++i)
                for (int l = 0; l < r; ++l) G[i * r + l] = s * St[l * d + i];
        } else {
            for (std::size_t i = 0; i < d; ++i)
                for (int l = 0; l < r; ++l) G[i * r + l] = s * St[l * d + i] - offset[i * r + l];
        }
        proj(static_cast<const double*>(X), static_cast<const double*>(G), U);
        for (std::size_t e = 0; e < item; ++e) U[e] = -eta * U[e];
        retr(static_cast<const double*>(X), static_cast<const double*>(U), G);
        std::copy(G, G + item, X);
    }
}

//! local_steps with this header library's own operations (rows(), stiefel::proj and
//! stiefel::retr_polar; R, P: compile-time r and p = r, 0 for any); `offset` as above.
template <int R = 0, int P = 0>
void local_steps(const double* z, std::size_t m, std::size_t d, int r, double* X, double s,
                 double eta, int steps, const double* offset = nullptr) {
    const int n = static_cast<int>(d);
    std::vector<double> work(local_steps_work_size(m, d, r));
    std::vector<double> coef(static_cast<std::size_t>(kRowsMax) * r);
    std::vector<double> st_work(stiefel::work_size(n, r));
    const Weight plain{false, INFINITY, 1.0};
    local_steps(
        z, m, d, r, X, s, eta, steps, work.data(),
        [&](const double* rows, std::size_t count, const double* Xt, double* St) {
            client<R>(rows, count, d, Xt, r, plain, St, coef.data());
        },
        [&](const double* x, const double* g, double* u) {
            stiefel::proj<P>(x, g, u, n, r, st_work.data());
        },
        [&](const double* x, const double* u, double* y) {
            stiefel::retr_polar<P>(x, u, y, 1, n, r, st_work.data());
        },
        offset);
}

}  // namespace pca
}  // namespace rfl
