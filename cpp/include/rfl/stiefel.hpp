// Stiefel manifold St(n, p) kernels on row-major (n, p) float64 items, n >= p: one item per
// call, except polar and retr_polar, which take N consecutive items (p = 5 batches them).
//
//   proj(x, u)          u - x sym(x'u)
//   polar(a)            a (a'a)^-½, the polar factor (nearest point of St(n, p)); NaN when
//                       rank-deficient (s_min <= s_max * eps * n, as the NumPy reference)
//   retr_polar(x, u)    polar(x + u)
//   inv_retr_polar(x,y) y S - x with S symmetric, (x'y) S + S (y'x) = 2I (NaN unless S is
//                       positive definite: polar_spd); NaN if the
//                       Lyapunov operator is singular (two eigenvalues of x'y sum to ~0)
//   retr_qr(x, u)       qf(x + u), R with positive diagonal
//   inv_retr_qr(x, y)   y R - x with R upper triangular, (x'y) R + R'(y'x) = 2I; NaN if a
//                       leading block of x'y is singular within the rounding of x'y
//
// Algorithms. Polar: the p x p Gram route G = a'a = W diag(l) W', Q0 = a W diag(l^-½) W',
// whose error (eps cond(a)^2) is only in the symmetric part of Q0'Q0 - I: when that is not
// negligible one more Gram step Q = Q0 (Q0'Q0)^-½ restores orthonormality (the rotation part
// of the error is eps cond(a)). For cond(a) > 1e5 (or rank deficiency) the kernel switches to
// a one-sided Jacobi SVD of a. For p = 5 the Gram eigendecompositions of 8 items at a time run
// through the lockstep Jacobi of linalg_small.hpp, and the row passes are 4-wide vectors.
// QR: Cholesky QR, Q = a R^-1 with R'R = a'a (R^-1 formed, then applied by the polar route's
// product), repeated once (CholeskyQR2) when Q'Q - I is not negligible; Householder QR when a'a
// is not numerically positive definite or R's diagonal spans more than 1e6. Lyapunov: for
// p <= 6 the p(p+1)/2 x p(p+1)/2 linear system on the upper triangle of S by Gaussian
// elimination with partial pivoting (O(p^6), the fastest there); for p > 6 the scaled Newton
// iteration of the matrix sign function (O(p^3) per step, O(p^2) scratch), which converges
// when x'y is positive stable (true for every y = retr_polar(x, u)); where it does not, the
// linear system again for p <= 32, and no solution (NaN) above. When the application set
// BLAS / LAPACK (blas.hpp), every p >= 9 runs the same algorithms on them: GEMM for proj, for
// x'y and y S - x of both inverses, for the sign iteration's products and for the Gram
// routes' a'a, Q0'Q0 and a C (polar: C = (a'a)^-½; QR: C = R^-1); LU for the iteration's
// inverses, dsyevd for the polar Gram route's eigendecompositions; and where the sign
// iteration does not converge, Bartels-Stewart (dgees, dtrsyl) instead of the linear system,
// at every p: an answer wherever one exists, as the reference's.
// QR inverse: one LU of x'y without pivoting gives every leading block at once (columns
// solved by forward/back substitution); partial-pivoting solves per column when a pivot is
// small. All loops over n are fused passes over contiguous rows.
//
// Every function takes `work`, scratch of at least work_size(n, p) doubles, and a template
// parameter P: 0 for any p, or the compile-time value of p (the binding instantiates 1..8).
#pragma once

#include <cmath>
#include <cstddef>
#include <memory>

#include "blas.hpp"
#include "linalg_small.hpp"

