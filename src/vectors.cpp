// Sphere and Lorentz (hyperboloid) kernels: exp, log, dist, transport.
#include <cstddef>

#include "binding.hpp"
#include "rfl/lorentz.hpp"
#include "rfl/sphere.hpp"

namespace {

// Vector kernels: the point length d gets compile-time values 2..12 (the Lorentz and small
// sphere cases), so the item functions' loops unroll completely; 0 means "runtime d".
#define RFL_SMALL_D(CALL)                                \
    switch (d) {                                         \
        case 2: return CALL(2);                          \
        case 3: return CALL(3);                          \
        case 4: return CALL(4);                          \
        case 5: return CALL(5);                          \
        case 6: return CALL(6);                          \
        case 7: return CALL(7);                          \
        case 8: return CALL(8);                          \
        case 9: return CALL(9);                          \
        case 10: return CALL(10);                        \
        case 11: return CALL(11);                        \
        case 12: return CALL(12);                        \
        default: return CALL(0);                         \
    }

template <void (*F)(const double*, const double*, double*, std::size_t), std::size_t D>
RFL_INLINE void vec2_items(const double* px, const double* pb, double* po, py::ssize_t N,
                           std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) F(px + i * d, pb + i * d, po + i * d, d);
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
RFL_CLONES void vec2_loop(const double* px, const double* pb, double* po, py::ssize_t N,
                          std::size_t d) {
#define RFL_CALL(K) vec2_items<F, K>(px, pb, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <double (*F)(const double*, const double*, std::size_t), std::size_t D>
RFL_INLINE void dist_items(const double* px, const double* py_, double* po, py::ssize_t N,
                           std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) po[i] = F(px + i * d, py_ + i * d, d);
}

template <double (*F)(const double*, const double*, std::size_t)>
RFL_CLONES void dist_loop(const double* px, const double* py_, double* po, py::ssize_t N,
                          std::size_t d) {
#define RFL_CALL(K) dist_items<F, K>(px, py_, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t),
          std::size_t D>
RFL_INLINE void vec3_items(const double* px, const double* py_, const double* pv, double* po,
                           py::ssize_t N, std::size_t d_) {
    const std::size_t d = D ? D : d_;
    for (py::ssize_t i = 0; i < N; ++i) F(px + i * d, py_ + i * d, pv + i * d, po + i * d, d);
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t)>
RFL_CLONES void vec3_loop(const double* px, const double* py_, const double* pv, double* po,
                          py::ssize_t N, std::size_t d) {
#define RFL_CALL(K) vec3_items<F, K>(px, py_, pv, po, N, d)
    RFL_SMALL_D(RFL_CALL)
#undef RFL_CALL
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
void vec_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    vec2_loop<F>(a, b, o, N, static_cast<std::size_t>(c[0]));
}

template <double (*F)(const double*, const double*, std::size_t)>
void dist_run(const double* a, const double* b, double* o, py::ssize_t N, const py::ssize_t* c) {
    dist_loop<F>(a, b, o, N, static_cast<std::size_t>(c[0]));
}

template <void (*F)(const double*, const double*, double*, std::size_t)>
Arr vec_binary(const Arr& x, const Arr& b, const char* kernel, const char* bname) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(b, 2, kernel, bname, "(N, d)");
    check_same(x, b, kernel, "x", bname);
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out({N, static_cast<py::ssize_t>(d)});
    const double* px = x.data();
    const double* pb = b.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const py::ssize_t core[1] = {static_cast<py::ssize_t>(d)};
        run2_chunked(vec_run<F>, px, pb, po, N, core, d, d);
    }
    return out;
}

template <double (*F)(const double*, const double*, std::size_t)>
Arr vec_dist(const Arr& x, const Arr& y, const char* kernel) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(y, 2, kernel, "y", "(N, d)");
    check_same(x, y, kernel, "x", "y");
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out(N);
    const double* px = x.data();
    const double* py_ = y.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const py::ssize_t core[1] = {static_cast<py::ssize_t>(d)};
        run2_chunked(dist_run<F>, px, py_, po, N, core, d, 1);
    }
    return out;
}

