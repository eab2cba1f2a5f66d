"""A federated problem defined by a per-sample loss written in torch or JAX: gradients by
autodiff."""

import math

import numpy as np

from .._typing import ArrayLike, ClientId, ClientSamples, FloatArray, Weighting
from ..kernels import autodiff
from ..manifolds import Manifold
from ..privacy.clipping import clip_factors
from ._clients import check_sample_index, pack_clients
from .base import Problem

__all__ = ["LossProblem"]


def _sample_ndim(data):
    """Axes of one sample of ``data`` (a stacked array, a list of client arrays, ClientData)."""
    offsets = getattr(data, "offsets", None)
    if offsets is not None and not isinstance(data, np.ndarray):
        for attr in ("data", "X", "x", "samples", "values"):
            arr = getattr(data, attr, None)
            if arr is not None:
                return max(np.ndim(arr) - 1, 0)
    if isinstance(data, np.ndarray) and data.dtype != object:
        if data.ndim < 3:
            raise ValueError(f"data: a stacked array must have shape (n_clients, m, *sample) "
                             f"(at least 3 axes), got shape {data.shape}; pass a list of "
                             f"per-client (m_i, *sample) arrays otherwise")
        return data.ndim - 2
    try:
        first = next(iter(data))
    except TypeError:
        raise TypeError(f"data: expected a list of per-client arrays, a stacked array or a "
                        f"ClientData; got {type(data).__name__}") from None
    except StopIteration:
        raise ValueError("data: no clients (empty list)") from None
    nd = np.ndim(first)
    if nd < 1:
        raise ValueError(f"data: client 0 must be an array of shape (m_i, *sample), got a "
                         f"{nd}-d value")
    return nd - 1