namespace rfl {
namespace stiefel {

using linalg::kEps;
using linalg::kNaN;

// Largest p for which inv_retr_polar may build the O(p^4) linear system (when the O(p^3) sign
// iteration does not converge); above it the scratch stays O(n p + p^2).
constexpr int kKronMax = 32;
// Largest p solved by the O(p^6) linear system first, where it is faster than the O(p^3) sign
// iteration (the measurements behind each boundary here are in the commit that set it; the
// benchmark StiefelRoutes in benchmarks/suite/bench_kernels.py times both sides of each).
constexpr int kKronFirst = 6;
// Smallest p for which the Stiefel kernels run through BLAS / LAPACK when the application set
// them (blas.hpp): every p without a compile-time specialisation.
constexpr int kBlasMin = 9;

// Whether the Stiefel kernels (all six) run their products (and the sign iteration, the Gram
// eigendecompositions) on BLAS / LAPACK.
inline bool uses_blas(int p) { return p >= kBlasMin && blas::available(); }

// Whether those kernels' items of shape (n, p) run through BLAS and their n p^2 products are
// large enough for BLAS to thread them, so that a batch loop should not add threads of its own
// (below p = 16 BLAS's threads have too few of the p x p outputs to share).
inline bool blas_threaded(int n, int p) {
    return uses_blas(p) && p >= 16 && static_cast<std::size_t>(n) * p * p >= blas::kThreadsFrom;
}

inline std::size_t work_size(int n, int p) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    const std::size_t q = static_cast<std::size_t>(p) * (p + 1) / 2;
    const std::size_t np = static_cast<std::size_t>(n) * p;
    const std::size_t kron = p <= kKronMax ? q * q + q : 0;  // lyapunov_sym's system
    std::size_t small = 8 * pp + 4 * p + linalg::eigh_work(p) + kron;
    std::size_t big = 2 * np + pp + 2 * p + static_cast<std::size_t>(n);  // SVD / Householder
    return small + big;
}

namespace detail {

// 4-lane vectors (simd::v4d: AVX2/FMA in the x86-64-v3 clone, pairs of SSE2 ops in the
// baseline one), for the p = 5 fast path and the rows of mul_small; without GNU vector
// extensions (RFL_SIMD_VECTOR_EXT 0) both take their scalar loops.
#if RFL_SIMD_VECTOR_EXT
using simd::v4d;
#endif

// Whether x'y and the products with a third term (proj, y S - x) of a compile-time P go through
// cross_small and mul_small: the plain loops spill their P x P sums from P = 7, and below it
// the compiler's own vectorization of the plain loops is as fast or faster (P = 5 has its own
// vector path). The right products a C of the Gram routes (right_mul) take mul_small at every
// P >= 2.
template <int P>
constexpr bool kRowVectors = P >= 7;

// M (P x P, row-major) = x'y over n rows for a compile-time P: M's rows in blocks of 4, whose
// 4 P sums stay in registers.
template <int P>
RFL_INLINE void cross_small(const double* x, const double* y, double* M, int n) {
    constexpr int R = P < 4 ? P : 4;
    for (int r0 = 0; r0 < P; r0 += R) {
        double acc[R][P] = {};
        for (int i = 0; i < n; ++i) {
            const double* xi = x + static_cast<std::size_t>(i) * P + r0;
            const double* yi = y + static_cast<std::size_t>(i) * P;
            for (int r = 0; r < R && r0 + r < P; ++r)
                for (int c = 0; c < P; ++c) acc[r][c] += xi[r] * yi[c];
        }
        for (int r = 0; r < R && r0 + r < P; ++r)
            for (int c = 0; c < P; ++c) M[(r0 + r) * P + c] = acc[r][c];
    }
}

// out_i = alpha a_i C (+ beta z_i when z) for every row i, a = x (+ u when ADD), C P x P
// row-major, a compile-time P; with H, also H = out'out (full). Each output row is held as
// (P + 3) / 4 vectors: GCC's own vectorization of the plain loop (4 rows at a time, transposed)
// spilled at P = 8. out may alias x or z (each row is read before it is written).
template <int P, bool ADD>
RFL_INLINE void mul_small(const double* x, const double* u, const double* C, double alpha,
                          double beta, const double* z, double* out, int n, double* H = nullptr) {
#if RFL_SIMD_VECTOR_EXT
    constexpr int L = (P + 3) / 4;
    v4d Hv[P][L] = {};
    v4d Cv[P][L] = {};  // (zeroed: GCC 12 warns otherwise)
    for (int r = 0; r < P; ++r)
        for (int l = 0; l < L; ++l) Cv[r][l] = simd::load_first(C + r * P + 4 * l, P - 4 * l);
    for (int i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(i) * P;
        v4d o[L];
        for (int l = 0; l < L; ++l)
            o[l] = z ? simd::splat(beta) * simd::load_first(z + at + 4 * l, P - 4 * l) : simd::splat(0.0);
        for (int r = 0; r < P; ++r) {
            const v4d ar = simd::splat(alpha * (ADD ? x[at + r] + u[at + r] : x[at + r]));
            for (int l = 0; l < L; ++l) o[l] += ar * Cv[r][l];
        }
        for (int l = 0; l < L; ++l) {
            if (4 * l + 4 <= P) {
                simd::store(out + at + 4 * l, o[l]);
            } else {
                for (int k = 0; 4 * l + k < P; ++k) out[at + 4 * l + k] = o[l][k];
            }
        }
        if (H && P <= 4)
            for (int r = 0; r < P; ++r) Hv[r][0] += simd::splat(o[0][r]) * o[0];
    }
    if (H && P <= 4)
        for (int r = 0; r < P; ++r)
            for (int c = 0; c < P; ++c) H[r * P + c] = Hv[r][0][c];
    if (H && P > 4) cross_small<P>(out, out, H, n);
#else
    double Cl[P * P];
    for (int i = 0; i < P * P; ++i) Cl[i] = C[i];
    for (int i = 0; i < n; ++i) {
        const std::size_t at = static_cast<std::size_t>(i) * P;
        double o[P];
        for (int c = 0; c < P; ++c) o[c] = z ? beta * z[at + c] : 0.0;
        for (int r = 0; r < P; ++r) {
            const double ar = alpha * (ADD ? x[at + r] + u[at + r] : x[at + r]);
            for (int c = 0; c < P; ++c) o[c] += ar * Cl[r * P + c];
        }
        for (int c = 0; c < P; ++c) out[at + c] = o[c];
    }
    if (H) cross_small<P>(out, out, H, n);
#endif
}

// G (lower triangle, p x p) = a'a with a = x (+ u when ADD).
template <int P, bool ADD>
RFL_INLINE void gram(const double* x, const double* u, double* G, int n, int p_) {
    const int p = P > 0 ? P : p_;
    double local[P > 0 ? P * P : 1];  // register/stack accumulator: no aliasing with x, u
    double* const Gout = G;
    if (P > 0) G = local;
    for (int i = 0; i < p * p; ++i) G[i] = 0.0;
    for (int i = 0; i < n; ++i) {
        const double* xi = x + static_cast<std::size_t>(i) * p;
        const double* ui = ADD ? u + static_cast<std::size_t>(i) * p : nullptr;
        double a[P > 0 ? P : 1];
        if (P > 0) {
            for (int r = 0; r < p; ++r) a[r] = ADD ? xi[r] + ui[r] : xi[r];
            for (int r = 0; r < p; ++r)
                for (int c = 0; c <= r; ++c) G[r * p + c] += a[r] * a[c];
        } else {
            for (int r = 0; r < p; ++r) {
                const double ar = ADD ? xi[r] + ui[r] : xi[r];
                for (int c = 0; c <= r; ++c) G[r * p + c] += ar * (ADD ? xi[c] + ui[c] : xi[c]);
            }
        }
    }
    if (P > 0)
        for (int i = 0; i < p * p; ++i) Gout[i] = local[i];
}

// out_i = a_i C (C p x p row-major) for every row, accumulating H = out'out (lower) if H.
// out may alias x (each row is read before it is written). rowbuf: 2p doubles.
template <int P, bool ADD>
RFL_INLINE void right_mul(const double* x, const double* u, const double* C, double* out, double* H,
                      int n, int p_, double* rowbuf) {
    if constexpr (P >= 2) return mul_small<P, ADD>(x, u, C, 1.0, 0.0, nullptr, out, n, H);
    const int p = P > 0 ? P : p_;
    double Hl[P > 0 ? P * P : 1], Cl[P > 0 ? P * P : 1];
    double* const Hout = H;
    if (P > 0) {
        for (int i = 0; i < p * p; ++i) Cl[i] = C[i];
        C = Cl;
        if (H) H = Hl;
    }
    if (H)
        for (int i = 0; i < p * p; ++i) H[i] = 0.0;
    double abuf[P > 0 ? P : 1], obuf[P > 0 ? P : 1];
    double* a = P > 0 ? abuf : rowbuf;
    double* o = P > 0 ? obuf : rowbuf + p;
    for (int i = 0; i < n; ++i) {
        const double* xi = x + static_cast<std::size_t>(i) * p;
        double* oi = out + static_cast<std::size_t>(i) * p;
        for (int r = 0; r < p; ++r) a[r] = ADD ? xi[r] + u[static_cast<std::size_t>(i) * p + r] : xi[r];
        for (int c = 0; c < p; ++c) o[c] = 0.0;
        for (int r = 0; r < p; ++r) {
            const double ar = a[r];
            const double* cr = C + r * p;
            for (int c = 0; c < p; ++c) o[c] += ar * cr[c];
        }
        for (int c = 0; c < p; ++c) oi[c] = o[c];
        if (H)
            for (int r = 0; r < p; ++r)
                for (int c = 0; c <= r; ++c) H[r * p + c] += o[r] * o[c];
    }
    if (P > 0 && Hout)
        for (int i = 0; i < p * p; ++i) Hout[i] = Hl[i];
}

// off-orthonormality max |H - I| of a lower-triangle Gram H
inline double off_identity(const double* H, int p) {
    double m = 0.0;
    for (int r = 0; r < p; ++r)
        for (int c = 0; c <= r; ++c)
            m = linalg::max_skip_nan(m, std::fabs(H[r * p + c] - (r == c ? 1.0 : 0.0)));
    return m;
}

// Accurate polar factor by one-sided Jacobi SVD (slow path). a = x (+u); work >= 2np + p*p + p.
template <bool ADD>
inline void polar_svd(const double* x, const double* u, double* out, int n, int p, double* work) {
    const std::size_t np = static_cast<std::size_t>(n) * p;
    double* A = work;          // column-major n x p
    double* Vt = A + np;       // p x p
    double* s = Vt + static_cast<std::size_t>(p) * p;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < p; ++j)
            A[static_cast<std::size_t>(j) * n + i] =
                ADD ? x[static_cast<std::size_t>(i) * p + j] + u[static_cast<std::size_t>(i) * p + j]
                    : x[static_cast<std::size_t>(i) * p + j];
    if (!linalg::svd_jacobi(A, s, Vt, n, p)) return linalg::fill_nan(out, np);
    double smax = 0.0, smin = INFINITY;
    for (int j = 0; j < p; ++j) {
        smax = std::fmax(smax, s[j]);
        smin = std::fmin(smin, s[j]);
    }
    if (!(smin > smax * kEps * n)) return linalg::fill_nan(out, np);
    for (int j = 0; j < p; ++j) {
        const double inv = 1.0 / s[j];
        double* aj = A + static_cast<std::size_t>(j) * n;
        for (int i = 0; i < n; ++i) aj[i] *= inv;
    }
    for (int i = 0; i < n; ++i) {
        double* oi = out + static_cast<std::size_t>(i) * p;
        for (int c = 0; c < p; ++c) oi[c] = 0.0;
        for (int j = 0; j < p; ++j) {
            const double uij = A[static_cast<std::size_t>(j) * n + i];
            const double* vj = Vt + static_cast<std::size_t>(j) * p;
            for (int c = 0; c < p; ++c) oi[c] += uij * vj[c];
        }
    }
}

// ---- p = 5 fast path: rows vectorized with 4-lane vectors (simd::v4d: AVX2/FMA in the
// x86-64-v3 clone, pairs of SSE2 ops in the baseline one). A row a_i = x_i (+ u_i) is held
// as a 4-vector (columns 0..3) plus a scalar (column 4).
#if RFL_SIMD_VECTOR_EXT

// G (full 5 x 5, row-major) = a'a: column d of G's rows 0..3 accumulates A_i * a_id (two rows
// summed before the accumulator, which halves the latency chain; the broadcasts are register
// shuffles), G44 as a scalar. With ADD, a = x + u is also written to out, so that the output
// pass reads one array (in cache) instead of two; out must not overlap x or u.
template <bool ADD>
RFL_INLINE void gram5(const double* __restrict x, const double* __restrict u,
                      double* __restrict out, double* G, int n) {
    v4d c0[5] = {};
    double g0 = 0.0, g1 = 0.0;
    // (always_inline: an out-of-line lambda would be compiled for the baseline ISA only, and
    // GCC's inlining choice for it changed with unrelated edits elsewhere: 8 -> 14 us per item)
    auto row = [&](int i, v4d& A, double& a4) __attribute__((always_inline)) {
        const double* xi = x + static_cast<std::size_t>(i) * 5;
        A = simd::load(xi);
        a4 = xi[4];
        if (ADD) {
            const double* ui = u + static_cast<std::size_t>(i) * 5;
            A += simd::load(ui);
            a4 += ui[4];
            double* oi = out + static_cast<std::size_t>(i) * 5;
            simd::store(oi, A);
            oi[4] = a4;
        }
    };
    int i = 0;
    for (; i + 2 <= n; i += 2) {
        v4d A0, A1;
        double a04, a14;
        row(i, A0, a04);
        row(i + 1, A1, a14);
        for (int d = 0; d < 4; ++d) c0[d] += A0 * simd::splat(A0[d]) + A1 * simd::splat(A1[d]);
        c0[4] += A0 * simd::splat(a04) + A1 * simd::splat(a14);
        g0 += a04 * a04;
        g1 += a14 * a14;
    }
    if (i < n) {
        v4d A0;
        double a04;
        row(i, A0, a04);
        for (int d = 0; d < 4; ++d) c0[d] += A0 * simd::splat(A0[d]);
        c0[4] += A0 * simd::splat(a04);
        g0 += a04 * a04;
    }
    for (int d = 0; d < 5; ++d) {
        const v4d c = c0[d];
        for (int r = 0; r < 4; ++r) G[r * 5 + d] = G[d * 5 + r] = c[r];
    }
    G[24] = g0 + g1;
}

// M (full 5 x 5, row-major) = x'y in one pass: rows 0..3 of column d as a 4-vector, row 4
// as a 4-vector and a scalar; two rows per step as in gram5.
RFL_INLINE void cross5(const double* __restrict x, const double* __restrict y, double* M, int n) {
    v4d m[5] = {}, m4 = {};  // m[d] = M[0..3][d], m4 = M[4][0..3]
    double m44 = 0.0, m44b = 0.0;
    int i = 0;
    for (; i + 2 <= n; i += 2) {
        const double* xi = x + static_cast<std::size_t>(i) * 5;
        const double* yi = y + static_cast<std::size_t>(i) * 5;
        const v4d X0 = simd::load(xi), X1 = simd::load(xi + 5), Y0 = simd::load(yi), Y1 = simd::load(yi + 5);
        for (int d = 0; d < 4; ++d) m[d] += X0 * simd::splat(Y0[d]) + X1 * simd::splat(Y1[d]);
        m[4] += X0 * simd::splat(yi[4]) + X1 * simd::splat(yi[9]);
        m4 += Y0 * simd::splat(xi[4]) + Y1 * simd::splat(xi[9]);
        m44 += xi[4] * yi[4];
        m44b += xi[9] * yi[9];
    }
    if (i < n) {
        const double* xi = x + static_cast<std::size_t>(i) * 5;
        const double* yi = y + static_cast<std::size_t>(i) * 5;
        const v4d X0 = simd::load(xi), Y0 = simd::load(yi);
        for (int d = 0; d < 4; ++d) m[d] += X0 * simd::splat(Y0[d]);
        m[4] += X0 * simd::splat(yi[4]);
        m4 += Y0 * simd::splat(xi[4]);
        m44 += xi[4] * yi[4];
    }
    for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) M[r * 5 + c] = m[c][r];
        M[r * 5 + 4] = m[4][r];
        M[20 + r] = m4[r];
    }
    M[24] = m44 + m44b;
}

