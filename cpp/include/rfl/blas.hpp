// Optional BLAS / LAPACK for the kernels' large-size paths (Stiefel p >= 9, SPD n >= 128):
// header-only C++17, linked at run time.
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
//   eigh(A, w, p, vectors = true)
//        symmetric A (p x p; its lower triangle is read) = V diag(w) V', w ascending; A is
//        overwritten by V' (row k: the k-th eigenvector; without vectors, by scratch); false
//        if LAPACK fails
//   lyapunov(M, S, p)
//        symmetric S (p x p) with M S + S M' = 2I by Bartels-Stewart (real Schur form by dgees,
//        the triangular equation by dtrsyl), for any M without two eigenvalues summing to 0;
//        false otherwise (or if LAPACK fails)
//   set_thread_routines(get, set), OneThread
//        the BLAS's own thread setting (openblas_get_num_threads / openblas_set_num_threads),
//        if the application hands it over: while a OneThread lives (on any thread), BLAS runs
//        every call on the thread that makes it, so a batch loop can run items on threads of
//        its own, one BLAS thread each, instead of one item at a time on BLAS's threads
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <mutex>

#include "linalg_small.hpp"

namespace rfl {
namespace blas {

// GEMM work (m n k) from which OpenBLAS threads a call (its GEMM_MULTITHREAD_THRESHOLD 4 times
// SMP_THRESHOLD_MIN 65536): a batch loop over items that make such calls should not add threads
// of its own.
constexpr std::size_t kThreadsFrom = std::size_t(1) << 18;

using dgemm_fn = void (*)(char* transa, char* transb, int* m, int* n, int* k, double* alpha,
                          double* a, int* lda, double* b, int* ldb, double* beta, double* c,
                          int* ldc);
using dgesv_fn = void (*)(int* n, int* nrhs, double* a, int* lda, int* ipiv, double* b, int* ldb,
                          int* info);
using dsyevd_fn = void (*)(char* jobz, char* uplo, int* n, double* a, int* lda, double* w,
                           double* work, int* lwork, int* iwork, int* liwork, int* info);
using dgees_fn = void (*)(char* jobvs, char* sort, void* select, int* n, double* a, int* lda,
                          int* sdim, double* wr, double* wi, double* vs, int* ldvs, double* work,
                          int* lwork, int* bwork, int* info);
using dtrsyl_fn = void (*)(char* trana, char* tranb, int* isgn, int* m, int* n, double* a,
                           int* lda, double* b, int* ldb, double* c, int* ldc, double* scale,
                           int* info);

struct Routines {
    dgemm_fn dgemm = nullptr;
    dgesv_fn dgesv = nullptr;
    dsyevd_fn dsyevd = nullptr;
    dgees_fn dgees = nullptr;
    dtrsyl_fn dtrsyl = nullptr;
};

inline Routines& routines() {
    static Routines r;
    return r;
}

// Set (or, with nullptr, clear) the routines; not thread-safe against running kernels.
inline void set_routines(dgemm_fn dgemm, dgesv_fn dgesv, dsyevd_fn dsyevd, dgees_fn dgees,
                         dtrsyl_fn dtrsyl) {
    routines() = Routines{dgemm, dgesv, dsyevd, dgees, dtrsyl};
}

using get_threads_fn = int (*)();
using set_threads_fn = void (*)(int);

struct ThreadRoutines {
    get_threads_fn get = nullptr;
    set_threads_fn set = nullptr;
    std::mutex lock;
    int holders = 0;  // OneThread scopes alive
    int saved = 0;    // BLAS's setting before the first of them
};

inline ThreadRoutines& thread_routines() {
    static ThreadRoutines r;
    return r;
}

// Set (or, with nullptr, clear) BLAS's thread-setting routines; not while a OneThread lives.
inline void set_thread_routines(get_threads_fn get, set_threads_fn set) {
    ThreadRoutines& r = thread_routines();
    std::lock_guard<std::mutex> hold(r.lock);
    r.get = get;
    r.set = set;
}

// Whether OneThread can hold BLAS to one thread.
inline bool can_hold_threads() {
    ThreadRoutines& r = thread_routines();
    std::lock_guard<std::mutex> hold(r.lock);
    return r.get != nullptr && r.set != nullptr;
}

// BLAS runs on one thread while any OneThread lives: the first sets it, the last restores the
// setting it found. The setting is process-wide (BLAS has no other), so a call made meanwhile
// from another thread also runs on one thread: slower, never different.
class OneThread {
  public:
    OneThread() {
        ThreadRoutines& r = thread_routines();
        std::lock_guard<std::mutex> hold(r.lock);
        if (r.get == nullptr || r.set == nullptr) return;
        held_ = true;
        if (r.holders++ == 0) {
            r.saved = r.get();
            if (r.saved > 1) r.set(1);
        }
    }
    ~OneThread() {
        if (!held_) return;
        ThreadRoutines& r = thread_routines();
        std::lock_guard<std::mutex> hold(r.lock);
        if (--r.holders == 0 && r.saved > 1) r.set(r.saved);
    }
    OneThread(const OneThread&) = delete;
    OneThread& operator=(const OneThread&) = delete;

