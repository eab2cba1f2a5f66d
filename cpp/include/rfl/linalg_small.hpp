// Small dense linear algebra for the rfl_fast kernels: header-only C++17, no dependencies.
//
// Everything works on raw row-major float64 buffers of one small matrix (n up to a few dozen)
// and takes its scratch memory from the caller, so a batched loop allocates nothing per item
// and concurrent calls from several threads never share state.
//
// Contents
//   eigh        symmetric eigendecomposition: Householder tridiagonalisation + implicit QL
//               (the EISPACK tred2/tql2 pair as in JAMA), eigenvectors returned as ROWS
//   cholesky    in-place lower Cholesky factor
//   lu_solve    Gaussian elimination with partial pivoting (one right-hand side)
//   svd_jacobi  one-sided (Hestenes) Jacobi SVD of a column-major n x p matrix
//   jacobi_lanes  cyclic Jacobi eigensolver run in lockstep on L matrices stored as structure
//               of arrays (batched kernels: vectorizes across the batch)
//   tred2_lanes, tql2_lanes  the Householder + QL pair in lockstep on 4 matrices (same layout,
//               GNU vector extensions: RFL_SIMD_VECTOR_EXT, see simd.hpp)
//
// Conventions: "lower" means only the lower triangle (i >= j) of an input is read, as LAPACK's
// UPLO='L' (numpy.linalg.eigh's default). Functions return false when they cannot produce an
// answer (non-finite input, no convergence, not positive definite, singular); callers turn
// that into NaN items.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "simd.hpp"  // RFL_INLINE, RFL_COLD, RFL_IVDEP, simd::v4d