// out_i = a_i C + SIGN b_i (SIGN = 0: no b) for the rows of n x 5 matrices, C 5 x 5
// row-major. Each row: 5 broadcasts and FMAs for columns 0..3, 5 scalar FMAs for column 4.
// out may alias a (each row is read before it is written).
template <int SIGN>
RFL_INLINE void mul5(const double* a, const double* C, const double* b, double* out, int n) {
    const v4d C0 = simd::load(C), C1 = simd::load(C + 5), C2 = simd::load(C + 10), C3 = simd::load(C + 15),
              C4 = simd::load(C + 20);
    const double k0 = C[4], k1 = C[9], k2 = C[14], k3 = C[19], k4 = C[24];
    for (int i = 0; i < n; ++i) {
        const double* ai = a + static_cast<std::size_t>(i) * 5;
        double* oi = out + static_cast<std::size_t>(i) * 5;
        const double a0 = ai[0], a1 = ai[1], a2 = ai[2], a3 = ai[3], a4 = ai[4];
        v4d o = (C0 * simd::splat(a0) + C1 * simd::splat(a1)) +
                (C2 * simd::splat(a2) + C3 * simd::splat(a3)) + C4 * simd::splat(a4);
        double o4 = (a0 * k0 + a1 * k1) + (a2 * k2 + a3 * k3) + a4 * k4;
        if constexpr (SIGN != 0) {
            const double* bi = b + static_cast<std::size_t>(i) * 5;
            if constexpr (SIGN > 0) {
                o += simd::load(bi);
                o4 += bi[4];
            } else {
                o -= simd::load(bi);
                o4 -= bi[4];
            }
        }
        simd::store(oi, o);
        oi[4] = o4;
    }
}

// out = u - x sym(x'u): M = x'u in one pass, then the rows while x and u of the item are still
// in cache (u + x (-sym(M)), exactly u - x sym(M): negation is exact).
RFL_INLINE void proj5(const double* __restrict x, const double* __restrict u,
                      double* __restrict out, int n) {
    double M[25], S[25];
    cross5(x, u, M, n);
    for (int r = 0; r < 5; ++r)
        for (int c = 0; c < 5; ++c) S[r * 5 + c] = -0.5 * (M[r * 5 + c] + M[c * 5 + r]);
    mul5<1>(x, S, u, out, n);
}
#endif

// C = G^-½ from the lower-triangle Gram G; returns lmin/lmax (negative or NaN if G unusable).
inline double inv_sqrt_gram(const double* G, double* C, int p, double* work) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* Vt = work;
    double* w = Vt + pp;
    double* scratch = w + p;
    double* ework = scratch + pp;
    if (!linalg::eigh(G, w, Vt, p, ework)) return kNaN;
    double lmin = INFINITY, lmax = 0.0;
    for (int k = 0; k < p; ++k) {
        lmin = std::fmin(lmin, w[k]);
        lmax = std::fmax(lmax, w[k]);
    }
    if (!(lmin > 0.0)) return -1.0;
    for (int k = 0; k < p; ++k) w[k] = 1.0 / std::sqrt(w[k]);
    linalg::sym_from_eig(Vt, w, C, p, scratch);
    return lmin / lmax;
}

// Whether the Gram G = a'a (lower triangle) is finite with its largest entry (the largest
// diagonal one) in [2^-300, 2^300], where the eigensolvers and the SVD fallback neither overflow
// nor lose digits to underflow. Outside it (a huge or tiny step, |a| beyond ~1e45 or below
// ~1e-45) the item is rescaled first (polar_rescaled).
inline bool gram_in_range(const double* G, int p) {
    double dmax = 0.0;
    for (int k = 0; k < p; ++k) dmax = std::fmax(dmax, G[k * p + k]);
    return dmax >= 0x1p-300 && dmax <= 0x1p300;  // false for NaN / inf
}