template <void (*F)(const double*, const double*, const double*, double*, std::size_t)>
Arr vec_ternary(const Arr& x, const Arr& y, const Arr& v, const char* kernel) {
    check_ndim(x, 2, kernel, "x", "(N, d)");
    check_ndim(y, 2, kernel, "y", "(N, d)");
    check_ndim(v, 2, kernel, "v", "(N, d)");
    check_same(x, y, kernel, "x", "y");
    check_same(x, v, kernel, "x", "v");
    const py::ssize_t N = x.shape(0);
    const std::size_t d = static_cast<std::size_t>(x.shape(1));
    Arr out({N, static_cast<py::ssize_t>(d)});
    const double* px = x.data();
    const double* py_ = y.data();
    const double* pv = v.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        for_chunks(N, d * sizeof(double), 3, [&](py::ssize_t i0, py::ssize_t i1) {
            vec3_loop<F>(px + i0 * d, py_ + i0 * d, pv + i0 * d, po + i0 * d, i1 - i0, d);
            return true;
        });
    }
    return out;
}

bool any_core(const py::ssize_t*) { return true; }

}  // namespace

void register_vectors(py::module_& m) {
    // sphere
    m.def("sphere_exp", [](py::handle x, py::handle u) {
        return vec_binary<rfl::sphere::exp>(x, u, "sphere_exp", "u"); }, py::arg("x"), py::arg("u"),
        R"pbdoc(Sphere Exp ``cos|u| x + sin|u| u/|u|``; (N, d) -> (N, d).)pbdoc");
    m.def("sphere_log", [](py::handle x, py::handle y) {
        return vec_binary<rfl::sphere::log>(x, y, "sphere_log", "y"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Sphere Log ``theta v/|v|``, ``v = y - <x,y>x``; (N, d); NaN at antipodal points.)pbdoc");
    m.def("sphere_dist", [](py::handle x, py::handle y) {
        return vec_dist<rfl::sphere::dist>(x, y, "sphere_dist"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Great-circle distance ``2 asin(|x - y|/2)``; (N, d) -> (N,).)pbdoc");
    m.def("sphere_transport", [](py::handle x, py::handle y, py::handle v) {
        return vec_ternary<rfl::sphere::transport>(x, y, v, "sphere_transport"); },
        py::arg("x"), py::arg("y"), py::arg("v"),
        R"pbdoc(Parallel transport ``v - <y,v>/(1+<x,y>) (x+y)``; (N, d) -> (N, d).)pbdoc");

    // Lorentz
    m.def("lorentz_exp", [](py::handle x, py::handle v) {
        return vec_binary<rfl::lorentz::exp>(x, v, "lorentz_exp", "v"); }, py::arg("x"), py::arg("v"),
        R"pbdoc(Hyperboloid Exp ``cosh|v| x + sinh|v| v/|v|``; (N, d+1) -> (N, d+1).)pbdoc");
    m.def("lorentz_log", [](py::handle x, py::handle y) {
        return vec_binary<rfl::lorentz::log>(x, y, "lorentz_log", "y"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Hyperboloid Log ``acosh(a) (y - a x)/sqrt(a^2-1)``, ``a = -<x,y>_L``; (N, d+1).)pbdoc");
    m.def("lorentz_dist", [](py::handle x, py::handle y) {
        return vec_dist<rfl::lorentz::dist>(x, y, "lorentz_dist"); }, py::arg("x"), py::arg("y"),
        R"pbdoc(Hyperboloid distance ``acosh(-<x,y>_L)``; (N, d+1) -> (N,).)pbdoc");
    m.def("lorentz_transport", [](py::handle x, py::handle y, py::handle v) {
        return vec_ternary<rfl::lorentz::transport>(x, y, v, "lorentz_transport"); },
        py::arg("x"), py::arg("y"), py::arg("v"),
        R"pbdoc(Parallel transport ``v + <y,v>_L/(1-<x,y>_L) (x+y)``; (N, d+1) -> (N, d+1).)pbdoc");

    // fast lanes (see checked_binary in _core.cpp)
    def_checked<1, false>(m, "sphere_exp", vec_run<rfl::sphere::exp>, any_core);
    def_checked<1, false>(m, "sphere_log", vec_run<rfl::sphere::log>, any_core);
    def_checked<1, false>(m, "lorentz_exp", vec_run<rfl::lorentz::exp>, any_core);
}
