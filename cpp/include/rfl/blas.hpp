// Optional BLAS / LAPACK for the kernels' large-p paths: header-only C++17, linked at run time.
//
// The headers ship no BLAS. An application that has one hands its Fortran-interface routines
// (32-bit integers) to set_routines() once, before any kernel runs; rfl_fast passes SciPy's
// (scipy.linalg.cython_blas / cython_lapack). Without them, or on a thread inside a Suspend
// scope, available() is false and every kernel keeps its own loops.
//
//   gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
//        row-major C (m x n) = alpha op(A) op(B) + beta C, op = transpose when ta / tb
//   inverse(A, Inv, ipiv, p, logdet)
//        row-major Inv = A^-1 (A p x p, overwritten by its LU factors), log|det A| in *logdet;
//        false when A is singular or the result is not finite
//   eigh(A, w, p)
//        symmetric A (p x p; its lower triangle is read) = V diag(w) V', w ascending; A is
//        overwritten by V' (row k: the k-th eigenvector); false if LAPACK fails
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>

#include "linalg_small.hpp"

namespace rfl {
namespace blas {

using dgemm_fn = void (*)(char* transa, char* transb, int* m, int* n, int* k, double* alpha,
                          double* a, int* lda, double* b, int* ldb, double* beta, double* c,
                          int* ldc);
using dgesv_fn = void (*)(int* n, int* nrhs, double* a, int* lda, int* ipiv, double* b, int* ldb,
                          int* info);
using dsyevd_fn = void (*)(char* jobz, char* uplo, int* n, double* a, int* lda, double* w,
                           double* work, int* lwork, int* iwork, int* liwork, int* info);

struct Routines {
    dgemm_fn dgemm = nullptr;
    dgesv_fn dgesv = nullptr;
    dsyevd_fn dsyevd = nullptr;
};

inline Routines& routines() {
    static Routines r;
    return r;
}

// Set (or, with nullptr, clear) the routines; not thread-safe against running kernels.
inline void set_routines(dgemm_fn dgemm, dgesv_fn dgesv, dsyevd_fn dsyevd) {
    routines().dgemm = dgemm;
    routines().dgesv = dgesv;
    routines().dsyevd = dsyevd;
}

// Calls on this thread while a Suspend lives keep to the kernels' own loops: for a caller
// that runs kernels on several threads of its own, which BLAS's threads would oversubscribe.
inline int& suspended() {
    static thread_local int depth = 0;
    return depth;
}

struct Suspend {
    Suspend() { ++suspended(); }
    ~Suspend() { --suspended(); }
    Suspend(const Suspend&) = delete;
    Suspend& operator=(const Suspend&) = delete;
};

inline bool available() {
    const Routines& r = routines();
    return r.dgemm != nullptr && r.dgesv != nullptr && r.dsyevd != nullptr && suspended() == 0;
}

// Row-major C = alpha op(A) op(B) + beta C: the column-major product C' = op(B)' op(A)'.
inline void gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* A, int lda,
                 const double* B, int ldb, double beta, double* C, int ldc) {
    char opb = tb ? 'T' : 'N', opa = ta ? 'T' : 'N';
    routines().dgemm(&opb, &opa, &n, &m, &k, &alpha, const_cast<double*>(B), &ldb,
                     const_cast<double*>(A), &lda, &beta, C, &ldc);
}

// Row-major Inv = A^-1 by LU with partial pivoting (LAPACK dgesv on the identity; A viewed
// column-major is A', whose inverse viewed row-major is A^-1). A is overwritten.
inline bool inverse(double* A, double* Inv, int* ipiv, int p, double* logdet) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    std::fill(Inv, Inv + pp, 0.0);
    for (int i = 0; i < p; ++i) Inv[static_cast<std::size_t>(i) * p + i] = 1.0;
    int n = p, info = 0;
    routines().dgesv(&n, &n, A, &n, ipiv, Inv, &n, &info);
    if (info != 0) return false;
    double ld = 0.0;
    for (int i = 0; i < p; ++i) ld += std::log(std::fabs(A[static_cast<std::size_t>(i) * p + i]));
    *logdet = ld;
    return linalg::all_finite(Inv, pp) && std::isfinite(ld);
}

// Symmetric eigendecomposition by LAPACK dsyevd. Row-major lower = column-major upper, and the
// column-major eigenvectors read row-major are the rows of V'.
inline bool eigh(double* A, double* w, int p) {
    char jobz = 'V', uplo = 'U';
    int n = p, lwork = 1 + 6 * p + 2 * p * p, liwork = 3 + 5 * p, info = 0;
    std::unique_ptr<double[]> work(new double[lwork]);
    std::unique_ptr<int[]> iwork(new int[liwork]);
    routines().dsyevd(&jobz, &uplo, &n, A, &n, w, work.get(), &lwork, iwork.get(), &liwork, &info);
    return info == 0;
}

}  // namespace blas
}  // namespace rfl