template <int P, bool ADD>
void polar_rescaled(const double* x, const double* u, double* out, int n, int p, double* work);

// A fresh copy of the item a = x (+ u) (np doubles): the BLAS routes read a after writing out,
// which may alias x.
template <bool ADD>
std::unique_ptr<double[]> item_copy(const double* x, const double* u, std::size_t np) {
    std::unique_ptr<double[]> a(new double[np]);
    for (std::size_t i = 0; i < np; ++i) a[i] = ADD ? x[i] + u[i] : x[i];
    return a;
}

// C = G^-½ as inv_sqrt_gram, by LAPACK (uses_blas(p)): C = V' D V from dsyevd's V' (rows:
// eigenvectors), D = diag(l^-½). work: 2 p^2 + p doubles.
inline double inv_sqrt_gram_blas(const double* G, double* C, int p, double* work) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* Vt = work;
    double* T = Vt + pp;
    double* w = T + pp;
    std::copy(G, G + pp, Vt);
    if (!blas::eigh(Vt, w, p) || !linalg::all_finite(w, static_cast<std::size_t>(p))) return kNaN;
    const double lmin = w[0], lmax = w[p - 1];  // ascending
    if (!(lmin > 0.0)) return -1.0;
    for (int k = 0; k < p; ++k) {
        const double d = 1.0 / std::sqrt(w[k]);
        for (int j = 0; j < p; ++j) T[k * p + j] = d * Vt[k * p + j];
    }
    blas::gemm(true, false, p, p, p, 1.0, Vt, p, T, p, 0.0, C, p);
    return lmin / lmax;
}

// polar_impl on BLAS / LAPACK (uses_blas(p)): the same Gram route and fallbacks, with GEMM for
// a'a, a C and the check Q0'Q0, and dsyevd for the eigendecompositions. a = x (+ u) is copied
// first, so out may alias x. work: as polar_impl.
template <bool ADD>
void polar_blas(const double* x, const double* u, double* out, int n, int p, double* work) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    const std::size_t np = static_cast<std::size_t>(n) * p;
    double* G = work;
    double* C = G + pp;
    double* ework = C + pp;  // 2 p^2 + p
    const std::unique_ptr<double[]> abuf = item_copy<ADD>(x, u, np);
    double* a = abuf.get();
    blas::gemm(true, false, p, p, n, 1.0, a, p, a, p, 0.0, G, p);
    if (!gram_in_range(G, p)) return polar_rescaled<0, false>(a, nullptr, out, n, p, work);
    if (!(inv_sqrt_gram_blas(G, C, p, ework) > 1e-10))
        return polar_svd<false>(a, nullptr, out, n, p, work);
    blas::gemm(false, false, n, p, p, 1.0, a, p, C, p, 0.0, out, p);  // Q0 = a G^-½
    blas::gemm(true, false, p, p, n, 1.0, out, p, out, p, 0.0, G, p);  // Q0'Q0
    if (off_identity(G, p) <= 1e-13) return;
    // one more Gram step on the nearly orthonormal Q0: out <- Q0 (Q0'Q0)^-½
    if (!(inv_sqrt_gram_blas(G, C, p, ework) > 0.5))
        return polar_svd<false>(a, nullptr, out, n, p, work);
    std::copy(out, out + np, a);
    blas::gemm(false, false, n, p, p, 1.0, a, p, C, p, 0.0, out, p);
}

template <int P, bool ADD>
RFL_INLINE void polar_impl(const double* x, const double* u, double* out, int n, int p_, double* work) {
    const int p = P > 0 ? P : p_;
    if (P == 0 && uses_blas(p)) return polar_blas<ADD>(x, u, out, n, p, work);
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* G = work;
    double* C = G + pp;
    double* H = C + pp;
    double* ework = H + pp;  // 2pp + p + eigh_work(p)
    gram<P, ADD>(x, u, G, n, p);
    if (!gram_in_range(G, p)) return polar_rescaled<P, ADD>(x, u, out, n, p, work);
    if (!(inv_sqrt_gram(G, C, p, ework) > 1e-10)) return polar_svd<ADD>(x, u, out, n, p, work);
    right_mul<P, ADD>(x, u, C, out, H, n, p, ework);
    if (off_identity(H, p) <= 1e-13) return;
    // one more Gram step on the nearly orthonormal Q0 (in place: out <- out (Q0'Q0)^-½)
    if (!(inv_sqrt_gram(H, C, p, ework) > 0.5)) return polar_svd<ADD>(x, u, out, n, p, work);
    right_mul<P, false>(out, nullptr, C, out, nullptr, n, p, ework);
}

// out = a s for a = x (+ u), s = 2^-e (exact) with max|a s| in [1, 2), whose Gram is then in
// range: the rescaled item of polar_rescaled and qr_rescaled (polar and qf are invariant under
// s > 0). False, with out NaN, if a is zero or not finite (x + u overflowing), or if even the
// scaled Gram is out of range (only for n p beyond ~2^290). work: p*p doubles.
template <bool ADD>
inline bool scale_to_unit(const double* x, const double* u, double* out, int n, int p,
                          double* work) {
    const std::size_t np = static_cast<std::size_t>(n) * p;
    double m = 0.0;
    for (std::size_t i = 0; i < np; ++i) {
        out[i] = ADD ? x[i] + u[i] : x[i];
        m = linalg::max_skip_nan(m, std::fabs(out[i]));
    }
    if (!(m > 0.0) || !std::isfinite(m) || !linalg::all_finite(out, np)) {
        linalg::fill_nan(out, np);
        return false;
    }
    const double s = std::ldexp(1.0, -std::max(-1000, std::min(1000, std::ilogb(m))));
    for (std::size_t i = 0; i < np; ++i) out[i] *= s;
    gram<0, false>(out, nullptr, work, n, p);
    if (gram_in_range(work, p)) return true;
    linalg::fill_nan(out, np);
    return false;
}

// polar(a) for an item whose Gram is out of range (or not finite): the item scaled by
// scale_to_unit goes through polar_impl (generic p; a cold path, out of line).
template <int P, bool ADD>
RFL_COLD void polar_rescaled(const double* x, const double* u, double* out, int n, int p,
                             double* work) {
    if (scale_to_unit<ADD>(x, u, out, n, p, work))
        polar_impl<0, false>(out, nullptr, out, n, p, work);  // in place: a row read, then written
}

#if RFL_SIMD_VECTOR_EXT
// ---- p = 5 in groups of L items: their 5 x 5 Gram eigendecompositions run in lockstep
// (linalg::jacobi_lanes, cheaper per item than Householder + QL one item at a time). A lane's result
// does not depend on the other lanes, so an item gets the same answer in any batch.
constexpr int kLanes = 8;

