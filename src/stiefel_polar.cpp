// Stiefel kernels around the polar factor: stiefel_retr_polar, stiefel_inv_retr_polar, polar.
#include <string>

#include "stiefel_loops.hpp"

namespace {

Arr polar(const Arr& a, const std::string& parallel) {
    const char* kernel = "polar";
    const Parallel par = parallel_arg(parallel, kernel);
    check_ndim(a, 3, kernel, "a", "(N, n, p)");
    const py::ssize_t N = a.shape(0);
    const int n = static_cast<int>(a.shape(1)), p = static_cast<int>(a.shape(2));
    if (p > n) fail(kernel, "need n >= p, got shape " + shape_str(a));
    Arr out({N, static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(p)});
    const double* pa = a.data();
    double* po = out.mutable_data();
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(n) * p;
        const py::ssize_t core[2] = {n, p};
        for_chunks(N, item * sizeof(double), 1, [&](py::ssize_t i0, py::ssize_t i1) {
            const double* ai = pa + i0 * item;
            stiefel_loop<StOp::polar>(ai, ai, po + i0 * item, i1 - i0, n, p);
            return true;
        }, stiefel_blas_work(core), par, rfl::batch::kMinBytesPerThread,
           stiefel_group<StOp::polar>(core));
    }
    return out;
}

}  // namespace

void stiefel_retr_polar_loop(const double* x, const double* u, double* o, py::ssize_t N, int n,
                             int p) {
    stiefel_loop<StOp::retr_polar>(x, u, o, N, n, p);
}

void stiefel_polar_loop(const double* a, double* o, py::ssize_t N, int n, int p) {
    stiefel_loop<StOp::polar>(a, a, o, N, n, p);
}

void stiefel_inv_retr_polar_loop(const double* x, const double* y, double* o, py::ssize_t N,
                                 int n, int p) {
    stiefel_loop<StOp::inv_retr_polar>(x, y, o, N, n, p);
}

void register_stiefel_polar(py::module_& m) {
    m.def("stiefel_retr_polar", [](py::handle x, py::handle u, const std::string& parallel) {
        return stiefel_binary<StOp::retr_polar>(x, u, "stiefel_retr_polar", "u", parallel); },
        py::arg("x"), py::arg("u"), py::arg("parallel") = "auto",
        R"pbdoc(Polar retraction ``polar(x + u)``; x, u: (N, n, p) -> (N, n, p).

p x p Gram route with a refinement step when x + u is ill-conditioned, a one-sided Jacobi SVD
beyond cond 1e5; NaN for rank-deficient x + u. For p >= 9 the Gram route runs on SciPy's BLAS /
LAPACK (GEMM, dsyevd).)pbdoc");
    m.def("stiefel_inv_retr_polar", [](py::handle x, py::handle y, const std::string& parallel) {
        return stiefel_binary<StOp::inv_retr_polar>(x, y, "stiefel_inv_retr_polar", "y",
                                                    parallel); },
        py::arg("x"), py::arg("y"), py::arg("parallel") = "auto",
        R"pbdoc(Inverse polar retraction ``y S - x``, S symmetric with ``(x'y)S + S(y'x) = 2I``.

x, y: (N, n, p) -> (N, n, p). The Lyapunov equation is solved as a p(p+1)/2 linear system for
p <= 7, by the scaled sign-function iteration above (O(p^3); on SciPy's BLAS / LAPACK for
p >= 9). Where the iteration does not converge (x'y not positive stable): Bartels-Stewart on
LAPACK for p >= 9, else the linear system up to p = 32; NaN where there is no unique
solution.)pbdoc");
    m.def("polar", [](py::handle a, const std::string& parallel) { return polar(a, parallel); },
        py::arg("a"), py::arg("parallel") = "auto",
        R"pbdoc(Polar factor ``a (a'a)^(-1/2)`` (nearest Stiefel point); a: (N, n, p), n >= p.

NaN for rank-deficient items (s_min <= s_max * eps * n).)pbdoc");

    for (const char* kernel : {"polar", "stiefel_retr_polar", "stiefel_inv_retr_polar"})
        declare_blas_work(kernel, stiefel_blas_work);
    def_checked<2, false>(m, "stiefel_retr_polar", stiefel_run<StOp::retr_polar>, stiefel_core,
                          stiefel_blas_work, rfl::batch::kMinBytesPerThread,
                          stiefel_group<StOp::retr_polar>);
    def_checked<2, false>(m, "stiefel_inv_retr_polar", stiefel_run<StOp::inv_retr_polar>,
                          stiefel_core, stiefel_blas_work, rfl::batch::kMinBytesPerThread,
                          stiefel_group<StOp::inv_retr_polar>);
}
