// Symmetric matrix functions and the affine-invariant SPD kernels (one n x n item per call).
//
//   sym_expm / sym_logm / sym_sqrtm / sym_invsqrtm  f(S) = V f(diag w) V' from one symmetric
//       eigendecomposition of S (lower triangle read, as numpy.linalg.eigh); the log and the
//       square roots give an all-NaN item when an eigenvalue is <= 0.
//   spd_exp(x, u) = x^½ expm(x^-½ u x^-½) x^½,  spd_log(x, y) = x^½ logm(x^-½ y x^-½) x^½,
//   spd_dist(x, y) = |logm(x^-½ y x^-½)|_F
//       all computed through the Cholesky factor x = L L' instead of x^½: with
//       M = L^-1 sym(u) L^-T (similar to x^-½ u x^-½ by the orthogonal Q = L^-1 x^½),
//       x^½ f(x^-½ u x^-½) x^½ = L f(M) L', and the eigenvalues of M are those of
//       x^-½ y x^-½. One Cholesky + one eigendecomposition instead of two eigendecompositions.
//       x not positive definite (Cholesky fails) -> NaN item; spd_log/spd_dist also give NaN
//       when x^-½ y x^-½ has an eigenvalue <= 0.
//   sym_fun_lanes  the same matrix functions for a whole batch of small matrices, through the
//       lockstep Jacobi eigensolver over kLanes items at once (the binding uses it for n <= 12
//       when AVX2 is available, where it is faster per item than Householder + QL).
//   sym_fun_ql_lanes  the same through Householder + QL in lockstep over 4 items (the binding
//       uses it for n > 12 when AVX2 is available, where it is faster than one item at a time).
//   Every eigensolver here (linalg::eigh, the lockstep ones, LAPACK's) works on its matrix
//   scaled to max |entry| in [1, 2) by a power of two (linalg::unit_exponent), so a matrix
//   near 1e200 or 1e-200 gets the answer of the same matrix at scale 1, scaled.
//   For n >= 128 (spd_exp, spd_log) or 256 (sym_fun, spd_dist), when the application set
//   BLAS / LAPACK (blas.hpp), the kernels decompose by LAPACK dsyevd and form V f V' and L V
//   by GEMM; the Cholesky factor and the triangular solves stay the kernels' own.
//
// Scratch: sym_work(n) / spd_work(n) / sym_lanes_work(n) / sym_ql_lanes_work(n) doubles.
#pragma once

#include <cmath>
#include <cstddef>

#include "blas.hpp"
#include "linalg_small.hpp"

namespace rfl {
namespace spd {

using linalg::kNaN;

// Smallest n for which the kernels decompose on BLAS / LAPACK (blas.hpp) when the application
// set them: later for sym_fun and spd_dist, whose O(n^3) work is all eigensolver, where the own
// lockstep solvers over the loop's threads hold up longer (the measurements are in the commit
// that set them; the sweep `rfl-fast bench --sweep --only spd_log` times both sides).
constexpr int kBlasMinExpLog = 128;  // spd_exp, spd_log
constexpr int kBlasMinEig = 256;     // sym_fun (sym_expm, sym_logm, ...), spd_dist

// Whether an item of size n runs on BLAS / LAPACK from size `from` on. At these n BLAS
// threads every call (n^3 >= blas::kThreadsFrom), so a batch loop over such items runs in the
// calling thread.
inline bool uses_blas(int n, int from) { return n >= from && blas::available(); }

namespace detail {

// The eigenvalues w (ascending) of the symmetric s (lower triangle read) by LAPACK dsyevd,
// and with `vectors` Vt (n x n, rows: eigenvectors), else scratch. False when s is not finite
// or LAPACK fails.
inline bool eigh_blas(const double* s, double* w, double* Vt, int n, bool vectors) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) Vt[i * n + j] = Vt[j * n + i] = s[i * n + j];
    if (!linalg::all_finite(Vt, nn) || !blas::eigh(Vt, w, n, vectors)) return false;
    return linalg::all_finite(w, static_cast<std::size_t>(n));
}

// out = Zt' diag(f) Zt (n x n, symmetric) by GEMM. T: n*n scratch.
inline void sym_from_eig_blas(const double* Zt, const double* f, double* out, int n, double* T) {
    for (int k = 0; k < n; ++k)
        for (int j = 0; j < n; ++j) T[k * n + j] = f[k] * Zt[k * n + j];
    blas::gemm(true, false, n, n, n, 1.0, Zt, n, T, n, 0.0, out, n);
    linalg::symmetrize(out, n);
}

}  // namespace detail