class LossProblem(Problem):
    r"""The federated problem of a per-sample loss written in torch (or JAX), on any manifold.

    :math:`f_i(x) = \frac{1}{m_i}\sum_j \ell(x, z_{ij})`, ``f = sum_i w_i f_i``, for a loss
    ``loss(params, sample) -> 0-d tensor`` and each client's samples ``z_ij``. The Euclidean
    gradients (per client mean and per sample) come from torch's autodiff, batched over the
    participating clients (``torch.func.vmap`` of ``torch.func.grad``:
    :mod:`rfl_fast.kernels.autodiff`); the Riemannian gradients are the manifold's
    ``egrad2rgrad`` of them. The samples are converted once to a float64 torch tensor (on the
    CPU it shares the NumPy memory) and stay there; everything is computed in float64.

    **Parameters of the loss.** ``params`` is a float64 tensor in the manifold's point layout
    (``(d, p)`` for ``Stiefel(d, p)``); on a :class:`~rfl_fast.manifolds.Product` the loss gets
    a tuple of tensors, one per factor, in the factors' shapes (the parts of
    :meth:`Product.split <rfl_fast.manifolds.Product.split>`), so ``Product(Stiefel(64, k),
    Euclidean(k, 10))`` hands ``(W, B)`` of shapes ``(64, k)`` and ``(k, 10)``.

    **Samples.** One sample is one row of a client's array: ``(m_i, *s)`` gives samples of
    shape ``s``. Labels travel in the same row (e.g. features then a one-hot label,
    ``sample[:64]`` and ``sample[64:]``).

    **Unequal client sizes** are grouped by size: one batched autodiff call per distinct
    sample count among the participating clients (no padding, exact means).

    **Privacy.** Each per-sample gradient depends on its own sample only, so PriRFed's
    per-sample clipping bounds each sample's influence (``dp_unbounded`` is ``None``).

    **No solution.** There is no closed form or reference solver: :meth:`solution` raises
    ``NotImplementedError`` and :meth:`metrics` reports ``grad_norm`` and ``loss`` (``f(x)``).

    Parameters
    ----------
    loss : callable
        ``loss(params, sample) -> 0-d float64 tensor``, written with torch operations that
        ``torch.func.vmap`` batches (no ``.item()``, no data-dependent Python branches);
        constants must be float64 (torch's default dtype is float32).
    data : list of array_like (m_i, ...), ndarray (n, m, ...) or ClientData
        Client samples as rows.
    manifold : Manifold
        Where the parameters live (any rfl_fast manifold; products hand the loss the parts).
    weighting : {"uniform", "samples"} or array_like (n,)
    backend : {"torch", "jax"}
        The framework ``loss`` is written in: ``"jax"`` for a loss in ``jax.numpy`` (the same
        functions by ``jax.vmap`` of ``jax.grad``, compiled by ``jax.jit``, float64 under
        ``jax.enable_x64`` without changing your global setting).
    device : str or torch.device, optional
        torch only: the device that keeps the samples and computes the gradients (e.g.
        ``"cuda"``; the samples are copied there once, each call's points go there and the
        gradients come back as NumPy arrays). ``None``: the CPU (the samples' memory shared).

    Attributes
    ----------
    manifold : Manifold
    loss_fn : callable
        The per-sample loss.
    """

    dp_unbounded = None

    def __init__(self, loss, data: ClientSamples, manifold: Manifold, *,
                 weighting: Weighting = "uniform", backend: str = "torch",
                 device=None) -> None:
        if not isinstance(manifold, Manifold):
            raise TypeError(f"manifold: expected an rfl_fast manifold, got "
                            f"{type(manifold).__name__}")
        if not callable(loss):
            raise TypeError(f"loss: expected a callable loss(params, sample), got "
                            f"{type(loss).__name__}")
        flat, offsets = pack_clients(data, _sample_ndim(data), "data")
        super().__init__(np.diff(offsets), weighting)
        self.manifold = manifold
        self.loss_fn = loss
        self._offsets = offsets
        parts = None
        factors = getattr(manifold, "factors", None)     # a Product: its flat layout's parts
        if factors is not None:
            stops = np.cumsum([math.prod(f.shape) for f in factors]).tolist()
            parts = [(b - math.prod(f.shape), b, f.shape) for f, b in zip(factors, stops)]
        self._ad = autodiff.build(loss, flat, manifold.shape, parts, backend, device)

    # ---------------------------------------------------------------- grouping

    def _groups(self, idx, batch):
        """``[(pos, rows), ...]``: positions in ``idx`` of clients giving the same number of
        samples, and their flat-array rows (kg, m). ``batch``: None (all samples), (k, b)
        local indices, or a sequence of k 1-d index arrays."""
        offsets = self._offsets
        if batch is None:
            counts = self.sizes[idx]
            out = []
            for c in np.unique(counts).tolist():
                pos = np.flatnonzero(counts == c)
                out.append((pos, offsets[idx[pos]][:, None] + np.arange(c)))
            return out
        if isinstance(batch, np.ndarray) and batch.dtype != object:
            b = self._batch(idx, batch)
            return [(np.arange(idx.size), offsets[idx][:, None] + b)]
        batch = list(batch)
        if len(batch) != idx.size:
            raise ValueError(f"batch: expected {idx.size} per-client index arrays (one per "
                             f"client id), got {len(batch)}")
        local = [check_sample_index(np.asarray(b)[None, :], self.sizes[[i]], f"batch[{j}]")[0]
                 for j, (i, b) in enumerate(zip(idx.tolist(), batch))]
        lens = np.array([b.size for b in local])
        out = []
        for c in np.unique(lens).tolist():
            pos = np.flatnonzero(lens == c)
            out.append((pos, offsets[idx[pos]][:, None] + np.stack([local[j] for j in pos])))
        return out

    # ---------------------------------------------------------------- batched

    def loss(self, idx: ArrayLike, x: ArrayLike) -> FloatArray:
        """Mean of ``loss(x_j, z)`` over client ``idx[j]``'s samples -> (k,)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        out = np.empty(idx.size)
        for pos, rows in self._groups(idx, None):
            out[pos] = self._ad.losses(x[pos], rows)
        return out

    def egrad(self, idx: ArrayLike, x: ArrayLike, batch: ArrayLike | None = None
              ) -> FloatArray:
        """Autodiff of the mean loss (over all samples, or over ``batch``)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        out = np.empty(x.shape)
        for pos, rows in self._groups(idx, batch):
            out[pos] = self._ad.grads(x[pos], rows)
        return out

    def sample_rgrads(self, i: ClientId, x: ArrayLike) -> FloatArray:
        """``egrad2rgrad`` of the autodiff per-sample gradients -> ``(m_i, *shape)``."""
        i = self._client(i)
        x = self._point(x)
        rows = np.arange(self._offsets[i], self._offsets[i + 1])[None, :]
        g = self._ad.sample_grads(x[None], rows)[0]
        return self.manifold.egrad2rgrad(np.broadcast_to(x, g.shape), g)

    def clipped_rgrad_sum(self, idx: ArrayLike, x: ArrayLike, tau: float,
                          batch: ArrayLike | None = None) -> FloatArray:
        """Per group of equal sample counts, one autodiff call gives every per-sample gradient
        ``(kg, m, *shape)``; they are mapped to Riemannian gradients, clipped by their norms and
        summed per client (the terms of :meth:`sample_rgrads`)."""
        idx = self._clients(idx)
        x = self._points(idx, x)
        out = np.empty(x.shape)
        axes = (slice(None), None) + (slice(None),) * len(self.shape)
        for pos, rows in self._groups(idx, batch):
            g = self._ad.sample_grads(x[pos], rows)                 # (kg, m, *shape)
            xs = np.broadcast_to(x[pos][axes], g.shape)
            r = self.manifold.egrad2rgrad(xs, g)
            coef = clip_factors(self.manifold.norm(xs, r), tau)     # (kg, m)
            out[pos] = np.einsum("km,km...->k...", coef, r)
        return out

    # ---------------------------------------------------------------- global

    def solution(self) -> FloatArray:
        """None known: a loss has no closed-form minimizer here (raises
        ``NotImplementedError``)."""
        raise NotImplementedError("LossProblem: no closed-form solution or reference solver "
                                  "for a user's loss; metrics report grad_norm and loss")

    def metrics(self, x: ArrayLike) -> dict[str, float]:
        """``grad_norm`` (``|grad f(x)|_x``) and ``loss`` (``f(x)``): no ``f*`` is known."""
        x = self._point(x)
        return {"grad_norm": self.grad_norm(x), "loss": self.f(x)}