namespace rfl {
namespace linalg {

constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline bool all_finite(const double* a, std::size_t len) {
    double acc = 0.0;
    for (std::size_t i = 0; i < len; ++i) acc += a[i] * 0.0;  // NaN/inf poison the sum
    return acc == 0.0;
}

// max(m, v) for a running maximum m that is not NaN: a NaN v leaves m as it is, as std::fmax
// does. Written as a comparison because GCC 12 for aarch64 stops with an internal compiler
// error (vect_transform_reduction, tree-vect-loop.cc:7457) when it vectorizes std::fmax
// reductions at -O3 (Stiefel's off_identity, lyapunov_sign, scale_to_unit); the comparison
// vectorizes as a max on x86-64 and aarch64 alike.
RFL_INLINE double max_skip_nan(double m, double v) { return v > m ? v : m; }

// Scale invariance of the eigensolvers: they work on 2^-k a with k = unit_exponent(max |a|),
// so that max |2^-k a| is in [1, 2), and return the eigenvalues times 2^k. Powers of two scale
// exactly, and every step of the solvers is homogeneous in a, so for a whose squares neither
// overflow nor underflow the answer is the same bits as without the scaling; for a near 1e200
// or 1e-200 (where squares and the solvers' absolute thresholds leave the range) it is then
// the same answer scaled, as LAPACK's. k is clamped to [-1000, 1000] (2^-k a normal double);
// 0 for a zero matrix.
inline int unit_exponent(double amax) {
    return amax > 0.0 ? std::max(-1000, std::min(1000, std::ilogb(amax))) : 0;
}

inline void fill_nan(double* a, std::size_t len) { std::fill(a, a + len, kNaN); }

// sqrt(a^2 + b^2) without the slow path of std::hypot unless squaring over/underflows.
inline double hypot2(double a, double b) {
    const double s = a * a + b * b;
    if (s > 1e-290 && s < 1e290) return std::sqrt(s);
    return std::hypot(a, b);
}

// ------------------------------------------------------------------ symmetric eigenproblem

// Householder reduction of the symmetric matrix in V (lower triangle read, n x n row-major) to
// tridiagonal form: diagonal in d, subdiagonal in e[1..n-1] (e[0] = 0). With `vectors`, V is
// overwritten by the orthogonal transformation (columns), otherwise its content is destroyed.
inline void tred2(double* V, double* d, double* e, int n, bool vectors) {
    auto at = [V, n](int i, int j) -> double& { return V[static_cast<std::size_t>(i) * n + j]; };
    for (int j = 0; j < n; ++j) d[j] = at(n - 1, j);
    for (int i = n - 1; i > 0; --i) {
        double scale = 0.0, h = 0.0;
        for (int k = 0; k < i; ++k) scale += std::fabs(d[k]);
        if (scale == 0.0) {
            e[i] = d[i - 1];
            for (int j = 0; j < i; ++j) {
                d[j] = at(i - 1, j);
                at(i, j) = 0.0;
                at(j, i) = 0.0;
            }
        } else {
            for (int k = 0; k < i; ++k) {
                d[k] /= scale;
                h += d[k] * d[k];
            }
            double f = d[i - 1];
            double g = std::sqrt(h);
            if (f > 0) g = -g;
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            for (int j = 0; j < i; ++j) e[j] = 0.0;
            for (int j = 0; j < i; ++j) {
                f = d[j];
                at(j, i) = f;
                g = e[j] + at(j, j) * f;
                for (int k = j + 1; k <= i - 1; ++k) {
                    g += at(k, j) * d[k];
                    e[k] += at(k, j) * f;
                }
                e[j] = g;
            }
            f = 0.0;
            for (int j = 0; j < i; ++j) {
                e[j] /= h;
                f += e[j] * d[j];
            }
            const double hh = f / (h + h);
            for (int j = 0; j < i; ++j) e[j] -= hh * d[j];
            for (int j = 0; j < i; ++j) {
                f = d[j];
                g = e[j];
                for (int k = j; k <= i - 1; ++k) at(k, j) -= (f * e[k] + g * d[k]);
                d[j] = at(i - 1, j);
                at(i, j) = 0.0;
            }
        }
        d[i] = h;
    }
    if (!vectors) {
        for (int i = 0; i < n; ++i) d[i] = at(i, i);
        e[0] = 0.0;
        return;
    }
    for (int i = 0; i < n - 1; ++i) {
        at(n - 1, i) = at(i, i);
        at(i, i) = 1.0;
        const double h = d[i + 1];
        if (h != 0.0) {
            for (int k = 0; k <= i; ++k) d[k] = at(k, i + 1) / h;
            for (int j = 0; j <= i; ++j) {
                double g = 0.0;
                for (int k = 0; k <= i; ++k) g += at(k, i + 1) * at(k, j);
                for (int k = 0; k <= i; ++k) at(k, j) -= g * d[k];
            }
        }
        for (int k = 0; k <= i; ++k) at(k, i + 1) = 0.0;
    }
    for (int j = 0; j < n; ++j) {
        d[j] = at(n - 1, j);
        at(n - 1, j) = 0.0;
    }
    at(n - 1, n - 1) = 1.0;
    e[0] = 0.0;
}

// Implicit QL on the tridiagonal (d, e) from tred2. With Vt non-null it holds the
// transformation TRANSPOSED (rows) and receives the eigenvectors as rows. Returns false if an
// eigenvalue needs more than 60 iterations (not seen for finite input).
inline bool tql2(double* d, double* e, double* Vt, int n) {
    for (int i = 1; i < n; ++i) e[i - 1] = e[i];
    e[n - 1] = 0.0;
    double f = 0.0, tst1 = 0.0;
    for (int l = 0; l < n; ++l) {
        tst1 = std::max(tst1, std::fabs(d[l]) + std::fabs(e[l]));
        int m = l;
        while (m < n - 1) {
            if (std::fabs(e[m]) <= kEps * tst1) break;
            ++m;
        }
        if (m > l) {
            int iter = 0;
            do {
                if (++iter > 60) return false;
                double g = d[l];
                double p = (d[l + 1] - g) / (2.0 * e[l]);
                double r = hypot2(p, 1.0);
                if (p < 0) r = -r;
                d[l] = e[l] / (p + r);
                d[l + 1] = e[l] * (p + r);
                const double dl1 = d[l + 1];
                double h = g - d[l];
                for (int i = l + 2; i < n; ++i) d[i] -= h;
                f += h;
                p = d[m];
                double c = 1.0, c2 = 1.0, c3 = 1.0, s = 0.0, s2 = 0.0;
                const double el1 = e[l + 1];
                for (int i = m - 1; i >= l; --i) {
                    c3 = c2;
                    c2 = c;
                    s2 = s;
                    g = c * e[i];
                    h = c * p;
                    r = hypot2(p, e[i]);
                    e[i + 1] = s * r;
                    s = e[i] / r;
                    c = p / r;
                    p = c * d[i] - s * g;
                    d[i + 1] = h + s * (c * g + s * d[i]);
                    if (Vt) {
                        double* vi = Vt + static_cast<std::size_t>(i) * n;
                        double* vj = vi + n;
                        for (int k = 0; k < n; ++k) {
                            const double t = vj[k];
                            vj[k] = s * vi[k] + c * t;
                            vi[k] = c * vi[k] - s * t;
                        }
                    }
                }
                p = -s * s2 * c3 * el1 * e[l] / dl1;
                e[l] = s * p;
                d[l] = c * p;
            } while (std::fabs(e[l]) > kEps * tst1);
        }
        d[l] += f;
        e[l] = 0.0;
    }
    return true;
}

// Scratch doubles needed by eigh for an n x n matrix.
inline std::size_t eigh_work(int n) { return static_cast<std::size_t>(n) * n + n; }

// Eigendecomposition of the symmetric matrix a (lower triangle read, n x n row-major):
// a = Vt' diag(w) Vt, eigenvectors as the ROWS of Vt (n x n), eigenvalues unsorted; at every
// scale of a (unit_exponent).
// Pass Vt = nullptr for eigenvalues only. work: eigh_work(n) doubles. a may alias Vt.
inline bool eigh(const double* a, double* w, double* Vt, int n, double* work) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    double* V = work;           // n*n
    double* e = work + nn;      // n
    for (int i = 0; i < n; ++i)  // copy lower triangle, mirror (tred2 reads the lower part)
        for (int j = 0; j <= i; ++j) V[i * n + j] = V[j * n + i] = a[i * n + j];
    if (!all_finite(V, nn)) return false;
    double amax = 0.0;  // scaled to max |a| in [1, 2) (see unit_exponent)
    for (std::size_t i = 0; i < nn; ++i) amax = max_skip_nan(amax, std::fabs(V[i]));
    const int k = unit_exponent(amax);
    const double down = std::ldexp(1.0, -k), up = std::ldexp(1.0, k);
    for (std::size_t i = 0; i < nn; ++i) V[i] *= down;
    const bool vectors = Vt != nullptr;
    tred2(V, w, e, n, vectors);
    if (vectors)
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) Vt[i * n + j] = V[j * n + i];
    if (!tql2(w, e, Vt, n)) return false;
    for (int i = 0; i < n; ++i) w[i] *= up;
    return true;
}