inline std::size_t sym_work(int n) {
    return 2 * static_cast<std::size_t>(n) * n + linalg::eigh_work(n) + n;
}

// f(s) for a symmetric s; f maps an eigenvalue to a value (NaN for "no answer").
template <class F>
inline void sym_fun(const double* s, double* out, int n, F f, double* work) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    double* Vt = work;
    double* scratch = Vt + nn;
    double* w = scratch + nn;
    double* ework = w + n;
    const bool on_blas = uses_blas(n, kBlasMinEig);
    if (!(on_blas ? detail::eigh_blas(s, w, Vt, n, true) : linalg::eigh(s, w, Vt, n, ework)))
        return linalg::fill_nan(out, nn);
    for (int k = 0; k < n; ++k) {
        w[k] = f(w[k]);
        if (std::isnan(w[k])) return linalg::fill_nan(out, nn);
    }
    if (on_blas) return detail::sym_from_eig_blas(Vt, w, out, n, scratch);
    linalg::sym_from_eig(Vt, w, out, n, scratch);
}

inline double f_exp(double w) { return std::exp(w); }
inline double f_log(double w) { return w > 0.0 ? std::log(w) : kNaN; }
inline double f_sqrt(double w) { return w > 0.0 ? std::sqrt(w) : kNaN; }
inline double f_invsqrt(double w) { return w > 0.0 ? 1.0 / std::sqrt(w) : kNaN; }

// out_i = f(s_i) for the m items from item g on, one at a time (the lockstep solvers'
// fallback). work: sym_work(n) doubles.
template <class F>
inline void sym_fun_items(const double* s, double* out, std::ptrdiff_t g, int m, int n, F f,
                          double* work) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (int l = 0; l < m; ++l) {
        const std::size_t at = static_cast<std::size_t>(g + l) * nn;
        sym_fun(s + at, out + at, n, f, work);
    }
}

inline void sym_expm(const double* s, double* out, int n, double* work) {
    sym_fun(s, out, n, f_exp, work);
}
inline void sym_logm(const double* s, double* out, int n, double* work) {
    sym_fun(s, out, n, f_log, work);
}
inline void sym_sqrtm(const double* s, double* out, int n, double* work) {
    sym_fun(s, out, n, f_sqrt, work);
}
inline void sym_invsqrtm(const double* s, double* out, int n, double* work) {
    sym_fun(s, out, n, f_invsqrt, work);
}

// ---- batched f(S) for small n: lockstep Jacobi over kLanes matrices (linalg::jacobi_lanes)

constexpr int kLanes = 8;

inline std::size_t sym_lanes_work(int n) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    return 3 * nn * kLanes + static_cast<std::size_t>(n) * kLanes + sym_work(n);
}

