"""Small federated problems for the engine and algorithm tests (independent of
``rfl_fast.problems``, so these tests do not depend on the concrete problem modules)."""

import numpy as np

import rfl_fast as rf
from rfl_fast.problems.base import Problem


class ToyPCA(Problem):
    """``f_i(x) = -(1/2m) sum_j |x' z_ij|^2`` on Stiefel(d, r) (or the sphere with ``r=None``).

    ``Z`` : (n, m, d) client data, equal sizes.
    """

    def __init__(self, Z, r=None, weighting="uniform"):
        self.Z = np.ascontiguousarray(Z, dtype=np.float64)
        n, m, d = self.Z.shape
        super().__init__(np.full(n, m), weighting)
        self.r = r
        self.manifold = rf.Sphere(d) if r is None else rf.Stiefel(d, r)
        self.A = np.einsum("imd,ime->ide", self.Z, self.Z) / m

    def _mat(self, x):
        return x[..., None] if self.r is None else x

    def _unmat(self, y):
        return y[..., 0] if self.r is None else y

    def loss(self, idx, x):
        idx = self._clients(idx)
        X = self._mat(np.asarray(x))
        return -0.5 * np.einsum("kdr,kde,ker->k", X, self.A[idx], X)

    def egrad(self, idx, x, batch=None):
        idx = self._clients(idx)
        X = self._mat(np.asarray(x))
        if batch is None:
            return self._unmat(-(self.A[idx] @ X))
        Zb = np.take_along_axis(self.Z[idx], np.asarray(batch)[:, :, None], axis=1)
        return self._unmat(-(np.swapaxes(Zb, 1, 2) @ (Zb @ X)) / Zb.shape[1])

    def solution(self):
        if self._solution is None:
            A = np.tensordot(self.weights, self.A, axes=1)
            w, V = np.linalg.eigh(A)
            self._solution = V[:, ::-1][:, : (1 if self.r is None else self.r)]
            if self.r is None:
                self._solution = self._solution[:, 0]
        return self._solution

    def dist_to_solution(self, x):
        xs = self.solution()
        if self.r is None:
            return float(min(np.linalg.norm(x - xs), np.linalg.norm(x + xs)))
        return float(np.linalg.norm(self.manifold.principal_angles(x, xs)))

    def metrics(self, x):
        out = super().metrics(x)
        if self.r is not None:
            out["angle"] = float(self.manifold.principal_angles(x, self.solution()).sum())
        return out


class ToyQuadratic(Problem):
    """``f_i(x) = |x - a_i|^2 / 2`` on ``manifold`` (Euclidean by default); ``a`` (n, *shape)."""

    def __init__(self, a, manifold=None, sizes=None, weighting="uniform"):
        self.a = np.asarray(a, dtype=np.float64)
        super().__init__(np.ones(self.a.shape[0], int) if sizes is None else sizes, weighting)
        self.manifold = manifold or rf.Euclidean(*self.a.shape[1:])

    def loss(self, idx, x):
        idx = self._clients(idx)
        diff = np.asarray(x) - self.a[idx]
        return 0.5 * np.sum(diff.reshape(diff.shape[0], -1) ** 2, axis=1)

    def egrad(self, idx, x, batch=None):
        idx = self._clients(idx)
        return np.asarray(x) - self.a[idx]


def heterogeneous_pca(n=8, m=40, d=10, r=None, seed=0, spread=1.0):
    """Clients whose covariances have different leading directions (per-client scales)."""
    rng = np.random.default_rng(seed)
    scales = np.exp(spread * rng.standard_normal((n, 1, d)))
    Z = rng.standard_normal((n, m, d)) * scales
    return ToyPCA(Z, r=r)
