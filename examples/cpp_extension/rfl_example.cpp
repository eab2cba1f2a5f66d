// A pybind11 extension of another project that calls rfl_fast's C++ kernels through the
// headers shipped in the wheel (rfl_fast.get_include()). Build: see setup.py beside this file.
//
//   rfl_example.stiefel_retr_polar(x, u, threads=1)   (N, n, p) arrays -> (N, n, p)
//   rfl_example.stiefel_inv_retr_polar(x, y, threads=1)
//   rfl_example.spd_exp(x, u, threads=1)              (N, n, n) arrays -> (N, n, n)
//   rfl_example.spd_dist(x, y, threads=1)             (N, n, n) arrays -> (N,)
//   rfl_example.headers_version                       "MAJOR.MINOR.PATCH" of the headers
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include <rfl/batch.hpp>
#include <rfl/version.hpp>

namespace py = pybind11;
using Arr = py::array_t<double, py::array::c_style | py::array::forcecast>;

namespace {

// (N, n, p) float64 C-contiguous arrays of one shape; returns a new array of that shape
Arr like(const Arr& a, const Arr& b, const char* an, const char* bn) {
    if (a.ndim() != 3 || b.ndim() != 3)
        throw std::invalid_argument(std::string(an) + ", " + bn + ": expected (N, n, p) arrays");
    for (int k = 0; k < 3; ++k)
        if (a.shape(k) != b.shape(k))
            throw std::invalid_argument(std::string(bn) + ": expected the shape of " + an);
    return Arr({a.shape(0), a.shape(1), a.shape(2)});
}

template <void (*F)(const double*, const double*, double*, std::ptrdiff_t, int, int, int)>
Arr stiefel(const Arr& x, const Arr& b, int threads) {
    Arr out = like(x, b, "x", "u");
    const int n = static_cast<int>(x.shape(1)), p = static_cast<int>(x.shape(2));
    if (p > n) throw std::invalid_argument("x: expected n >= p for points of St(n, p)");
    py::gil_scoped_release release;  // the kernels never touch Python objects
    F(x.data(), b.data(), out.mutable_data(), x.shape(0), n, p, threads);
    return out;
}

Arr spd_exp(const Arr& x, const Arr& u, int threads) {
    Arr out = like(x, u, "x", "u");
    if (x.shape(1) != x.shape(2)) throw std::invalid_argument("x: expected square matrices");
    py::gil_scoped_release release;
    rfl::batch::spd_exp(x.data(), u.data(), out.mutable_data(), x.shape(0),
                        static_cast<int>(x.shape(1)), threads);
    return out;
}

Arr spd_dist(const Arr& x, const Arr& y, int threads) {
    like(x, y, "x", "y");
    if (x.shape(1) != x.shape(2)) throw std::invalid_argument("x: expected square matrices");
    Arr out(x.shape(0));
    py::gil_scoped_release release;
    rfl::batch::spd_dist(x.data(), y.data(), out.mutable_data(), x.shape(0),
                         static_cast<int>(x.shape(1)), threads);
    return out;
}

}  // namespace

PYBIND11_MODULE(rfl_example, m) {
    m.doc() = "Example consumer of the rfl_fast C++ headers";
    m.attr("headers_version") = RFL_FAST_VERSION_STRING;
    m.def("stiefel_retr_polar", &stiefel<rfl::batch::stiefel_retr_polar>, py::arg("x"),
          py::arg("u"), py::arg("threads") = 1, "polar(x + u) for a batch (N, n, p)");
    m.def("stiefel_inv_retr_polar", &stiefel<rfl::batch::stiefel_inv_retr_polar>, py::arg("x"),
          py::arg("y"), py::arg("threads") = 1, "exact inverse of the polar retraction");
    m.def("spd_exp", &spd_exp, py::arg("x"), py::arg("u"), py::arg("threads") = 1,
          "affine-invariant Exp of SPD(n) for a batch (N, n, n)");
    m.def("spd_dist", &spd_dist, py::arg("x"), py::arg("y"), py::arg("threads") = 1,
          "affine-invariant distance for a batch (N, n, n) -> (N,)");
}
