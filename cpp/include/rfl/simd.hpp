// The compiler-specific parts of the rfl_fast headers, in one place: the inlining and branch
// hints, and ONE 4-lane vector type of doubles for the hand-vectorized loops.
//
//   RFL_INLINE      force inlining (GNU always_inline, MSVC __forceinline), so that a hot item
//                   function takes the instruction set of the batch loop that calls it (the
//                   binding compiles its loops once per ISA)
//   RFL_COLD, RFL_UNLIKELY, RFL_IVDEP   rare paths out of line; "no loop-carried dependence"
//   RFL_SIMD_VECTOR_EXT   1 where rfl::simd::v4d is a GNU vector (GCC, Clang), 0 where it is
//                   the plain struct below (MSVC and any compiler without GNU vector
//                   extensions; -DRFL_NO_VECTOR_EXT forces it, to test that path)
//   rfl::simd::v4d  4 doubles: +, -, *, / (also with a double), +=, -=, *=, indexing,
//                   brace initialisation {a, b, c, d}; load / store / splat / hsum / sqrt / abs.
//                   A GNU vector becomes one AVX2 register in the x86-64-v3 clones and two
//                   SSE2 (or NEON) registers elsewhere; the struct is four scalars (the
//                   compiler may still vectorize it).
//   rfl::simd::m4   the lane mask of v4d comparisons (GNU vectors only: the code that selects
//                   per lane, linalg::tql2_lanes and the Stiefel p = 5 path, is compiled only
//                   when RFL_SIMD_VECTOR_EXT is 1; the other paths answer without it)
//
// GCC notes (-Wpsabi, a warning) that a function passing a 32-byte vector by value has another
// ABI where AVX is off. Every such function is always inlined, so no ABI is ever crossed: the
// helpers below silence it around their definitions (push / pop), which is where GCC reports
// it for code that includes these headers. Code compiled into GNU target_clones functions (as
// the extension's batch loops are) gets the note at each call site instead, where no pragma of
// a header can scope it: the extension's build, the CMake target rfl_fast::headers and
// rfl_fast.pc pass -Wno-psabi to GCC.
#pragma once

#include <cmath>
#include <cstring>

#if defined(__GNUC__) || defined(__clang__)
#define RFL_INLINE inline __attribute__((always_inline))
#define RFL_COLD __attribute__((noinline, cold))
#define RFL_UNLIKELY(c) __builtin_expect(!!(c), 0)
// a read of the line at p soon, into L2 only (locality 1: an L1 prefetch would evict what the
// loops reuse)
#define RFL_PREFETCH(p) __builtin_prefetch((p), 0, 1)
#elif defined(_MSC_VER)
#define RFL_INLINE __forceinline
#define RFL_COLD __declspec(noinline)
#define RFL_UNLIKELY(c) (c)
#define RFL_PREFETCH(p) ((void)0)
#else
#define RFL_INLINE inline
#define RFL_COLD
#define RFL_UNLIKELY(c) (c)
#define RFL_PREFETCH(p) ((void)0)
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define RFL_IVDEP _Pragma("GCC ivdep")
#elif defined(__clang__)
#define RFL_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define RFL_IVDEP
#endif

#if (defined(__GNUC__) || defined(__clang__)) && !defined(RFL_NO_VECTOR_EXT)
#define RFL_SIMD_VECTOR_EXT 1
#else
#define RFL_SIMD_VECTOR_EXT 0
#endif

// (the -Wpsabi note, see above)
#if RFL_SIMD_VECTOR_EXT && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace rfl {
namespace simd {

#if RFL_SIMD_VECTOR_EXT
// aligned(8): arrays of v4d live in caller scratch with no alignment promise; may_alias: a
// double buffer is read as v4d
typedef double v4d __attribute__((vector_size(32), aligned(8), may_alias));
typedef long long m4 __attribute__((vector_size(32), aligned(8), may_alias));

RFL_INLINE v4d load(const double* p) { return *reinterpret_cast<const v4d*>(p); }
RFL_INLINE void store(double* p, v4d v) { *reinterpret_cast<v4d*>(p) = v; }
RFL_INLINE v4d abs(v4d x) { return x < 0.0 ? -x : x; }
#else
struct v4d {
    double v[4];
    RFL_INLINE double& operator[](int i) { return v[i]; }
    RFL_INLINE double operator[](int i) const { return v[i]; }
};
#define RFL_SIMD_OP(op)                                                                   \
    RFL_INLINE v4d operator op(v4d a, v4d b) {                                            \
        return {a.v[0] op b.v[0], a.v[1] op b.v[1], a.v[2] op b.v[2], a.v[3] op b.v[3]};  \
    }                                                                                     \
    RFL_INLINE v4d operator op(v4d a, double b) { return a op v4d{b, b, b, b}; }         \
    RFL_INLINE v4d operator op(double a, v4d b) { return v4d{a, a, a, a} op b; }         \
    RFL_INLINE v4d& operator op##=(v4d& a, v4d b) { return a = a op b; }
RFL_SIMD_OP(+)
RFL_SIMD_OP(-)
RFL_SIMD_OP(*)
RFL_SIMD_OP(/)
#undef RFL_SIMD_OP
RFL_INLINE v4d operator-(v4d a) { return {-a.v[0], -a.v[1], -a.v[2], -a.v[3]}; }

RFL_INLINE v4d load(const double* p) {
    v4d v;
    std::memcpy(v.v, p, sizeof v.v);
    return v;
}
RFL_INLINE void store(double* p, v4d v) { std::memcpy(p, v.v, sizeof v.v); }
RFL_INLINE v4d abs(v4d x) {
    for (int l = 0; l < 4; ++l) x[l] = std::fabs(x[l]);
    return x;
}
#endif

RFL_INLINE v4d splat(double a) { return v4d{a, a, a, a}; }
RFL_INLINE double hsum(v4d v) { return (v[0] + v[1]) + (v[2] + v[3]); }
RFL_INLINE v4d sqrt(v4d x) {
    for (int l = 0; l < 4; ++l) x[l] = std::sqrt(x[l]);
    return x;
}
// a[0 .. m) in the first m lanes, zeros after (m = 1..4)
RFL_INLINE v4d load_first(const double* a, int m) {
    return m >= 4 ? load(a) : v4d{a[0], m > 1 ? a[1] : 0.0, m > 2 ? a[2] : 0.0, 0.0};
}

}  // namespace simd
}  // namespace rfl

#if RFL_SIMD_VECTOR_EXT && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
