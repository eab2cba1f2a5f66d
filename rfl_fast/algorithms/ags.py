"""RFedAGS: Riemannian federated learning by averaging gradient streams (Huang et al.
2025, Algorithm 1), with arbitrary partial participation.

Round ``t`` (step ``a_t``, fixed or Huang et al. 2025's decaying rule):

* the server broadcasts ``x_t``;
* client ``j`` starts at ``x_{t,0} = x_t`` with ``zeta = 0`` and for ``k = 0 .. K-1`` draws a
  mini-batch, ``eta_k = (1/b) sum_b grad f_j(x_{t,k}; z_b)`` (the full local gradient when
  ``batch_size`` is None), steps ``x_{t,k+1} = R_{x_{t,k}}(-a_t eta_k)`` and accumulates
  ``zeta += T_{x_{t,k} -> x_t}(a_t eta_k)``; it uploads ``zeta``, a tangent vector at ``x_t``
  (the "gradient stream"). At ``k = 0`` the transport is the identity.
* the server retracts the aggregated stream:

  - AGS-RS: ``x_{t+1} = R_{x_t}(-(1/|S_t|) sum_{j in S_t} zeta^j)``;
  - AGS-AP: ``x_{t+1} = R_{x_t}(-varpi sum_{j in S_t} zeta^j / (N q_t^j))`` with ``q_t^j``
    the true participation probability ``p_j`` (``q="true"``) or the observed frequency
    ``q_t^j = (#rounds j answered up to t) / t`` (``q="frequency"``, Huang et al. 2025 section 3.3).

Under Bernoulli participation (client ``i`` answers with probability ``p_i``), AGS-AP's
direction is unbiased for ``grad f`` (Huang et al. 2025, eq. 2.1), while AGS-RS's is unbiased for the
reweighted objective ``sum_i p~_i f_i`` of Theorem 1 (see :func:`reweighted_weights`): with
unequal ``p_i``, AGS-RS converges to a different point.

No inverse retraction is used, so the algorithm runs on every manifold with a retraction and a
vector transport (sphere, Stiefel, SPD, Lorentz). The seed's transport ``T_{eta~}`` with
``R_{x_{t,k}}(eta~) = x_t`` is the transport "to ``x_t``"; here the manifold's (projection on
Stiefel, parallel where closed form) unless ``transport`` names another. Rounds where nobody
answers keep ``x_t`` (the engine skips them); they still count in the frequency estimate's
denominator ``t``.

Client weights: the seed's objective is ``(1/N) sum_i f_i``. With a problem of non-uniform
weights ``w_i``, AGS-RS weights the respondents by ``w_j`` normalized over ``S_t`` and AGS-AP
uses ``w_j / q_t^j`` in place of ``1 / (N q_t^j)``; with uniform weights both are the seed's
formulas exactly.
"""

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
from numpy.polynomial.legendre import leggauss

from .._validation import COUNT, POSITIVE, Choice, Optional, check_reals
from ..errors import InvalidParameterError
from ._checks import transport_name
from .participation import Bernoulli, Full, Uniform
from .schedules import as_schedule
from .base import FederatedAlgorithm, check_problem, participant_weights, stacked
from .fedavg_prox import check_fused_steps, fused_local_steps

__all__ = ["RFedAGS", "AGSState", "reweighted_weights"]


def _probabilities(p, name, n=None):
    """``p`` as a read-only float array of probabilities in (0, 1] (scalar or shape (n,))."""
    arr = check_reals(p, name, low=0, high=1, low_open=True)
    if n is not None and arr.ndim == 1 and arr.size != n:
        raise InvalidParameterError(name, f"{arr.size} probabilities for n={n} clients")
    if n is not None:
        arr = np.broadcast_to(arr, (n,)).copy()
    arr.setflags(write=False)
    return arr


