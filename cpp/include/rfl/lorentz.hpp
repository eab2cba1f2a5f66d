// Hyperboloid (Lorentz) model H^d kernels on one point (vectors of length d+1, float64).
// Minkowski product <a,b>_L = -a0 b0 + sum_{k>=1} ak bk.
//
//   exp(x, v)          cosh|v| x + sinh|v| v/|v|,  |v| = sqrt(max(<v,v>_L, 0))
//   log(x, y)          acosh(a) (y - a x)/sqrt(a^2 - 1), a = max(-<x,y>_L, 1) (0 at y = x)
//   dist(x, y)         acosh(max(-<x,y>_L, 1))
//   transport(x, y, v) v + <y,v>_L/(1 - <x,y>_L) (x + y), parallel transport along the geodesic
//
// Same formulas as the NumPy reference.
#pragma once

#include <cmath>
#include <cstddef>

#include "linalg_small.hpp"  // RFL_INLINE

namespace rfl {
namespace lorentz {

RFL_INLINE double ldot(const double* a, const double* b, std::size_t d1) {
    double s = 0.0;
    for (std::size_t k = 1; k < d1; ++k) s += a[k] * b[k];
    return s - a[0] * b[0];
}

RFL_INLINE void exp(const double* x, const double* v, double* out, std::size_t d1) {
    const double t = std::sqrt(std::fmax(ldot(v, v, d1), 0.0));
    double ch, sh;
    if (t < 20.0) {  // one expm1 for both (accurate for small t)
        const double em = std::expm1(t);
        const double den = 2.0 * (em + 1.0);
        ch = 1.0 + em * em / den;
        sh = em * (em + 2.0) / den;
    } else {
        ch = std::cosh(t);
        sh = std::sinh(t);
    }
    const double shc = t > 0.0 ? sh / t : 1.0;
    for (std::size_t k = 0; k < d1; ++k) out[k] = ch * x[k] + shc * v[k];
}

RFL_INLINE void log(const double* x, const double* y, double* out, std::size_t d1) {
    const double a = std::fmax(-ldot(x, y, d1), 1.0);
    const double s = std::sqrt((a - 1.0) * (a + 1.0));
    const double scale = s > 0.0 ? std::acosh(a) / s : 1.0;
    for (std::size_t k = 0; k < d1; ++k) out[k] = scale * (y[k] - a * x[k]);
}

RFL_INLINE double dist(const double* x, const double* y, std::size_t d1) {
    return std::acosh(std::fmax(-ldot(x, y, d1), 1.0));
}

RFL_INLINE void transport(const double* x, const double* y, const double* v, double* out,
                      std::size_t d1) {
    double yv = 0.0, xy = 0.0;
    for (std::size_t k = 1; k < d1; ++k) {
        yv += y[k] * v[k];
        xy += x[k] * y[k];
    }
    yv -= y[0] * v[0];
    xy -= x[0] * y[0];
    const double coef = yv / (1.0 - xy);
    for (std::size_t k = 0; k < d1; ++k) out[k] = v[k] + coef * (x[k] + y[k]);
}

}  // namespace lorentz
}  // namespace rfl
