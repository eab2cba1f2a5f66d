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
#include <stdexcept>
#include <vector>

#include "simd.hpp"  // RFL_INLINE, simd::v4d
#include "stiefel.hpp"  // local_steps' default projection and retraction

namespace rfl {
namespace pca {

using simd::v4d;

//! Rows per block (their dot products keep B*R vector accumulators in registers).
constexpr int kRows(int R) { return R == 0 ? 1 : (R <= 5 ? 4 : 2); }
//! Rows per block of the plain pass: at r = 1, 8 (eight independent dot-product chains, as
//! many as two FMA units of latency 4 keep busy; four left the vector pass at ~1.7x NumPy's two
//! GEMV passes at 60 x 784). A row's sums never depend on the block size (each row has its own
//! accumulators; St adds the rows in order), so neither do the bits.
constexpr int kRowsPlain(int R) { return R == 1 ? 8 : kRows(R); }
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

// dots at r = 1 for 8 rows (the plain pass's block, kRowsPlain(1)): the same sums as the
// general form, with the eight accumulators and row pointers as named locals (GCC keeps the
// general form's array of eight vectors on the stack: a load and a store per FMA).
RFL_INLINE void dots8(const double* Z, const double* x, std::size_t d, double* y) {
    const std::size_t d4 = d & ~static_cast<std::size_t>(3);
    const double *z0 = Z, *z1 = Z + d, *z2 = Z + 2 * d, *z3 = Z + 3 * d, *z4 = Z + 4 * d,
                 *z5 = Z + 5 * d, *z6 = Z + 6 * d, *z7 = Z + 7 * d;
    v4d s0 = simd::splat(0.0), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    for (std::size_t k = 0; k < d4; k += 4) {
        if ((k & 7) == 0)  // one prefetch per 64-byte line of each row, kPrefetchRows ahead
            for (int b = 0; b < 8; ++b) RFL_PREFETCH(Z + (b + kPrefetchRows) * d + k);
        const v4d xk = simd::load(x + k);
        s0 += simd::load(z0 + k) * xk;
        s1 += simd::load(z1 + k) * xk;
        s2 += simd::load(z2 + k) * xk;
        s3 += simd::load(z3 + k) * xk;
        s4 += simd::load(z4 + k) * xk;
        s5 += simd::load(z5 + k) * xk;
        s6 += simd::load(z6 + k) * xk;
        s7 += simd::load(z7 + k) * xk;
    }
    const v4d s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int b = 0; b < 8; ++b) {
        const double* z = Z + b * d;
        double t = simd::hsum(s[b]);
        for (std::size_t k = d4; k < d; ++k) t += z[k] * x[k];
        y[b] = t;
    }
}

// dots at r = 1 for the clipped pass's 4 rows with their |z|^2 (the same sums as the general
// form, the eight accumulators as named locals, as dots8).
RFL_INLINE void dots4_clipped(const double* Z, const double* x, std::size_t d, double* y,
                              double* z2) {
    const std::size_t d4 = d & ~static_cast<std::size_t>(3);
    const double *z0 = Z, *z1 = Z + d, *z2p = Z + 2 * d, *z3 = Z + 3 * d;
    v4d s0 = simd::splat(0.0), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    for (std::size_t k = 0; k < d4; k += 4) {
        if ((k & 7) == 0)
            for (int b = 0; b < 4; ++b) RFL_PREFETCH(Z + (b + kPrefetchRows) * d + k);
        const v4d xk = simd::load(x + k);
        const v4d a0 = simd::load(z0 + k), a1 = simd::load(z1 + k), a2 = simd::load(z2p + k),
                  a3 = simd::load(z3 + k);
        s0 += a0 * xk;
        s1 += a1 * xk;
        s2 += a2 * xk;
        s3 += a3 * xk;
        q0 += a0 * a0;
        q1 += a1 * a1;
        q2 += a2 * a2;
        q3 += a3 * a3;
    }
    const v4d s[4] = {s0, s1, s2, s3}, q[4] = {q0, q1, q2, q3};
    for (int b = 0; b < 4; ++b) {
        const double* z = Z + b * d;
        double t = simd::hsum(s[b]);
        for (std::size_t k = d4; k < d; ++k) t += z[k] * x[k];
        y[b] = t;
        double u = simd::hsum(q[b]);
        for (std::size_t k = d4; k < d; ++k) u += z[k] * z[k];
        z2[b] = u;
    }
}

// y[b * r + l] = <Xt[l], z_b> for B rows z_b = Z + b*d (and z2[b] = |z_b|^2 when CLIP);
// R = compile-time r (0: runtime r, one l at a time).
template <int R, int B, bool CLIP>
RFL_INLINE void dots(const double* Z, const double* Xt, std::size_t d, int r_, double* y,
                     double* z2) {
    const std::size_t d4 = d & ~static_cast<std::size_t>(3);
    if constexpr (R == 1 && B == 8 && !CLIP) {
        (void)r_, (void)z2, (void)d4;
        dots8(Z, Xt, d, y);
    } else if constexpr (R == 1 && B == 4 && CLIP) {
        (void)r_, (void)d4;
        dots4_clipped(Z, Xt, d, y, z2);
    } else if constexpr (R == 0) {
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
        // 4-vectors per strip: KV R independent accumulator chains (at least 8 for r <= 5, as
        // two FMA units of latency 4 need); an entry's sum is in row order whatever KV
        constexpr int KV = R == 1 ? 8 : (R == 2 ? 4 : (R <= 5 ? 2 : 1));
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
        constexpr int B = kRowsPlain(R);
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
constexpr int kRowsMax = 8;

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

//! Chunks of kChunkRows rows in m rows (at least one).
inline std::size_t chunk_count(std::size_t m) {
    return std::max<std::size_t>(1, (m + kChunkRows - 1) / kChunkRows);
}

//! St (r x d) = (Z'(Z X))' of a client's m rows Z (m x d) at X (d x r, row-major), chunk by
//! chunk: chunk(rows, count, Xt, St_c) puts (Z_c' Z_c X)' of `count` rows into St_c (r x d, from
//! zero; Xt = X', r x d), and several chunks are summed in order. Scratch: Xt (r d doubles) and
//! partials (chunk_count(m) r d doubles when there are several chunks, else none).
template <class Chunk>
void rows_gradient(const double* z, std::size_t m, std::size_t d, int r, const double* X,
                   double* Xt, double* St, double* partials, Chunk&& chunk) {
    const std::size_t item = static_cast<std::size_t>(r) * d, nc = chunk_count(m);
    if (r == 1)  // the same copy, contiguous
        std::copy(X, X + d, Xt);
    else
        for (std::size_t i = 0; i < d; ++i)
            for (int l = 0; l < r; ++l) Xt[l * d + i] = X[i * r + l];
    for (std::size_t c = 0; c < nc; ++c) {
        const std::size_t lo = c * kChunkRows;
        chunk(z + lo * d, std::min(m, lo + kChunkRows) - lo, static_cast<const double*>(Xt),
              nc == 1 ? St : partials + c * item);
    }
    if (nc > 1) {
        std::fill(St, St + item, 0.0);
        for (std::size_t c = 0; c < nc; ++c)
            for (std::size_t e = 0; e < item; ++e) St[e] += partials[c * item + e];
    }
}

//! The terms an algorithm adds to local_steps' steps (each optional; nullptr: none). The
//! per-client arrays hold the group's g items (d x r, row-major) one after another.
struct Terms {
    //! (g, d, r): subtracted from every step's Euclidean gradient before the projection
    //! (RFedSVRG, whose correction P_X(offset) is the projection transport of a constant)
    const double* offset = nullptr;
    //! (d, r): RFedProx's server point, the direction P_X(G) - mu R_X^{-1}(anchor) (NaN where
    //! the inverse retraction has no solution, which the next retraction carries into X)
    const double* anchor = nullptr;
    double mu = 0.0;
    //! (g,), with anchor in place of mu's term: RFedSVRG-2BB's direction
    //! P_X(G + coef R_anchor^{-1}(X))
    const double* coef = nullptr;
    //! (g, d, r): the step directions (before the factor -eta) summed over the steps
    //! (RFedAGS's stream); the last step's retraction is then skipped (X is left at the last
    //! point whose gradient was taken)
    double* sum = nullptr;
    //! (g, d, r), starting at X: RFedProj's steps instead, in the ambient space and projected
    //! back, zhat <- zhat - eta (P_X(G) + drift), X <- P(zhat)
    double* ambient = nullptr;
    const double* drift = nullptr;  //!< (g, d, r), with ambient: RFedProj's drift corrections
};

//! Doubles of scratch local_steps needs for a group of g clients (d x r points) and terms t.
inline std::size_t local_steps_work_size(std::size_t g, std::size_t d, int r, const Terms& t) {
    const std::size_t item = static_cast<std::size_t>(r) * d, all = g * item;
    return item + 3 * all + (t.anchor ? 2 * all : 0) + (t.coef ? all : 0);
}

//! The local steps of g clients in lockstep (their points X: g consecutive d x r items,
//! row-major, overwritten with the last iterates): `steps` times
//!   X <- R_X(-eta P_X(s_c G_c(X) - offset_c))     (G_c: client c's Euclidean gradient part)
//! with the terms t (see Terms). The operations are the caller's (the extension passes its
//! per-ISA batch loops, so the iterates are its batched route's bits), on N = g items:
//!   grad(c, Xc, St): St (r x d) = G_c(Xc)' for client c (e.g. rows_gradient: (Z'ZX)');
//!   proj(X, G, U, N): U = P_X(G);  retr(X, U, Y, N): Y = R_X(U) (NaN: no solution);
//!   inv(X, Y, O, N): O = R_X^{-1}(Y);  project(Z, Y, N): Y = the nearest points to Z.
//! The polar pair (Stiefel) or, at r = 1, the sphere's Exp and Log: the loop is the same.
//! s: (g,) gradient scales (kPCA: -2/m). work: local_steps_work_size(g, d, r, t) doubles.
template <class Grad, class Proj, class Retr, class Inv, class Project>
void local_steps(std::size_t g, std::size_t d, int r, double* X, const double* s, double eta,
                 int steps, const Terms& t, double* work, Grad&& grad, Proj&& proj,
                 Retr&& retr, Inv&& inv, Project&& project) {
    if (t.coef != nullptr && t.anchor == nullptr)  // coef's term is c R_anchor^{-1}(X)
        throw std::invalid_argument("rfl::pca::local_steps: Terms.coef needs Terms.anchor");
    const std::size_t item = static_cast<std::size_t>(r) * d, all = g * item;
    double* St = work;              // r x d
    double* G = St + item;          // g x d x r
    double* U = G + all;
    double* Y = U + all;
    double* pull = Y + all;         // with anchor: the inverse retractions
    double* anc = pull + (t.anchor ? all : 0);  // with anchor: g copies of it
    double* corrected = anc + (t.anchor ? all : 0);  // with coef
    if (t.anchor)
        for (std::size_t c = 0; c < g; ++c) std::copy(t.anchor, t.anchor + item, anc + c * item);
    for (int step = 0; step < steps; ++step) {
        for (std::size_t c = 0; c < g; ++c) {  // the Euclidean gradients
            grad(c, static_cast<const double*>(X + c * item), St);
            double* Gc = G + c * item;
            const double sc = s[c];
            if (r == 1) {  // the same products, contiguous (vectorized)
                if (t.offset == nullptr)
                    for (std::size_t i = 0; i < d; ++i) Gc[i] = sc * St[i];
                else
                    for (std::size_t i = 0; i < d; ++i) Gc[i] = sc * St[i] - t.offset[c * d + i];
            } else if (t.offset == nullptr) {
                for (std::size_t i = 0; i < d; ++i)
                    for (int l = 0; l < r; ++l) Gc[i * r + l] = sc * St[l * d + i];
            } else {
                const double* oc = t.offset + c * item;
                for (std::size_t i = 0; i < d; ++i)
                    for (int l = 0; l < r; ++l)
                        Gc[i * r + l] = sc * St[l * d + i] - oc[i * r + l];
            }
        }
        if (t.coef != nullptr) {  // 2BB: P_X(G + c R_anchor^{-1}(X)), one projection
            inv(static_cast<const double*>(anc), static_cast<const double*>(X), pull, g);
            for (std::size_t c = 0; c < g; ++c) {
                const double cj = t.coef[c];
                for (std::size_t e = c * item; e < (c + 1) * item; ++e)
                    corrected[e] = G[e] + cj * pull[e];
            }
            proj(static_cast<const double*>(X), static_cast<const double*>(corrected), U, g);
        } else {
            proj(static_cast<const double*>(X), static_cast<const double*>(G), U, g);
        }
        if (t.anchor != nullptr && t.coef == nullptr) {  // RFedProx: - mu R_X^{-1}(anchor)
            inv(static_cast<const double*>(X), static_cast<const double*>(anc), pull, g);
            for (std::size_t e = 0; e < all; ++e) U[e] -= t.mu * pull[e];
        }
        if (t.sum != nullptr)
            for (std::size_t e = 0; e < all; ++e) t.sum[e] += U[e];
        for (std::size_t e = 0; e < all; ++e) U[e] = -eta * U[e];
        if (t.ambient != nullptr) {  // RFedProj: zhat <- zhat - eta (P_X(G) + drift)
            if (t.drift == nullptr)
                for (std::size_t e = 0; e < all; ++e) t.ambient[e] += U[e];
            else
                for (std::size_t e = 0; e < all; ++e) t.ambient[e] += U[e] - eta * t.drift[e];
        }
        if (t.sum != nullptr && step + 1 == steps) break;  // the last retraction: not needed
        if (t.ambient != nullptr)
            project(static_cast<const double*>(t.ambient), Y, g);
        else
            retr(static_cast<const double*>(X), static_cast<const double*>(U), Y, g);
        std::copy(Y, Y + all, X);
    }
}

//! RFedAvg's (with `offset`, d x r: RFedSVRG's) local steps on kPCA for one client Z (m x d)
//! with this header library's own operations (rows(), stiefel::proj, stiefel::retr_polar;
//! R, P: compile-time r and p = r, 0 for any): `steps` times X <- R_X(-eta P_X(s Z'(Z X) -
//! offset)) from X (d x r, row-major, overwritten with the last iterate), s the gradient scale
//! (kPCA: -2/m). The client's rows stay in cache over its steps.
template <int R = 0, int P = 0>
void local_steps(const double* z, std::size_t m, std::size_t d, int r, double* X, double s,
                 double eta, int steps, const double* offset = nullptr) {
    const int n = static_cast<int>(d);
    const std::size_t item = static_cast<std::size_t>(r) * d, nc = chunk_count(m);
    Terms t;
    t.offset = offset;
    std::vector<double> work(local_steps_work_size(1, d, r, t));
    std::vector<double> xt(item), partials(nc > 1 ? nc * item : 0);
    std::vector<double> coef(static_cast<std::size_t>(kRowsMax) * r);
    std::vector<double> st_work(stiefel::work_size(n, r));
    const Weight plain{false, INFINITY, 1.0};
    local_steps(
        1, d, r, X, &s, eta, steps, t, work.data(),
        [&](std::size_t, const double* Xc, double* St) {
            rows_gradient(z, m, d, r, Xc, xt.data(), St, partials.data(),
                          [&](const double* rows, std::size_t count, const double* Xt,
                              double* Sc) { client<R>(rows, count, d, Xt, r, plain, Sc,
                                                      coef.data()); });
        },
        [&](const double* x, const double* g, double* u, std::size_t N) {
            for (std::size_t i = 0; i < N; ++i)
                stiefel::proj<P>(x + i * item, g + i * item, u + i * item, n, r, st_work.data());
        },
        [&](const double* x, const double* u, double* y, std::size_t N) {
            stiefel::retr_polar<P>(x, u, y, static_cast<std::ptrdiff_t>(N), n, r,
                                   st_work.data());
        },
        [&](const double* x, const double* y, double* o, std::size_t N) {
            for (std::size_t i = 0; i < N; ++i)
                stiefel::inv_retr_polar<P>(x + i * item, y + i * item, o + i * item, n, r,
                                           st_work.data());
        },
        [&](const double* a, double* y, std::size_t N) {
            stiefel::polar<P>(a, y, static_cast<std::ptrdiff_t>(N), n, r, st_work.data());
        });
}

}  // namespace pca
}  // namespace rfl