// A <- (A + A')/2 in place (n x n row-major): a symmetric matrix whose two triangles were
// computed apart (and differ by rounding).
inline void symmetrize(double* A, int n) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j) {
            const std::size_t ij = static_cast<std::size_t>(i) * n + j;
            const std::size_t ji = static_cast<std::size_t>(j) * n + i;
            A[ij] = A[ji] = 0.5 * (A[ij] + A[ji]);
        }
}

// out = Vt' diag(f) Vt (n x n, symmetric by construction: the upper triangle is mirrored).
// scratch: n*n doubles.
inline void sym_from_eig(const double* Vt, const double* f, double* out, int n, double* scratch) {
    for (int k = 0; k < n; ++k)
        for (int j = 0; j < n; ++j) scratch[k * n + j] = f[k] * Vt[k * n + j];
    for (int i = 0; i < n; ++i) {
        double* oi = out + static_cast<std::size_t>(i) * n;
        for (int j = i; j < n; ++j) oi[j] = 0.0;
        for (int k = 0; k < n; ++k) {
            const double vki = Vt[k * n + i];
            const double* sk = scratch + static_cast<std::size_t>(k) * n;
            for (int j = i; j < n; ++j) oi[j] += vki * sk[j];
        }
    }
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j) out[i * n + j] = out[j * n + i];
}

