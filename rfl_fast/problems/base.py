"""The federated objective interface: ``f(x) = sum_i w_i f_i(x)`` on a manifold.

Client computations are batched over the client axis: a call takes client ids ``idx`` of
shape (k,) and one point per client ``x`` of shape ``(k, *manifold.shape)``, so an algorithm can
advance all participating clients of a round with one call per local step.

Per-sample quantities (``sample_rgrads``, ``sample_rgrad_norms``, ``weighted_rgrad``) are for
one client ``i`` at one point ``x`` ``(*shape)``; they serve the privacy module (per-sample
clipping) and the tests.
"""

from dataclasses import dataclass

import numpy as np

from .._docs import inherit_sections
from .._typing import ArrayLike, ClientId, FloatArray, Weighting
from ..manifolds import Manifold
from ..privacy.clipping import clip_factors
from ._clients import check_sample_index, select_rows

__all__ = ["Problem", "QuadraticRows"]


@dataclass(frozen=True)
class QuadraticRows:
    """Client ``i``'s full local Euclidean gradient is ``scale[i] Z_i' Z_i X`` with
    ``Z_i = rows[offsets[i]:offsets[i + 1]]`` (``X`` of shape (d, r); (d,) for vectors), or,
    with ``h``, ``scale[i] A_i X diag(h)`` with ``A_i = rows[offsets[i]:offsets[i + 1]]`` the
    client's symmetric ``d x d`` matrix.

    Parameters
    ----------
    rows : ndarray, shape (M, d)
        Every client's rows (or matrices, stacked), C-contiguous float64.
    offsets : ndarray of int64, shape (n + 1,)
        Client ``i`` owns rows ``offsets[i]:offsets[i + 1]`` (``d`` of them with ``h``).
    scale : ndarray, shape (n,)
        Gradient scale per client.
    h : ndarray, shape (r,), optional
        The matrices' form: the right diagonal factor; ``None``: the rows form.
    """

    rows: np.ndarray
    offsets: np.ndarray
    scale: np.ndarray
    h: np.ndarray | None = None


