"""The federated objective interface: ``f(x) = sum_i w_i f_i(x)`` on a manifold.

Client computations are batched over the client axis: a call takes client ids ``idx`` of
shape (k,) and one point per client ``x`` of shape (k, *manifold.shape), so an algorithm can
advance all participating clients of a round with one call per local step.
"""

import numpy as np

__all__ = ["Problem"]


class Problem:
    """Base class of the federated problems.

    Subclasses set ``manifold``, ``sizes`` (samples per client, shape (n,)) and implement
    ``loss`` and ``egrad`` (and ``rgrad`` when a closed form beats ``egrad2rgrad``), plus
    ``solution``.

    Parameters
    ----------
    weighting : {"uniform", "samples"}
        Client weights ``w_i = 1/n`` (default) or ``w_i = m_i / sum_j m_j``.
    """

    manifold = None

    def __init__(self, sizes, weighting="uniform"):
        self.sizes = np.asarray(sizes, dtype=np.int64)
        if self.sizes.ndim != 1 or self.sizes.size == 0 or (self.sizes < 1).any():
            raise ValueError(f"client data: every client needs at least one sample; "
                             f"sizes were {self.sizes.tolist()}")
        if weighting == "uniform":
            self.weights = np.full(self.sizes.size, 1.0 / self.sizes.size)
        elif weighting == "samples":
            self.weights = self.sizes / self.sizes.sum()
        else:
            raise ValueError(f"weighting: expected 'uniform' or 'samples', got {weighting!r}")
        self.weighting = weighting
        self._solution = None

    @property
    def n_clients(self):
        return int(self.sizes.size)

    def _clients(self, idx):
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        if idx.ndim != 1 or (idx < 0).any() or (idx >= self.n_clients).any():
            raise ValueError(f"idx: expected client ids in [0, {self.n_clients}), got {idx}")
        return idx

    # ---------------------------------------------------------------- per client, batched

    def loss(self, idx, x):
        """``f_i(x_j)`` for clients ``idx`` (k,) at points ``x`` (k, *shape) -> (k,)."""
        raise NotImplementedError

    def egrad(self, idx, x, batch=None):
        """Euclidean gradient of ``f_i`` (mean over the client's samples, or over the sample
        indices ``batch`` (k, b) when given) at ``x`` (k, *shape) -> (k, *shape)."""
        raise NotImplementedError

    def rgrad(self, idx, x, batch=None):
        """Riemannian gradient of ``f_i`` at ``x`` (k, *shape) -> (k, *shape)."""
        return self.manifold.egrad2rgrad(x, self.egrad(idx, x, batch))

    def sample_rgrads(self, i, x):
        """Per-sample Riemannian gradients of client ``i`` at ``x`` (*shape) -> (m_i, *shape).

        Materialized: the reference for the fused clipped sums of the privacy module.
        """
        raise NotImplementedError

    # ---------------------------------------------------------------- global

    def f(self, x):
        """Global objective ``sum_i w_i f_i(x)`` at one point ``x`` (*shape) -> float."""
        idx = np.arange(self.n_clients)
        xs = np.broadcast_to(x, (self.n_clients,) + self.manifold.shape)
        return float(self.weights @ self.loss(idx, xs))

    def grad(self, x):
        """Global Riemannian gradient ``sum_i w_i grad f_i(x)`` at one point -> (*shape)."""
        idx = np.arange(self.n_clients)
        xs = np.broadcast_to(x, (self.n_clients,) + self.manifold.shape)
        return np.tensordot(self.weights, self.rgrad(idx, xs), axes=1)

    def solution(self):
        """A global minimizer ``x*`` (*shape): closed form where one exists, else a
        centralized high-precision solver. Cached."""
        raise NotImplementedError

    def f_star(self):
        return self.f(self.solution())

    def metrics(self, x):
        """Per-iterate metrics: ``grad_norm``, ``f_gap``, ``dist`` (to ``x*``) and, where
        they apply, ``angle`` (sum of principal angles) and ``feasibility``."""
        M = self.manifold
        out = {"grad_norm": float(M.norm(x, self.grad(x))), "f_gap": self.f(x) - self.f_star()}
        return out