// out_i = f(s_i) for N symmetric n x n items (same results as sym_fun item by item, to
// rounding). work: sym_lanes_work(n) doubles, 64-byte aligned preferably.
template <class F>
RFL_INLINE void sym_fun_lanes(const double* s, double* out, std::ptrdiff_t N, int n, F f,
                          double* work) {
    constexpr int L = kLanes;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    double* A = work;
    double* V = A + nn * L;
    double* W = V + nn * L;
    double* fw = W + nn * L;
    double* single = fw + static_cast<std::size_t>(n) * L;  // sym_work(n) for the fallback
    for (std::ptrdiff_t g = 0; g < N; g += L) {
        const int m = static_cast<int>(N - g < L ? N - g : L);  // items in this group
        bool bad[L];
        double up[L];  // each lane scaled to max |s| in [1, 2) (linalg::unit_exponent)
        for (int l = 0; l < L; ++l) {
            bad[l] = l >= m;
            const double* si = s + static_cast<std::size_t>(g + l) * nn;
            double amax = 0.0;
            if (!bad[l]) {
                double acc = 0.0;
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j <= i; ++j) {
                        acc += si[i * n + j] * 0.0;
                        amax = linalg::max_skip_nan(amax, std::fabs(si[i * n + j]));
                    }
                bad[l] = !(acc == 0.0);
            }
            const int k = linalg::unit_exponent(amax);
            const double down = std::ldexp(1.0, -k);
            up[l] = std::ldexp(1.0, k);
            for (int i = 0; i < n; ++i)
                for (int j = 0; j <= i; ++j) {
                    const double v = bad[l] ? 0.0 : si[i * n + j] * down;
                    A[(static_cast<std::size_t>(i) * n + j) * L + l] = v;
                    A[(static_cast<std::size_t>(j) * n + i) * L + l] = v;
                }
        }
        if (!linalg::jacobi_lanes<L>(A, V, n)) {  // fallback: one item at a time
            sym_fun_items(s, out, g, m, n, f, single);
            continue;
        }
        for (int k = 0; k < n; ++k)
            for (int l = 0; l < L; ++l) {
                const double v = f(A[(static_cast<std::size_t>(k) * n + k) * L + l] * up[l]);
                fw[k * L + l] = v;
                if (std::isnan(v)) bad[l] = true;
            }
        // W = V diag(fw); O (in A) = W V', upper triangle then mirrored
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < n; ++k) {
                const double* vik = V + (static_cast<std::size_t>(i) * n + k) * L;
                double* wik = W + (static_cast<std::size_t>(i) * n + k) * L;
                for (int l = 0; l < L; ++l) wik[l] = vik[l] * fw[k * L + l];
            }
        for (int i = 0; i < n; ++i)
            for (int j = i; j < n; ++j) {
                alignas(64) double acc[L];
                for (int l = 0; l < L; ++l) acc[l] = 0.0;
                for (int k = 0; k < n; ++k) {
                    const double* wik = W + (static_cast<std::size_t>(i) * n + k) * L;
                    const double* vjk = V + (static_cast<std::size_t>(j) * n + k) * L;
                    for (int l = 0; l < L; ++l) acc[l] += wik[l] * vjk[l];
                }
                double* oij = A + (static_cast<std::size_t>(i) * n + j) * L;
                for (int l = 0; l < L; ++l) oij[l] = acc[l];
            }
        for (int l = 0; l < m; ++l) {
            double* oi = out + static_cast<std::size_t>(g + l) * nn;
            if (bad[l]) {
                linalg::fill_nan(oi, nn);
                continue;
            }
            for (int i = 0; i < n; ++i)
                for (int j = i; j < n; ++j)
                    oi[i * n + j] = oi[j * n + i] = A[(static_cast<std::size_t>(i) * n + j) * L + l];
        }
    }
}

// ---- batched f(S) for larger n: Householder + QL in lockstep over 4 matrices

#if RFL_SIMD_VECTOR_EXT
inline std::size_t sym_ql_lanes_work(int n) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    return (2 * nn + 4 * static_cast<std::size_t>(n)) * linalg::kQlLanes + sym_work(n);
}