// ------------------------------------------------------------------ lockstep Jacobi (batches)

// Plane rotation of L lanes: (p, q) <- (c p - s q, s p + c q) element-wise (restrict: the
// vectorizer needs to know the rows do not overlap).
template <int L>
RFL_INLINE void rotate_lanes(const double* __restrict c, const double* __restrict s,
                         double* __restrict p, double* __restrict q) {
    for (int l = 0; l < L; ++l) {
        const double xp = p[l], xq = q[l];
        p[l] = c[l] * xp - s[l] * xq;
        q[l] = s[l] * xp + c[l] * xq;
    }
}

// Cyclic Jacobi on L symmetric n x n matrices at once ("lanes"), structure of arrays: entry
// (i, j) of matrix l is A[(i * n + j) * L + l]; only the upper triangle (i <= j) is read and
// updated. Every rotation updates contiguous L-vectors, so the lane loops vectorize. V (same layout)
// receives the eigenvectors as COLUMNS: matrix_l = V_l diag(w_l) V_l' with w_l the diagonal of
// A_l on return. A rotation (p, q) is applied in a lane only while |a_pq| > eps sqrt|a_pp a_qq|
// (the threshold of Demmel & Veselic, which keeps small eigenvalues to high relative accuracy);
// the sweeps stop when no lane rotated. Returns false if some lane still rotated after
// max_sweeps (not seen for finite input; the caller then falls back to eigh per item).
template <int L>
RFL_INLINE bool jacobi_lanes(double* A, double* V, int n, int max_sweeps = 40) {
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    for (std::size_t k = 0; k < nn * L; ++k) V[k] = 0.0;
    for (int i = 0; i < n; ++i)
        for (int l = 0; l < L; ++l) V[(static_cast<std::size_t>(i) * n + i) * L + l] = 1.0;
    auto at = [A, n](int i, int j) { return A + (static_cast<std::size_t>(i) * n + j) * L; };
    auto vt = [V, n](int i, int j) { return V + (static_cast<std::size_t>(i) * n + j) * L; };
    for (int sweep = 0; sweep < max_sweeps; ++sweep) {
        double rotated = 0.0;
        for (int p = 0; p < n - 1; ++p) {
            for (int q = p + 1; q < n; ++q) {
                double* apq = at(p, q);
                double* app = at(p, p);
                double* aqq = at(q, q);
                alignas(64) double c[L], s[L];
                double any = 0.0;
                RFL_IVDEP
                for (int l = 0; l < L; ++l) {
                    const double x = apq[l], dp = app[l], dq = aqq[l];
                    const bool rot = std::fabs(x) > kEps * std::sqrt(std::fabs(dp * dq));
                    const double theta = (dq - dp) / (rot ? 2.0 * x : 1.0);
                    const double at_ = std::fabs(theta);
                    double t = at_ > 1e150 ? 0.5 / at_ : 1.0 / (at_ + std::sqrt(theta * theta + 1.0));
                    t = theta < 0.0 ? -t : t;
                    t = rot ? t : 0.0;
                    const double cc = 1.0 / std::sqrt(t * t + 1.0);
                    c[l] = cc;
                    s[l] = t * cc;
                    app[l] = dp - t * x;
                    aqq[l] = dq + t * x;
                    apq[l] = rot ? 0.0 : x;
                    any += rot ? 1.0 : 0.0;
                }
                if (any == 0.0) continue;
                rotated += any;
                // only the upper triangle is kept current (the lower one is never read)
                for (int r = 0; r < p; ++r) rotate_lanes<L>(c, s, at(r, p), at(r, q));
                for (int r = p + 1; r < q; ++r) rotate_lanes<L>(c, s, at(p, r), at(r, q));
                for (int r = q + 1; r < n; ++r) rotate_lanes<L>(c, s, at(p, r), at(q, r));
                for (int r = 0; r < n; ++r) {
                    double* vp = vt(r, p);
                    double* vq = vt(r, q);
                    rotate_lanes<L>(c, s, vp, vq);
                }
            }
        }
        if (rotated == 0.0) return true;
    }
    return false;
}

