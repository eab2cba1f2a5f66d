// The Stiefel manifold's exponential map (Edelman, Arias & Smith 1998) on one row-major (n, p)
// float64 item, and the small dense matrix exponential it needs:
//
//   expm(a, e, m)        e = exp(a), a m x m: Higham's (2005, Algorithm 2.3) scaling and
//                        squaring of the Pade approximant of the least degree 3, 5, 7, 9 or 13
//                        whose bound holds at ||a||_1, the solve by Gaussian elimination with
//                        partial pivoting; NaN for non-finite a
//   exp<P>(x, u, o)      o = [x u] expm([[A, -S], [I, A]]) [I; 0] expm(-A), A = x'u, S = u'u;
//                        NaN where o'o is off I by more than kExpGramTol + kExpGramSlack
//                        times x'x's own distance from I (a step so long that the
//                        exponentials lost their accuracy; o'o from the p x p factors)
//
// The degrees below 13 are where Higham's backward-error bound keeps the approximant's
// relative error below the unit roundoff, so the answer is the degree-13 one (the NumPy
// reference's) to rounding. Every function takes `work`, scratch of at least
// exp_work_size(p) (expm: expm_work_size(m)) doubles, and a template parameter P: 0 for any
// p, or the compile-time value of p.
#pragma once

#include <cmath>
#include <cstddef>
#include <utility>

#include "stiefel.hpp"

