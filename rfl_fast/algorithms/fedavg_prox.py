"""RFedAvg and RFedProx (Li & Ma 2022, Algorithms 2 and 3).

Local steps ``x <- R_x(-eta * d(x))`` from the server point ``x_t`` with

* RFedAvg: ``d(x) = grad f_i(x)`` (full local gradient, or a mini-batch of ``batch_size``);
* RFedProx: ``d(x) = grad f_i(x) - mu R_x^{-1}(x_t)``, the Riemannian gradient of
  ``f_i(x) + mu/2 d^2(x, x_t)`` (Li & Ma 2022, eq. 27-28: the prox subproblem solved inexactly by
  ``local_steps`` gradient steps), with ``R^{-1}`` the exact inverse of the retraction in use
  (Log where it exists).

The server aggregates the last local iterates by the tangent-space mean (eq. 8, with
``beta``) or the Karcher mean (eq. 7), weights ``w_i`` of the problem normalized over the
participants. The retraction is the same for local steps and consensus (default: Exp/Log
where they exist, Stiefel's polar pair), as in the paper's experiments.

RFedAvg's full-gradient steps run as one fused multi-client kernel where the kernels layer has
one (``kernels.fused.local_stepper``) for what the problem and the manifold declare (kPCA's rows,
``problem.quadratic_rows()``; Stiefel's polar step kernels, ``Manifold.step_kernels``): the same
iterates as stepping through ``rgrad`` and ``retr``. So do RFedProx's, where the manifold also
declares its inverse retraction's kernel (``Manifold.inverse_kernels``) and the fused kernel
adds the proximal term with it: the composed loop's iterates to rounding.
"""

from dataclasses import dataclass, replace

import numpy as np

from .._validation import COUNT, NONNEGATIVE, Optional
from ..errors import NoSolutionError
from ..kernels import fused
from .base import _RetractionBased, check_problem, stacked

__all__ = ["RFedAvg", "RFedProx", "PointState"]


@dataclass(frozen=True)
class PointState:
    """Server state of algorithms whose only server memory is the model.

    Parameters
    ----------
    x : ndarray, M.shape
        The server point ``x_t``.
    """

    x: np.ndarray


def fused_local_steps(problem, retraction, inverse=False, ambient=False):
    """The fused kernel of full-gradient local steps for the problem's declared rows
    (:meth:`~rfl_fast.problems.Problem.quadratic_rows`) and the manifold's declared step
    kernels of ``retraction`` (``Manifold.step_kernels``; ``inverse``: also its inverse's,
    ``Manifold.inverse_kernels``, for RFedProx's and RFedSVRG-2BB's terms; ``ambient``:
    RFedProj's steps, projected back by ``Manifold.project_kernel``, ``retraction`` ``None``:
    the gradient's kernel of any declared step), where the kernels layer has one:
    ``steps(idx, x, eta, n)`` (see :func:`rfl_fast.kernels.fused.local_stepper`), else
    ``None``; decided from the declarations, before any work."""
    M = problem.manifold
    if (inverse and retraction not in M.inverse_kernels) or (ambient and not M.project_kernel):
        return None
    kernels = (next(iter(M.step_kernels.values()), None) if ambient
               else M.step_kernels.get(retraction))
    return fused.local_stepper(problem.quadratic_rows(), kernels,
                               M.inverse_kernels[retraction] if inverse else None,
                               M.project_kernel if ambient else None)


def check_fused_steps(name, M, idx, x, eta):
    """``x``, the last iterates of fused local steps of the clients ``idx``, shape
    ``(k, *M.shape)``; raises ``NoSolutionError`` naming the clients whose steps left the
    manifold ``M`` (NaN items: a step overflowed, lost rank or had no inverse retraction), the
    algorithm ``name`` and the step ``eta``."""
    bad = ~np.isfinite(x.reshape(idx.size, -1)).all(axis=1)
    if bad.any():
        raise NoSolutionError(
            f"{name}: the local steps of clients {idx[bad][:5].tolist()} left "
            f"{M!r} (a step X - eta d(X) overflowed, lost rank or found no inverse "
            f"retraction to the server point: reduce the step {eta!r} or rescale the data)")
    return x


