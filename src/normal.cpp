// rfl_normal_rows: NumPy's standard normals drawn from NumPy's own PCG64 generators, for
// rfl_fast.kernels.streams (which calls it through ctypes.PyDLL and checks a probe draw against
// NumPy's first); the numbers are rfl/normal.hpp's, bit for bit NumPy's.
#include <Python.h>

#include <cstdint>
#include <vector>

#include "rfl/normal.hpp"

#if defined(_WIN32)
#define RFL_EXPORT extern "C" __declspec(dllexport)
#else
#define RFL_EXPORT extern "C" __attribute__((visibility("default")))
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
    for (Py_ssize_t j = 0; j < k; ++j) {
        // bitgen_t {void* state; ...}; PCG64's state: pcg64_state {pcg64_random_t* pcg_state; ...}
        void* bitgen = PyCapsule_GetPointer(PyList_GET_ITEM(capsules, j), "BitGenerator");
        if (bitgen == nullptr) {
            PyErr_Clear();
            return -1;
        }
        void* state = *static_cast<void**>(bitgen);
        states[static_cast<std::size_t>(j)] = *static_cast<rfl::normal::Pcg64**>(state);
    }
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