namespace rfl {
namespace stiefel {

inline std::size_t expm_work_size(int m) { return 9 * static_cast<std::size_t>(m) * m; }

// Largest max |o'o - I| of an Exp answer beyond kExpGramSlack times max |x'x - I|
// (rfl_fast.kernels.reference.EXP_GRAM_TOL, EXP_GRAM_SLACK).
constexpr double kExpGramTol = 1.5e-8;
constexpr double kExpGramSlack = 10.0;

inline std::size_t exp_work_size(int p) {
    const std::size_t q = 2 * static_cast<std::size_t>(p);
    return 2 * q * q + 4 * static_cast<std::size_t>(p) * p + q * p + expm_work_size(2 * p);
}

namespace detail {

// c = a b, all m x m row-major (c distinct from a and b); M: 0, or m known at compile time
// (the loops then unrolled and vectorized across the columns j; each entry's sum over k in
// the same order either way)
template <int M = 0>
RFL_INLINE void mm(const double* a, const double* b, double* c, int m_) {
    const int m = M > 0 ? M : m_;
    for (int i = 0; i < m * m; ++i) c[i] = 0.0;
    for (int i = 0; i < m; ++i)
        for (int k = 0; k < m; ++k) {
            const double aik = a[i * m + k];
            for (int j = 0; j < m; ++j) c[i * m + j] += aik * b[k * m + j];
        }
}

// Solve q x = r for x (m x m, m right-hand sides, in r) by Gaussian elimination with partial
// pivoting; q is destroyed. An exactly zero pivot (only for non-finite input) leaves inf/NaN.
template <int M = 0>
RFL_INLINE void solve_square(double* q, double* r, int m_) {
    const int m = M > 0 ? M : m_;
    for (int c = 0; c < m; ++c) {
        int piv = c;
        for (int i = c + 1; i < m; ++i)
            if (std::fabs(q[i * m + c]) > std::fabs(q[piv * m + c])) piv = i;
        if (piv != c)
            for (int j = 0; j < m; ++j) {
                std::swap(q[c * m + j], q[piv * m + j]);
                std::swap(r[c * m + j], r[piv * m + j]);
            }
        const double inv = 1.0 / q[c * m + c];
        for (int i = c + 1; i < m; ++i) {
            const double f = q[i * m + c] * inv;
            if (f == 0.0) continue;
            for (int j = c; j < m; ++j) q[i * m + j] -= f * q[c * m + j];
            for (int j = 0; j < m; ++j) r[i * m + j] -= f * r[c * m + j];
        }
    }
    for (int c = m - 1; c >= 0; --c) {
        const double inv = 1.0 / q[c * m + c];
        for (int j = 0; j < m; ++j) {
            double acc = r[c * m + j];
            for (int k = c + 1; k < m; ++k) acc -= q[c * m + k] * r[k * m + j];
            r[c * m + j] = acc * inv;
        }
    }
}

}  // namespace detail

// e = exp(a) for the m x m row-major a (e distinct from a). work: expm_work_size(m) doubles.
// M: 0, or m known at compile time.
template <int M = 0>
inline void expm(const double* a, double* e, int m_, double* work) {
    const int m = M > 0 ? M : m_;
    // Higham (2005), Table 2.3: the largest 1-norm for each degree, and the coefficients
    static const double theta[4] = {1.495585217958292e-2, 2.539398330063230e-1,
                                    9.504178996162932e-1, 2.097847961257068e0};
    static const double theta13 = 5.371920351148152;
    static const double b3[4] = {120.0, 60.0, 12.0, 1.0};
    static const double b5[6] = {30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0};
    static const double b7[8] = {17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0,
                                 56.0, 1.0};
    static const double b9[10] = {17643225600.0, 8821612800.0, 2075673600.0, 302702400.0,
                                  30270240.0, 2162160.0, 110880.0, 3960.0, 90.0, 1.0};
    static const double b13[14] = {64764752532480000.0, 32382376266240000.0,
                                   7771770303897600.0, 1187353796428800.0, 129060195264000.0,
                                   10559470521600.0, 670442572800.0, 33522128640.0,
                                   1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0};
    const std::size_t mm = static_cast<std::size_t>(m) * m;
    double* x = work;            // a scaled
    double* x2 = x + mm;
    double* x4 = x2 + mm;
    double* x6 = x4 + mm;
    double* x8 = x6 + mm;        // (degree 9 only)
    double* u = x8 + mm;
    double* v = u + mm;
    double* t = v + mm;
    double* q = t + mm;
    double norm = 0.0;
    for (int j = 0; j < m; ++j) {
        double s = 0.0;
        for (int i = 0; i < m; ++i) s += std::fabs(a[i * m + j]);
        norm = s > norm || std::isnan(s) ? s : norm;
    }
    if (!std::isfinite(norm)) {
        for (std::size_t i = 0; i < mm; ++i) e[i] = std::nan("");
        return;
    }
    int degree = 13, squarings = 0;
    for (int k = 0; k < 4; ++k)
        if (norm <= theta[k]) {
            degree = 3 + 2 * k;
            break;
        }
    if (degree == 13 && norm > theta13) squarings = static_cast<int>(std::ceil(std::log2(norm / theta13)));
    const double scale = std::ldexp(1.0, -squarings);
    for (std::size_t i = 0; i < mm; ++i) x[i] = a[i] * scale;
    detail::mm<M>(x, x, x2, m);
    const double* b = degree == 3 ? b3 : degree == 5 ? b5 : degree == 7 ? b7 : degree == 9 ? b9 : b13;
    if (degree >= 5) detail::mm<M>(x2, x2, x4, m);
    if (degree >= 7) detail::mm<M>(x4, x2, x6, m);
    if (degree == 9) detail::mm<M>(x6, x2, x8, m);
    if (degree < 13) {  // t = sum_k b_{2k+1} x^{2k}, v = sum_k b_{2k} x^{2k}
        const double* pw[5] = {nullptr, x2, x4, x6, x8};
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
                const std::size_t at = static_cast<std::size_t>(i) * m + j;
                double to = i == j ? b[1] : 0.0, ve = i == j ? b[0] : 0.0;
                for (int k = 1; 2 * k < degree; ++k) {
                    to += b[2 * k + 1] * pw[k][at];
                    ve += b[2 * k] * pw[k][at];
                }
                t[at] = to;
                v[at] = ve;
            }
        detail::mm<M>(x, t, u, m);
    } else {            // the reference's degree-13 grouping
        for (std::size_t i = 0; i < mm; ++i) q[i] = b[13] * x6[i] + b[11] * x4[i] + b[9] * x2[i];
        detail::mm<M>(x6, q, t, m);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
                const std::size_t at = static_cast<std::size_t>(i) * m + j;
                t[at] += b[7] * x6[at] + b[5] * x4[at] + b[3] * x2[at] + (i == j ? b[1] : 0.0);
            }
        detail::mm<M>(x, t, u, m);
        for (std::size_t i = 0; i < mm; ++i) q[i] = b[12] * x6[i] + b[10] * x4[i] + b[8] * x2[i];
        detail::mm<M>(x6, q, v, m);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
                const std::size_t at = static_cast<std::size_t>(i) * m + j;
                v[at] += b[6] * x6[at] + b[4] * x4[at] + b[2] * x2[at] + (i == j ? b[0] : 0.0);
            }
    }
    for (std::size_t i = 0; i < mm; ++i) {  // (v - u) r = v + u
        q[i] = v[i] - u[i];
        e[i] = v[i] + u[i];
    }
    detail::solve_square<M>(q, e, m);
    for (int s = 0; s < squarings; ++s) {
        detail::mm<M>(e, e, t, m);
        for (std::size_t i = 0; i < mm; ++i) e[i] = t[i];
    }
}

