"""Autodiff of a per-sample loss: the only code of rfl_fast that knows torch's autodiff.

A problem defined by a loss (:class:`rfl_fast.problems.LossProblem`) hands this floor the
user's per-sample loss ``loss(params, sample) -> scalar tensor`` and every client's samples as
one flat float64 array; :class:`TorchLoss` converts the samples once to a float64 torch tensor
(sharing the NumPy memory on the CPU; copied once to another ``device`` when one is asked) and
keeps them there, and answers NumPy-in/NumPy-out
batched functions of points ``x`` ``(k, *shape)`` and flat-row indices ``rows`` (k, m) (client
``j``'s ``m`` samples are ``flat[rows[j]]``):

* :meth:`TorchLoss.losses` -> (k,): each client's mean loss,
* :meth:`TorchLoss.grads` -> ``(k, *shape)``: each client's mean Euclidean gradient, one
  ``torch.func.vmap`` over the clients of ``torch.func.grad`` of the mean over the samples
  (itself a ``vmap`` of the loss): no Python loop over clients or samples,
* :meth:`TorchLoss.sample_grads` -> ``(k, m, *shape)``: the per-sample Euclidean gradients
  (``vmap`` of ``grad`` over the samples, then ``vmap`` over the clients) that PriRFed clips.

Equal sample counts only: ``rows`` is rectangular. Clients with different counts are grouped by
count by the caller (one batched call per distinct count; the problems floor does it), so no
padding or mask enters the loss and the means are exact.

Parameters come in the manifold's point layout ``shape``; ``parts`` (the factors' ``(start,
stop, shape)`` of a :class:`~rfl_fast.manifolds.Product`'s flat layout) hands the loss a tuple
of tensors, one per factor, instead. Everything is float64 (torch's default dtype is float32:
the data and points are converted explicitly, and a loss that answers another dtype is refused
when the problem is built). ``torch`` (or ``jax``) is imported here, lazily: only when such a problem
is built. A loss written in JAX (``jax.numpy``) gets the same functions from :class:`JaxLoss`
(``jax.vmap`` of ``jax.grad``, compiled by ``jax.jit``, float64 under ``jax.enable_x64``).
"""

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["TorchLoss", "JaxLoss", "build", "FRAMEWORKS"]

#: The autodiff frameworks a loss can be written in.
FRAMEWORKS = ("torch", "jax")


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise ImportError("loss: a loss written in torch needs PyTorch (pip install "
                          "'rfl_fast[torch]')") from exc
    return torch