// ------------------------------------------------------------------ lockstep Householder + QL

#if RFL_SIMD_VECTOR_EXT
// Four lanes: one simd::v4d (one AVX2 register, two SSE2 registers in the baseline clone).
using simd::m4;
using simd::v4d;
constexpr int kQlLanes = 4;

// tred2 on 4 symmetric n x n matrices in lockstep: A[i * n + j][l] is entry (i, j) of matrix l
// (lower triangle read), d and e n lanes each. tred2's branch for an all-zero row is replaced
// by safe divisors (1 instead of 0), which give exactly what the branch gives. On return A
// holds the orthogonal transformations (columns), d the diagonal, e[1..n-1] the subdiagonal.
// ug: n lanes of scratch.
RFL_INLINE void tred2_lanes(v4d* A, v4d* d, v4d* e, int n, v4d* ug) {
    auto at = [A, n](int i, int j) -> v4d& { return A[static_cast<std::size_t>(i) * n + j]; };
    const v4d zero = {0.0, 0.0, 0.0, 0.0}, one = {1.0, 1.0, 1.0, 1.0};
    for (int j = 0; j < n; ++j) d[j] = at(n - 1, j);
    for (int i = n - 1; i > 0; --i) {
        v4d scale = zero, h = zero;
        for (int k = 0; k < i; ++k) scale += simd::abs(d[k]);
        const v4d inv_scale = one / (scale == 0.0 ? one : scale);
        for (int k = 0; k < i; ++k) {
            d[k] *= inv_scale;
            h += d[k] * d[k];
        }
        v4d f = d[i - 1];
        v4d g = simd::sqrt(h);
        g = f > 0.0 ? -g : g;
        e[i] = scale * g;
        h -= f * g;
        d[i - 1] = f - g;
        const v4d inv_h = one / (h == 0.0 ? one : h);
        for (int j = 0; j < i; ++j) e[j] = zero;
        for (int j = 0; j < i; ++j) {  // e = A u (u in d), the Householder vector stored in A
            f = d[j];
            at(j, i) = f;
            g = e[j] + at(j, j) * f;
            for (int k = j + 1; k <= i - 1; ++k) {
                g += at(k, j) * d[k];
                e[k] += at(k, j) * f;
            }
            e[j] = g;
        }
        f = zero;
        for (int j = 0; j < i; ++j) {
            e[j] *= inv_h;
            f += e[j] * d[j];
        }
        const v4d hh = f * (0.5 * inv_h);
        for (int j = 0; j < i; ++j) e[j] -= hh * d[j];
        for (int j = 0; j < i; ++j) {  // rank-2 update of the leading block
            f = d[j];
            g = e[j];
            for (int k = j; k <= i - 1; ++k) at(k, j) -= f * e[k] + g * d[k];
            d[j] = at(i - 1, j);
            at(i, j) = zero;
        }
        d[i] = h;
    }
    for (int i = 0; i < n - 1; ++i) {  // accumulate the transformations
        at(n - 1, i) = at(i, i);
        at(i, i) = one;
        const v4d h = d[i + 1];
        const v4d inv_h = one / (h == 0.0 ? one : h);
        // A[0..i][0..i] -= (u / h) (u' A[0..i][0..i]), u = A[0..i][i+1], by rows
        for (int j = 0; j <= i; ++j) ug[j] = zero;
        for (int k = 0; k <= i; ++k) {
            const v4d uk = at(k, i + 1);
            d[k] = uk * inv_h;
            for (int j = 0; j <= i; ++j) ug[j] += uk * at(k, j);
        }
        for (int k = 0; k <= i; ++k)
            for (int j = 0; j <= i; ++j) at(k, j) -= d[k] * ug[j];
        for (int k = 0; k <= i; ++k) at(k, i + 1) = zero;
    }
    for (int j = 0; j < n; ++j) {
        d[j] = at(n - 1, j);
        at(n - 1, j) = zero;
    }
    at(n - 1, n - 1) = one;
    e[0] = zero;
}

