// Fused kernels of the PCA problems: the gradient sums over clients' rows (pca_grad_sum) and
// the fused local steps of the quadratic losses (pca_local_steps: kPCA's rows, Brockett's matrices,
// and at r = 1 with the sphere's Exp / Log, SpherePCA).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "binding.hpp"
#include "rfl/blas.hpp"
#include "rfl/pca.hpp"
#include "rfl/sphere.hpp"

namespace {

// Work unit of pca_grad_sum: rows [lo, hi) of one selected client, into its own accumulator.
struct PcaUnit {
    std::int64_t item, lo, hi;
    double* St;  // r x d: the output slot of the item, or a private partial
    double q;
    double* G = nullptr;  // a whole client's gradient form scale St' (d x r): St then in the
    double scale = 0.0;   // unit's thread's own buffer, transposed in cache; nullptr: none
};

// Rows per unit: a client with more rows is split into fixed chunks (partials summed in chunk
// order afterwards), so a result never depends on the thread count or on which thread ran a
// unit. Small enough that threads balance well when one of them starts late.
constexpr std::int64_t kPcaChunkRows = static_cast<std::int64_t>(rfl::pca::kChunkRows);
// Multiply-adds (rows * d * r) below which one more thread costs more than it saves.
constexpr double kPcaMinWorkPerThread = 1 << 19;

// px: the points X_j (k, d, r) when `points`, transposed into the thread's own xt (r x d) for
// each client it meets (kept while its next unit is the same client's), else the caller's
// Xt (k, r, d).
template <int R>
RFL_INLINE void pca_units_r(PcaUnit* u, std::size_t nu, std::atomic<std::size_t>& next,
                            const double* pz, std::size_t d, const double* px, bool points,
                            int r, const rfl::pca::Weight& wt, double* coef, double* own,
                            double* xt) {
    const std::size_t item = static_cast<std::size_t>(r) * d;
    std::int64_t held = -1;
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < nu;) {
        double* st = u[i].G ? own : u[i].St;  // a gradient form's St: the thread's own, in cache
        const double* xtj = px + u[i].item * item;
        if (points) {
            if (u[i].item != held) {
                for (std::size_t e = 0; e < d; ++e)
                    for (int l = 0; l < r; ++l) xt[l * d + e] = xtj[e * r + l];
                held = u[i].item;
            }
            xtj = xt;
        }
        u[i].q = rfl::pca::client<R>(pz + u[i].lo * d, static_cast<std::size_t>(u[i].hi - u[i].lo),
                                     d, xtj, r, wt, st, coef);
        if (double* g = u[i].G) {  // G = scale St'
            const double sc = u[i].scale;
            for (std::size_t e = 0; e < d; ++e)
                for (int l = 0; l < r; ++l) g[e * r + l] = sc * st[l * d + e];
        }
    }
}

// Worker of pca_grad_sum: claims units from `next` until none is left (dynamic schedule: a
// thread that starts late, or shares its core, simply takes fewer units).
RFL_CLONES_V4 void pca_units(PcaUnit* u, std::size_t nu, std::atomic<std::size_t>* next,
                             const double* pz, std::size_t d, const double* pxt,
                             int r, rfl::pca::Weight wt, bool points) {
    std::vector<double> coef(static_cast<std::size_t>(rfl::pca::kRowsMax) * r);
    double* c = coef.data();
    // one St of its own for the gradient form's units (uninitialized), only where one is
    // (the local steps' one-unit calls have none: no allocation per chunk and step)
    bool transposing = false;
    for (std::size_t i = 0; i < nu && !transposing; ++i) transposing = u[i].G != nullptr;
    std::unique_ptr<double[]> own(transposing ? new double[static_cast<std::size_t>(r) * d]
                                              : nullptr);
    double* o = own.get();
    std::unique_ptr<double[]> xt_own(points ? new double[static_cast<std::size_t>(r) * d]
                                            : nullptr);
    double* t = xt_own.get();
    switch (r) {
        case 1: return pca_units_r<1>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 2: return pca_units_r<2>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 3: return pca_units_r<3>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 4: return pca_units_r<4>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 5: return pca_units_r<5>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 6: return pca_units_r<6>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 7: return pca_units_r<7>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        case 8: return pca_units_r<8>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
        default: return pca_units_r<0>(u, nu, *next, pz, d, pxt, points, r, wt, c, o, t);
    }
}