// out_i = f(s_i) for N symmetric n x n items through linalg::tred2_lanes + tql2_lanes (same
// results as sym_fun item by item, to rounding). work: sym_ql_lanes_work(n) doubles.
template <class F>
RFL_INLINE void sym_fun_ql_lanes(const double* s, double* out, std::ptrdiff_t N, int n, F f,
                                 double* work) {
    using simd::v4d;
    constexpr int L = linalg::kQlLanes;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    v4d* V = reinterpret_cast<v4d*>(work);  // the matrices, then their eigenvectors
    v4d* W = V + nn;                           // V diag(f(w))
    v4d* d = W + nn;
    v4d* e = d + n;
    v4d* cs = e + n;  // 2n
    double* single = reinterpret_cast<double*>(cs + 2 * n);  // sym_work(n) for the fallback
    for (std::ptrdiff_t g = 0; g < N; g += L) {
        const int m = static_cast<int>(N - g < L ? N - g : L);  // items in this group
        bool bad[L];
        v4d poison = {0.0, 0.0, 0.0, 0.0};  // NaN/inf in a lane's lower triangle poisons it
        v4d amax = {0.0, 0.0, 0.0, 0.0};
        for (int i = 0; i < n; ++i)
            for (int j = 0; j <= i; ++j) {
                v4d v;
                for (int l = 0; l < L; ++l)
                    v[l] = l < m ? s[(static_cast<std::size_t>(g + l) * n + i) * n + j] : 0.0;
                V[i * n + j] = v;
                poison += v * 0.0;
                const v4d a = simd::abs(v);
                amax = a > amax ? a : amax;
            }
        v4d down, up;  // each lane scaled to max |s| in [1, 2) (linalg::unit_exponent)
        for (int l = 0; l < L; ++l) {  // lanes past the batch or not finite: zero matrices
            bad[l] = l >= m || !(poison[l] == 0.0);
            const int k = bad[l] ? 0 : linalg::unit_exponent(amax[l]);
            down[l] = std::ldexp(1.0, -k);
            up[l] = std::ldexp(1.0, k);
            for (int i = 0; i < n; ++i)
                for (int j = 0; j <= i; ++j)
                    V[i * n + j][l] = bad[l] ? 0.0 : V[i * n + j][l] * down[l];
        }
        linalg::tred2_lanes(V, d, e, n, cs);
        if (!linalg::tql2_lanes(d, e, V, n, cs)) {  // fallback: one item at a time
            sym_fun_items(s, out, g, m, n, f, single);
            continue;
        }
        for (int k = 0; k < n; ++k)
            for (int l = 0; l < L; ++l) {
                d[k][l] = f(d[k][l] * up[l]);
                if (std::isnan(d[k][l])) bad[l] = true;
            }
        for (int i = 0; i < n; ++i)
            for (int k = 0; k < n; ++k) W[i * n + k] = V[i * n + k] * d[k];
        // out_ij = sum_k W_ik V_jk for j >= i, four columns j at a time (the last block
        // repeats column n-1), mirrored
        for (int i = 0; i < n; ++i)
            for (int j0 = i; j0 < n; j0 += 4) {
                const v4d* v[4];
                for (int b = 0; b < 4; ++b) v[b] = V + std::min(j0 + b, n - 1) * n;
                v4d acc[4] = {};
                for (int k = 0; k < n; ++k) {
                    const v4d wik = W[i * n + k];
                    for (int b = 0; b < 4; ++b) acc[b] += wik * v[b][k];
                }
                for (int l = 0; l < m; ++l) {
                    double* ol = out + static_cast<std::size_t>(g + l) * nn;
                    for (int b = 0; b < 4 && j0 + b < n; ++b)
                        ol[i * n + j0 + b] = ol[(j0 + b) * n + i] = acc[b][l];
                }
            }
        for (int l = 0; l < m; ++l)
            if (bad[l]) linalg::fill_nan(out + static_cast<std::size_t>(g + l) * nn, nn);
    }
}
#endif

inline std::size_t spd_work(int n) {
    return 4 * static_cast<std::size_t>(n) * n + linalg::eigh_work(n) + n;
}