def reweighted_weights(p, normalize=True):
    """The weights ``p~_i`` of the problem AGS-RS solves (Huang et al. 2025, Theorem 1).

    With client ``i`` answering independently with probability ``p_i``,
    ``E[(1/|S_t|) sum_{j in S_t} grad f_j] = sum_i p~_i grad f_i`` with
    ``p~_i = p_i * integral_0^1 prod_{j != i} (1 - p_j + p_j s) ds`` (an empty round counts
    as the zero vector). The integrand is a polynomial of degree ``n - 1`` in ``s``, so
    Gauss-Legendre quadrature with ``ceil(n/2) + 1`` nodes is exact up to rounding; the
    products are formed as sums of logarithms (the nodes lie inside (0, 1), so no factor is
    zero).

    Parameters
    ----------
    p : array_like, shape (n,)
        Participation probabilities, each in ``(0, 1]``.
    normalize : bool
        ``True`` (default): divide by ``sum_i p~_i = P(|S_t| >= 1) = 1 - prod_i (1 - p_i)``,
        i.e. the weights of the normalized objective ``sum_i p~_i f_i / sum_i p~_i`` (the
        expected direction conditioned on a non-empty round), usable as a Problem's
        ``weighting``. ``False``: the raw ``p~_i`` of the theorem.

    Returns
    -------
    ndarray, shape (n,)
        ``p~`` (equal to ``p_i / sum_j p_j = 1/n`` for equal ``p`` when normalized).
    """
    p = _probabilities(p, "p")
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p: expected a 1-d array of n >= 1 probabilities, got shape {p.shape}")
    n = p.size
    s, w = leggauss(n // 2 + 2)
    s, w = 0.5 * (s + 1.0), 0.5 * w                      # nodes and weights on [0, 1]
    logf = np.log1p(-p[:, None] * (1.0 - s[None, :]))    # log(1 - p_j + p_j s), (n, nodes)
    others = np.exp(logf.sum(axis=0)[None, :] - logf)    # prod over j != i, (n, nodes)
    pt = p * (others @ w)
    return pt / pt.sum() if normalize else pt


@dataclass(frozen=True)
class AGSState:
    """Server state of RFedAGS.

    Parameters
    ----------
    x : ndarray, M.shape
        The server point ``x_t``.
    counts : ndarray of int64, shape (n,)
        How many rounds each client has answered (the frequency estimate's numerators).
    """

    x: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True, eq=False)