py::tuple pca_grad_sum(const Arr& z, const I64& offsets, const I64& idx, const Arr& xt,
                       double tau, double c, bool clipped, int threads, const py::object& scale,
                       bool points) {
    const char* kernel = "pca_grad_sum";
    check_ndim(z, 2, kernel, "z", "(M, d)");
    check_arg(offsets, kernel, "offsets");
    check_arg(idx, kernel, "idx");
    check_ndim(xt, 3, kernel, "xt", points ? "(k, d, r) (points=True)" : "(k, r, d)");
    if (offsets.ndim() != 1 || offsets.shape(0) < 1)
        fail(kernel, "argument offsets must have shape (n + 1,), got " + std::to_string(offsets.ndim()) + " axes");
    if (idx.ndim() != 1 || idx.shape(0) != xt.shape(0))
        fail(kernel, "argument idx must have shape (k,) with k = xt.shape[0] = " +
                         std::to_string(xt.shape(0)));
    const std::size_t d = static_cast<std::size_t>(z.shape(1));
    if (xt.shape(points ? 1 : 2) != z.shape(1))
        fail(kernel, "xt " + shape_str(xt) + " does not match the row length of z " + shape_str(z));
    if (clipped && !(tau > 0.0)) fail(kernel, "tau must be > 0 (inf: no clipping)");
    const py::ssize_t k = xt.shape(0), n = offsets.shape(0) - 1;
    const int r = static_cast<int>(xt.shape(points ? 2 : 1));
    const std::int64_t* po = offsets.data();
    const std::int64_t* pi = idx.data();
    const std::int64_t rows = z.shape(0);
    for (py::ssize_t i = 0; i <= n; ++i)
        if (po[i] < 0 || po[i] > rows || (i && po[i] < po[i - 1]))
            fail(kernel, "offsets must be non-decreasing within [0, " + std::to_string(rows) + "]");
    for (py::ssize_t j = 0; j < k; ++j)
        if (pi[j] < 0 || pi[j] >= n)
            fail(kernel, "idx[" + std::to_string(j) + "] = " + std::to_string(pi[j]) +
                             " is not a client index in [0, " + std::to_string(n) + ")");
    // with scale: G[j] = scale[j] St[j]' (k, d, r) out, St in scratch
    const bool gradient = !scale.is_none();
    Arr sc;
    if (gradient) {
        sc = take_array<double>(scale);
        check_arg(sc, kernel, "scale");
        if (sc.ndim() != 1 || sc.shape(0) != k)
            fail(kernel, "argument scale must have shape (k,) with k = " + std::to_string(k));
    }
    const auto R_ = static_cast<py::ssize_t>(r), D_ = static_cast<py::ssize_t>(d);
    Arr out = gradient ? Arr({k, D_, R_}) : Arr({k, R_, D_});
    // (uninitialized, and untouched by the one-unit clients of the gradient form: no page faults)
    std::unique_ptr<double[]> st_scratch(gradient ? new double[static_cast<std::size_t>(k) * r * d]
                                                  : nullptr);
    py::array_t<double> q(k);
    const double* pz = z.data();
    const double* pxt = xt.data();
    double* pout = gradient ? st_scratch.get() : out.mutable_data();
    double* pg = out.mutable_data();
    const double* psc = gradient ? sc.data() : nullptr;
    double* pq = q.mutable_data();
    const rfl::pca::Weight wt{clipped, tau, std::fabs(c)};
    {
        py::gil_scoped_release release;
        const std::size_t item = static_cast<std::size_t>(r) * d;
        // units: fixed row chunks per client; multi-chunk clients get private partials
        std::vector<PcaUnit> units;
        std::vector<std::size_t> first(k + 1);
        std::size_t n_partial = 0;
        for (py::ssize_t j = 0; j < k; ++j) {
            first[j] = units.size();
            const std::int64_t lo = po[pi[j]], hi = po[pi[j] + 1];
            const std::int64_t nc = std::max<std::int64_t>(1, (hi - lo + kPcaChunkRows - 1) / kPcaChunkRows);
            for (std::int64_t s = 0; s < nc; ++s)
                units.push_back({j, lo + s * kPcaChunkRows,
                                 std::min(hi, lo + (s + 1) * kPcaChunkRows), nullptr, 0.0});
            if (nc > 1) n_partial += static_cast<std::size_t>(nc);
        }
        first[k] = units.size();
        std::vector<double> partial(n_partial * item);
        std::size_t slot = 0;
        for (py::ssize_t j = 0; j < k; ++j) {
            const std::size_t nc = first[j + 1] - first[j];
            for (std::size_t s = first[j]; s < first[j + 1]; ++s)
                units[s].St = nc == 1 ? pout + j * item : partial.data() + (slot++) * item;
            if (gradient && nc == 1) {  // a one-unit client's gradient form by its thread
                units[first[j]].G = pg + j * item;
                units[first[j]].scale = psc[j];
            }
        }
        const std::size_t nu = units.size();
        std::int64_t all_rows = 0;
        for (const auto& u : units) all_rows += u.hi - u.lo;
        const double work = static_cast<double>(all_rows) * static_cast<double>(d) * r;
        const std::size_t by_work = static_cast<std::size_t>(work / kPcaMinWorkPerThread);
        const int T = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(
            std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), nu), by_work)));
        std::atomic<std::size_t> next{0};
        rfl::batch::run_threads(  // a thread the system refuses is not started (batch.hpp)
            T, [&] { pca_units(units.data(), nu, &next, pz, d, pxt, r, wt, points); });
        // reduction in chunk order
        for (py::ssize_t j = 0; j < k; ++j) {
            double qj = 0.0;
            const std::size_t nc = first[j + 1] - first[j];
            if (nc > 1) {
                double* o = pout + j * item;
                std::fill(o, o + item, 0.0);
                for (std::size_t s = first[j]; s < first[j + 1]; ++s)
                    for (std::size_t e = 0; e < item; ++e) o[e] += units[s].St[e];
            }
            for (std::size_t s = first[j]; s < first[j + 1]; ++s) qj += units[s].q;
            pq[j] = qj;
            if (gradient && nc > 1) {  // G[j] = scale[j] St[j]' (one-unit clients: done)
                const double* st = pout + j * item;
                double* g = pg + j * item;
                for (std::size_t i = 0; i < d; ++i)
                    for (int l = 0; l < r; ++l) g[i * r + l] = psc[j] * st[l * d + i];
            }
        }
    }
    return py::make_tuple(out, q);
}

