// Sphere S^(d-1) kernels on one point (vectors of length d, float64), closed forms.
//
//   exp(x, u)          cos|u| x + sin|u| u/|u|   (sin(t)/t = 1 at t = 0)
//   log(x, y)          theta v/|v|, v = y - <x,y> x, theta = atan2(|v|, <x,y>); NaN at
//                      antipodal points (v = 0 and <x,y> <= 0), 0 when y = x
//   dist(x, y)         2 asin(min(|x - y|/2, 1))  (accurate for nearby points)
//   transport(x, y, v) v - <y,v>/(1 + <x,y>) (x + y), parallel transport along the geodesic
//
// Same formulas and NaN/inf behaviour as the NumPy reference; at most two passes over d.
#pragma once

#include <cmath>
#include <cstddef>

#include "linalg_small.hpp"  // RFL_INLINE
#include <limits>

namespace rfl {
namespace sphere {

// |u| when |u|^2 overflows (|u| beyond ~1.3e154): m |u/m| with m = max|u_k| (a cold path)
RFL_COLD inline double norm_scaled(const double* u, std::size_t d) {
    double m = 0.0;
    for (std::size_t k = 0; k < d; ++k) m = std::fmax(m, std::fabs(u[k]));
    if (!(m > 0.0) || !std::isfinite(m)) return m;
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) s += (u[k] / m) * (u[k] / m);
    return m * std::sqrt(s);
}

RFL_INLINE void exp(const double* x, const double* u, double* out, std::size_t d) {
    double uu = 0.0;
    for (std::size_t k = 0; k < d; ++k) uu += u[k] * u[k];
    const double t = RFL_UNLIKELY(!(uu <= 1e300)) ? norm_scaled(u, d) : std::sqrt(uu);
    const double c = std::cos(t);
    const double s = t > 0.0 ? std::sin(t) / t : 1.0;
    for (std::size_t k = 0; k < d; ++k) out[k] = c * x[k] + s * u[k];
}

RFL_INLINE void log(const double* x, const double* y, double* out, std::size_t d) {
    double c = 0.0;
    for (std::size_t k = 0; k < d; ++k) c += x[k] * y[k];
    double vv = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
        const double v = y[k] - c * x[k];
        out[k] = v;
        vv += v * v;
    }
    const double nv = std::sqrt(vv);
    const double theta = std::atan2(nv, c);
    // antipodal within the rounding of v (the reference's test): no unique logarithm
    const bool antipodal = c < 0.0 && nv <= 2.0 * (d + 3) * linalg::kEps * -c;
    const double scale = antipodal ? std::numeric_limits<double>::quiet_NaN()
                                   : (nv > 0.0 ? theta / nv : 1.0);
    for (std::size_t k = 0; k < d; ++k) out[k] *= scale;
}

RFL_INLINE double dist(const double* x, const double* y, std::size_t d) {
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
        const double t = x[k] - y[k];
        s += t * t;
    }
    const double h = std::sqrt(s) / 2.0;
    return 2.0 * std::asin(std::fmin(h, 1.0));
}

RFL_INLINE void transport(const double* x, const double* y, const double* v, double* out,
                      std::size_t d) {
    double yv = 0.0, xy = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
        yv += y[k] * v[k];
        xy += x[k] * y[k];
    }
    const double coef = yv / (1.0 + xy);
    for (std::size_t k = 0; k < d; ++k) out[k] = v[k] - coef * (x[k] + y[k]);
}

}  // namespace sphere
}  // namespace rfl