class RFedAGS(FederatedAlgorithm):
    """Riemannian federated averaging of gradient streams (Huang et al. 2025, Algorithm 1).

    Parameters
    ----------
    step : float or Schedule
        Local step ``a_t`` (> 0); e.g. ``Decaying(a0, beta, dec)`` for Huang et al. 2025's rule.
    local_steps : int
        ``K`` (>= 1).
    batch_size : int, optional
        Mini-batch size ``b`` (without replacement, redrawn every local step, ``b <= m_i``);
        ``None`` (default): full local gradients.
    aggregation : {"RS", "AP"}
        AGS-RS (mean over the respondents) or AGS-AP (inverse-probability weights).
    varpi : float
        Global step of AGS-AP (> 0); unused by AGS-RS.
    q : {"true", "frequency"}
        AGS-AP's ``q_t^j``: the true ``p_j`` or the observed participation frequency.
    p : array_like (n,) or float, optional
        The true probabilities for ``q="true"``. When omitted they are read from the run's
        participation model: ``Full()`` gives 1, ``Uniform(k)`` gives ``k/n`` (Huang et al. 2025's
        "Case 2"), ``Bernoulli(p)`` its ``p`` (each must be in ``(0, 1]``).
    retraction : str, optional
        Any retraction of the manifold (no inverse is needed); default the manifold's first.
    transport : str, optional
        Vector transport; default the manifold's first.

    Examples
    --------
    >>> alg = RFedAGS(step=0.01, local_steps=5, aggregation="AP", q="frequency")
    >>> res = run(problem, alg, 500, participation=Bernoulli(p))        # doctest: +SKIP
    """

    step: object
    local_steps: int
    batch_size: int | None = None
    aggregation: str = "RS"
    varpi: float = 1.0
    q: str = "true"
    p: object = None
    retraction: str | None = None
    transport: str | None = None

    array_kinds = {"x": "point", "zeta": "tangent"}
    uploads = {"update": ("zeta",)}

    CHECKS = {"step": as_schedule, "local_steps": COUNT, "batch_size": Optional(COUNT),
              "aggregation": Choice("RS", "AP"), "varpi": POSITIVE,
              "q": Choice("true", "frequency"), "p": Optional(_probabilities)}

    def __repr__(self):
        p = self.p
        if isinstance(p, np.ndarray):
            p = float(p) if p.ndim == 0 else f"array(n={p.size})"
        return (f"RFedAGS(step={self.step!r}, local_steps={self.local_steps}, "
                f"batch_size={self.batch_size}, aggregation={self.aggregation!r}, "
                f"varpi={self.varpi:g}, q={self.q!r}, p={p}, retraction={self.retraction!r}, "
                f"transport={self.transport!r})")

    @property
    def _needs_p(self):
        return self.aggregation == "AP" and self.q == "true"

    # ------------------------------------------------------------------ set-up
    def for_run(self, problem, participation, rounds, resumed=False):
        if not self._needs_p:
            return self
        n = int(problem.n_clients)
        if self.p is not None:
            return replace(self, p=_probabilities(self.p, "p", n))
        if isinstance(participation, Full):
            p = np.ones(n)
        elif isinstance(participation, Uniform):
            p = np.full(n, participation.k / n)
        elif isinstance(participation, Bernoulli):
            p = participation.probabilities(n)
        else:
            raise InvalidParameterError("q", f"'true' needs the participation probabilities; "
                                        f"{type(participation).__name__} does not give them: "
                                        f"pass p=... or use q='frequency'")
        try:
            p = _probabilities(p, "p", n)
        except InvalidParameterError as exc:
            raise InvalidParameterError("p", f"{exc.reason} (read from {participation!r}; AGS-AP "
                                        f"with q='true' divides by p_j; use q='frequency' or p "
                                        f"> 0)") from None
        return replace(self, p=p)

    def validate(self, problem):
        M = check_problem(problem, self.name)
        if self.retraction is not None and self.retraction not in M.retractions:
            raise InvalidParameterError("retraction", f"manifold {M!r} has no retraction "
                                        f"{self.retraction!r}; available: {M.retractions}",
                                        self.name)
        if not M.retractions:
            raise ValueError(f"RFedAGS: manifold {M!r} provides no retraction")
        self._transport(M)
        self._check_batch(problem)

    def _retraction(self, M):
        return self.retraction or M.retractions[0]

    def _transport(self, M):
        return transport_name(M, self.transport, self.name, "the gradient stream")

    def init_server(self, problem, x0, ctx):
        return AGSState(x=np.array(x0), counts=np.zeros(problem.n_clients, dtype=np.int64))

    # ------------------------------------------------------------------ rounds
    def broadcast(self, problem, state, ctx):
        return {"x": state.x}

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        """``K`` local steps; upload the transported gradient stream.

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
            The round and the participants' random streams.

        Returns
        -------
        upload : dict of str to ndarray
            ``{"zeta": (k, *M.shape)}``, tangent vectors at ``x_t``.
        cstate, memo : dict
            Unchanged.
        """
        M = problem.manifold
        method, transport = self._retraction(M), self._transport(M)
        a = self.step(ctx.round)
        x_t = msg["x"]
        k = idx.size
        steps = self._fused_steps(problem, method, transport)
        if steps is not None:      # one fused call
            # the transport carried by the kernel, each direction to x_t
            carried = getattr(steps, "keywords", {}).get("transport") is not None
            x, total = steps(idx, x_t, a, self.local_steps, accumulate=True,
                             **({"anchor": x_t} if carried else {}))
            check_fused_steps(self.name, M, idx, x, a)
            check_fused_steps(self.name, M, idx, total, a)     # the last gradient overflowed
            # (a projection transport: the stream transported once, by linearity)
            return {"zeta": a * total if carried else M.transport(x, x_t, a * total, transport)
                    }, cstate, memo
        x = stacked(x_t, k)
        zeta = np.zeros((k,) + M.shape)
        for step in range(self.local_steps):
            v = a * problem.rgrad(idx, x, self._batch(problem, idx, ctx))
            zeta += v if step == 0 else M.transport(x, x_t, v, transport)
            if step + 1 < self.local_steps:
                x = M.retr(x, -v, method)
        return {"zeta": zeta}, cstate, memo

    def _fused_steps(self, problem, method, transport):
        """The fused kernel of the ``K`` local steps with their directions summed
        (``steps(..., accumulate=True)``, :func:`rfl_fast.kernels.fused.local_stepper`) where the
        declarations allow it, else ``None``; decided before any work. Full local gradients, the
        manifold's step kernels of ``method`` and ``transport`` declared as the gradient's own
        kernel (``Manifold.transport_kernels``, a projection: linear in its vector and
        forgetting where the vector came from), so the stream
        ``sum_k T_{x_k -> x_t}(a eta_k)`` is ``T(a sum_k eta_k)``: one transport of the sum (the
        composed loop's stream to rounding; the ``k = 0`` term is tangent at ``x_t`` already);
        or ``transport`` declared as a kernel the fused kernel carries itself
        (``steps.transports``: the sphere's parallel transport, each step's direction
        transported to the anchor ``x_t`` inside the kernel, linear in the direction, so the
        stream is ``a`` times the kernel's sum); the stepper then carries that kernel
        (``functools.partial``'s ``transport``)."""
        M = problem.manifold
        kernels, kernel = M.step_kernels.get(method), M.transport_kernels.get(transport)
        if self.batch_size is not None or kernels is None or kernel is None:
            return None
        steps = fused_local_steps(problem, method)
        if kernel == kernels[0] or steps is None:
            return steps
        return (partial(steps, transport=kernel) if kernel in getattr(steps, "transports", ())
                else None)

    def _weights(self, problem, state, idx, ctx):
        """Coefficients of the respondents' streams in the server direction."""
        if self.aggregation == "RS":
            return participant_weights(problem, idx)
        w = np.asarray(problem.weights, dtype=np.float64)[idx]
        if self.q == "true":
            q = np.broadcast_to(self.p, (problem.n_clients,))[idx]
        else:
            q = state.counts[idx] / (ctx.round + 1.0)     # frequency up to this round
        return self.varpi * w / q

    def server_update(self, problem, state, idx, upload, ctx):
        counts = state.counts.copy()
        counts[idx] += 1
        state = replace(state, counts=counts)
        c = self._weights(problem, state, idx, ctx)
        direction = np.tensordot(c, upload["zeta"], axes=1)
        x = problem.manifold.retr(state.x, -direction, self._retraction(problem.manifold))
        return replace(state, x=x), None