// ---------------------------------------------------------------- fused local steps (kPCA)

// The fused local steps (pca_local_steps): the header's loop rfl::pca::local_steps (a group of
// clients in lockstep, what a C++ user calls with one) with this extension's operations: each
// client's rows in 512-row chunks through pca_units (summed in order, as the batched
// pca_grad_sum), or its matrix through gram_rows, and the group's projection, retraction,
// inverse retraction and nearest-point projection in single batch calls of the Stiefel loops
// (p = 5: their 8-item lanes), which give each item the bits of a call of its own; so RFedAvg's
// iterates are the batched route's bit for bit. The terms an algorithm adds are the header's
// rfl::pca::Terms (offset: RFedSVRG; anchor, mu: RFedProx; coef: RFedSVRG-2BB; sum: RFedAGS's
// stream; ambient, drift: RFedProj). `h` (r, or nullptr): the client's rows are instead its
// symmetric d x d matrix A (the Brockett cost, kPCA from Gram matrices) and the gradient is
// s A X diag(h). `geodesic` (r = 1, the sphere S^(d-1) on its points as d x 1 matrices): the
// retraction and its inverse are the sphere's Exp and Log (rfl/sphere.hpp) instead of the polar
// pair; the projection (u - x x'u) and the nearest point (x/|x|) are the Stiefel loops' at p = 1.
// Those Exp and Log run inline here, not through the sphere kernels' per-ISA batch loops, so
// the sphere's iterates equal the composed route's to rounding, not bit for bit (measured:
// 5.6e-17 after one step).
struct LocalSteps {
    const double* pz;
    const std::int64_t* po;
    const std::int64_t* pi;
    std::size_t d;
    int r;
    const double* ps;
    double eta;
    int steps;
    rfl::pca::Terms terms;  // per-client arrays for all k clients, from client 0
    const double* h;  // (r,) or nullptr: the rows are each client's d x d matrix
    bool geodesic;    // r = 1: the sphere's Exp / Log in place of the polar pair
    bool parallel;    // with geodesic: the offset is parallel-transported from the anchor
};

// Below this 1 + <x, y> the sphere's parallel transport takes the logarithm's form (the
// threshold of rfl_fast.manifolds.sphere: Sphere.transport's _NEAR_ANTIPODAL).
constexpr double kNearAntipodal = 1e-6;

// The sphere's parallel transport of v from x to y as Sphere.transport: the kernel's
// v - <y,v>/(1 + <x,y>) (x + y) (rfl::sphere::transport), or where 1 + <x,y> < kNearAntipodal
// the logarithm's form v + <e,v>((cos t - 1) e - sin t x), e the unit direction of
// w = y - <x,y> x, t = atan2(|w|, <x,y>) (NaN at the antipode).
void sphere_parallel_transport(const double* x, const double* y, const double* v, double* out,
                               std::size_t d) {
    double c = 0.0;
    for (std::size_t k = 0; k < d; ++k) c += x[k] * y[k];
    if (!(1.0 + c < kNearAntipodal)) return rfl::sphere::transport(x, y, v, out, d);
    double ww = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
        out[k] = y[k] - c * x[k];
        ww += out[k] * out[k];
    }
    const double nw = std::sqrt(ww), t = std::atan2(nw, c);
    const double inv = nw > 0.0 ? 1.0 / nw : std::numeric_limits<double>::quiet_NaN();
    double ev = 0.0;
    for (std::size_t k = 0; k < d; ++k) ev += out[k] * inv * v[k];
    const double ct = std::cos(t) - 1.0, st = std::sin(t);
    for (std::size_t k = 0; k < d; ++k) out[k] = v[k] + ev * (ct * (out[k] * inv) - st * x[k]);
}