namespace detail {

// L <- chol(x) (lower), M <- L^-1 sym(b) L^-T symmetrised. scratch: n*n. False if x is not
// positive definite or an input is not finite.
inline bool congruence(const double* x, const double* b, double* L, double* M, int n,
                       double* scratch) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (std::size_t i = 0; i < nn; ++i) L[i] = x[i];
    if (!linalg::all_finite(L, nn) || !linalg::cholesky(L, n)) return false;
    // scratch <- L^-1 sym(b), row by row (forward substitution on rows)
    for (int i = 0; i < n; ++i) {
        double* ri = scratch + static_cast<std::size_t>(i) * n;
        for (int j = 0; j < n; ++j) ri[j] = 0.5 * (b[i * n + j] + b[j * n + i]);
        const double* li = L + static_cast<std::size_t>(i) * n;
        for (int k = 0; k < i; ++k) {
            const double lik = li[k];
            const double* rk = scratch + static_cast<std::size_t>(k) * n;
            for (int j = 0; j < n; ++j) ri[j] -= lik * rk[j];
        }
        const double inv = 1.0 / li[i];
        for (int j = 0; j < n; ++j) ri[j] *= inv;
    }
    // M = (L^-1 sym(b)) L^-T = L^-1 (L^-1 sym(b))'  (M symmetric): transpose, solve again
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) M[i * n + j] = scratch[j * n + i];
    for (int i = 0; i < n; ++i) {
        double* mi = M + static_cast<std::size_t>(i) * n;
        const double* li = L + static_cast<std::size_t>(i) * n;
        for (int k = 0; k < i; ++k) {
            const double lik = li[k];
            const double* mk = M + static_cast<std::size_t>(k) * n;
            for (int j = 0; j < n; ++j) mi[j] -= lik * mk[j];
        }
        const double inv = 1.0 / li[i];
        for (int j = 0; j < n; ++j) mi[j] *= inv;
    }
    linalg::symmetrize(M, n);
    return linalg::all_finite(M, nn);
}

// out = L f(M) L' with M = Wt' diag(w) Wt: Zt = Wt L' (rows k: (L W)_{:,k}), out = Zt' f Zt.
template <class F>
inline void spd_fun(const double* x, const double* b, double* out, int n, F f, double* work) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    double* L = work;
    double* M = L + nn;
    double* Wt = M + nn;
    double* scratch = Wt + nn;
    double* w = scratch + nn;
    double* ework = w + n;
    const bool on_blas = uses_blas(n, kBlasMinExpLog);
    if (!congruence(x, b, L, M, n, scratch) ||
        !(on_blas ? eigh_blas(M, w, Wt, n, true) : linalg::eigh(M, w, Wt, n, ework)))
        return linalg::fill_nan(out, nn);
    for (int k = 0; k < n; ++k) {
        w[k] = f(w[k]);
        if (std::isnan(w[k])) return linalg::fill_nan(out, nn);
    }
    if (on_blas) {  // Zt = Wt L' (L's upper triangle zeroed), out = Zt' f Zt
        for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) L[i * n + j] = 0.0;
        blas::gemm(false, true, n, n, n, 1.0, Wt, n, L, n, 0.0, M, n);
        return sym_from_eig_blas(M, w, out, n, scratch);
    }
    // Zt[k][i] = sum_{l <= i} Wt[k][l] L[i][l]   (stored in M)
    double* Zt = M;
    for (int k = 0; k < n; ++k) {
        const double* wk = Wt + static_cast<std::size_t>(k) * n;
        double* zk = Zt + static_cast<std::size_t>(k) * n;
        for (int i = 0; i < n; ++i) {
            const double* li = L + static_cast<std::size_t>(i) * n;
            double acc = 0.0;
            for (int l = 0; l <= i; ++l) acc += wk[l] * li[l];
            zk[i] = acc;
        }
    }
    linalg::sym_from_eig(Zt, w, out, n, scratch);
}

}  // namespace detail

inline void spd_exp(const double* x, const double* u, double* out, int n, double* work) {
    detail::spd_fun(x, u, out, n, f_exp, work);
}

inline void spd_log(const double* x, const double* y, double* out, int n, double* work) {
    detail::spd_fun(x, y, out, n, f_log, work);
}

inline double spd_dist(const double* x, const double* y, int n, double* work) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    double* L = work;
    double* M = L + nn;
    double* scratch = M + nn;
    double* w = scratch + nn;
    double* ework = w + n;
    const bool on_blas = uses_blas(n, kBlasMinEig);
    if (!detail::congruence(x, y, L, M, n, scratch) ||
        !(on_blas ? detail::eigh_blas(M, w, scratch, n, false)
                  : linalg::eigh(M, w, nullptr, n, ework)))
        return kNaN;
    double acc = 0.0;
    for (int k = 0; k < n; ++k) {
        if (!(w[k] > 0.0)) return kNaN;
        const double l = std::log(w[k]);
        acc += l * l;
    }
    return std::sqrt(acc);
}

}  // namespace spd
}  // namespace rfl