  private:
    bool held_ = false;
};

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
    return r.dgemm != nullptr && r.dgesv != nullptr && r.dsyevd != nullptr &&
           r.dgees != nullptr && r.dtrsyl != nullptr && suspended() == 0;
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
inline bool eigh(double* A, double* w, int p, bool vectors = true) {
    char jobz = vectors ? 'V' : 'N', uplo = 'U';
    int n = p, lwork = 1 + 6 * p + 2 * p * p, liwork = 3 + 5 * p, info = 0;
    std::unique_ptr<double[]> work(new double[lwork]);
    std::unique_ptr<int[]> iwork(new int[liwork]);
    routines().dsyevd(&jobz, &uplo, &n, A, &n, w, work.get(), &lwork, iwork.get(), &liwork, &info);
    return info == 0;
}

// Symmetric S with M S + S M' = 2I (row-major p x p) by Bartels-Stewart, as SciPy's
// solve_continuous_lyapunov: column-major, LAPACK sees A = M', and the equation reads
// A' S + S A = 2I. With A = Z T Z' (real Schur form, dgees), Y = Z' S Z solves T' Y + Y T = 2I
// (dtrsyl), and S = Z Y Z'. False when two eigenvalues of M (nearly) sum to zero (no unique
// solution), when LAPACK fails, or when S is not finite. O(p^3) time, O(p^2) memory.
inline bool lyapunov(const double* M, double* S, int p) {
    const std::size_t pp = static_cast<std::size_t>(p) * p;
    char jobvs = 'V', sort = 'N';
    int n = p, sdim = 0, info = 0, lwork = -1;
    double query = 0.0;
    std::unique_ptr<double[]> buf(new double[3 * pp + 2 * static_cast<std::size_t>(p)]);
    double* T = buf.get();
    double* Z = T + pp;
    double* Y = Z + pp;
    double* wr = Y + pp;
    double* wi = wr + p;
    std::copy(M, M + pp, T);
    routines().dgees(&jobvs, &sort, nullptr, &n, T, &n, &sdim, wr, wi, Z, &n, &query, &lwork,
                     nullptr, &info);
    if (info != 0) return false;
    lwork = std::max(static_cast<int>(query), 3 * p);
    std::unique_ptr<double[]> work(new double[lwork]);
    routines().dgees(&jobvs, &sort, nullptr, &n, T, &n, &sdim, wr, wi, Z, &n, work.get(), &lwork,
                     nullptr, &info);
    if (info != 0) return false;
    // unique solution: |l_i + l_j| > 1e-12 max(1, max |l|) for all i, j, the reference's test
    // (dtrsyl flags only exactly common eigenvalues: at l = +-i(1 + eps) it returned |S| ~ 1e15)
    double big = 1.0;
    for (int i = 0; i < p; ++i) big = std::fmax(big, std::hypot(wr[i], wi[i]));
    for (int i = 0; i < p; ++i)
        for (int j = 0; j <= i; ++j)
            if (!(std::hypot(wr[i] + wr[j], wi[i] + wi[j]) > 1e-12 * big)) return false;
    std::fill(Y, Y + pp, 0.0);
    for (int i = 0; i < p; ++i) Y[static_cast<std::size_t>(i) * p + i] = 2.0;
    char ta = 'T', tb = 'N';
    int isgn = 1;
    double scale = 1.0;
    routines().dtrsyl(&ta, &tb, &isgn, &n, &n, T, &n, T, &n, Y, &n, &scale, &info);
    if (info != 0 || !(scale > 0.0)) return false;
    // S = Z (Y / scale) Z' (column-major: the same row-major, S being symmetric), then symmetrized
    double one = 1.0 / scale, zero = 0.0;
    char nn = 'N', nt = 'T';
    routines().dgemm(&nn, &nn, &n, &n, &n, &one, Z, &n, Y, &n, &zero, T, &n);
    one = 1.0;
    routines().dgemm(&nn, &nt, &n, &n, &n, &one, T, &n, Z, &n, &zero, S, &n);
    linalg::symmetrize(S, p);
    return linalg::all_finite(S, pp);
}

}  // namespace blas
}  // namespace rfl