// The sphere's steps (r = 1, the points' d x 1 matrices as vectors) with the offset
// parallel-transported from the anchor x_t (RFedSVRG's correction under the sphere's default
// transport): g clients in lockstep, `steps` times, with the composed loop's maps in its order
//   v = offset_c - coef_c Log_{x_t}(x)     (v = offset_c without coef)
//   d = P_x(s_c G_c(x)) - PT_{x_t -> x}(v),   x <- Exp_x(-eta d)
// (P_x: the Stiefel projection loop at p = 1, as the header's loop; NaN where a Log or the
// transport has no answer, which Exp carries into x).
// Without an offset, with `sum` (RFedAGS's stream under the sphere's parallel transport): the
// directions d = P_x(s_c G_c(x)) transported to the anchor x_t and summed, sum +=
// PT_{x -> x_t}(d) (from x0 = x_t the first transport is the identity to rounding, which the
// composed loop skips), x <- Exp_x(-eta d) but after the last step (x: the last point whose
// gradient was taken), the composed loop's stream over eta.
template <class Grad>
void sphere_parallel_steps(const LocalSteps& a, std::size_t g, double* X,
                           const double* s, const rfl::pca::Terms& t, Grad&& grad) {
    const std::size_t d = a.d, all = g * d;
    std::vector<double> work(d + 4 * all + 2 * d);
    double* St = work.data();
    double* G = St + d;
    double* U = G + all;
    double* Y = U + all;
    double* V = Y + all;
    double* pull = V + all;
    double* T = pull + d;
    const int n = static_cast<int>(d);
    for (int step = 0; step < a.steps; ++step) {
        for (std::size_t c = 0; c < g; ++c) {
            grad(c, static_cast<const double*>(X + c * d), St);
            const double sc = s[c];
            for (std::size_t i = 0; i < d; ++i) G[c * d + i] = sc * St[i];
        }
        stiefel_proj_loop(X, G, U, static_cast<py::ssize_t>(g), n, 1);
        if (t.offset == nullptr) {  // the stream
            const bool last = step + 1 == a.steps;
            for (std::size_t c = 0; c < g; ++c) {
                const double* xc = X + c * d;
                double* uc = U + c * d;
                double* sum = t.sum + c * d;
                sphere_parallel_transport(xc, t.anchor, uc, T, d);
                for (std::size_t i = 0; i < d; ++i) sum[i] += T[i];
                if (last) continue;
                for (std::size_t i = 0; i < d; ++i) uc[i] = -a.eta * uc[i];
                rfl::sphere::exp(xc, uc, Y + c * d, d);
            }
            if (!last) std::copy(Y, Y + all, X);
            continue;
        }
        for (std::size_t c = 0; c < g; ++c) {
            const double* xc = X + c * d;
            const double* v = t.offset + c * d;
            if (t.coef != nullptr) {
                rfl::sphere::log(t.anchor, xc, pull, d);
                const double cj = t.coef[c];
                for (std::size_t i = 0; i < d; ++i) V[c * d + i] = v[i] - cj * pull[i];
                v = V + c * d;
            }
            sphere_parallel_transport(t.anchor, xc, v, T, d);
            double* uc = U + c * d;
            for (std::size_t i = 0; i < d; ++i) uc[i] = -a.eta * (uc[i] - T[i]);
            rfl::sphere::exp(xc, uc, Y + c * d, d);
        }
        std::copy(Y, Y + all, X);
    }
}

// St (r x d) = (A X diag(h))' = diag(h) X' A for the symmetric A (d x d, row-major) and X
// (d x r, row-major): row l of St is the sum over k of h_l X[k][l] A[k][.], each a contiguous
// axpy of length d (vectorized; the x86-64-v3 clone's FMAs), in a fixed order.
RFL_CLONES void gram_rows(const double* A, std::size_t d, int r, const double* X,
                          const double* h, double* St) {
    std::fill(St, St + static_cast<std::size_t>(r) * d, 0.0);
    for (std::size_t k = 0; k < d; ++k) {
        const double* ak = A + k * d;
        for (int l = 0; l < r; ++l) {
            const double c = h[l] * X[k * static_cast<std::size_t>(r) + l];
            double* s = St + static_cast<std::size_t>(l) * d;
            for (std::size_t i = 0; i < d; ++i) s[i] += c * ak[i];
        }
    }
}

// Clients j0 .. j0 + g - 1 in lockstep (their points contiguous at X) through the header's
// loop. Large clients go one at a time (g = 1), so a client's rows stay in cache over its
// steps; small ones (rows of at most kSmallClientBytes, a group's in L2) in groups of kGroup,
// where one item's retraction would cost more than its gradient.
constexpr std::size_t kGroup = 8;
//! Rows bytes per client up to which clients step in groups.
constexpr std::size_t kSmallClientBytes = 64 * 1024;