// The rotations of one QL chain applied to R consecutive rows of V (lanes, row length n):
// columns (i, i+1) <- (c x - s y, s x + c y) for i = last-1 down to first, the moving column
// kept in registers (R independent rows hide the latency of the chain).
template <int R>
RFL_INLINE void ql_rotate_rows(v4d* V, int n, int first, int last, const v4d* c,
                               const v4d* s) {
    v4d y[R];
    for (int r = 0; r < R; ++r) y[r] = V[static_cast<std::size_t>(r) * n + last];
    for (int i = last - 1; i >= first; --i)
        for (int r = 0; r < R; ++r) {
            v4d* vr = V + static_cast<std::size_t>(r) * n;
            const v4d x = vr[i];
            vr[i + 1] = s[i] * x + c[i] * y[r];
            y[r] = c[i] * x - s[i] * y[r];
        }
    for (int r = 0; r < R; ++r) V[static_cast<std::size_t>(r) * n + first] = y[r];
}

// tql2 on 4 tridiagonals (d, e from tred2_lanes) in lockstep, V (lanes, n x n) receiving the
// eigenvectors as COLUMNS. Every lane runs tql2's own sequence of implicit QL steps (its own
// l, m, shift and convergence test); a round does one step in every unfinished lane: the
// rotation chain runs over the union of the lanes' ranges [l, m) and is the identity (c = 1,
// s = 0) outside a lane's range. The rotations of a round are then applied to the columns of
// V, four rows at a time (ql_rotate_rows). cs: 2n lanes. False if a lane needs
// more than 60 steps for one eigenvalue or a hypot leaves the range where it needs no
// scaling (|x| ~ 1e-145 or 1e145; the caller then falls back to eigh per matrix).
RFL_INLINE bool tql2_lanes(v4d* d, v4d* e, v4d* V, int n, v4d* cs) {
    constexpr int L = kQlLanes;
    const v4d zero = {0.0, 0.0, 0.0, 0.0}, one = {1.0, 1.0, 1.0, 1.0};
    for (int i = 1; i < n; ++i) e[i - 1] = e[i];
    e[n - 1] = zero;
    int lo[L], hi[L], iter[L];  // per lane: current l, its m, steps for this l
    double shift[L], tst1[L];
    // lane k: take the eigenvalues that need no step, stop at the next l with m > l
    auto seek = [&](int k) {
        for (; lo[k] < n; ++lo[k]) {
            const int l = lo[k];
            tst1[k] = std::max(tst1[k], std::fabs(d[l][k]) + std::fabs(e[l][k]));
            int m = l;
            while (m < n - 1 && !(std::fabs(e[m][k]) <= kEps * tst1[k])) ++m;
            if (m > l) {
                hi[k] = m;
                iter[k] = 0;
                return;
            }
            d[l][k] += shift[k];
            e[l][k] = 0.0;
        }
    };
    for (int k = 0; k < L; ++k) {
        lo[k] = 0;
        shift[k] = tst1[k] = 0.0;
        seek(k);
    }
    v4d* c_of = cs;      // rotation (c, s) at chain index i
    v4d* s_of = cs + n;
    for (;;) {
        int first = n, last = 0;  // union of the ranges
        m4 lv, mv;
        v4d h = zero, el1 = zero, dl1 = one, p = zero;
        for (int k = 0; k < L; ++k) {
            lv[k] = lo[k];
            mv[k] = lo[k] < n ? hi[k] : 0;
            if (lo[k] == n) continue;
            if (++iter[k] > 60) return false;
            const int l = lo[k];
            first = std::min(first, l);
            last = std::max(last, hi[k]);
            const double g = d[l][k];  // Wilkinson-type shift from the leading 2x2
            const double q = (d[l + 1][k] - g) / (2.0 * e[l][k]);
            const double r = q < 0 ? -hypot2(q, 1.0) : hypot2(q, 1.0);
            d[l][k] = e[l][k] / (q + r);
            d[l + 1][k] = e[l][k] * (q + r);
            dl1[k] = d[l + 1][k];
            el1[k] = e[l + 1][k];
            h[k] = g - d[l][k];
            shift[k] += h[k];
        }
        if (first == n) return true;
        for (int i = first + 2; i < n; ++i) {
            const m4 iv = {i, i, i, i};
            d[i] -= iv >= lv + 2 ? h : zero;
        }
        for (int k = 0; k < L; ++k) p[k] = lo[k] < n ? d[hi[k]][k] : 0.0;
        v4d c = one, c2 = one, c3 = one, s = zero, s2 = zero;
        m4 bad = {0, 0, 0, 0};
        for (int i = last - 1; i >= first; --i) {
            const m4 iv = {i, i, i, i};
            const m4 act = (iv >= lv) & (iv < mv);
            const v4d ei = e[i], di = d[i];
            const v4d g = c * ei, hp = c * p;
            const v4d rr = p * p + ei * ei;
            bad |= act & ~((rr > 1e-290) & (rr < 1e290));
            const v4d r = simd::sqrt(rr);
            e[i + 1] = act ? s * r : e[i + 1];
            const v4d sn = ei / r, cn = p / r;
            d[i + 1] = act ? hp + sn * (cn * g + sn * di) : d[i + 1];
            c3 = act ? c2 : c3;
            c2 = act ? c : c2;
            s2 = act ? s : s2;
            p = act ? cn * di - sn * g : p;
            c = act ? cn : c;
            s = act ? sn : s;
            c_of[i] = act ? cn : one;
            s_of[i] = act ? sn : zero;
        }
        if (bad[0] | bad[1] | bad[2] | bad[3]) return false;
        for (int k = 0; k < L; ++k) {
            const int l = lo[k];
            if (l == n) continue;
            const double q = -s[k] * s2[k] * c3[k] * el1[k] * e[l][k] / dl1[k];
            e[l][k] = s[k] * q;
            d[l][k] = c[k] * q;
            if (std::fabs(e[l][k]) <= kEps * tst1[k]) {  // d[l] converged
                d[l][k] += shift[k];
                e[l][k] = 0.0;
                ++lo[k];
                seek(k);
            }
        }
        int r = 0;
        for (; r + 4 <= n; r += 4)
            ql_rotate_rows<4>(V + static_cast<std::size_t>(r) * n, n, first, last, c_of, s_of);
        for (; r < n; ++r)
            ql_rotate_rows<1>(V + static_cast<std::size_t>(r) * n, n, first, last, c_of, s_of);
    }
}