// o = Exp_x(u) on St(n, p): Edelman's geodesic [x u] expm([[A, -S], [I, A]]) [I; 0] expm(-A),
// A = x'u, S = u'u (o distinct from x and u). work: exp_work_size(p) doubles.
template <int P = 0>
RFL_INLINE void exp(const double* x, const double* u, double* o, int n, int p_, double* work) {
    const int p = P > 0 ? P : p_, q = 2 * p;
    const std::size_t pp = static_cast<std::size_t>(p) * p, qq = static_cast<std::size_t>(q) * q;
    double* B = work;            // q x q: [[A, -S], [I, A]], then scratch
    double* A = B + qq;
    double* S = A + pp;
    double* F = S + pp;          // expm(-A)
    double* E = F + pp;          // q x q: expm(B)
    double* M = E + qq;          // q x p: expm(B)[:, :p] expm(-A)
    double* XX = M + static_cast<std::size_t>(q) * p;  // x'x
    double* w = XX + pp;
    cross<P>(x, u, A, n, p);
    cross<P>(u, u, S, n, p);
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
            B[i * q + j] = A[i * p + j];
            B[i * q + p + j] = -S[i * p + j];
            B[(p + i) * q + j] = i == j ? 1.0 : 0.0;
            B[(p + i) * q + p + j] = A[i * p + j];
        }
    expm<(P > 0 ? 2 * P : 0)>(B, E, q, w);
    for (std::size_t i = 0; i < pp; ++i) B[i] = -A[i];  // (B is free again; S is kept)
    expm<P>(B, F, p, w);
    for (int i = 0; i < q; ++i)
        for (int j = 0; j < p; ++j) {
            double acc = 0.0;
            for (int k = 0; k < p; ++k) acc += E[i * q + k] * F[k * p + j];
            M[i * p + j] = acc;
        }
    const double* Mu = M + pp;
    // o'o = M' [[x'x, A], [A', S]] M from the p x p factors: off I beyond the tolerance (and
    // the slack for x's own distance from the manifold), the item has no answer (NaN)
    cross<P>(x, x, XX, n, p);
    double off = 0.0, own = 0.0;
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
            const double dev = std::fabs(XX[i * p + j] - (i == j ? 1.0 : 0.0));
            own = dev > own || std::isnan(dev) ? dev : own;
            double top = 0.0, bot = 0.0;  // column j of C M: rows i (top), p + i (bottom)
            for (int k = 0; k < p; ++k) {
                top += XX[i * p + k] * M[k * p + j] + A[i * p + k] * Mu[k * p + j];
                bot += A[k * p + i] * M[k * p + j] + S[i * p + k] * Mu[k * p + j];
            }
            B[i * p + j] = top;
            B[pp + i * p + j] = bot;
        }
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
            double g = 0.0;
            for (int k = 0; k < p; ++k) g += M[k * p + i] * B[k * p + j] + Mu[k * p + i] * B[pp + k * p + j];
            const double dev = std::fabs(g - (i == j ? 1.0 : 0.0));
            off = dev > off || std::isnan(dev) ? dev : off;
        }
    if (!(off <= kExpGramTol + kExpGramSlack * own)) {
        for (std::size_t r = 0; r < static_cast<std::size_t>(n) * p; ++r) o[r] = std::nan("");
        return;
    }
    if constexpr (P >= 2) {
        detail::mul_small<P, false>(x, nullptr, M, 1.0, 0.0, nullptr, o, n);
        detail::mul_small<P, false>(u, nullptr, Mu, 1.0, 1.0, o, o, n);
    } else {
        for (int r = 0; r < n; ++r) {
            const double* xr = x + static_cast<std::size_t>(r) * p;
            const double* ur = u + static_cast<std::size_t>(r) * p;
            double* orow = o + static_cast<std::size_t>(r) * p;
            for (int j = 0; j < p; ++j) {
                double acc = 0.0;
                for (int k = 0; k < p; ++k) acc += xr[k] * M[k * p + j] + ur[k] * Mu[k * p + j];
                orow[j] = acc;
            }
        }
    }
}

}  // namespace stiefel
}  // namespace rfl