void pca_local_steps_group(const LocalSteps& a, std::size_t j0, std::size_t g, double* X) {
    const std::size_t d = a.d, item = static_cast<std::size_t>(a.r) * d;
    const int n = static_cast<int>(d), r = a.r;
    std::size_t nc_max = 1;  // chunks of the largest client (rows form)
    if (a.h == nullptr)
        for (std::size_t c = 0; c < g; ++c)
            nc_max = std::max(nc_max, rfl::pca::chunk_count(static_cast<std::size_t>(
                                          a.po[a.pi[j0 + c] + 1] - a.po[a.pi[j0 + c]])));
    rfl::pca::Terms t = a.terms;  // the group's slices of the per-client arrays
    const auto at = [&](auto* p) { return p == nullptr ? nullptr : p + j0 * item; };
    t.offset = at(t.offset);
    t.sum = at(t.sum);
    t.ambient = at(t.ambient);
    t.drift = at(t.drift);
    t.coef = t.coef == nullptr ? nullptr : t.coef + j0;
    std::vector<double> work(rfl::pca::local_steps_work_size(g, d, r, t) + item +
                             (nc_max > 1 ? nc_max * item : 0));
    double* Xt = work.data() + (work.size() - item - (nc_max > 1 ? nc_max * item : 0));
    double* partials = Xt + item;
    const rfl::pca::Weight plain{false, INFINITY, 1.0};
    const auto N = [](std::size_t m) { return static_cast<py::ssize_t>(m); };
    const auto grad = [&](std::size_t c, const double* Xc, double* St) {  // the Euclidean
            const std::int64_t lo = a.po[a.pi[j0 + c]], hi = a.po[a.pi[j0 + c] + 1];
            if (a.h != nullptr) return gram_rows(a.pz + lo * d, d, r, Xc, a.h, St);
            rfl::pca::rows_gradient(
                a.pz + lo * d, static_cast<std::size_t>(hi - lo), d, r, Xc, Xt, St, partials,
                [&](const double* rows, std::size_t count, const double* xt, double* Sc) {
                    PcaUnit unit{0, 0, static_cast<std::int64_t>(count), Sc, 0.0};
                    std::atomic<std::size_t> next{0};
                    pca_units(&unit, 1, &next, rows, d, xt, r, plain, false);
                });
    };  // gradient's St
    if (a.parallel) return sphere_parallel_steps(a, g, X, a.ps + j0, t, grad);
    rfl::pca::local_steps(
        g, d, r, X, a.ps + j0, a.eta, a.steps, t, work.data(), grad,
        [&](const double* x, const double* u, double* o, std::size_t m) {
            stiefel_proj_loop(x, u, o, N(m), n, r);
        },
        [&](const double* x, const double* u, double* y, std::size_t m) {
            if (!a.geodesic) return stiefel_retr_polar_loop(x, u, y, N(m), n, r);
            for (std::size_t c = 0; c < m; ++c)
                rfl::sphere::exp(x + c * d, u + c * d, y + c * d, d);
        },
        [&](const double* x, const double* y, double* o, std::size_t m) {
            if (!a.geodesic) return stiefel_inv_retr_polar_loop(x, y, o, N(m), n, r);
            for (std::size_t c = 0; c < m; ++c)
                rfl::sphere::log(x + c * d, y + c * d, o + c * d, d);
        },
        [&](const double* z, double* y, std::size_t m) { stiefel_polar_loop(z, y, N(m), n, r); });
}

void pca_local_units(const LocalSteps& a, std::size_t k, std::size_t group, double* px,
                     std::atomic<std::size_t>* next) {
    const std::size_t item = static_cast<std::size_t>(a.r) * a.d;
    const rfl::blas::Suspend own_loops;  // clients run on several threads: no BLAS threads
    for (std::size_t j; (j = next->fetch_add(group, std::memory_order_relaxed)) < k;)
        pca_local_steps_group(a, j, std::min(group, k - j), px + j * item);
}

// A per-client argument of the shape of x0 (k, d, r) (offset, drift), or an empty array for
// None; refusals name the argument.
Arr like_x0(const py::object& arg, const Arr& x0, const char* kernel, const char* name) {
    if (arg.is_none()) return Arr();
    Arr a = take_array<double>(arg);
    check_arg(a, kernel, name);
    if (a.ndim() != 3 || a.shape(0) != x0.shape(0) || a.shape(1) != x0.shape(1) ||
        a.shape(2) != x0.shape(2))
        fail(kernel, std::string(name) + " " + shape_str(a) + " must have the shape of x0 " +
                         shape_str(x0));
    return a;
}

