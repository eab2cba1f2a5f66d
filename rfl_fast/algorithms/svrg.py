"""RFedSVRG (Li & Ma 2022, Algorithm 1).

Round ``t``:

1. *Prepare exchange.* The server sends ``x_t``; the clients return their full local
   gradients ``grad f_i(x_t)`` and the server sends ``g_t`` back to the participants. Both
   directions are counted as communication.

   * ``full_gradient="all"`` (default, the paper's algorithm: Li & Ma 2022, Alg. 1 and eq. 9 use
     ``g_t = grad f(x_t)``): the exchange addresses all ``n`` clients (engine hook
     ``prepare_recipients``), ``g_t = sum_i w_i grad f_i(x_t)`` exactly, and all ``n``
     uploads, downloads and gradient evaluations are accounted.
     In the simulation (the engine hands the exchange to one batched ``client_prepare`` over
     all ``n`` clients), for a problem whose ``has_pooled_grad()`` is true (kPCA, sphere
     PCA once their pooled matrix exists or from covariances), the uploads are not formed: ``g_t`` is ``problem.grad(x_t)``, the pooled route
     (mathematically identical: ``grad f = sum_i w_i grad f_i``, e.g. one ``d x d`` product
     for the PCA problems instead of a pass over all clients' data), and each participant
     computes its own ``grad f_i(x_t)`` at the start of its local steps. The upload is still
     accounted at full size (``n`` gradients) and the CPU model is unchanged (one gradient
     evaluation per client). Clients and server make the same choice from the same
     ``(problem, recipients)``; a subclass with ``_pooled_prepare = False`` (the BB variants
     keep every client's gradient) gets the plain exchange, and so does a deployment (one
     client per call, real uploads; the server's problem holds no data).
   * ``full_gradient="participants"`` (a cheaper variant): only the round's participants
     answer and ``g_t = sum_{i in S_t} w_i grad f_i(x_t)`` with the weights normalized over
     ``S_t``, an unbiased but noisy estimate of ``grad f(x_t)``; under ``Uniform(k < n)``
     the iterates then stall at a sampling-noise floor instead of converging.
2. *Local steps* (eq. 9), for ``l = 0 .. tau-1``:
   ``x <- R_x(-eta [grad f_i(x) - T_{x_t -> x}(grad f_i(x_t) - g_t)])``. At ``l = 0`` the
   direction is exactly ``g_t`` (no gradient is evaluated), the same for every client (one
   retraction serves them all).
   Client output option 1: the last iterate ``x_tau``; option 2: ``x_l`` with ``l`` drawn
   uniformly from ``{1, .., tau}`` (from the client's own stream).
3. *Aggregation* by the tangent-space mean (eq. 8, ``beta``) or the Karcher mean (eq. 7).

Where the declarations allow, local steps ``l = 1 .. tau-1`` run as one fused multi-client
kernel, as RFedAvg's do (``fedavg_prox.fused_local_steps``): with the transport declared as the
Riemannian gradient's own kernel (``Manifold.transport_kernels``: Stiefel's projection
``T_{x_t -> x} v = P_x(v)``, and ``grad f_i(x) = P_x(egrad f_i(x))``), the direction is
``P_x(egrad f_i(x) - diff)``, the fused kPCA step with the constant per-client offset
``diff = grad f_i(x_t) - g_t``; with a transport the fused kernel declares itself
(``registry.Fused.transports``: the sphere's parallel transport from ``x_t``), the kernel
transports ``diff`` each step: the composed loop's iterates to rounding; the second-order
variants' corrected vector ``diff - c_i R_{x_t}^{-1}(x)`` (``svrg_bb``) adds the inverse
retraction's kernel (``Manifold.inverse_kernels``) to the fused step. Decided from the
declarations before the round (the problem's ``quadratic_rows()``, the manifold's step,
transport and inverse retraction kernels, client option 1); the composed loop otherwise. On
Grassmann with the projection transport the composed loop's direction takes one projection
for the gradient and the transported vector together (``Manifold.corrected_direction``;
the composed maps' iterates to rounding).

Global output option 1: ``x_T``; option 2: ``x_s`` with ``s`` uniform in ``{1, .., T}``, drawn
from the server stream when the run starts. The paper writes Exp, Log and parallel transport;
here ``R``, ``R^{-1}`` are a retraction and its exact inverse (Exp/Log where they exist,
Stiefel's polar pair otherwise, as the paper's experiments do) and ``T`` the manifold's
default transport (parallel on Sphere/SPD/Lorentz, projection on Stiefel) unless
``transport`` names another.
"""

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from .._validation import Choice, validation_enabled
from ._checks import transport_name
from .base import _RetractionBased, check_problem, participant_weights, stacked
from .fedavg_prox import check_fused_steps, fused_local_steps

