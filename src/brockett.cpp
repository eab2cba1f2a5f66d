// Brockett's clipped per-sample gradient sums (rfl/brockett.hpp) for many clients at once:
// brockett_clipped_sum, the private local steps' pass of rfl_fast.problems.Brockett.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "binding.hpp"
#include "rfl/brockett.hpp"

namespace {

// Multiply-adds (samples * d^2 * p) each thread must have: about a millisecond of the loop
// (~400 ns a 30 x 30 sample at p = 5). A thread started for less costs its start and, on a busy
// machine, the wait for a thread that is descheduled holding a client: Brockett at k = 100 (4.5 M)
// took 2.4 ms a call on two threads against 0.4 on one at load 5; k = 1000 (45 M) still splits.
constexpr double kMinWorkPerThread = 1 << 22;

struct Args {
    const double* a;
    const std::int64_t* rows;
    const double* x;
    const double* h2;
    double* out;
    std::size_t b, d;
    int p;
    double tau;
};

template <int P>
RFL_INLINE void units_p(const Args& g, std::size_t k, std::atomic<std::size_t>& next,
                        std::atomic<bool>& ok) {
    const std::size_t dd = g.d * g.d, dp = g.d * static_cast<std::size_t>(g.p);
    std::vector<double> scratch(rfl::brockett::scratch_size(g.d, g.p));
    std::vector<const double*> A(g.b);
    for (std::size_t j; ok.load(std::memory_order_relaxed) &&
                        (j = next.fetch_add(1, std::memory_order_relaxed)) < k;) {
        for (std::size_t s = 0; s < g.b; ++s)
            A[s] = g.a + static_cast<std::size_t>(g.rows[j * g.b + s]) * dd;
        if (!rfl::brockett::client<P>(A.data(), g.b, g.d, g.p, g.x + j * dp, g.h2, g.tau,
                                      g.out + j * dp, scratch.data()))
            ok.store(false, std::memory_order_relaxed);
    }
}

// Worker: claims clients from `next` until none is left or a client has an untrusted sample.
RFL_CLONES void units(const Args* g, std::size_t k, std::atomic<std::size_t>* next,
                      std::atomic<bool>* ok) {
    switch (g->p) {
        case 1: return units_p<1>(*g, k, *next, *ok);
        case 2: return units_p<2>(*g, k, *next, *ok);
        case 3: return units_p<3>(*g, k, *next, *ok);
        case 4: return units_p<4>(*g, k, *next, *ok);
        case 5: return units_p<5>(*g, k, *next, *ok);
        case 6: return units_p<6>(*g, k, *next, *ok);
        case 7: return units_p<7>(*g, k, *next, *ok);
        case 8: return units_p<8>(*g, k, *next, *ok);
        default: return units_p<0>(*g, k, *next, *ok);
    }
}

py::tuple brockett_clipped_sum(const Arr& a, const I64& rows, const Arr& x, const Arr& h,
                               double tau, int threads) {
    const char* kernel = "brockett_clipped_sum";
    check_ndim(a, 3, kernel, "a", "(M, d, d)");
    check_arg(rows, kernel, "rows");
    check_ndim(x, 3, kernel, "x", "(k, d, p)");
    check_ndim(h, 1, kernel, "h", "(p,)");
    const py::ssize_t M = a.shape(0), d = a.shape(1), k = x.shape(0), p = x.shape(2);
    if (a.shape(2) != d) fail(kernel, "a " + shape_str(a) + " holds no square matrices");
    if (x.shape(1) != d) fail(kernel, "x " + shape_str(x) + " does not match a " + shape_str(a));
    if (h.shape(0) != p) fail(kernel, "h " + shape_str(h) + " does not match x " + shape_str(x));
    if (rows.ndim() != 2 || rows.shape(0) != k)
        fail(kernel, "argument rows must have shape (k, b) with k = x.shape[0] = " +
                         std::to_string(k));
    if (!(tau > 0.0)) fail(kernel, "tau must be > 0 (inf: no clipping)");
    const py::ssize_t b = rows.shape(1);
    const std::int64_t* pr = rows.data();
    for (py::ssize_t q = 0; q < k * b; ++q)
        if (pr[q] < 0 || pr[q] >= M)
            fail(kernel, "rows holds " + std::to_string(pr[q]) + ", not a sample index in [0, " +
                             std::to_string(M) + ")");
    std::vector<double> h2(static_cast<std::size_t>(p));
    for (py::ssize_t l = 0; l < p; ++l) h2[l] = 2.0 * h.data()[l];
    Arr out({k, d, p});
    const Args g{a.data(), pr, x.data(), h2.data(), out.mutable_data(),
                 static_cast<std::size_t>(b), static_cast<std::size_t>(d), static_cast<int>(p),
                 tau};
    const double work = static_cast<double>(k) * b * d * d * p;
    const int T = static_cast<int>(std::max<double>(1.0, std::min<double>(
        std::min<double>(std::max(threads, 1), static_cast<double>(k)),
        std::floor(work / kMinWorkPerThread))));
    std::atomic<bool> ok{true};
    {
        py::gil_scoped_release release;
        std::atomic<std::size_t> next{0};
        rfl::batch::run_threads(T, [&] { units(&g, static_cast<std::size_t>(k), &next, &ok); });
    }
    return py::make_tuple(std::move(out), ok.load());
}

}  // namespace

void register_brockett(py::module_& m) {
    m.def("brockett_clipped_sum",
          [](py::handle a, py::handle rows, py::handle x, py::handle h, double tau,
             int threads) { return brockett_clipped_sum(a, rows, x, h, tau, threads); },
          py::arg("a"), py::arg("rows"), py::arg("x"), py::arg("h"), py::arg("tau"),
          py::arg("threads") = 1,
          R"pbdoc(Brockett's clipped per-sample gradient sums, one pass over the samples:
``(out, trusted)``. a: (M, d, d) symmetric samples; rows: (k, b) int64, client j's samples
``a[rows[j]]``; x: (k, d, p) points (orthonormal columns); h: (p,); tau > 0 (inf: no clipping).
For each j: ``G_s = 2 A_s X_j diag(h)``, ``|P_X G_s|^2 = |G_s|^2 - |sym(X_j'G_s)|^2``,
``c_s = min(1, tau / |P_X G_s|)`` (1 at a zero norm), ``out[j] = P_X(sum_s c_s G_s)``.
``trusted`` is false (``out`` then unspecified) where some sample's norm is not trusted:
``|P_X G|^2 < |G|^2 / 4`` (cancellation), or ``|G|^2`` outside (1e-280, 1e280) or not finite;
the caller then takes its reference (rfl_fast.problems.Brockett). ``threads`` threads take
whole clients; the result does not depend on their number.)pbdoc");
}
