// Stiefel kernels stiefel_proj, stiefel_retr_qr, stiefel_inv_retr_qr and stiefel_exp.
#include "stiefel_loops.hpp"

void stiefel_proj_loop(const double* x, const double* u, double* o, py::ssize_t N, int n, int p) {
    stiefel_loop<StOp::proj>(x, u, o, N, n, p);
}

void register_stiefel_qr(py::module_& m) {
    m.def("stiefel_proj", [](py::handle x, py::handle u, const std::string& parallel) {
        return stiefel_binary<StOp::proj>(x, u, "stiefel_proj", "u", parallel); },
        py::arg("x"), py::arg("u"), py::arg("parallel") = "auto",
        R"pbdoc(Tangent projection ``u - x sym(x'u)``; x, u: (N, n, p) -> (N, n, p).)pbdoc");
    m.def("stiefel_retr_qr", [](py::handle x, py::handle u, const std::string& parallel) {
        return stiefel_binary<StOp::retr_qr>(x, u, "stiefel_retr_qr", "u", parallel); },
        py::arg("x"), py::arg("u"), py::arg("parallel") = "auto",
        R"pbdoc(QR retraction ``qf(x + u)`` with a positive diagonal of R; (N, n, p) -> (N, n, p).

CholeskyQR2 (Householder QR when (x+u)'(x+u) is not numerically positive definite).)pbdoc");
    m.def("stiefel_inv_retr_qr", [](py::handle x, py::handle y, const std::string& parallel) {
        return stiefel_binary<StOp::inv_retr_qr>(x, y, "stiefel_inv_retr_qr", "y",
                                                 parallel); },
        py::arg("x"), py::arg("y"), py::arg("parallel") = "auto",
        R"pbdoc(Inverse QR retraction ``y R - x``, R upper triangular, ``(x'y)R + R'(y'x) = 2I``.

x, y: (N, n, p) -> (N, n, p); NaN where a leading minor of x'y vanishes.)pbdoc");

    m.def("stiefel_exp", [](py::handle x, py::handle u, const std::string& parallel) {
        return stiefel_binary<StOp::exp>(x, u, "stiefel_exp", "u", parallel); },
        py::arg("x"), py::arg("u"), py::arg("parallel") = "auto",
        R"pbdoc(Exponential map (Edelman's geodesic) ``[x u] expm([[A, -S], [I, A]]) [I; 0] expm(-A)``.

``A = x'u``, ``S = u'u``; x, u: (N, n, p) -> (N, n, p). The 2p x 2p and p x p exponentials by
scaling and squaring of the Pade approximant of the least sufficient degree (Higham 2005); NaN
for non-finite items.)pbdoc");

    for (const char* kernel : {"stiefel_proj", "stiefel_retr_qr", "stiefel_inv_retr_qr",
                               "stiefel_exp"})
        declare_blas_work(kernel, stiefel_blas_work);
    def_checked<2, false>(m, "stiefel_proj", stiefel_run<StOp::proj>, stiefel_core,
                          stiefel_blas_work, rfl::batch::kMinBytesPerThread,
                          stiefel_group<StOp::proj>);
    def_checked<2, false>(m, "stiefel_inv_retr_qr", stiefel_run<StOp::inv_retr_qr>, stiefel_core,
                          stiefel_blas_work, rfl::batch::kMinBytesPerThread,
                          stiefel_group<StOp::inv_retr_qr>);
}
