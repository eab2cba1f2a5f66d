// rfl_normal_rows: NumPy's standard normals drawn from NumPy's own PCG64 generators, for
// rfl_fast.kernels.streams (which calls it through ctypes.PyDLL and checks a probe draw against
// NumPy's first); the numbers are rfl/normal.hpp's, bit for bit NumPy's.
#include <Python.h>

#include <algorithm>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rfl/normal.hpp"

#if defined(_WIN32)
#define RFL_EXPORT extern "C" __declspec(dllexport)
#else
#define RFL_EXPORT extern "C" __attribute__((visibility("default")))
#endif

#if defined(RFL_HAVE_PCG64)
// states[j] = the PCG64 state of the generator whose `bitgen_t` capsule is capsules[j] (a list
// of len(states) capsules): bitgen_t {void* state; ...}, PCG64's state pcg64_state
// {pcg64_random_t* pcg_state; ...}. False (no Python error left set) for a capsule that is not
// a BitGenerator's.
static bool pcg64_states(PyObject* capsules, std::vector<rfl::normal::Pcg64*>& states) {
    for (std::size_t j = 0; j < states.size(); ++j) {
        void* bitgen = PyCapsule_GetPointer(
            PyList_GET_ITEM(capsules, static_cast<Py_ssize_t>(j)), "BitGenerator");
        if (bitgen == nullptr) {
            PyErr_Clear();
            return false;
        }
        void* state = *static_cast<void**>(bitgen);
        states[j] = *static_cast<rfl::normal::Pcg64**>(state);
    }
    return true;
}
#endif

// Row j of out (k x n, row-major, k = len(capsules)) from the generator whose
// `bit_generator.capsule` is capsules[j] (a list; the caller passes PCG64 ones only), in order.
// Called with the GIL (ctypes.PyDLL); released while drawing. Returns 1 when drawn, 0 when this
// build has no 128-bit integers, -1 on a bad argument (nothing drawn, no Python error left set).
RFL_EXPORT int rfl_normal_rows(PyObject* capsules, double* out, std::int64_t n) {
#if defined(RFL_HAVE_PCG64)
    if (!PyList_Check(capsules) || n < 0) return -1;
    const Py_ssize_t k = PyList_GET_SIZE(capsules);
    std::vector<rfl::normal::Pcg64*> states(static_cast<std::size_t>(k));
    if (!pcg64_states(capsules, states)) return -1;
    Py_BEGIN_ALLOW_THREADS
    rfl::normal::fill_rows(states.data(), static_cast<std::int64_t>(k), out, n);
    Py_END_ALLOW_THREADS
    return 1;
#else
    (void)capsules;
    (void)out;
    (void)n;
    return 0;
#endif
}

// The Stiefel projection's batch loop (stiefel_qr.cpp: its per-ISA clones, the bits of the
// stiefel_proj kernel).
void stiefel_proj_loop(const double* x, const double* u, double* o, Py_ssize_t N, int n, int p);

//! Items per chunk of rfl_projected_normal_rows: their draws stay in L2 until projected.
constexpr std::int64_t kNoiseChunk = 8;

// Item j of out (k items of n x p, row-major) = P_x(sigma_j N_j) with x_j the j-th item of x:
// N_j the n p standard normals of standard_normal((n, p)) from capsules[j]'s generator, in order,
// as rfl_normal_rows draws them; P_x(v) = v - x sym(x'v), the Stiefel tangent projection (p = 1:
// the sphere's v - <x, v> x) by the stiefel_proj kernel's loop. The tangent Gaussian
// N_x(0, sigma_j^2) of Stiefel and the sphere with the draws of kNoiseChunk items at a time in
// a buffer that stays in cache, where NumPy's route writes the normals, scales them and
// projects them in three passes over memory. sigma: k doubles. Same conventions and returns as
// rfl_normal_rows, and -2 where memory is refused (the streams may then be partly advanced).
RFL_EXPORT int rfl_projected_normal_rows(PyObject* capsules, const double* x, double* out,
                                         const double* sigma, std::int64_t n, std::int64_t p) {
#if defined(RFL_HAVE_PCG64)
    if (!PyList_Check(capsules) || n < 0 || p < 1 || n > INT32_MAX || p > INT32_MAX) return -1;
    const Py_ssize_t k = PyList_GET_SIZE(capsules);
    std::vector<rfl::normal::Pcg64*> states(static_cast<std::size_t>(k));
    if (!pcg64_states(capsules, states)) return -1;
    const std::int64_t item = n * p;
    const std::size_t chunk = static_cast<std::size_t>(std::min<Py_ssize_t>(k, kNoiseChunk));
    std::vector<double> buf;
    try {  // allocated with the GIL held; a C++ exception never crosses the ctypes boundary
        buf.resize(chunk * static_cast<std::size_t>(item));
    } catch (...) {
        return -2;
    }
    int rc = 1;
    Py_BEGIN_ALLOW_THREADS
    try {
        for (Py_ssize_t j0 = 0; j0 < k; j0 += kNoiseChunk) {
            const Py_ssize_t cnt = std::min<Py_ssize_t>(kNoiseChunk, k - j0);
            rfl::normal::fill_rows(states.data() + j0, cnt, buf.data(), item);
            for (Py_ssize_t c = 0; c < cnt; ++c) {
                const double s = sigma[j0 + c];
                double* g = buf.data() + c * item;
                for (std::int64_t e = 0; e < item; ++e) g[e] *= s;
            }
            stiefel_proj_loop(x + j0 * item, buf.data(), out + j0 * item, cnt,
                              static_cast<int>(n), static_cast<int>(p));
        }
    } catch (...) {  // the projection's scratch refused: no memory
        rc = -2;
    }
    Py_END_ALLOW_THREADS
    return rc;
#else
    (void)capsules;
    (void)x;
    (void)out;
    (void)sigma;
    (void)n;
    (void)p;
    return 0;
#endif
}