__all__ = ["RFedSVRG", "SVRGState"]


@dataclass(frozen=True)
class SVRGState:
    """Server state of RFedSVRG.

    Parameters
    ----------
    x : ndarray, M.shape
        The server point ``x_t``.
    g : ndarray or None, M.shape
        ``g_t`` of the current round once gathered (``None`` before the first round).
    pick : int
        Global option 2: the round ``s`` whose point is the output (0 for option 1).
    x_out : ndarray or None
        Global option 2: ``x_s`` once reached.
    """

    x: np.ndarray
    g: np.ndarray | None = None
    pick: int = 0
    x_out: np.ndarray | None = None


@dataclass(frozen=True)
class RFedSVRG(_RetractionBased):
    """Riemannian federated SVRG (Li & Ma 2022, Algorithm 1).

    Parameters
    ----------
    step : float or Schedule
        Local step size ``eta`` (> 0).
    local_steps : int
        ``tau`` (>= 1).
    client_option : {1, 2}
        Client output: last local iterate (1) or a uniformly drawn one (2).
    global_option : {1, 2}
        Algorithm output: last server point (1) or a uniformly drawn one (2).
    retraction : str, optional
        Retraction with an exact inverse (default: Exp/Log where they exist).
    transport : str, optional
        Vector transport name (default: the manifold's first, see module docstring).
    consensus : {"tangent", "karcher"}
    beta : float
        Server step of the tangent-space mean.
    karcher_tol : float
    full_gradient : {"all", "participants"}
        Which clients the server gathers ``g_t`` from (see the module docstring).
    """

    step: object
    local_steps: int
    client_option: int = 1
    global_option: int = 1
    retraction: str | None = None
    transport: str | None = None
    consensus: str = "tangent"
    beta: float = 1.0
    karcher_tol: float = 1e-6
    full_gradient: str = "all"

    has_prepare = True
    array_kinds = {"x": "point", "grad": "tangent", "g": "tangent"}
    uploads = {"prepare": ("grad",), "update": ("x",)}
    #: Whether the simulated all-``n`` exchange may be pooled (module docstring).
    _pooled_prepare = True
    #: Whether :meth:`_correction` may give weights of a second-order term (the 2BB variants):
    #: then the fused local steps need the inverse retraction's kernel too (module docstring).
    _corrected = False

    CHECKS = {**_RetractionBased.CHECKS, "client_option": Choice(1, 2),
              "global_option": Choice(1, 2), "full_gradient": Choice("all", "participants")}

    def prepare_recipients(self, n, idx):
        """Clients the prepare exchange addresses: all ``n`` or the participants ``idx``.

        Parameters
        ----------
        n : int
            Number of clients.
        idx : ndarray of int, shape (k,)
            The round's participants.

        Returns
        -------
        ndarray of int
            ``arange(n)`` (``full_gradient="all"``) or ``idx``.
        """
        return np.arange(n, dtype=np.int64) if self.full_gradient == "all" else idx

    def validate(self, problem):
        M = check_problem(problem, self.name)
        self._retraction(M)
        self._transport(M)

    def _transport(self, M):
        return transport_name(M, self.transport, self.name, "the variance correction")

    # ------------------------------------------------------------------ server
    def init_server(self, problem, x0, ctx):
        pick = int(ctx.rng.integers(1, ctx.rounds + 1)) if self.global_option == 2 else 0
        return SVRGState(x=np.array(x0), pick=pick, x_out=np.array(x0) if pick else None)

    def prepare_message(self, problem, state, ctx):
        return {"x": state.x}

    def server_prepare(self, problem, state, idx, upload, ctx):
        g = self._gathered(problem, state, idx, upload)
        return replace(state, g=g), {"g": g}

    def _gathered(self, problem, state, idx, upload):
        """``g_t`` from the prepare exchange's uploads (or the pooled gradient)."""
        if self._pooled_exchange(problem, idx):               # see the module docstring
            return np.asarray(problem.grad(state.x), dtype=float)
        return np.tensordot(participant_weights(problem, idx), upload["grad"], axes=1)

    def server_update(self, problem, state, idx, upload, ctx):
        return replace(state, **self._updated(problem, state, idx, upload, ctx)), None

    def _updated(self, problem, state, idx, upload, ctx):
        """The fields of the state that the round's aggregation changes (one ``replace`` for
        the subclasses' fields too: it costs ~10 us per call)."""
        x = self._aggregate(problem, state.x, idx, upload["x"])
        return {"x": x, "x_out": x if ctx.round + 1 == state.pick else state.x_out}

    def output(self, problem, state):
        return state.x_out if self.global_option == 2 else state.x

    # ------------------------------------------------------------------ clients
    def _pooled_exchange(self, problem, idx):
        """Whether the prepare exchange with the clients ``idx`` simulates the all-``n``
        exchange by the pooled ``problem.grad`` (module docstring); the clients' and the
        server's answer, from the same arguments."""
        return (self._pooled_prepare and self.full_gradient == "all"
                and idx.size == problem.n_clients > 1 and problem.has_pooled_grad())

    def client_prepare(self, problem, idx, msg, cstate, ctx):
        """Full local gradients at ``x_t``.

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
        ctx : rfl_fast.federation.ClientContext
            The round (unused).

        Returns
        -------
        upload : dict of str to ndarray
            ``{"grad": (k, *M.shape)}`` (zeros of that shape without memory when the all-``n``
            exchange is pooled, module docstring).
        cstate : dict of str to ndarray
            Unchanged.
        memo : dict
            ``{"x": (k, *M.shape)}`` and, unless pooled, ``{"grad": (k, *M.shape)}``.
        """
        x_t = stacked(msg["x"], idx.size)
        if self._pooled_exchange(problem, idx):
            shape = (idx.size,) + problem.manifold.shape
            return {"grad": np.broadcast_to(np.zeros(()), shape)}, cstate, {"x": x_t}
        grad = problem.rgrad(idx, x_t)
        return {"grad": grad}, cstate, {"x": x_t, "grad": grad}

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        """Variance-reduced local steps (eq. 9).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"g": g_t}`` (M.shape), plus the 2BB variants' ``s`` and ``B``.
        cstate : dict of str to ndarray
            Passed through unchanged.
        memo : dict
            ``{"x", "grad"}`` from :meth:`client_prepare`, each ``(k, *M.shape)``.
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams (client option 2).

        Returns
        -------
        upload : dict of str to ndarray
            ``{"x": (k, *M.shape)}``, the last (or picked) local iterates.
        cstate : dict of str to ndarray
            Unchanged.
        memo : dict
            ``memo`` with ``grad`` filled in.
        """
        M = problem.manifold
        method, transport = self._retraction(M), self._transport(M)
        steps = self._fused_steps(problem, method, transport)   # from the declarations alone
        x_t, g = memo["x"][0], msg["g"]
        if "grad" not in memo:                       # pooled exchange: own grad f_i(x_t) now
            memo = {**memo, "grad": problem.rgrad(idx, memo["x"])}
        diff = memo["grad"] - g                      # grad f_i(x_t) - g_t, tangent at x_t
        coef = self._correction(problem, idx, x_t, msg, memo)
        eta = self._local_step(msg, ctx)
        k = idx.size
        if self.client_option == 2:
            pick = ctx.rng.integers(1, self.local_steps + 1)        # l_j in {1..tau}
            out = np.empty((k,) + M.shape)
        # l = 0: the direction is g_t, the same for every client: one retraction for all
        x1 = M.retr(x_t, -eta * g, method)
        if steps is not None and self.local_steps > 1:      # l = 1 .. tau-1 in one fused call
            terms = {} if coef is None else {"anchor": x_t, "coef": coef}
            if "transport" in getattr(steps, "keywords", ()):  # the offset transported by
                terms["anchor"] = x_t                           # the kernel from x_t
            x = steps(idx, x1, eta, self.local_steps - 1, offset=diff, **terms)
            return {"x": check_fused_steps(self.name, M, idx, x, eta)}, cstate, memo
        expand = (slice(None),) + (None,) * len(M.shape)
        x = np.array(stacked(x1, k), order="C")   # not order K: a broadcast's copy would
        # keep the stride-0 axis innermost ((8, 8 n p, 8 n)-like strides), slowing every pass
        direction = self._one_projection(problem, transport, diff, x_t)
        scratch = buf = None
        for step in range(1, self.local_steps + 1):
            if self.client_option == 2:
                hit = pick == step
                out[hit] = x[hit]
            if step == self.local_steps:
                break
            if direction is not None:               # the same direction, one projection
                if scratch is None:
                    scratch, buf = np.empty_like(x), np.empty_like(x)
                d = direction(x_t, x, problem.rgrad(idx, x), diff, coef, method, scratch, buf)
                d *= -eta                  # buf: free again once the retraction has read it
            else:
                if scratch is None:     # vector points (Lorentz, sphere): x_t's rows once,
                    # the maps then take equal stacks (the same numbers; matrix manifolds
                    # factor the one point once instead: SPD's transport and log)
                    scratch = (np.array(stacked(x_t, k), order="C") if M.core_ndim == 1
                               else x_t)
                v = diff if coef is None else diff - coef[expand] * M.inv_retr(scratch, x, method)
                d = problem.rgrad(idx, x) - M.transport(scratch, x, v, transport)
                d = -eta * d
            x = M.retr(x, d, method)
        return {"x": out if self.client_option == 2 else x}, cstate, memo

    @staticmethod
    def _one_projection(problem, transport, diff, x_t):
        """The manifold's one-map form of the local direction ``grad f_i(x) - T_{x_t -> x}(diff
        - c R^-1_{x_t}(x))`` where it declares one for ``transport``
        (:meth:`~rfl_fast.manifolds.Manifold.corrected_direction`; Grassmann's projection
        transport: gradient and transport share one projection) and the arrays are float64
        without on-manifold checks in force, else ``None``."""
        M = problem.manifold
        if (diff.dtype != np.float64 or x_t.dtype != np.float64
                or validation_enabled(M.validate)):    # on-manifold checks: the maps' own
            return None
        return M.corrected_direction(transport)

    def _fused_steps(self, problem, method, transport):
        """The fused kernel of local steps ``l = 1 .. tau-1`` (``steps(idx, x, eta, n,
        offset)``, :func:`rfl_fast.kernels.fused.local_stepper`) where the declarations allow
        it (module docstring), else ``None``; decided before any work. The transport's
        declared kernel (``Manifold.transport_kernels``) is either the gradient's own (a
        projection: the offset's ``P_x(egrad - diff)``) or one the fused kernel declares for
        its offset (``steps.transports``, ``registry.Fused.transports``: the sphere's parallel
        transport from ``x_t``, passed as the anchor); the stepper then carries that kernel
        (``functools.partial``'s ``transport``).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem (its ``quadratic_rows()``).
        method, transport : str
            The retraction and the transport in use.

        Returns
        -------
        callable or None
        """
        M = problem.manifold
        kernels = M.step_kernels.get(method)
        kernel = M.transport_kernels.get(transport)
        if self.client_option != 1 or kernels is None or kernel is None:
            return None
        if kernel == kernels[0]:
            return fused_local_steps(problem, method, inverse=self._corrected)
        steps = fused_local_steps(problem, method, inverse=True)   # x_t: the anchor
        if steps is None or kernel not in getattr(steps, "transports", ()):
            return None
        return partial(steps, transport=kernel)

    # hooks of the second-order variants (svrg_bb.py)
    def _correction(self, problem, idx, x_t, msg, memo):
        """``None``, or the weights ``c`` (k,) of the second-order term: the vector at ``x_t``
        whose transport to ``x`` is subtracted from ``grad f_i(x)`` is then
        ``diff - c_i R_{x_t}^{-1}(x)`` (RFedSVRG: ``diff = grad f_i(x_t) - g_t`` itself)."""
        return None

    def _local_step(self, msg, ctx):
        """The local step size of this round."""
        return self.step(ctx.round)