// polar(a_l), a_l = x_l (+ u_l), for the m <= L consecutive items of x, u, out.
template <int L, bool ADD>
RFL_INLINE void polar5_lanes(const double* x, const double* u, double* out, int m, int n,
                             double* work) {
    const std::size_t item = static_cast<std::size_t>(n) * 5;
    alignas(64) double A[25 * L], V[25 * L], C[25 * L], f[5 * L];  // entry k, lane l: [k * L + l]
    bool ok[L];
    for (int l = 0; l < L; ++l) {
        double G[25];
        ok[l] = l < m;
        if (ok[l]) {
            gram5<ADD>(x + l * item, ADD ? u + l * item : nullptr, out + l * item, G, n);
            ok[l] = linalg::all_finite(G, 25) && gram_in_range(G, 5);  // else rescaled
        }
        for (int k = 0; k < 25; ++k) A[k * L + l] = ok[l] ? G[k] : (k % 6 == 0 ? 1.0 : 0.0);
    }
    const bool converged = linalg::jacobi_lanes<L>(A, V, 5);
    for (int l = 0; l < L; ++l) {
        double lmin = INFINITY, lmax = 0.0;
        for (int k = 0; k < 5; ++k) {
            lmin = std::fmin(lmin, A[k * 6 * L + l]);
            lmax = std::fmax(lmax, A[k * 6 * L + l]);
        }
        // Well conditioned (cond(a) < ~3.2, e.g. a tangent step of moderate size: the Gram is
        // I + u'u): the Gram route's orthonormality error, O(n eps cond(a)^2) from the n-term
        // sums of a'a (about sqrt(n) eps cond(a)^2 for random rounding), is within a factor 10
        // of the O(n eps) that polar_impl's second Gram step would leave, so its check and the
        // accumulation of Q0'Q0 are skipped. Every other item (and every item if Jacobi
        // failed) goes through polar_impl.
        ok[l] = ok[l] && converged && lmin / lmax > 0.1;
    }
    // C_l = V_l diag(w_l^-½) V_l' (upper triangle)
    for (int k = 0; k < 5; ++k)
        for (int l = 0; l < L; ++l) f[k * L + l] = 1.0 / std::sqrt(std::fabs(A[k * 6 * L + l]));
    for (int i = 0; i < 5; ++i)
        for (int j = i; j < 5; ++j) {
            double* cij = C + (i * 5 + j) * L;
            for (int l = 0; l < L; ++l) cij[l] = 0.0;
            for (int k = 0; k < 5; ++k) {
                const double* vik = V + (i * 5 + k) * L;
                const double* vjk = V + (j * 5 + k) * L;
                const double* fk = f + k * L;
                for (int l = 0; l < L; ++l) cij[l] += vik[l] * fk[l] * vjk[l];
            }
        }
    for (int l = 0; l < m; ++l) {
        const double* xl = x + l * item;
        const double* ul = ADD ? u + l * item : nullptr;
        double* ol = out + l * item;
        if (!ok[l]) {
            polar_impl<5, ADD>(xl, ul, ol, n, 5, work);
            continue;
        }
        double Cl[25];
        for (int i = 0; i < 5; ++i)
            for (int j = i; j < 5; ++j) Cl[i * 5 + j] = Cl[j * 5 + i] = C[(i * 5 + j) * L + l];
        mul5<0>(ADD ? ol : xl, Cl, nullptr, ol, n);  // a = x + u is in out already
    }
}
#endif

// polar(a_i), a_i = x_i (+ u_i), for the N consecutive n x p items of x, u, out
template <int P, bool ADD>
RFL_INLINE void polar_items(const double* x, const double* u, double* out, std::ptrdiff_t N,
                            int n, int p, double* work) {
    const std::size_t item = static_cast<std::size_t>(n) * p;
    std::ptrdiff_t i = 0;
#if RFL_SIMD_VECTOR_EXT
    if constexpr (P == 5) {
        // every group, the last one padded (even a single item), through one call site: one
        // inlined copy for every item, so an item's answer cannot depend on its batch (a 1-lane
        // instantiation, or a second copy specialised for full groups, may contract
        // multiply-adds differently: each once differed in the last bit)
        for (; i < N; i += kLanes) {
            const int m = static_cast<int>(std::min<std::ptrdiff_t>(kLanes, N - i));
            polar5_lanes<kLanes, ADD>(x + i * item, ADD ? u + i * item : nullptr, out + i * item,
                                      m, n, work);
        }
        return;
    }
#endif
    for (; i < N; ++i)
        polar_impl<P, ADD>(x + i * item, ADD ? u + i * item : nullptr, out + i * item, n, p, work);
}

}  // namespace detail

// polar / retr_polar of N consecutive items (the batch form: p = 5 goes by lanes, see above)
template <int P = 0>
RFL_INLINE void polar(const double* a, double* out, std::ptrdiff_t N, int n, int p, double* work) {
    detail::polar_items<P, false>(a, nullptr, out, N, n, p, work);
}

template <int P = 0>
RFL_INLINE void retr_polar(const double* x, const double* u, double* out, std::ptrdiff_t N, int n,
                           int p, double* work) {
    detail::polar_items<P, true>(x, u, out, N, n, p, work);
}

// M = x'y (full p x p)
template <int P>
RFL_INLINE void cross(const double* x, const double* y, double* M, int n, int p_) {
#if RFL_SIMD_VECTOR_EXT
    if constexpr (P == 5) return detail::cross5(x, y, M, n);
#endif
    const int p = P > 0 ? P : p_;
    if (P == 0 && uses_blas(p)) return blas::gemm(true, false, p, p, n, 1.0, x, p, y, p, 0.0, M, p);
    if constexpr (detail::kRowVectors<P>) return detail::cross_small<P>(x, y, M, n);
    double local[P > 0 ? P * P : 1];
    double* const Mout = M;
    if (P > 0) M = local;
    for (int i = 0; i < p * p; ++i) M[i] = 0.0;
    for (int i = 0; i < n; ++i) {
        const double* xi = x + static_cast<std::size_t>(i) * p;
        const double* yi = y + static_cast<std::size_t>(i) * p;
        for (int r = 0; r < p; ++r) {
            const double xr = xi[r];
            for (int c = 0; c < p; ++c) M[r * p + c] += xr * yi[c];
        }
    }
    if (P > 0)
        for (int i = 0; i < p * p; ++i) Mout[i] = local[i];
}

template <int P = 0>
RFL_INLINE void proj(const double* x, const double* u, double* out, int n, int p_, double* work) {
#if RFL_SIMD_VECTOR_EXT
    if constexpr (P == 5) return detail::proj5(x, u, out, n);
#endif
    const int p = P > 0 ? P : p_;
    double local[P > 0 ? P * P : 1];
    double* A = P > 0 ? local : work;  // x'u (a GEMM on BLAS), then sym
    cross<P>(x, u, A, n, p);
    linalg::symmetrize(A, p);
    if (P == 0 && uses_blas(p)) {  // out = u - x A by a second GEMM
        std::copy(u, u + static_cast<std::size_t>(n) * p, out);
        return blas::gemm(false, false, n, p, p, -1.0, x, p, A, p, 1.0, out, p);
    }
    if constexpr (detail::kRowVectors<P>)
        return detail::mul_small<P, false>(x, nullptr, A, -1.0, 1.0, u, out, n);
    for (int i = 0; i < n; ++i) {
        const double* xi = x + static_cast<std::size_t>(i) * p;
        const double* ui = u + static_cast<std::size_t>(i) * p;
        double* oi = out + static_cast<std::size_t>(i) * p;
        double o[P > 0 ? P : 1];
        if (P > 0) {
            for (int c = 0; c < p; ++c) o[c] = ui[c];
            for (int r = 0; r < p; ++r) {
                const double xr = xi[r];
                for (int c = 0; c < p; ++c) o[c] -= xr * A[r * p + c];
            }
            for (int c = 0; c < p; ++c) oi[c] = o[c];
        } else {
            for (int c = 0; c < p; ++c) {
                double acc = ui[c];
                for (int r = 0; r < p; ++r) acc -= xi[r] * A[r * p + c];
                oi[c] = acc;
            }
        }
    }
}

// out = y S - x
template <int P>
RFL_INLINE void y_times_minus_x(const double* x, const double* y, const double* S, double* out, int n,
                            int p_) {
#if RFL_SIMD_VECTOR_EXT
    if constexpr (P == 5) return detail::mul5<-1>(y, S, x, out, n);
#endif
    const int p = P > 0 ? P : p_;
    if (P == 0 && uses_blas(p)) {
        std::copy(x, x + static_cast<std::size_t>(n) * p, out);
        return blas::gemm(false, false, n, p, p, 1.0, y, p, S, p, -1.0, out, p);
    }
    if constexpr (detail::kRowVectors<P>)
        return detail::mul_small<P, false>(y, nullptr, S, 1.0, -1.0, x, out, n);
    double Sl[P > 0 ? P * P : 1];
    if (P > 0) {
        for (int i = 0; i < p * p; ++i) Sl[i] = S[i];
        S = Sl;
    }
    for (int i = 0; i < n; ++i) {
        const double* xi = x + static_cast<std::size_t>(i) * p;
        const double* yi = y + static_cast<std::size_t>(i) * p;
        double* oi = out + static_cast<std::size_t>(i) * p;
        double o[P > 0 ? P : 1];
        if (P > 0) {
            for (int c = 0; c < p; ++c) o[c] = -xi[c];
            for (int r = 0; r < p; ++r) {
                const double yr = yi[r];
                for (int c = 0; c < p; ++c) o[c] += yr * S[r * p + c];
            }
            for (int c = 0; c < p; ++c) oi[c] = o[c];
        } else {
            for (int c = 0; c < p; ++c) {
                double acc = -xi[c];
                for (int r = 0; r < p; ++r) acc += yi[r] * S[r * p + c];
                oi[c] = acc;
            }
        }
    }
}

