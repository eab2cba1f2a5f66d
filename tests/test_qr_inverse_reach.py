"""The QR retraction reaches only the points ``Y`` with ``X + U = Y R``, ``r_jj > 0``: its
inverse refuses the others on every backend instead of returning a vector that retracts
elsewhere (found by geomstats' ``test_retraction_after_lifting`` on the geomstats adapter)."""

import numpy as np
import pytest

import rfl_fast as rf
from rfl_fast.errors import NoSolutionError


def test_qr_inverse_refuses_points_the_qr_retraction_does_not_reach(backend):
    M = rf.Stiefel(4, 3)
    x, y = M.random_point(rng=0), M.random_point(rng=1)
    assert np.linalg.det((x.T @ y)[:1, :1]) < 0          # the first leading minor is negative
    with pytest.raises(NoSolutionError, match="not reached by that retraction"):
        M.inv_retr(x, y, "qr")
    # in a batch, the item is named; the reachable items alone are answered exactly
    u = 0.5 * M.random_tangent(np.stack([x, x]), rng=2)
    ys = M.retr(np.stack([x, x]), u, "qr")
    with pytest.raises(NoSolutionError, match=r"batch index \[\[1\]\]"):
        M.inv_retr(np.stack([x, x]), np.stack([ys[0], y]), "qr")
    np.testing.assert_allclose(M.inv_retr(np.stack([x, x]), ys, "qr"), u, atol=1e-12)
    # flipping the sign of a column of y makes it unreachable: exactly one of y, -y is reached
    flipped = ys[0] * np.array([1.0, -1.0, 1.0])
    with pytest.raises(NoSolutionError):
        M.inv_retr(x, flipped, "qr")
