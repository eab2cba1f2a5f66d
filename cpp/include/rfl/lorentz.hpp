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
#include <limits>

#include "linalg_small.hpp"  // RFL_INLINE

namespace rfl {
namespace lorentz {

RFL_INLINE double ldot(const double* a, const double* b, std::size_t d1) {
    double s = 0.0;
    for (std::size_t k = 1; k < d1; ++k) s += a[k] * b[k];
    return s - a[0] * b[0];
}

// Exp is computed as cosh|v| x + sinh|v| v/|v| with two safeguards (the same on every backend):
// * |v|^2 = |v_r|^2 - v0^2 (r: the spatial part) cancels when x is far out and v points along
//   x_r; when it loses more than 2 bits, the tangent form (|v_r|^2 + |x_r|^2 |v_r - (v_r.e)e|^2)
//   / x0^2 (e = x_r/|x_r|, a sum of non-negative terms) is used instead;
// * where the result's time coordinate cancels (cosh|v| x0 > 16 z0), it is set to
//   sqrt(1 + |z_r|^2), so that the result lies on the hyperboloid.
// The result's coordinates carry rounding errors ~ eps cosh|v| x0 (the two terms cancel when v
// points back towards the origin): when that is more than 1e8 eps z0 (fewer than ~8 correct
// digits) the item is NaN (no answer) instead of a silently wrong point.
constexpr double kExpMaxLoss = 1e8;

RFL_COLD inline double tangent_norm2(const double* x, const double* v, std::size_t d1) {
    double xx = 0.0, xv = 0.0, vv = 0.0;
    for (std::size_t k = 1; k < d1; ++k) {
        xx += x[k] * x[k];
        xv += x[k] * v[k];
        vv += v[k] * v[k];
    }
    const double c = xx > 0.0 ? xv / xx : 0.0;
    double pp = 0.0;
    for (std::size_t k = 1; k < d1; ++k) {
        const double q = v[k] - c * x[k];
        pp += q * q;
    }
    return (vv + xx * pp) / (x[0] * x[0]);
}

// sqrt(1 + |z|^2) when |z|^2 overflows (coordinates beyond ~1e150): m sqrt(m^-2 + |z/m|^2)
RFL_COLD inline double hyperboloid_time(const double* z, std::size_t d) {
    double m = 0.0;
    for (std::size_t k = 0; k < d; ++k) m = std::fmax(m, std::fabs(z[k]));
    if (!(m > 0.0) || !std::isfinite(m)) return std::sqrt(1.0 + m * m);
    double s = 1.0 / (m * m);
    for (std::size_t k = 0; k < d; ++k) s += (z[k] / m) * (z[k] / m);
    return m * std::sqrt(s);
}

RFL_INLINE void exp(const double* x, const double* v, double* out, std::size_t d1) {
    double vv = 0.0;
    for (std::size_t k = 1; k < d1; ++k) vv += v[k] * v[k];
    double sq = vv - v[0] * v[0];
    if (RFL_UNLIKELY(!(vv <= 4.0 * sq))) sq = tangent_norm2(x, v, d1);  // cancelled/NaN
    const double t = std::sqrt(std::fmax(sq, 0.0));
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
    const double loss = ch * std::fabs(x[0]);
    if (RFL_UNLIKELY(!(loss <= 16.0 * out[0]))) {  // z0 cancelled (> 4 bits), or NaN
        double zz = 0.0;
        for (std::size_t k = 1; k < d1; ++k) zz += out[k] * out[k];
        const double z0 = zz <= 1e300 ? std::sqrt(1.0 + zz) : hyperboloid_time(out + 1, d1 - 1);
        out[0] = loss <= kExpMaxLoss * z0 ? z0 : std::numeric_limits<double>::quiet_NaN();
    }
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