// Solve M S + S M' = 2I for symmetric S (p x p, written full into S). False if singular.
// Unknowns s_ab, a <= b, indexed by idx(a, b); equation (i, j), i <= j:
//   sum_k M_ik S_kj + S_ik M_jk = 2 delta_ij.
// work: q*q + q doubles, q = p(p+1)/2.
inline bool lyapunov_sym(const double* M, double* S, int p, double* work) {
    const int q = p * (p + 1) / 2;
    double* A = work;
    double* b = work + static_cast<std::size_t>(q) * q;
    auto idx = [p](int a, int c) {
        if (a > c) std::swap(a, c);
        return a * p - a * (a - 1) / 2 + (c - a);  // row-major upper triangle
    };
    for (std::size_t i = 0; i < static_cast<std::size_t>(q) * q; ++i) A[i] = 0.0;
    for (int i = 0; i < p; ++i) {
        for (int j = i; j < p; ++j) {
            const int e = idx(i, j);
            double* row = A + static_cast<std::size_t>(e) * q;
            for (int k = 0; k < p; ++k) {
                row[idx(k, j)] += M[i * p + k];
                row[idx(i, k)] += M[j * p + k];
            }
            b[e] = i == j ? 2.0 : 0.0;
        }
    }
    if (p == 1) {
        if (!(std::fabs(A[0]) > 1e-12 * std::fmax(1.0, std::fabs(M[0])))) return false;
        S[0] = b[0] / A[0];
        return std::isfinite(S[0]);
    }
    // near-singular operator (eigenvalues of M summing to ~0, the reference's 1e-12 relative
    // test): pivots below 1e-12 max(1, max|M|) count as zero
    double mmax = 1.0;
    for (int i = 0; i < p * p; ++i) mmax = std::fmax(mmax, std::fabs(M[i]));
    if (!linalg::lu_solve(A, b, q, 1e-12 * mmax)) return false;
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) S[i * p + j] = b[idx(i, j)];
    return true;
}

// Inverse of B (p x p, row-major) by Gauss-Jordan elimination with partial pivoting into Inv;
// lu: p*p scratch. log|det B| in *logdet. False if a pivot is zero or not finite.
inline bool invert(const double* B, double* Inv, double* lu, int p, double* logdet) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    std::copy(B, B + pp, lu);
    std::fill(Inv, Inv + pp, 0.0);
    for (int i = 0; i < p; ++i) Inv[i * p + i] = 1.0;
    double ld = 0.0;
    for (int k = 0; k < p; ++k) {
        int piv = k;
        double best = std::fabs(lu[k * p + k]);
        for (int i = k + 1; i < p; ++i)
            if (std::fabs(lu[i * p + k]) > best) best = std::fabs(lu[(piv = i) * p + k]);
        if (!(best > 0.0) || !std::isfinite(best)) return false;
        if (piv != k)
            for (int j = 0; j < p; ++j) {
                std::swap(lu[k * p + j], lu[piv * p + j]);
                std::swap(Inv[k * p + j], Inv[piv * p + j]);
            }
        ld += std::log(best);
        const double inv = 1.0 / lu[k * p + k];
        for (int j = 0; j < p; ++j) {
            lu[k * p + j] *= inv;
            Inv[k * p + j] *= inv;
        }
        for (int i = 0; i < p; ++i) {
            const double l = lu[i * p + k];
            if (i == k || l == 0.0) continue;
            for (int j = 0; j < p; ++j) lu[i * p + j] -= l * lu[k * p + j];
            for (int j = 0; j < p; ++j) Inv[i * p + j] -= l * Inv[k * p + j];
        }
    }
    *logdet = ld;
    return linalg::all_finite(Inv, pp);
}

// Solve M S + S M' = 2I for symmetric S by the scaled Newton iteration of the sign function
// (Roberts; Benner's determinantal scaling): B_0 = M, Q_0 = 2I,
//   B <- (B/c + c B^-1)/2,  Q <- (Q/c + c B^-1 Q B^-T)/2,  c = |det B|^(1/p),
// B -> sign(M) = I when M is positive stable, and then S = Q/2. False when B does not reach I
// (M not positive stable, or no convergence), or when |S| cannot rule out a nearly singular
// equation (below). work: 5 p^2 doubles. The p x p products are
// the caller's: invert(B, Bi, lu, &logdet) writes Bi = B^-1 (lu: p^2 scratch), false when B
// is singular; sandwich(Bi, Q, T, S) writes at least the upper triangle of S = Bi Q Bi'
// (T: p^2 scratch).
template <class Invert, class Sandwich>
inline bool lyapunov_sign(const double* M, double* S, int p, double* work, Invert invert,
                          Sandwich sandwich) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* B = work;
    double* Bi = B + pp;
    double* Q = Bi + pp;
    double* T = Q + pp;
    double* lu = T + pp;
    std::copy(M, M + pp, B);
    std::fill(Q, Q + pp, 0.0);
    for (int i = 0; i < p; ++i) Q[i * p + i] = 2.0;
    bool close = false;
    for (int it = 0; it < 100; ++it) {
        double logdet;
        if (!invert(B, Bi, lu, &logdet)) return false;
        const double c = close ? 1.0 : std::exp(logdet / p);
        if (!(c > 0.0) || !std::isfinite(c)) return false;
        sandwich(Bi, Q, T, S);
        double change = 0.0, size = 0.0;
        for (int i = 0; i < p; ++i)
            for (int j = 0; j < p; ++j) {
                const double nb = 0.5 * (B[i * p + j] / c + c * Bi[i * p + j]);
                change = linalg::max_skip_nan(change, std::fabs(nb - B[i * p + j]));
                size = linalg::max_skip_nan(size, std::fabs(nb));
                B[i * p + j] = nb;
                if (j >= i) {
                    const double nq = 0.5 * (Q[i * p + j] / c + c * S[i * p + j]);
                    Q[i * p + j] = Q[j * p + i] = nq;
                }
            }
        if (!(size < 1e300)) return false;
        if (close && change <= 1e-14 * size) break;  // quadratic convergence: done
        close = change <= 1e-3 * size;                 // unscaled steps from here on
    }
    double off = 0.0;  // B must be the identity: sign(M) = I
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j)
            off = linalg::max_skip_nan(off, std::fabs(B[i * p + j] - (i == j)));
    if (!(off <= 1e-8)) return false;
    // Refuse where the reference does: it answers only if |l_i + l_j| > 1e-12 max(1, max |l|)
    // for all eigenvalues l of M. For the positive stable M here, v*(M S + S M')v = 2|v|^2 at
    // an eigenvector v of M' gives Re l >= 1 / |S|_2, so |S|_F max(1, |M|_F) < 2e12 proves
    // that test passes (M near a singular equation would otherwise give |S| ~ 1e15 silently).
    double s2 = 0.0, m2 = 0.0;
    for (std::size_t i = 0; i < pp; ++i) {
        S[i] = 0.5 * Q[i];
        s2 += S[i] * S[i];
        m2 += M[i] * M[i];
    }
    return std::sqrt(s2) * std::fmax(1.0, std::sqrt(m2)) < 2e12;  // false for NaN / inf
}

