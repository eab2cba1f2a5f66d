// A plain C++17 program using the rfl_fast headers (built by CMakeLists.txt beside this file):
// retracts a batch of Stiefel points, inverts the retraction and prints the largest error.
#include <cmath>
#include <cstdio>
#include <vector>

#include <rfl/batch.hpp>
#include <rfl/version.hpp>

int main() {
    const int N = 64, n = 20, p = 3;
    const std::size_t item = static_cast<std::size_t>(n) * p;
    std::vector<double> x(N * item, 0.0), u(N * item), y(N * item), v(N * item);
    for (int i = 0; i < N; ++i)
        for (int j = 0; j < p; ++j) x[i * item + j * p + j] = 1.0;  // the first p unit vectors
    for (std::size_t k = 0; k < u.size(); ++k) u[k] = 0.05 * std::sin(0.7 * static_cast<double>(k));
    // u is not tangent; its tangent part is what the inverse returns
    std::vector<double> t(N * item);
    rfl::batch::stiefel_proj(x.data(), u.data(), t.data(), N, n, p, 2);
    rfl::batch::stiefel_retr_polar(x.data(), t.data(), y.data(), N, n, p, 2);
    rfl::batch::stiefel_inv_retr_polar(x.data(), y.data(), v.data(), N, n, p, 2);
    double err = 0.0;
    for (std::size_t k = 0; k < v.size(); ++k) err = std::fmax(err, std::fabs(v[k] - t[k]));
    std::printf("rfl_fast %s: max |inv_retr(x, retr(x, u)) - u| = %.3g\n",
                RFL_FAST_VERSION_STRING, err);
    return err < 1e-12 ? 0 : 1;
}
