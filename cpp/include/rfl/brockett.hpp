// Brockett's clipped per-sample gradient sums (the private local steps of PriRFed): for one
// client at X (d x p, orthonormal columns), b symmetric samples A_j (d x d, row-major) and
// Y = X diag(2 h),
//
//   G_j = A_j Y,   |P_X G_j|^2 = |G_j|^2 - |sym(X'G_j)|^2,   c_j = min(1, tau / |P_X G_j|),
//   out = P_X(sum_j c_j G_j) = S - X sym(X'S),  S = sum_j c_j G_j,
//
// in one pass over the samples (each read once; its G_j, norm and clip factor formed while it is
// in cache). The same rule as rfl_fast.problems.Brockett._clipped_blocks, whose NumPy form is
// the reference: a norm is trusted where |P_X G_j|^2 >= |G_j|^2 / 4 and 1e-280 < |G_j|^2 <
// 1e280 (no cancellation, no overflow or underflow); a client with an untrusted sample returns
// false and the caller takes the reference for the call (the samples projected one by one,
// the non-finite norms refused naming the sample), so only ordinary samples are summed here.
#pragma once

#include <cmath>
#include <cstddef>

#include "rfl/simd.hpp"

namespace rfl {
namespace brockett {

constexpr double kTrust = 0.25, kLo = 1e-280, kHi = 1e280;

// sum_i a[i] b[i], i < n, four partial sums (then a scalar tail), in a fixed order
RFL_INLINE double dot(const double* a, const double* b, std::size_t n) {
    using simd::v4d;
    std::size_t i = 0;
    double s = 0.0;
    if (n >= 4) {
        v4d acc = simd::load(a) * simd::load(b);
        for (i = 4; i + 4 <= n; i += 4) acc += simd::load(a + i) * simd::load(b + i);
        s = simd::hsum(acc);
    }
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

// sum_i a[i]^2, i < n (a multiple of 4): four vector sums side by side, in a fixed order
RFL_INLINE double norm2(const double* a, std::size_t n) {
    using simd::v4d;
    v4d s[4] = {simd::splat(0.0), simd::splat(0.0), simd::splat(0.0), simd::splat(0.0)};
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int u = 0; u < 4; ++u) {
            const v4d v = simd::load(a + i + 4 * u);
            s[u] += v * v;
        }
    for (int u = 0; i < n; i += 4, ++u) {
        const v4d v = simd::load(a + i);
        s[u] += v * v;
    }
    return simd::hsum((s[0] + s[1]) + (s[2] + s[3]));
}

// Gt (P x d, rows of stride ds) = (A Y)' = Y' A for the symmetric A (d x d) and Y (d x P): row l of Gt is
// sum_m Y[m][l] A[m][.], formed 4 columns at a time (two such column blocks per pass, their
// P x 2 vector sums in registers over m); where 4 does not divide d the last block starts at
// d - 4 and recomputes a few columns (the same sums, the same values). d >= 4. Yb holds each
// Y[m][l] four times (a vector load, where a broadcast of Y's entry compiled to lane shuffles
// that bounded the loop). The first pass over A's rows also asks for the next sample's lines
// (`next`, d x d, or null), spread over its d steps: a sample is a few strided lines per row,
// whose misses the hardware prefetcher alone leaves one at a time (one thread read 4.9 GB/s).
template <int P>
RFL_INLINE void gradient_t(const double* A, std::size_t d, std::size_t ds, const double* Yb,
                            double* Gt, const double* next) {
    using simd::v4d;
    const std::size_t blocks = (d + 3) / 4, row = d * sizeof(double);
    const char* ahead = reinterpret_cast<const char*>(next);
    auto start = [&](std::size_t c) { return c + 1 < blocks ? 4 * c : d - 4; };
    std::size_t c = 0;
    for (; c + 2 <= blocks; c += 2) {
        const std::size_t c0 = start(c), c1 = start(c + 1);
        v4d s0[P], s1[P];
        for (int l = 0; l < P; ++l) s0[l] = s1[l] = simd::splat(0.0);
        for (std::size_t m = 0; m < d; ++m) {
            if (c == 0 && ahead != nullptr)  // row m's lines (a row's last: the next row's first)
                for (std::size_t at = m * row; at < (m + 1) * row; at += 64)
                    RFL_PREFETCH(ahead + at);
            const v4d a0 = simd::load(A + m * d + c0), a1 = simd::load(A + m * d + c1);
            for (int l = 0; l < P; ++l) {
                const v4d y = simd::load(Yb + (m * P + l) * 4);
                s0[l] += y * a0;
                s1[l] += y * a1;
            }
        }
        for (int l = 0; l < P; ++l) {
            simd::store(Gt + l * ds + c0, s0[l]);
            simd::store(Gt + l * ds + c1, s1[l]);
        }
    }
    if (c < blocks) {
        const std::size_t c0 = start(c);
        v4d s0[P];
        for (int l = 0; l < P; ++l) s0[l] = simd::splat(0.0);
        for (std::size_t m = 0; m < d; ++m) {
            const v4d a0 = simd::load(A + m * d + c0);
            for (int l = 0; l < P; ++l) s0[l] += simd::load(Yb + (m * P + l) * 4) * a0;
        }
        for (int l = 0; l < P; ++l) simd::store(Gt + l * ds + c0, s0[l]);
    }
}

// The same for any p and d (d < 4, or p above the specialisations): plain loops.
RFL_INLINE void gradient_t_any(const double* A, std::size_t d, std::size_t ds, int p,
                               const double* Y, double* Gt) {
    for (int l = 0; l < p; ++l) {
        double* g = Gt + static_cast<std::size_t>(l) * ds;
        for (std::size_t i = 0; i < d; ++i) g[i] = 0.0;
        for (std::size_t m = 0; m < d; ++m) {
            const double y = Y[m * p + l];
            const double* a = A + m * d;
            for (std::size_t i = 0; i < d; ++i) g[i] += y * a[i];
        }
    }
}

// st (p x p) = Xt Gt' for rows of length ds (a multiple of 4, zero-padded): st[a][l] =
// Xt[a] . Gt[l], the sums side by side (independent vector accumulators, not p^2 chains).
template <int P>
RFL_INLINE void cross(const double* Xt, const double* Gt, std::size_t ds, int p_rt, double* st) {
    using simd::v4d;
    if constexpr (P > 0) {
        // two rows of Gt at a time: 2 P accumulators and the loaded vectors fit the 16
        // registers of AVX2 for P <= 6 (no spills); the order of each sum is the same either way
        for (int l = 0; l < P; l += 2) {
            const bool two = l + 1 < P;
            v4d acc0[P], acc1[P];
            for (int a = 0; a < P; ++a) acc0[a] = acc1[a] = simd::splat(0.0);
            const double* g0 = Gt + l * ds;
            const double* g1 = Gt + (two ? l + 1 : l) * ds;
            for (std::size_t c = 0; c < ds; c += 4) {
                const v4d u = simd::load(g0 + c), w = simd::load(g1 + c);
                for (int a = 0; a < P; ++a) {
                    const v4d xa = simd::load(Xt + a * ds + c);
                    acc0[a] += xa * u;
                    acc1[a] += xa * w;
                }
            }
            for (int a = 0; a < P; ++a) {
                st[a * P + l] = simd::hsum(acc0[a]);
                if (two) st[a * P + l + 1] = simd::hsum(acc1[a]);
            }
        }
    } else {
        for (int a = 0; a < p_rt; ++a)
            for (int l = 0; l < p_rt; ++l)
                st[a * p_rt + l] = dot(Xt + static_cast<std::size_t>(a) * ds,
                                       Gt + static_cast<std::size_t>(l) * ds, ds);
    }
}

// Doubles of scratch client() needs: Y (d x p), Yb (4 d p), Xt, Gt, S (p x ds each), st (p x p).
inline std::size_t scratch_size(std::size_t d, int p) {
    const std::size_t ds = (d + 3) / 4 * 4;
    return 5 * d * p + 3 * ds * p + static_cast<std::size_t>(p) * p;
}

// One client: b samples at A[0], ..., A[b - 1] (each d x d), X (d x p), h2 = 2 h (p), tau > 0
// (inf: no clipping). Scratch: scratch_size(d, p) doubles. Writes out (d x p) and returns true,
// or returns false (out unspecified) where a sample's norm is not trusted (see above). The
// rows of Xt, Gt and S are padded with zeros to ds, a multiple of 4 (exact zeros in the sums).
template <int P>
RFL_INLINE bool client(const double* const* A, std::size_t b, std::size_t d, int p_rt,
                       const double* X, const double* h2, double tau, double* out,
                       double* scratch) {
    const int p = P > 0 ? P : p_rt;
    const std::size_t ds = (d + 3) / 4 * 4, pd = static_cast<std::size_t>(p) * ds;
    double* Y = scratch;          // d x p: X diag(2h)
    double* Yb = Y + d * p;       // d x p x 4: Y's entries repeated (P > 0)
    double* Xt = Yb + 4 * d * p;  // p x ds
    double* Gt = Xt + pd;         // p x ds: one sample's G'
    double* S = Gt + pd;          // p x ds: sum_j c_j G_j'
    double* st = S + pd;          // p x p
    const bool blocked = P > 0 && d >= 4;
    for (std::size_t q = 0; q < pd; ++q) S[q] = 0.0;
    for (int l = 0; l < p; ++l)               // the pads of Xt and Gt (never written after)
        for (std::size_t i = d; i < ds; ++i) Xt[l * ds + i] = Gt[l * ds + i] = 0.0;
    for (std::size_t i = 0; i < d; ++i)
        for (int l = 0; l < p; ++l) {
            const double y = X[i * p + l] * h2[l];
            Xt[l * ds + i] = X[i * p + l];
            if (blocked)
                simd::store(Yb + (i * p + l) * 4, simd::splat(y));
            else
                Y[i * p + l] = y;
        }
    for (std::size_t j = 0; j < b; ++j) {
        if (blocked)
            gradient_t<(P > 0 ? P : 1)>(A[j], d, ds, Yb, Gt, j + 1 < b ? A[j + 1] : nullptr);
        else
            gradient_t_any(A[j], d, ds, p, Y, Gt);
        const double g2 = norm2(Gt, pd);
        cross<P>(Xt, Gt, ds, p, st);          // X'G
        double s2 = 0.0;
        for (int a = 0; a < p; ++a)
            for (int l = 0; l < p; ++l) {
                const double v = 0.5 * (st[a * p + l] + st[l * p + a]);
                s2 += v * v;
            }
        const double n2 = g2 - s2;
        if (!(n2 >= kTrust * g2 && g2 > kLo && g2 < kHi)) return false;
        const double norm = std::sqrt(n2);
        const double c = norm > tau ? tau / norm : 1.0;
        for (std::size_t q = 0; q < pd; ++q) S[q] += c * Gt[q];
    }
    // out = S' - X sym(X'S')
    cross<P>(Xt, S, ds, p, st);
    for (int a = 0; a < p; ++a)
        for (int l = a + 1; l < p; ++l) {
            const double v = 0.5 * (st[a * p + l] + st[l * p + a]);
            st[a * p + l] = st[l * p + a] = v;
        }
    // row l of out' = S[l] - sum_a sym[a][l] Xt[a], 4 entries at a time (into Gt), then out
    for (int l = 0; l < p; ++l)
        for (std::size_t c = 0; c < ds; c += 4) {
            simd::v4d v = simd::load(S + l * ds + c);
            for (int a = 0; a < p; ++a) v -= simd::splat(st[a * p + l]) * simd::load(Xt + a * ds + c);
            simd::store(Gt + l * ds + c, v);
        }
    for (std::size_t i = 0; i < d; ++i)
        for (int l = 0; l < p; ++l) out[i * p + l] = Gt[l * ds + i];
    return true;
}

}  // namespace brockett
}  // namespace rfl