// lyapunov_sign with the kernels' own loops: Gauss-Jordan inverse, row-wise products.
inline bool lyapunov_sign(const double* M, double* S, int p, double* work) {
    auto sandwich = [p](const double* Bi, const double* Q, double* T, double* S) {
        for (int i = 0; i < p; ++i) {  // T = Bi Q
            double* ti = T + i * p;
            std::fill(ti, ti + p, 0.0);
            for (int k = 0; k < p; ++k) {
                const double b = Bi[i * p + k];
                const double* qk = Q + k * p;
                for (int j = 0; j < p; ++j) ti[j] += b * qk[j];
            }
        }
        for (int i = 0; i < p; ++i)  // upper triangle of T Bi'
            for (int j = i; j < p; ++j) {
                double acc = 0.0;
                const double* ti = T + i * p;
                const double* bj = Bi + j * p;
                for (int k = 0; k < p; ++k) acc += ti[k] * bj[k];
                S[i * p + j] = acc;
            }
    };
    auto inv = [p](const double* B, double* Bi, double* lu, double* logdet) {
        return invert(B, Bi, lu, p, logdet);
    };
    return lyapunov_sign(M, S, p, work, inv, sandwich);
}

// lyapunov_sign on BLAS / LAPACK (uses_blas(p)): LU inverses, GEMM products.
inline bool lyapunov_sign_blas(const double* M, double* S, int p, double* work) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    std::unique_ptr<int[]> ipiv(new int[p]);
    auto inv = [&](const double* B, double* Bi, double* lu, double* logdet) {
        std::copy(B, B + pp, lu);
        return blas::inverse(lu, Bi, ipiv.get(), p, logdet);
    };
    auto sandwich = [p](const double* Bi, const double* Q, double* T, double* S) {
        blas::gemm(false, false, p, p, p, 1.0, Bi, p, Q, p, 0.0, T, p);
        blas::gemm(false, true, p, p, p, 1.0, T, p, Bi, p, 0.0, S, p);
    };
    return lyapunov_sign(M, S, p, work, inv, sandwich);
}

// Whether the symmetric S (p x p) is positive definite by the test of every backend
// (reference.polar_spd): the Cholesky pivots (Schur complements, no pivoting) of sym(S) all
// exceed 1e-12 times its largest diagonal entry, every entry finite. a: p*p scratch.
inline bool polar_spd(const double* S, double* a, int p) {
    double dmax = 0.0;
    for (int i = 0; i < p; ++i) {
        for (int j = 0; j < p; ++j) {
            const double v = 0.5 * (S[i * p + j] + S[j * p + i]);
            if (!std::isfinite(v)) return false;
            a[i * p + j] = v;
        }
        dmax = std::fmax(dmax, a[i * p + i]);
    }
    const double tol = 1e-12 * dmax;
    for (int k = 0; k < p; ++k) {
        const double d = a[k * p + k];
        if (!(d > tol)) return false;
        for (int i = k + 1; i < p; ++i) {
            const double f = a[i * p + k];
            for (int j = k + 1; j < p; ++j) a[i * p + j] -= f * a[k * p + j] / d;
        }
    }
    return true;
}

template <int P = 0>
RFL_INLINE void inv_retr_polar(const double* x, const double* y, double* out, int n, int p_,
                           double* work) {
    const int p = P > 0 ? P : p_;
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* M = work;
    double* S = M + pp;
    double* lw = S + pp;
    cross<P>(x, y, M, n, p);
    bool ok = linalg::all_finite(M, pp);
    if (ok) {
        if (p <= kKronFirst)
            ok = lyapunov_sym(M, S, p, lw);
        else if (P == 0 && uses_blas(p))  // x'y not positive stable: Bartels-Stewart, any p
            ok = lyapunov_sign_blas(M, S, p, lw) || blas::lyapunov(M, S, p);
        else
            ok = lyapunov_sign(M, S, p, lw) || (p <= kKronMax && lyapunov_sym(M, S, p, lw));
    }
    // S must be positive definite: polar(x + u) = polar(y S) = y polar(S) is y only then, so
    // elsewhere no tangent vector retracts to y (the reference's polar_spd, same test)
    if (ok) ok = polar_spd(S, lw, p);
    if (!ok) return linalg::fill_nan(out, static_cast<std::size_t>(n) * p);
    y_times_minus_x<P>(x, y, S, out, n, p);
}

namespace detail {

// R (upper) with R'R = G from the lower-triangle G; false if not positive definite.
inline bool chol_upper(const double* G, double* R, int p) {
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) R[i * p + j] = j <= i ? G[i * p + j] : 0.0;
    if (!linalg::cholesky(R, p)) return false;  // R now holds L (lower), G = L L'
    for (int i = 0; i < p; ++i)
        for (int j = i + 1; j < p; ++j) {
            R[i * p + j] = R[j * p + i];
            R[j * p + i] = 0.0;
        }
    return true;
}

// CholeskyQR's first factor: R (upper) with R'R = G from the lower-triangle Gram G = a'a. False
// (the item goes to Householder QR) if G is not finite or not positive definite, or if R's
// diagonal spans more than a factor 1e6 (a too ill-conditioned for the Gram route).
RFL_INLINE bool chol_well_conditioned(const double* G, double* R, int p) {
    if (!linalg::all_finite(G, static_cast<std::size_t>(p) * p) || !chol_upper(G, R, p))
        return false;
    double dmin = INFINITY, dmax = 0.0;
    for (int k = 0; k < p; ++k) {
        dmin = std::fmin(dmin, R[k * p + k]);
        dmax = std::fmax(dmax, R[k * p + k]);
    }
    return dmin > 1e-6 * dmax;
}

// Householder QR fallback: Q with positive diag(R), like numpy + the sign fix of the reference.
template <bool ADD>
inline void qr_householder(const double* x, const double* u, double* out, int n, int p,
                           double* work) {
    const std::size_t np = static_cast<std::size_t>(n) * p;
    double* A = work;        // column-major n x p, Householder vectors below the diagonal
    double* beta = A + np;   // p
    double* rdiag = beta + p;
    double* col = rdiag + p; // n
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < p; ++j)
            A[static_cast<std::size_t>(j) * n + i] =
                ADD ? x[static_cast<std::size_t>(i) * p + j] + u[static_cast<std::size_t>(i) * p + j]
                    : x[static_cast<std::size_t>(i) * p + j];
    if (!linalg::all_finite(A, np)) return linalg::fill_nan(out, np);
    for (int k = 0; k < p; ++k) {
        double* ak = A + static_cast<std::size_t>(k) * n;
        double norm = 0.0;
        for (int i = k; i < n; ++i) norm += ak[i] * ak[i];
        norm = std::sqrt(norm);
        const double alpha = ak[k] > 0 ? -norm : norm;  // R_kk = alpha
        rdiag[k] = alpha;
        if (norm == 0.0) {
            beta[k] = 0.0;
            continue;
        }
        ak[k] -= alpha;  // v = a - alpha e_k, H = I - beta v v'
        double vv = 0.0;
        for (int i = k; i < n; ++i) vv += ak[i] * ak[i];
        beta[k] = vv > 0 ? 2.0 / vv : 0.0;
        for (int j = k + 1; j < p; ++j) {
            double* aj = A + static_cast<std::size_t>(j) * n;
            double t = 0.0;
            for (int i = k; i < n; ++i) t += ak[i] * aj[i];
            t *= beta[k];
            for (int i = k; i < n; ++i) aj[i] -= t * ak[i];
        }
    }
    // Q = H_0 ... H_{p-1} [I; 0], column j scaled by sign(R_jj) (0 -> +1)
    for (int j = 0; j < p; ++j) {
        for (int i = 0; i < n; ++i) col[i] = i == j ? 1.0 : 0.0;
        for (int k = std::min(j, p - 1); k >= 0; --k) {
            const double* ak = A + static_cast<std::size_t>(k) * n;
            double t = 0.0;
            for (int i = k; i < n; ++i) t += ak[i] * col[i];
            t *= beta[k];
            for (int i = k; i < n; ++i) col[i] -= t * ak[i];
        }
        const double sg = rdiag[j] < 0 ? -1.0 : 1.0;
        for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i) * p + j] = sg * col[i];
    }
}