#endif  // RFL_SIMD_VECTOR_EXT

// ------------------------------------------------------------------ factorizations, solves

// In-place lower Cholesky factor of the SPD matrix a (lower triangle read); the strict upper
// triangle is zeroed. False if a pivot is not positive (or not finite).
inline bool cholesky(double* a, int n) {
    for (int j = 0; j < n; ++j) {
        double* aj = a + static_cast<std::size_t>(j) * n;
        double s = aj[j];
        for (int k = 0; k < j; ++k) s -= aj[k] * aj[k];
        if (!(s > 0.0) || !std::isfinite(s)) return false;
        const double ljj = std::sqrt(s);
        aj[j] = ljj;
        const double inv = 1.0 / ljj;
        for (int i = j + 1; i < n; ++i) {
            double* ai = a + static_cast<std::size_t>(i) * n;
            double t = ai[j];
            for (int k = 0; k < j; ++k) t -= ai[k] * aj[k];
            ai[j] = t * inv;
        }
        for (int k = j + 1; k < n; ++k) aj[k] = 0.0;
    }
    return true;
}

// Solve A x = b in place (b <- x) by Gaussian elimination with partial pivoting; A (n x n,
// row-major) is destroyed. False if a pivot is <= tol in magnitude (exactly zero by default)
// or the result is not finite.
inline bool lu_solve(double* A, double* b, int n, double tol = 0.0) {
    for (int k = 0; k < n; ++k) {
        int piv = k;
        double best = std::fabs(A[k * n + k]);
        for (int i = k + 1; i < n; ++i) {
            const double v = std::fabs(A[i * n + k]);
            if (v > best) {
                best = v;
                piv = i;
            }
        }
        if (!(best > tol)) return false;
        if (piv != k) {
            for (int j = k; j < n; ++j) std::swap(A[k * n + j], A[piv * n + j]);
            std::swap(b[k], b[piv]);
        }
        const double inv = 1.0 / A[k * n + k];
        for (int i = k + 1; i < n; ++i) {
            const double l = A[i * n + k] * inv;
            if (l == 0.0) continue;
            for (int j = k + 1; j < n; ++j) A[i * n + j] -= l * A[k * n + j];
            b[i] -= l * b[k];
        }
    }
    for (int i = n - 1; i >= 0; --i) {
        double s = b[i];
        for (int j = i + 1; j < n; ++j) s -= A[i * n + j] * b[j];
        b[i] = s / A[i * n + i];
    }
    return all_finite(b, static_cast<std::size_t>(n));
}

