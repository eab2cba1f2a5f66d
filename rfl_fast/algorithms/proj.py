"""RFedProj: projection-based federated learning on compact submanifolds with client-drift
correction (Zhang, Hu, So, Johansson, NeurIPS 2024; Zhang et al. 2024, Algorithm 1).

Round ``r`` with server variable ``xhat_r`` (in the ambient space, not on M):

* client ``i``: ``z_0 = zhat_0 = P_M(xhat_r)``; for ``t < tau``: ``g_t = grad f_i(z_t; B_t)``,
  ``zhat_{t+1} = zhat_t - eta (g_t + c_i)``, ``z_{t+1} = P_M(zhat_{t+1})``; upload
  ``zhat_tau``;
* server: ``xhat_{r+1} = P_M(xhat_r) + eta_g (sum_i w_i zhat_tau^i - P_M(xhat_r))`` and sends
  ``xhat_{r+1}`` to the participants (the paper's line 14 broadcast, counted as download);
* client ``i`` (participants): ``c_i <- (P_M(xhat_r) - xhat_{r+1}) / (eta_g eta tau)
  - (1/tau) sum_t g_t``. Clients that did not take part keep their ``c_i`` (``c_i = 0`` at the
  start).

Output ``P_M(xhat_{R+1})``; the per-round metrics are evaluated at ``P_M(xhat_r)``. The paper
averages with ``1/n`` (full participation); here ``w_i`` are the problem's weights normalized
over the participants (``1/k`` for uniform weighting). With ``tau = 1``, full batches and full
participation the corrections make the iteration exactly projected gradient descent
``y <- P_M(y - eta eta_g grad f(y))`` on ``y = P_M(xhat)`` (the poster's remark).
``grad f_i(z; B)`` is the Riemannian gradient (the tangent projection of the Euclidean one).

With full local gradients, where the kernels layer has a fused kernel of ambient steps for the
problem's rows and the manifold's projection (``Manifold.project_kernel``; kPCA's rows on
Stiefel), a round's local steps run as one fused call (the composed loop's iterates to
rounding; the last projection, which no one reads, is not taken).
"""

from dataclasses import dataclass, replace

import numpy as np

from .._validation import COUNT, POSITIVE, Optional
from .schedules import as_schedule
from .base import FederatedAlgorithm, check_problem, participant_weights, stacked
from .fedavg_prox import check_fused_steps, fused_local_steps

__all__ = ["RFedProj", "ProjState"]


@dataclass(frozen=True)
class ProjState:
    """Server state of RFedProj.

    Parameters
    ----------
    xhat : ndarray, M.shape
        The ambient server iterate (generally off the manifold; the model is its projection).
    """

    xhat: np.ndarray


@dataclass(frozen=True)
class RFedProj(FederatedAlgorithm):
    """RFedProj (Zhang et al. 2024).

    Parameters
    ----------
    step : float or Schedule
        Local step ``eta`` (> 0).
    local_steps : int
        ``tau`` (>= 1).
    step_global : float
        Server step ``eta_g`` (> 0).
    batch_size : int, optional
        Mini-batch size ``b`` (without replacement, redrawn every local step); ``None`` for
        full local gradients.
    """

    step: object
    local_steps: int
    step_global: float = 1.0
    batch_size: int | None = None

    has_finalize = True
    array_kinds = {"xhat": "ambient", "zhat": "ambient"}
    uploads = {"update": ("zhat",)}

    CHECKS = {"step": as_schedule, "local_steps": COUNT, "step_global": POSITIVE,
              "batch_size": Optional(COUNT)}

    def validate(self, problem):
        M = check_problem(problem, self.name)
        if not M.has_project:
            raise ValueError(f"RFedProj: manifold {M!r} provides no nearest-point projection "
                             f"`project` (P_M), which RFedProj needs; it runs on compact "
                             f"embedded manifolds such as Sphere and Stiefel (and Euclidean)")
        self._check_batch(problem)

    def init_server(self, problem, x0, ctx):
        return ProjState(xhat=np.array(x0))

    def init_clients(self, problem, x0):
        return {"c": np.zeros((problem.n_clients,) + problem.manifold.shape)}

    def broadcast(self, problem, state, ctx):
        return {"xhat": state.xhat}

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        """Local projected steps with the drift correction ``c``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"xhat": (*M.shape)}``, the ambient server iterate.
        cstate : dict of str to ndarray
            ``{"c": (k, *M.shape)}``, the drift corrections (read only).
        memo : dict
            Replaced (nothing is kept from the prepare exchange).
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams.

        Returns
        -------
        upload : dict of str to ndarray
            ``{"zhat": (k, *M.shape)}``, the ambient local iterates.
        cstate : dict of str to ndarray
            Unchanged.
        memo : dict
            ``{"p", "gsum", "eta"}`` for :meth:`client_finalize`.
        """
        M = problem.manifold
        eta = self.step(ctx.round)
        p = M.project(msg["xhat"])
        c = cstate["c"]
        steps = (fused_local_steps(problem, None, ambient=True) if self.batch_size is None
                 else None)                     # decided from the declarations
        if steps is not None:
            zhat, gsum = steps(idx, p, eta, self.local_steps, accumulate=True, ambient=True,
                               drift=c)
            check_fused_steps(self.name, M, idx, zhat, eta)
            check_fused_steps(self.name, M, idx, gsum, eta)   # the last gradient overflowed
            return {"zhat": zhat}, cstate, {"p": p, "gsum": gsum, "eta": eta}
        zhat = stacked(p, idx.size)
        z = zhat
        gsum = 0.0
        for _ in range(self.local_steps):
            g = problem.rgrad(idx, z, self._batch(problem, idx, ctx))
            zhat = zhat - eta * (g + c)
            z = M.project(zhat)
            gsum = gsum + g
        return {"zhat": zhat}, cstate, {"p": p, "gsum": gsum, "eta": eta}

    def server_update(self, problem, state, idx, upload, ctx):
        p = problem.manifold.project(state.xhat)
        mean = np.tensordot(participant_weights(problem, idx), upload["zhat"], axes=1)
        xhat = p + self.step_global * (mean - p)
        return replace(state, xhat=xhat), {"xhat": xhat}

    def client_finalize(self, problem, idx, msg, cstate, memo, ctx):
        """Drift correction ``c_i`` from ``xhat_{r+1}`` and the round's gradient sum.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"xhat": (*M.shape)}``, the new ambient server iterate.
        cstate : dict of str to ndarray
            ``{"c": (k, *M.shape)}``.
        memo : dict
            ``{"p", "gsum", "eta"}`` from :meth:`client_update`.
        ctx : rfl_fast.federation.ClientContext
            The round (unused).

        Returns
        -------
        dict of str to ndarray
            ``cstate`` with the new ``c``, shape ``(k, *M.shape)``.
        """
        tau = self.local_steps
        c = ((memo["p"] - msg["xhat"]) / (self.step_global * memo["eta"] * tau)
             - memo["gsum"] / tau)
        return {**cstate, "c": c}

    def point(self, problem, state):
        return problem.manifold.project(state.xhat)
