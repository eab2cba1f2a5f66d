"""The C++ clipped PCA pass in blocks (``rfl::pca::rows_clipped_blocked``): rows whose
``|res|^2 = |z|^2 - |y|^2`` is trusted share the plain pass's blocks and add ``a y z' - a y y' X'``;
the others (almost in span(X), in span, zero, tiny or huge) take the explicit residual. Mixed
blocks of both kinds equal the NumPy reference, and every row alone adds at most ``tau`` (plus
rounding) whatever its kind."""

import numpy as np
import pytest

from rfl_fast.kernels import fused

needs_cpp = pytest.mark.skipif(not fused.compiled_available(),
                               reason="C++ extension without pca_grad_sum")


def _hostile_rows(rng, m, d, X):
    """``m`` rows cycling through: random, almost in span(X) (residual 1e-9 and 1e-15 of the
    row), exactly in span, zero, scaled by 1e150 and 1e-150, and half in span (|res|^2 just
    around the trust threshold |z|^2 / 4)."""
    r = X.shape[1]
    rows = []
    for j in range(m):
        kind = j % 9
        z = rng.standard_normal(d)
        inspan = X @ rng.standard_normal(r)
        if kind == 1:
            z = inspan + 1e-9 * np.linalg.norm(inspan) * z / np.linalg.norm(z)
        elif kind == 2:
            z = inspan + 1e-15 * np.linalg.norm(inspan) * z / np.linalg.norm(z)
        elif kind == 3:
            z = inspan
        elif kind == 4:
            z = np.zeros(d)
        elif kind == 5:
            z = 1e150 * z
        elif kind == 6:
            z = 1e-150 * z
        elif kind in (7, 8):   # |y|^2 / |z|^2 around 3/4 (the threshold |res|^2 >= |z|^2 / 4)
            res = z - X @ (X.T @ z)
            res *= np.linalg.norm(inspan) / np.linalg.norm(res)
            z = inspan * (np.sqrt(3.0) * (1.0 + (1e-12 if kind == 7 else -1e-12))) + res
        rows.append(z)
    return np.array(rows)


@needs_cpp
@pytest.mark.parametrize("r", [1, 3, 5, 7, 10])   # blocks of 4 (r <= 5), 2 (6..8), runtime r
@pytest.mark.parametrize("tau", [1e-3, 0.7, np.inf])
def test_blocked_clipped_pass_on_hostile_rows(r, tau):
    rng = np.random.default_rng(100 * r + 3)
    d, m = 37, 41
    X = np.linalg.qr(rng.standard_normal((d, r)))[0]
    Z = _hostile_rows(rng, m, d, X)
    Xt = np.ascontiguousarray(X.T)[None]
    one = np.array([0], dtype=np.int64)
    offsets = np.array([0, m], dtype=np.int64)
    st, q = fused.pca_grad_sum(Z, offsets, one, Xt, tau, 2.0, True, backend="cpp")
    want_st, want_q = fused.pca_grad_sum_reference(Z, offsets, one, Xt, tau, 2.0, True)
    # the huge rows' unclipped terms reach ~1e300 at tau = inf: compare relative to the largest
    scale = max(1.0, np.abs(want_st).max())
    np.testing.assert_allclose(st, want_st, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(q, want_q, rtol=1e-12)
    if np.isfinite(tau):
        # every row alone: at most tau; a client's sum is the sum of its rows' (to rounding)
        each = np.array([fused.pca_grad_sum(z[None], np.array([0, 1], dtype=np.int64), one, Xt,
                                            tau, 2.0, True, backend="cpp")[0][0] for z in Z])
        assert np.linalg.norm(each, axis=(1, 2)).max() <= tau * (1 + 1e-12)
        np.testing.assert_allclose(st[0], each.sum(axis=0), rtol=0, atol=1e-12 * m * tau)
        # dropping any one row moves the sum by at most tau
        for j in range(m):
            keep = np.delete(Z, j, axis=0)
            less, _ = fused.pca_grad_sum(keep, np.array([0, m - 1], dtype=np.int64), one, Xt,
                                         tau, 2.0, True, backend="cpp")
            assert np.linalg.norm(st[0] - less[0]) <= tau * (1 + 1e-9)