template <bool ADD>
void qr_rescaled(const double* x, const double* u, double* out, int n, int p, double* work);

// Ri = R^-1 for upper-triangular R (p x p, row-major, nonzero diagonal): back substitution
// column by column.
inline void upper_inverse(const double* R, double* Ri, int p) {
    std::fill(Ri, Ri + static_cast<std::size_t>(p) * p, 0.0);
    for (int j = 0; j < p; ++j) {
        Ri[j * p + j] = 1.0 / R[j * p + j];
        for (int i = j - 1; i >= 0; --i) {
            double acc = 0.0;
            for (int k = i + 1; k <= j; ++k) acc += R[i * p + k] * Ri[k * p + j];
            Ri[i * p + j] = -acc / R[i * p + i];
        }
    }
}

// qr_impl on BLAS (uses_blas(p)): the same CholeskyQR2 and fallbacks, with GEMM for a'a,
// Q0'Q0 and a R^-1. a = x (+ u) is copied first, so out may alias x. work: as qr_impl.
template <bool ADD>
void qr_blas(const double* x, const double* u, double* out, int n, int p, double* work) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    const std::size_t np = static_cast<std::size_t>(n) * p;
    double* G = work;
    double* R = G + pp;
    double* Ri = R + pp;
    const std::unique_ptr<double[]> abuf = item_copy<ADD>(x, u, np);
    double* a = abuf.get();
    blas::gemm(true, false, p, p, n, 1.0, a, p, a, p, 0.0, G, p);
    if (!gram_in_range(G, p)) return qr_rescaled<false>(a, nullptr, out, n, p, work);
    if (!chol_well_conditioned(G, R, p)) return qr_householder<false>(a, nullptr, out, n, p, work);
    upper_inverse(R, Ri, p);
    blas::gemm(false, false, n, p, p, 1.0, a, p, Ri, p, 0.0, out, p);  // Q0 = a R^-1
    blas::gemm(true, false, p, p, n, 1.0, out, p, out, p, 0.0, G, p);  // Q0'Q0
    const double off = off_identity(G, p);
    if (off <= 1e-13) return;
    if (!(off < 0.5) || !chol_upper(G, R, p))
        return qr_householder<false>(a, nullptr, out, n, p, work);
    upper_inverse(R, Ri, p);
    std::copy(out, out + np, a);
    blas::gemm(false, false, n, p, p, 1.0, a, p, Ri, p, 0.0, out, p);
}

template <int P, bool ADD>
RFL_INLINE void qr_impl(const double* x, const double* u, double* out, int n, int p_, double* work) {
    const int p = P > 0 ? P : p_;
    if (P == 0 && uses_blas(p)) return qr_blas<ADD>(x, u, out, n, p, work);
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* G = work;
    double* R = G + pp;
    double* H = R + pp;
    gram<P, ADD>(x, u, G, n, p);
    if (!gram_in_range(G, p)) return qr_rescaled<ADD>(x, u, out, n, p, work);
    if (!chol_well_conditioned(G, R, p)) return qr_householder<ADD>(x, u, out, n, p, work);
    double* Ri = H + pp;
    double* rowbuf = Ri + pp;
    upper_inverse(R, Ri, p);
    right_mul<P, ADD>(x, u, Ri, out, H, n, p, rowbuf);  // Q0 = a R^-1, H = Q0'Q0
    const double off = off_identity(H, p);
    if (off <= 1e-13) return;
    if (!(off < 0.5) || !chol_upper(H, R, p)) return qr_householder<ADD>(x, u, out, n, p, work);
    upper_inverse(R, Ri, p);
    right_mul<P, false>(out, nullptr, Ri, out, nullptr, n, p, rowbuf);
}

// qf(a) for an item whose Gram is out of range (or not finite), as polar_rescaled.
template <bool ADD>
RFL_COLD void qr_rescaled(const double* x, const double* u, double* out, int n, int p,
                          double* work) {
    if (scale_to_unit<ADD>(x, u, out, n, p, work))
        qr_impl<0, false>(out, nullptr, out, n, p, work);  // in place: a row read, then written
}

}  // namespace detail

template <int P = 0>
RFL_INLINE void retr_qr(const double* x, const double* u, double* out, int n, int p, double* work) {
    detail::qr_impl<P, true>(x, u, out, n, p, work);
}

// R upper triangular with (x'y) R + R'(y'x) = 2I, out = y R - x.
template <int P = 0>
RFL_INLINE void inv_retr_qr(const double* x, const double* y, double* out, int n, int p_,
                        double* work) {
    const int p = P > 0 ? P : p_;
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    double* M = work;
    double* LU = M + pp;
    double* R = LU + pp;
    double* A = R + pp;
    double* b = A + pp;
    cross<P>(x, y, M, n, p);
    if (!linalg::all_finite(M, pp)) return linalg::fill_nan(out, static_cast<std::size_t>(n) * p);
    // LU of M without pivoting (Doolittle): M = L U, L unit lower (strict part stored)
    for (std::size_t i = 0; i < pp; ++i) LU[i] = M[i];
    double mmax = 0.0;
    for (std::size_t i = 0; i < pp; ++i) mmax = std::fmax(mmax, std::fabs(M[i]));
    bool stable = mmax > 0.0;
    for (int k = 0; k < p && stable; ++k) {
        const double piv = LU[k * p + k];
        if (!(std::fabs(piv) > 1e-3 * mmax)) {
            stable = false;
            break;
        }
        for (int i = k + 1; i < p; ++i) {
            const double l = LU[i * p + k] / piv;
            LU[i * p + k] = l;
            for (int j = k + 1; j < p; ++j) LU[i * p + j] -= l * LU[k * p + j];
        }
    }
    for (std::size_t i = 0; i < pp; ++i) R[i] = 0.0;
    // Each entry of M = x'y (unit columns of length n) is within gamma of its exact value. The
    // solve r = M_j^-1 b of a leading block with |r| (j+1) gamma >= |b| proves
    // sigma_min(M_j) <= (j+1) gamma, the 2-norm of that rounding: M_j is singular within the
    // data and the inverse has no answer (NaN; the reference's test, the same in every backend).
    const double gamma = n * kEps / (1.0 - n * kEps);
    bool vanishing = false;
    for (int j = 0; j < p; ++j) {
        // b_i = -(M R)_{j,i} for i < j, b_j = 1; solve M[:j+1,:j+1] r = b
        for (int i = 0; i < j; ++i) {
            double acc = 0.0;
            for (int l = 0; l <= i; ++l) acc += M[j * p + l] * R[l * p + i];
            b[i] = -acc;
        }
        b[j] = 1.0;
        double bb = 0.0;
        for (int i = 0; i <= j; ++i) bb += b[i] * b[i];
        if (stable) {
            for (int i = 0; i <= j; ++i) {  // forward: L z = b
                double acc = b[i];
                for (int l = 0; l < i; ++l) acc -= LU[i * p + l] * b[l];
                b[i] = acc;
            }
            for (int i = j; i >= 0; --i) {  // back: U r = z
                double acc = b[i];
                for (int l = i + 1; l <= j; ++l) acc -= LU[i * p + l] * b[l];
                b[i] = acc / LU[i * p + i];
            }
        } else {
            const int m = j + 1;
            for (int r = 0; r < m; ++r)
                for (int c = 0; c < m; ++c) A[r * m + c] = M[r * p + c];
            if (!linalg::lu_solve(A, b, m))
                return linalg::fill_nan(out, static_cast<std::size_t>(n) * p);
        }
        double rn = 0.0;
        for (int i = 0; i <= j; ++i) {
            R[i * p + j] = b[i];
            rn += b[i] * b[i];
        }
        vanishing |= !(std::sqrt(rn) * ((j + 1) * gamma) < std::sqrt(bb));
    }
    if (vanishing || !linalg::all_finite(R, pp))
        return linalg::fill_nan(out, static_cast<std::size_t>(n) * p);
    y_times_minus_x<P>(x, y, R, out, n, p);
}

}  // namespace stiefel
}  // namespace rfl