class Problem:
    """Base class of the federated problems.

    Subclasses set ``manifold``, ``sizes`` (samples per client, shape (n,)) and implement
    ``loss`` and ``egrad`` (and ``rgrad`` when a closed form beats ``egrad2rgrad``), plus
    ``sample_rgrads`` and ``solution``. Everything else has a default built on those.

    Parameters
    ----------
    sizes : array_like of int, shape (n,)
        Samples per client, every entry >= 1.
    weighting : {"uniform", "samples"} or array_like, shape (n,)
        Client weights ``w_i = 1/n`` (default), ``w_i = m_i / sum_j m_j`` (Huang et al. 2024's
        ``p_i = N_i / sum N_j``), or explicit non-negative weights (normalized to sum one).

    Attributes
    ----------
    manifold : Manifold
    sizes : ndarray of int64, shape (n,)
    weights : ndarray, shape (n,)
        Client weights ``w_i``, summing to one.
    weighting : str
    """

    manifold: Manifold = None  # type: ignore[assignment]  # every subclass sets it
    #: ``None`` when one sample's gradient ``grad f_ij`` depends on that sample alone, so
    #: per-sample clipping bounds its influence on a clipped sum (the DP sensitivity of
    #: PriRFed); else a sentence saying why not (PriRFed then refuses the problem).
    dp_unbounded = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        inherit_sections(cls)           # an override documents what differs (rfl_fast._docs)

    def __init__(self, sizes: ArrayLike, weighting: Weighting = "uniform") -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        if self.sizes.ndim != 1 or self.sizes.size == 0 or (self.sizes < 1).any():
            raise ValueError(f"client data: every client needs at least one sample; "
                             f"sizes were {self.sizes.tolist()}")
        if isinstance(weighting, str) and weighting == "uniform":
            self.weights = np.full(self.sizes.size, 1.0 / self.sizes.size)
        elif isinstance(weighting, str) and weighting == "samples":
            self.weights = self.sizes / self.sizes.sum()
        elif isinstance(weighting, str):
            raise ValueError(f"weighting: expected 'uniform', 'samples' or an array of client "
                             f"weights, got {weighting!r}")
        else:
            w = np.asarray(weighting, dtype=np.float64)
            if w.shape != self.sizes.shape or not np.isfinite(w).all() or (w < 0).any() \
                    or w.sum() <= 0:
                raise ValueError(f"weighting: expected {self.sizes.size} non-negative client "
                                 f"weights with a positive sum, got {np.asarray(weighting)}")
            self.weights = w / w.sum()
            weighting = "custom"
        self.weighting = weighting
        self._solution = None
        self._f_star = None

    def __repr__(self):
        return (f"{type(self).__name__}({self.manifold!r}, n_clients={self.n_clients}, "
                f"samples={int(self.sizes.sum())}, weighting={self.weighting!r})")

    @property
    def n_clients(self) -> int:
        return int(self.sizes.size)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one point, ``manifold.shape``."""
        return self.manifold.shape

    # ---------------------------------------------------------------- argument checks

    def _clients(self, idx):
        if type(idx) is np.ndarray and idx.dtype == np.int64 and idx.ndim == 1:
            # the common case (an engine's ids): one test for both bounds, a negative id being
            # >= 2^63 as uint64
            if (idx.view(np.uint64) >= self.sizes.size).any():
                raise ValueError(f"idx: expected client ids in [0, {self.n_clients}), got {idx}")
            return idx
        idx = np.atleast_1d(np.asarray(idx))
        if idx.dtype.kind not in "iu":
            raise TypeError(f"idx: expected integer client ids, got dtype {idx.dtype}")
        idx = idx.astype(np.int64, copy=False)
        if idx.ndim != 1 or (idx < 0).any() or (idx >= self.n_clients).any():
            raise ValueError(f"idx: expected client ids in [0, {self.n_clients}), got {idx}")
        return idx

    def _client(self, i):
        """One client id ``i`` as an int."""
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"i: expected one integer client id, got {type(i).__name__}")
        if not 0 <= int(i) < self.n_clients:
            raise ValueError(f"i: expected a client id in [0, {self.n_clients}), got {i}")
        return int(i)

    def _points(self, idx, x, name="x"):
        """``x`` as a float64 array of shape ``(k, *shape)`` matching ``idx`` (k,)."""
        x = np.asarray(x, dtype=np.float64)
        want = (idx.size,) + self.shape
        if x.shape != want:
            raise ValueError(f"{name}: expected shape {want} (one point per client id), "
                             f"got {x.shape}")
        return x

    def _point(self, x, name="x"):
        """One point ``x`` ``(*shape)`` as a float64 array."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.shape:
            raise ValueError(f"{name}: expected shape {self.shape}, got {x.shape}")
        return x

    def _batch(self, idx, batch):
        """Sample indices (k, b) checked against the sizes of clients ``idx``."""
        return check_sample_index(batch, self.sizes[idx])

    def _select(self, idx, batch):
        """Flat-array ``rows, seg, starts, counts`` of clients ``idx`` (all their samples, or
        the sample indices ``batch`` (k, b) after checking them): :func:`select_rows` on the
        problem's ``_offsets`` (the flat layout of :mod:`rfl_fast.problems._clients`)."""
        return select_rows(self._offsets, idx, None if batch is None else self._batch(idx, batch))

    def _blocks(self, idx, batch):
        """``(sel, m)`` when every client of ``idx`` gives ``m`` samples, else ``None``:
        ``flat[sel]`` (for any of the problem's flat per-sample arrays) reshapes to ``(k, m,
        ...)``, client by client; ``sel`` is ``slice(None)`` (the data itself, no copy) on a
        full batch of all clients in order, else the selected rows."""
        if batch is not None:
            batch = self._batch(idx, batch)
            return select_rows(self._offsets, idx, batch)[0], batch.shape[1]
        counts = np.asarray(self.sizes)[idx]
        if not counts.size or (counts != counts[0]).any():
            return None
        if idx.size == self.n_clients and (idx == np.arange(idx.size)).all():
            return slice(None), int(counts[0])
        return select_rows(self._offsets, idx, None)[0], int(counts[0])

    def _sample_subset(self, i, batch):
        """Local sample indices of client ``i``: all (``batch=None``) or the given 1-d set."""
        if batch is None:
            return None
        b = np.asarray(batch)
        if b.ndim != 1:
            raise ValueError(f"batch: expected 1-d sample indices of client {i}, "
                             f"got shape {b.shape}")
        return check_sample_index(b[None, :], self.sizes[[i]])[0]

    # ---------------------------------------------------------------- per client, batched

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """``f_i(x_j)`` for clients ``idx`` (k,) at points ``x`` ``(k, *shape)`` -> (k,).

        Parameters
        ----------
        idx : array_like of int, shape (k,)
            Client ids.
        x : ndarray, shape ``(k, *shape)``
            One point per listed client.

        Returns
        -------
        ndarray, shape (k,)
            ``f_i(x_j)`` per listed client.
        """
        raise NotImplementedError

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """Euclidean gradient of ``f_i`` (mean over the client's samples, or over the sample
        indices ``batch`` (k, b) when given) at ``x`` ``(k, *shape)`` -> ``(k, *shape)``.

        Parameters
        ----------
        idx : array_like of int, shape (k,)
            Client ids.
        x : ndarray, shape ``(k, *shape)``
            One point per listed client.
        batch : ndarray of int, shape (k, b), optional
            Sample indices per client (a mini-batch); ``None``: all of each client's samples.

        Returns
        -------
        ndarray, shape ``(k, *shape)``
            Euclidean gradients.
        """
        raise NotImplementedError

    def rgrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """Riemannian gradient of ``f_i`` at ``x`` ``(k, *shape)`` -> ``(k, *shape)``.

        Parameters
        ----------
        idx : array_like of int, shape (k,)
            Client ids.
        x : ndarray, shape ``(k, *shape)``
            One point per listed client.
        batch : ndarray of int, shape (k, b), optional
            Sample indices per client (a mini-batch); ``None``: all of each client's samples.

        Returns
        -------
        ndarray, shape ``(k, *shape)``
            Riemannian gradients (tangent at each ``x_j``).
        """
        return self.manifold.egrad2rgrad(x, self.egrad(idx, x, batch))

    def quadratic_rows(self) -> "QuadraticRows | None":
        """The data of a local gradient that is a quadratic form of the clients' rows, when the
        problem computes its full local gradients from those rows (a declared capability,
        :class:`QuadraticRows`); ``None`` by default. Lets an algorithm hand whole local
        loops to a fused multi-client kernel (``kernels.registry.FUSED``)."""
        return None

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """Per-sample Riemannian gradients of client ``i`` at ``x`` ``(*shape)`` ->
        ``(m_i, *shape)``.

        Materialized: the reference for the fused clipped sums of the privacy module.

        Parameters
        ----------
        i : int
            Client id.
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        ndarray, shape ``(m_i, *shape)``
            One tangent vector at ``x`` per sample.
        """
        raise NotImplementedError

    def sample_rgrad_norms(self, i: ClientId, x: ArrayLike, batch: ArrayLike | None = None
                           ) -> FloatArray:
        """Riemannian norms ``|grad f_ij(x)|_x`` of client ``i``'s per-sample gradients.

        Parameters
        ----------
        i : int
        x : ndarray, shape ``(*shape)``
        batch : array_like of int, shape (b,), optional
            Local sample indices; all ``m_i`` samples when omitted.

        Returns
        -------
        ndarray, shape (m_i,) or (b,)

        Subclasses override this with closed forms; the default materializes
        ``sample_rgrads``.
        """
        i = self._client(i)
        sel = self._sample_subset(i, batch)
        g = self.sample_rgrads(i, x)
        if sel is not None:
            g = g[sel]
        xs = np.broadcast_to(self._point(x), g.shape)
        return np.asarray(self.manifold.norm(xs, g), dtype=np.float64)

    def weighted_rgrad(self, i: ClientId, x: ArrayLike, coef: ArrayLike,
                       batch: ArrayLike | None = None) -> FloatArray:
        """``sum_j coef_j grad f_ij(x)`` over client ``i``'s samples (or ``batch``).

        The fused form of a clipped mini-batch gradient: with ``coef_j = min(1, tau /
        |grad f_ij|) / b`` it is the mean of the clipped per-sample gradients.

        Parameters
        ----------
        i : int
        x : ndarray, shape ``(*shape)``
        coef : array_like, shape (m_i,) or (b,)
        batch : array_like of int, shape (b,), optional

        Returns
        -------
        ndarray, shape ``(*shape)``
            A tangent vector at ``x``.
        """
        i = self._client(i)
        sel = self._sample_subset(i, batch)
        g = self.sample_rgrads(i, x)
        if sel is not None:
            g = g[sel]
        coef = self._coef(coef, g.shape[0])
        return np.tensordot(coef, g, axes=1)

    def clipped_rgrad_sum(self, idx: ArrayLike, x: ArrayLike, tau: float,
                          batch: ArrayLike | None = None) -> FloatArray:
        """``sum_p clip_tau(grad f_ip(x_j))`` for every client ``i = idx[j]``: the clipped
        per-sample gradient sums of a private local step, batched over the clients.

        ``clip_tau(g) = g min(1, tau / |g|_x)`` (:func:`rfl_fast.privacy.clip_factors`). The
        default goes client by client through :meth:`sample_rgrad_norms` and
        :meth:`weighted_rgrad`; problems with a fused multi-client pass override it with the
        same terms.

        Parameters
        ----------
        idx : array_like of int, shape (k,)
            Client ids.
        x : ndarray, shape ``(k, *shape)``
            One point per listed client: read during the call only (the caller may reuse its
            buffer afterwards; neither keep it nor write to it).
        tau : float
            Clipping threshold (> 0; ``inf``: the plain sum).
        batch : ndarray of int (k, b), or a sequence of k 1-d arrays, optional
            Local sample indices per client; ``None``: all of each client's samples.

        Returns
        -------
        ndarray, shape ``(k, *shape)``
            Tangent vectors at ``x``.

        Raises
        ------
        ValueError
            A per-sample gradient norm is not finite (it cannot be clipped).
        """
        idx = self._clients(idx)
        x = self._points(idx, x)
        out = np.empty(x.shape)
        for j, i in enumerate(idx.tolist()):
            bj = None if batch is None else batch[j]
            coef = clip_factors(self.sample_rgrad_norms(i, x[j], bj), tau)
            out[j] = self.weighted_rgrad(i, x[j], coef, bj)
        return out

    @staticmethod
    def _coef(coef, count):
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (count,):
            raise ValueError(f"coef: expected shape ({count},) (one weight per sample), "
                             f"got {coef.shape}")
        return coef

    # ---------------------------------------------------------------- global

    def f(self, x: ArrayLike) -> float:
        """Global objective ``sum_i w_i f_i(x)`` at one point ``x`` ``(*shape)`` -> float.

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
        """
        idx = np.arange(self.n_clients)
        xs = np.broadcast_to(x, (self.n_clients,) + self.manifold.shape)
        return float(self.weights @ self.loss(idx, xs))

    def grad(self, x: ArrayLike) -> FloatArray:
        """Global Riemannian gradient ``sum_i w_i grad f_i(x)`` at one point -> ``(*shape)``.

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        ndarray, shape ``(*shape)``
            A tangent vector at ``x``.
        """
        idx = np.arange(self.n_clients)
        xs = np.broadcast_to(x, (self.n_clients,) + self.manifold.shape)
        return np.tensordot(self.weights, self.rgrad(idx, xs), axes=1)

    def has_pooled_grad(self) -> bool:
        """Whether :meth:`grad` avoids a pass over the clients' data (e.g. one product with a
        pooled ``d x d`` matrix); ``False`` by default. RFedSVRG's simulation then takes its
        all-client ``g_t`` from :meth:`grad`."""
        return False

    def solution(self) -> FloatArray:
        """A global minimizer ``x*`` ``(*shape)``: closed form where one exists, else a
        centralized high-precision solver. Cached."""
        raise NotImplementedError

    def f_star(self) -> float:
        """``f(x*)`` (cached)."""
        if self._f_star is None:
            self._f_star = self.f(self.solution())
        return self._f_star

    def grad_norm(self, x: ArrayLike) -> float:
        """``|grad f(x)|_x`` at one point ``x`` ``(*shape)`` -> float.

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
        """
        x = self._point(x)
        return float(self.manifold.norm(x, self.grad(x)))

    def dist_to_solution(self, x: ArrayLike) -> float:
        """Distance from ``x`` to the solution set (geodesic distance to ``x*`` by default;
        subclasses account for symmetries such as ``x* ~ -x*``).

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
        """
        return float(self.manifold.dist(self._point(x), self.solution()))

    def feasibility(self, x: ArrayLike) -> float:
        """Distance of ``x`` from the manifold constraint (0 where it does not apply).

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        float
        """
        return 0.0

    def metrics(self, x: ArrayLike) -> dict[str, float]:
        """Per-iterate metrics at one point ``x`` ``(*shape)`` as a dict of floats.

        Keys: ``grad_norm`` (``|grad f(x)|_x``), ``f_gap`` (``f(x) - f*``), ``dist``
        (``dist_to_solution``), ``feasibility`` and, where they apply, ``angle`` (sum of
        principal angles to ``x*``).

        Parameters
        ----------
        x : ndarray, shape ``(*shape)``
            One point.

        Returns
        -------
        dict of str to float
        """
        x = self._point(x)
        return {"grad_norm": self.grad_norm(x),
                "f_gap": float(self.f(x) - self.f_star()),
                "dist": self.dist_to_solution(x),
                "feasibility": float(self.feasibility(x))}