class TorchLoss:
    """Batched mean losses, mean gradients and per-sample gradients of a torch loss.

    Parameters
    ----------
    loss : callable
        ``loss(params, sample) -> 0-d tensor``: one sample's loss, written with torch
        operations that ``torch.func.vmap`` can batch (no ``.item()``, no data-dependent
        Python control flow). ``params`` is a float64 tensor of shape ``shape`` (or a tuple
        of tensors, one per entry of ``parts``); ``sample`` one float64 row of ``flat``.
    flat : ndarray, shape (M, *s)
        Every client's samples, float64 (kept: the tensor shares its memory on the CPU).
    shape : tuple of int
        The shape of one point (the manifold's).
    parts : sequence of (int, int, tuple), optional
        ``(start, stop, shape)`` per factor of a flat product layout: the loss gets
        ``tuple(params[start:stop].reshape(shape))``.
    device : str or torch.device, optional
        Where the samples are kept and the gradients computed (``"cuda"``, ...): the samples
        are copied there once, each call's points go there and its answers come back to the
        host. ``None`` (default): the CPU, sharing the samples' NumPy memory.

    Raises
    ------
    TypeError
        ``loss`` is not callable, or it does not return a torch tensor.
    ValueError
        ``loss`` does not return a float64 scalar on one sample, or fails on one sample of the
        data (message naming ``loss`` and ``data``).
    """

    def __init__(self, loss: Callable, flat: np.ndarray, shape: Sequence[int],
                 parts: Sequence[tuple[int, int, tuple]] | None = None,
                 device: Any = None) -> None:
        if not callable(loss):
            raise TypeError(f"loss: expected a callable loss(params, sample), got "
                            f"{type(loss).__name__}")
        torch = _torch()
        try:
            self.device = torch.device("cpu" if device is None else device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device: not a torch device: {device!r} ({exc})") from None
        from torch import func

        self._torch, self._func = torch, func
        self.shape = tuple(int(s) for s in shape)
        self.parts = None if parts is None else tuple(
            (int(a), int(b), tuple(int(s) for s in sh)) for a, b, sh in parts)
        self._flat = np.ascontiguousarray(flat, dtype=np.float64)
        with warnings.catch_warnings():       # read-only samples (a ClientData): only read here
            warnings.filterwarnings("ignore", "The given NumPy array is not writable")
            self.data = torch.from_numpy(self._flat)      # float64, the same memory
        if self.device.type != "cpu":
            try:
                self.data = self.data.to(self.device)   # once: the samples stay there
            except (RuntimeError, AssertionError) as exc:
                raise ValueError(f"device: cannot keep the samples on {device!r}: "
                                 f"{exc}") from None
        self._loss = loss

        one = self._sample_loss                             # (params, sample) -> scalar

        def mean(p, d):                                     # one client's mean over (m, *s)
            return func.vmap(one, in_dims=(None, 0))(p, d).mean()

        self._losses = func.vmap(mean)                      # over clients: (k, ...), (k, m, ...)
        self._grads = func.vmap(func.grad(mean))
        self._sample = func.vmap(func.vmap(func.grad(one), in_dims=(None, 0)))
        self._probe()

    def _unpack(self, p):
        if self.parts is None:
            return p
        return tuple(p[a:b].reshape(sh) for a, b, sh in self.parts)

    def _sample_loss(self, p, sample):
        return self._loss(self._unpack(p), sample)

    def _probe(self):
        """One call on the first sample at the zero point: the loss's output checked."""
        torch = self._torch
        p = torch.zeros(self.shape, dtype=torch.float64, device=self.device)
        try:
            out = self._sample_loss(p, self.data[0])
        except Exception as exc:
            raise ValueError(
                f"loss: loss(params, sample) failed on params of shape {self.shape}"
                f"{'' if self.parts is None else ' (as parts ' + str([s for _, _, s in self.parts]) + ')'}"
                f" and the first sample of data (shape {tuple(self.data.shape[1:])}): "
                f"{type(exc).__name__}: {exc}; check that data's samples have the shape the "
                "loss expects") from exc
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"loss: expected a torch tensor (a 0-d one), got "
                            f"{type(out).__name__}")
        if out.ndim != 0:
            raise ValueError(f"loss: expected a scalar (0-d tensor) per sample, got shape "
                             f"{tuple(out.shape)}; reduce it (e.g. .sum()) inside the loss")
        if out.dtype != torch.float64:
            raise ValueError(f"loss: expected a float64 result, got {out.dtype}; create any "
                             "constant tensors with dtype=torch.float64 (torch's default "
                             "dtype is float32)")

    # ---------------------------------------------------------------- batched, NumPy in/out

    def _args(self, x, rows):
        x = np.ascontiguousarray(x, dtype=np.float64)
        if not x.flags.writeable:                     # torch warns on read-only memory
            x = x.copy()
        rows = np.array(rows, dtype=np.int64)         # a writable copy (k m integers)
        p = self._torch.from_numpy(x)
        r = self._torch.from_numpy(rows)
        if self.device.type != "cpu":
            p, r = p.to(self.device), r.to(self.device)
        d = self.data[r]                                     # (k, m, *s): one gather
        return p, d

    def _call(self, f, x, rows):
        """``f`` (one of the batched maps) on ``x`` and the clients' ``rows``, as NumPy (the
        gradient maps are torch.func transforms: an outer ``no_grad`` does not stop them)."""
        with self._torch.no_grad():
            return f(*self._args(x, rows)).detach().cpu().numpy()

    def losses(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Mean loss per client.

        Parameters
        ----------
        x : ndarray, shape ``(k, *shape)``
            One point per client.
        rows : ndarray of int, shape (k, m)
            Flat-array rows of each client's samples.

        Returns
        -------
        ndarray, shape (k,)
        """
        return self._call(self._losses, x, rows)

    def grads(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Mean Euclidean gradient per client.

        Parameters
        ----------
        x : ndarray, shape ``(k, *shape)``
            One point per client.
        rows : ndarray of int, shape (k, m)
            Flat-array rows of each client's samples.

        Returns
        -------
        ndarray, shape ``(k, *shape)``
        """
        return self._call(self._grads, x, rows)

    def sample_grads(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per-sample Euclidean gradients.

        Parameters
        ----------
        x : ndarray, shape ``(k, *shape)``
            One point per client.
        rows : ndarray of int, shape (k, m)
            Flat-array rows of each client's samples.

        Returns
        -------
        ndarray, shape ``(k, m, *shape)``
        """
        return self._call(self._sample, x, rows)


class JaxLoss(TorchLoss):
    """:class:`TorchLoss`'s functions for a loss written in JAX (``jax.numpy``).

    The same interface and checks; ``jax.vmap`` of ``jax.grad``, each function compiled once
    per shape by ``jax.jit`` (the data an argument, not a constant of the compiled program).
    float64 without touching the caller's global JAX setting: the data, the points and every
    call run under ``jax.enable_x64(True)`` (a thread-local context).

    Parameters
    ----------
    loss : callable
        ``loss(params, sample) -> 0-d array``, written with ``jax.numpy``.
    flat : ndarray, shape (M, *s)
        Every client's samples, float64 (copied once to JAX's default device).
    shape : tuple of int
        The shape of one point.
    parts : sequence of (int, int, tuple), optional
        See :class:`TorchLoss`.
    """

    def __init__(self, loss: Callable, flat: np.ndarray, shape: Sequence[int],
                 parts: Sequence[tuple[int, int, tuple]] | None = None) -> None:
        if not callable(loss):
            raise TypeError(f"loss: expected a callable loss(params, sample), got "
                            f"{type(loss).__name__}")
        try:
            import jax
            import jax.numpy as jnp
        except ImportError as exc:  # pragma: no cover - jax is an optional dependency
            raise ImportError("loss: a loss written in JAX needs jax (pip install "
                              "'rfl_fast[jax]')") from exc
        self._jax, self._jnp = jax, jnp
        self.shape = tuple(int(s) for s in shape)
        self.parts = None if parts is None else tuple(
            (int(a), int(b), tuple(int(s) for s in sh)) for a, b, sh in parts)
        self._loss = loss
        one = self._sample_loss

        def mean(p, d):
            return jnp.mean(jax.vmap(one, in_axes=(None, 0))(p, d))

        def gathered(f):
            return jax.jit(lambda p, data, rows: f(p, data[rows]))

        with jax.enable_x64(True):
            self.data = jnp.asarray(np.ascontiguousarray(flat, dtype=np.float64))
            self._losses = gathered(jax.vmap(mean))
            self._grads = gathered(jax.vmap(jax.grad(mean)))
            self._sample = gathered(jax.vmap(jax.vmap(jax.grad(one), in_axes=(None, 0))))
            self._probe()

    def _probe(self):
        jnp = self._jnp
        p = jnp.zeros(self.shape, dtype=jnp.float64)
        try:
            out = self._sample_loss(p, self.data[0])
        except Exception as exc:
            raise ValueError(
                f"loss: loss(params, sample) failed on params of shape {self.shape}"
                f"{'' if self.parts is None else ' (as parts ' + str([s for _, _, s in self.parts]) + ')'}"
                f" and the first sample of data (shape {tuple(self.data.shape[1:])}): "
                f"{type(exc).__name__}: {exc}; check that data's samples have the shape the "
                "loss expects") from exc
        if not isinstance(out, self._jax.Array):
            raise TypeError(f"loss: expected a JAX array (a 0-d one), got "
                            f"{type(out).__name__}")
        if out.ndim != 0:
            raise ValueError(f"loss: expected a scalar (0-d array) per sample, got shape "
                             f"{tuple(out.shape)}; reduce it (e.g. .sum()) inside the loss")
        if out.dtype != jnp.float64:
            raise ValueError(f"loss: expected a float64 result, got {out.dtype}; create any "
                             "constant arrays with dtype=jnp.float64")

    def _call(self, f, x, rows):
        with self._jax.enable_x64(True):
            out = f(self._jnp.asarray(np.asarray(x, dtype=np.float64)), self.data,
                    self._jnp.asarray(np.asarray(rows, dtype=np.int64)))
            return np.asarray(out, dtype=np.float64)


def build(loss: Callable, flat: np.ndarray, shape: Sequence[int],
          parts: Sequence[tuple[int, int, tuple]] | None = None,
          backend: str = "torch", device: Any = None) -> Any:
    """The batched functions of ``loss`` in framework ``backend``.

    Parameters
    ----------
    loss : callable
        ``loss(params, sample) -> scalar``.
    flat : ndarray, shape (M, *s)
        Every client's samples.
    shape : tuple of int
        One point's shape.
    parts : sequence of (int, int, tuple), optional
        See :class:`TorchLoss`.
    backend : {"torch", "jax"}
        The framework ``loss`` is written in.
    device : str or torch.device, optional
        torch only: where the samples stay and the gradients are computed (``None``: CPU).

    Returns
    -------
    TorchLoss or JaxLoss
    """
    if backend == "torch":
        return TorchLoss(loss, flat, shape, parts, device)
    if backend == "jax":
        if device is not None:
            raise ValueError(f"device: only a torch loss takes a device (JAX computes on its "
                             f"default device), got {device!r}")
        return JaxLoss(loss, flat, shape, parts)
    raise ValueError(f"backend: expected one of {FRAMEWORKS}, got {backend!r}")