class _LocalRetractionSteps(_RetractionBased):

    array_kinds = {"x": "point"}
    uploads = {"update": ("x",)}
    CHECKS = {**_RetractionBased.CHECKS, "batch_size": Optional(COUNT)}

    def validate(self, problem):
        M = check_problem(problem, self.name)
        self._retraction(M)
        self._check_batch(problem)

    def init_server(self, problem, x0, ctx):
        return PointState(x=np.array(x0))

    def broadcast(self, problem, state, ctx):
        return {"x": state.x}

    def _direction(self, problem, idx, x, x_t, batch, method):
        return problem.rgrad(idx, x, batch)

    # hooks of RFedProx: the fused kernel of its direction, and that kernel's extra arguments
    def _fused_steps(self, problem, method):
        return fused_local_steps(problem, method)

    def _fused_terms(self, x_t):
        return {}

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        """``local_steps`` retraction steps for all k participants at once.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"x": x_t}``, the server point, M.shape.
        cstate : dict of str to ndarray
            Passed through unchanged.
        memo : dict
            Passed through unchanged.
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' streams (mini-batches).

        Returns
        -------
        upload : dict of str to ndarray
            ``{"x": (k, *M.shape)}``, the last local iterates.
        cstate, memo : dict
            Unchanged.
        """
        M = problem.manifold
        method = self._retraction(M)
        eta = self.step(ctx.round)
        x_t = msg["x"]
        steps = self._fused_steps(problem, method) if self.batch_size is None else None
        if steps is not None:
            x = steps(idx, x_t, eta, self.local_steps, **self._fused_terms(x_t))
            return {"x": check_fused_steps(self.name, M, idx, x, eta)}, cstate, memo
        x = stacked(x_t, idx.size)
        for _ in range(self.local_steps):
            d = self._direction(problem, idx, x, x_t, self._batch(problem, idx, ctx), method)
            x = M.retr(x, -eta * d, method)
        return {"x": x}, cstate, memo

    def server_update(self, problem, state, idx, upload, ctx):
        return replace(state, x=self._aggregate(problem, state.x, idx, upload["x"])), None


@dataclass(frozen=True)
class RFedAvg(_LocalRetractionSteps):
    """Riemannian FedAvg (Li & Ma 2022, Algorithm 2).

    Parameters
    ----------
    step : float or Schedule
        Local step size ``eta`` (> 0), fixed or a schedule of the round.
    local_steps : int
        Local steps ``tau`` per round (>= 1).
    batch_size : int, optional
        Mini-batch size (without replacement, redrawn every step); ``None`` for full local
        gradients.
    retraction : str, optional
        A retraction of the manifold with an exact inverse (default: Exp/Log where they
        exist, else the first such pair, e.g. Stiefel ``"polar"``).
    consensus : {"tangent", "karcher"}
        Server aggregation: tangent-space mean (eq. 8) or Karcher mean (eq. 7).
    beta : float
        Server step of the tangent-space mean (eq. 8's moving average; 1 = plain mean).
    karcher_tol : float
        Gradient-norm tolerance of the Karcher mean.
    """

    step: object
    local_steps: int
    batch_size: int | None = None
    retraction: str | None = None
    consensus: str = "tangent"
    beta: float = 1.0
    karcher_tol: float = 1e-6


@dataclass(frozen=True)
class RFedProx(_LocalRetractionSteps):
    """Riemannian FedProx (Li & Ma 2022, Algorithm 3, with eq. 28's inexact local solver).

    Local direction ``grad f_i(x) - mu R_x^{-1}(x_t)``; ``mu = 0`` is RFedAvg.

    Parameters
    ----------
    step : float or Schedule
        Local step size ``eta`` (> 0), fixed or a schedule of the round.
    local_steps : int
        Local steps ``tau`` per round (>= 1).
    mu : float
        The proximal weight (>= 0).
    batch_size, retraction, consensus, beta, karcher_tol
        As :class:`RFedAvg`.
    """

    step: object
    local_steps: int
    mu: float
    batch_size: int | None = None
    retraction: str | None = None
    consensus: str = "tangent"
    beta: float = 1.0
    karcher_tol: float = 1e-6

    CHECKS = {**_LocalRetractionSteps.CHECKS, "mu": NONNEGATIVE}

    def _fused_steps(self, problem, method):
        return fused_local_steps(problem, method, inverse=self.mu != 0.0)

    def _fused_terms(self, x_t):
        return {} if self.mu == 0.0 else {"anchor": x_t, "mu": self.mu}

    def _direction(self, problem, idx, x, x_t, batch, method):
        g = problem.rgrad(idx, x, batch)
        if self.mu == 0.0:
            return g
        return g - self.mu * problem.manifold.inv_retr(x, x_t, method)