py::object pca_local_steps(const Arr& z, const I64& offsets, const I64& idx, const Arr& x0,
                    const Arr& scale, double eta, int steps, int threads,
                    const py::object& offset, const py::object& anchor, double mu,
                    bool accumulate, bool ambient, const py::object& drift,
                    const py::object& coef, const py::object& h,
                    const std::string& retraction, const std::string& transport) {
    const char* kernel = "pca_local_steps";
    // every argument is checked before any work
    check_ndim(z, 2, kernel, "z", "(M, d)");
    check_arg(offsets, kernel, "offsets");
    check_arg(idx, kernel, "idx");
    check_ndim(x0, 3, kernel, "x0", "(k, d, r)");
    check_arg(scale, kernel, "scale");
    if (offsets.ndim() != 1 || offsets.shape(0) < 2)
        fail(kernel, "offsets must have shape (n + 1,) with n >= 1");
    const py::ssize_t k = x0.shape(0), n = offsets.shape(0) - 1;
    const std::size_t d = static_cast<std::size_t>(z.shape(1));
    const int r = static_cast<int>(x0.shape(2));
    if (x0.shape(1) != z.shape(1) || r > x0.shape(1))
        fail(kernel, "x0 " + shape_str(x0) + " does not match the rows of z " + shape_str(z));
    if (idx.ndim() != 1 || idx.shape(0) != k || scale.ndim() != 1 || scale.shape(0) != k)
        fail(kernel, "idx and scale must have shape (k,) with k = " + std::to_string(k));
    const std::int64_t* po = offsets.data();
    const std::int64_t* pi = idx.data();
    for (py::ssize_t i = 0; i <= n; ++i)
        if (po[i] < 0 || po[i] > z.shape(0) || (i && po[i] < po[i - 1]))
            fail(kernel, "offsets must be non-decreasing within [0, " +
                             std::to_string(z.shape(0)) + "]");
    for (py::ssize_t j = 0; j < k; ++j)
        if (pi[j] < 0 || pi[j] >= n) fail(kernel, "idx has a value outside [0, n)");
    if (steps < 0) fail(kernel, "steps must be >= 0");
    const bool geodesic = retraction == "exp";
    if (!geodesic && retraction != "polar")
        fail(kernel, "retraction must be 'polar' or 'exp', got '" + retraction + "'");
    if (geodesic && r != 1)
        fail(kernel, "retraction 'exp' (the sphere's Exp and Log) needs r = 1, got x0 " +
                         shape_str(x0));
    const Arr off = like_x0(offset, x0, kernel, "offset");  // RFedSVRG's per-client offsets
    Arr anc;  // RFedProx's anchor x_t (d, r), with its weight mu
    if (!anchor.is_none()) {
        anc = take_array<double>(anchor);
        check_arg(anc, kernel, "anchor");
        if (anc.ndim() != 2 || anc.shape(0) != x0.shape(1) || anc.shape(1) != x0.shape(2))
            fail(kernel, "anchor " + shape_str(anc) + " must have the shape of one point of x0 " +
                             shape_str(x0));
        if (!std::isfinite(mu) || mu < 0.0) fail(kernel, "mu must be finite and >= 0");
        if (ambient) fail(kernel, "ambient steps (RFedProj's) take no anchor");
    }
    Arr hh;  // the matrices' form: each client's rows are its d x d matrix, the gradient
    if (!h.is_none()) {  // s A X diag(h)
        hh = take_array<double>(h);
        check_arg(hh, kernel, "h");
        if (hh.ndim() != 1 || hh.shape(0) != x0.shape(2))
            fail(kernel, "h must have shape (r,) with r = " + std::to_string(x0.shape(2)));
        for (py::ssize_t j = 0; j < k; ++j)
            if (po[pi[j] + 1] - po[pi[j]] != z.shape(1))
                fail(kernel, "with h, every selected client must own d = " +
                                 std::to_string(z.shape(1)) + " rows (its d x d matrix)");
    }
    Arr cf;  // RFedSVRG-2BB's per-client correction weights
    if (!coef.is_none()) {
        if (anchor.is_none() || mu != 0.0)
            fail(kernel, "coef needs an anchor and mu = 0 (RFedSVRG-2BB's correction)");
        cf = take_array<double>(coef);
        check_arg(cf, kernel, "coef");
        if (cf.ndim() != 1 || cf.shape(0) != k)
            fail(kernel, "coef must have shape (k,) with k = " + std::to_string(k));
        for (py::ssize_t j = 0; j < k; ++j)
            if (!std::isfinite(cf.data()[j])) fail(kernel, "coef must be finite");
    }
    if (!drift.is_none() && !ambient) fail(kernel, "drift needs ambient=True (RFedProj's steps)");
    const bool parallel = transport == "parallel";  // the offset's transport from the anchor
    if (!parallel && transport != "projection")
        fail(kernel, "transport must be 'projection' or 'parallel', got '" + transport + "'");
    if (parallel && !geodesic)
        fail(kernel, "transport 'parallel' (the sphere's parallel transport of the offset) needs "
                     "retraction 'exp' at r = 1, got retraction '" + retraction + "'");
    if (parallel && (offset.is_none() == !accumulate || anchor.is_none() || mu != 0.0 ||
                     ambient || (accumulate && !coef.is_none())))
        fail(kernel, "transport 'parallel' needs the anchor x_t, mu = 0, no ambient steps, and "
                     "either an offset (tangent at x_t) or accumulate (the stream transported "
                     "to x_t, without coef), not both");
    const Arr dr = like_x0(drift, x0, kernel, "drift");  // RFedProj's drift corrections
    // the outputs
    Arr x({k, x0.shape(1), x0.shape(2)});
    std::copy(x0.data(), x0.data() + x0.size(), x.mutable_data());
    Arr zh;  // RFedProj's ambient iterates, from x0
    if (ambient) {
        zh = Arr({k, x0.shape(1), x0.shape(2)});
        std::copy(x0.data(), x0.data() + x0.size(), zh.mutable_data());
    }
    Arr sum;  // RFedAGS's stream: the directions summed
    if (accumulate) {
        sum = Arr({k, x0.shape(1), x0.shape(2)});
        std::fill(sum.mutable_data(), sum.mutable_data() + sum.size(), 0.0);
    }
    rfl::pca::Terms terms;
    terms.offset = offset.is_none() ? nullptr : off.data();
    terms.anchor = anchor.is_none() ? nullptr : anc.data();
    terms.mu = mu;
    terms.coef = coef.is_none() ? nullptr : cf.data();
    terms.sum = accumulate ? sum.mutable_data() : nullptr;
    terms.ambient = ambient ? zh.mutable_data() : nullptr;
    terms.drift = drift.is_none() ? nullptr : dr.data();
    const LocalSteps args{z.data(), po, pi, d, r, scale.data(), eta, steps, terms,
                          h.is_none() ? nullptr : hh.data(), geodesic, parallel};
    double* px = x.mutable_data();
    std::int64_t rows_max = 0, rows_all = 0;  // small clients step in groups
    for (py::ssize_t j = 0; j < k; ++j) {
        rows_max = std::max(rows_max, po[pi[j] + 1] - po[pi[j]]);
        rows_all += po[pi[j] + 1] - po[pi[j]];
    }
    const std::size_t group =
        static_cast<std::size_t>(rows_max) * d * sizeof(double) <= kSmallClientBytes ? kGroup : 1;
    // threads: at most one per unit (a group) and per kPcaMinWorkPerThread multiply-adds of the
    // gradients, pca_grad_sum's rule (a small call stays on the calling thread)
    const double work = static_cast<double>(rows_all) * static_cast<double>(d) * r *
                        std::max(steps, 1);
    const std::size_t units = (static_cast<std::size_t>(k) + group - 1) / group;
    const int T = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(
        std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), units),
        static_cast<std::size_t>(work / kPcaMinWorkPerThread))));
    {
        py::gil_scoped_release release;
        std::atomic<std::size_t> next{0};
        rfl::batch::run_threads(T, [&] {
            pca_local_units(args, static_cast<std::size_t>(k), group, px, &next);
        });
    }
    if (ambient) x = zh;
    if (accumulate) return py::make_tuple(x, sum);
    return std::move(x);
}

}  // namespace