// One-sided Jacobi SVD of the COLUMN-major n x p matrix A (column j at A + j*n), n >= p:
// on return the columns of A are U_j * s_j (mutually orthogonal), s holds the singular values
// (unsorted) and Vt (p x p, row-major) the right singular vectors as rows: A_in = sum_j
// (U_j s_j) (Vt row j)'. False without convergence in 60 sweeps or for non-finite input.
inline bool svd_jacobi(double* A, double* s, double* Vt, int n, int p) {
    const std::size_t np = static_cast<std::size_t>(n) * p;
    if (!all_finite(A, np)) return false;
    std::fill(Vt, Vt + static_cast<std::size_t>(p) * p, 0.0);
    for (int j = 0; j < p; ++j) Vt[j * p + j] = 1.0;
    bool converged = p < 2;
    for (int sweep = 0; sweep < 60 && !converged; ++sweep) {
        converged = true;
        for (int j = 0; j < p - 1; ++j) {
            for (int k = j + 1; k < p; ++k) {
                double* aj = A + static_cast<std::size_t>(j) * n;
                double* ak = A + static_cast<std::size_t>(k) * n;
                double alpha = 0.0, beta = 0.0, gamma = 0.0;
                for (int i = 0; i < n; ++i) {
                    alpha += aj[i] * aj[i];
                    beta += ak[i] * ak[i];
                    gamma += aj[i] * ak[i];
                }
                if (gamma == 0.0 || std::fabs(gamma) <= kEps * std::sqrt(alpha * beta)) continue;
                converged = false;
                const double zeta = (beta - alpha) / (2.0 * gamma);
                double t = 1.0 / (std::fabs(zeta) + std::sqrt(1.0 + zeta * zeta));
                if (zeta < 0.0) t = -t;
                const double c = 1.0 / std::sqrt(1.0 + t * t);
                const double sn = c * t;
                for (int i = 0; i < n; ++i) {
                    const double x = aj[i], y = ak[i];
                    aj[i] = c * x - sn * y;
                    ak[i] = sn * x + c * y;
                }
                double* vj = Vt + static_cast<std::size_t>(j) * p;
                double* vk = Vt + static_cast<std::size_t>(k) * p;
                for (int i = 0; i < p; ++i) {
                    const double x = vj[i], y = vk[i];
                    vj[i] = c * x - sn * y;
                    vk[i] = sn * x + c * y;
                }
            }
        }
    }
    for (int j = 0; j < p; ++j) {
        const double* aj = A + static_cast<std::size_t>(j) * n;
        double ss = 0.0;
        for (int i = 0; i < n; ++i) ss += aj[i] * aj[i];
        s[j] = std::sqrt(ss);
    }
    return converged;
}

}  // namespace linalg
}  // namespace rfl