void register_pca(py::module_& m) {
    m.def("pca_local_steps",
          [](py::handle z, py::handle offsets, py::handle idx, py::handle x0, py::handle scale,
             double eta, int steps, int threads, const py::object& offset,
             const py::object& anchor, double mu, bool accumulate, bool ambient,
             const py::object& drift, const py::object& coef,
             const py::object& h, const std::string& retraction,
             const std::string& transport) -> py::object {
              return pca_local_steps(z, offsets, idx, x0, scale, eta, steps, threads, offset,
                                     anchor, mu, accumulate, ambient, drift, coef, h,
                                     retraction, transport);
          },
          py::arg("z"), py::arg("offsets"), py::arg("idx"),
          py::arg("x0"), py::arg("scale"), py::arg("eta"), py::arg("steps"),
          py::arg("threads") = 1, py::arg("offset") = py::none(),
          py::arg("anchor") = py::none(), py::arg("mu") = 0.0, py::arg("accumulate") = false,
          py::arg("ambient") = false, py::arg("drift") = py::none(),
          py::arg("coef") = py::none(), py::arg("h") = py::none(),
          py::arg("retraction") = "polar", py::arg("transport") = "projection",
          R"pbdoc(Fused local steps of the quadratic losses (kPCA, Brockett): for each j,
``steps`` times ``X <- polar(X - eta P_X(scale[j] Z_i'(Z_i X)))`` from ``x0[j]`` (k, d, r) on the rows of client
``idx[j]``; returns the last iterates (k, d, r), NaN where a retraction had no solution. The
same arithmetic as the batched kernels (pca_grad_sum with scale, stiefel_proj,
stiefel_retr_polar), so the same bits; all steps of one client run while its rows are in
cache (clients of at most 64 KiB of rows in lockstep groups of 8, the same bits). ``threads``
threads take whole clients (groups). With ``offset`` ((k, d, r) float64) every step
is ``X <- polar(X - eta P_X(scale[j] Z_i'(Z_i X) - offset[j]))`` (RFedSVRG's local steps on
kPCA, whose correction is the projection of a constant vector). With ``anchor`` ((d, r)
float64) and ``mu`` (>= 0) the direction also subtracts ``mu R_X^{-1}(anchor)``, the inverse
polar retraction (RFedProx's local steps on kPCA); NaN where that inverse has no solution.
With ``accumulate``: ``(x, sum)``, ``sum[j]`` the client's step directions (before ``-eta``)
summed over its steps, the last step's retraction skipped (``x[j]`` is the last point whose
gradient was taken): RFedAGS's gradient stream on kPCA. With ``ambient``: RFedProj's steps,
``zhat <- zhat - eta (P_X(G) + drift[j])``, ``X <- polar(zhat)`` from ``zhat = X = x0[j]``
(``drift``: (k, d, r) or none), returning ``zhat`` in place of ``x``. With ``anchor`` and
``coef`` ((k,) float64; ``mu = 0``): RFedSVRG-2BB's steps, the direction
``P_X(scale[j] Z_i'(Z_i X) - offset[j] + coef[j] R_anchor^{-1}(X))``. With ``h`` ((r,)
float64): each client's rows ``offsets[i]:offsets[i+1]`` are its symmetric d x d matrix
``A_i`` and the Euclidean gradient is ``scale[j] A_i X diag(h)`` (the Brockett cost; kPCA from
covariances with ``h = 1``). With ``retraction="exp"`` (r = 1: the sphere S^(d-1), its points
as d x 1 matrices) the retraction and its inverse are the sphere's Exp ``cos|u| x + sin|u| u/|u|``
and Log in place of the polar pair (the projection and the nearest point are the polar loops'
at p = 1: ``u - x x'u``, ``x/|x|``). With ``transport="parallel"`` (retraction ``"exp"`` only;
``anchor`` = x_t, ``mu = 0``, no ambient steps) and ``offset``, tangent at x_t: RFedSVRG's steps
under the sphere's parallel transport, ``x <- Exp_x(-eta (P_x(scale[j] Z_i'(Z_i x)) -
PT_{x_t -> x}(v)))`` with ``v = offset[j] - coef[j] Log_{x_t}(x)`` (``v = offset[j]`` without
``coef``); or instead ``accumulate`` (no ``coef``): RFedAGS's stream, each step's direction
``d = P_x(scale[j] Z_i'(Z_i x))`` transported to x_t and summed, ``sum[j] += PT_{x -> x_t}(d)``,
``x <- Exp_x(-eta d)`` but after the last step.)pbdoc");

    // fused PCA-type gradient sums (not a KERNELS entry: clients of different sizes)
    m.def("pca_grad_sum",
        [](py::handle z, py::handle offsets, py::handle idx, py::handle xt, double tau, double c,
           bool clipped, int threads, const py::object& scale, bool points) {
            return pca_grad_sum(z, offsets, idx, xt, tau, c, clipped, threads, scale, points);
        },
        py::arg("z"), py::arg("offsets"), py::arg("idx"),
        py::arg("xt"), py::arg("tau"), py::arg("c"), py::arg("clipped"), py::arg("threads") = 1,
        py::arg("scale") = py::none(), py::arg("points") = false,
        R"pbdoc(One streaming pass over the rows of each selected client: ``(St, q)``.

z: (M, d) all clients' rows; offsets: (n + 1,) int64, client i owns rows offsets[i]:offsets[i+1];
idx: (k,) int64 selected clients; xt: (k, r, d) the points X_j transposed (orthonormal
columns of X_j when clipped). For each j: ``y = X_j' z`` per row z of client idx[j], weight
``w = 1`` (plain) or ``min(1, tau / (|c| sqrt(|z|^2 - |y|^2) |y|))`` (clipped), and
``St[j] = sum w y z'`` (r, d), i.e. ``(Z'(w o ZX))'``; ``q[j] = sum |y|^2``. ``threads``
threads (at most; fewer for small work) claim the work in units of one client's fixed
512-row chunk; the result does not depend on the thread count. With ``scale`` ((k,)
float64) the first output is the gradient form ``G[j] = scale[j] St[j]'`` (k, d, r). With
``points=True`` xt holds the points X_j themselves, (k, d, r), which each thread transposes
for the clients it takes (no transposed copy of the stack; the same results).)pbdoc");
}
