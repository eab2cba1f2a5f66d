"""RFedSVRG-2BB and RFedSVRG-2BBS (Xiao et al. 2024): RFedSVRG with a
Barzilai-Borwein (BB) second-order correction, and with BB step sizes.

Round ``t`` (on top of :class:`~rfl_fast.algorithms.svrg.RFedSVRG`):

1. *Prepare exchange* to all ``n`` clients (the BB pairs need every client's gradient at
   ``x_{t-1}`` and ``x_t``): client ``i`` returns ``grad f_i(x_t)`` and, from its state (its
   previous gradient ``grad f_i(x_{t-1})`` and ``x_{t-1}``), forms
   ``y_i = grad f_i(x_t) - T_{x_{t-1} -> x_t} grad f_i(x_{t-1})`` (eq. 25). The server forms
   ``g_t = grad f(x_t)``, ``s = T_{x_{t-1} -> x_t} R^-1_{x_{t-1}}(x_t)`` (eq. 21),
   ``y = g_t - T_{x_{t-1} -> x_t} g_{t-1}`` (eq. 22), ``B = <s,y>/<s,s>`` (eq. 26), and sends
   ``g_t``, ``s`` and ``B`` (``B = 0`` at ``t = 0`` or when ``<s,y> <= 0``). 2BBS also sends
   the round's step.
2. *Local steps* (eq. 16), ``xi = R^-1_{x_t}(x)``::

       x <- R_x(-eta [grad f_i(x) + T_{x_t -> x}(g_t - grad f_i(x_t) + (B - B_i) xi)])

   with ``B_i = <s,y_i>/<s,s>``; ``B = B_i = 0`` (first-order RFedSVRG) when ``t = 0``,
   ``<s,y> <= 0`` or ``<s,y_i> <= 0`` (eq. 27, decided per client).
3. Tangent-space (or Karcher) mean, as RFedSVRG.

2BBS (section 3.4, eqs. 29-30): the local step is ``eta_t = hat_eta_t / tau`` with
``hat_eta_t = min(eta_max, max(eta_min, <s,s>/<s,y>))`` if ``<s,y> > 0``, ``eta_max``
otherwise, and ``hat_eta_0 = step`` (the paper's ``eta_0``) at ``t = 0``.

Readings of the extraction (Xiao et al. 2024 is a plain-text copy; formulas lost their operators):

* eq. 16 reads ``grad f_i(x) + P_{x_t -> x}(grad f(x_t) - grad f_i(x_t) + B xi - B_i xi)``:
  taken as the *sum* ``+ (B - B_i) xi`` (the SVRG-2 control variate
  ``grad f_i(x) - [grad f_i(x_t) + H_i xi] + [grad f(x_t) + H xi]``, and the paper's own
  unbiasedness argument ``E[B_i] = B`` only needs ``B - B_i``).
* eq. 26/27: the condition "``t >= 1``, ``<s,y> > 0`` and ``<s,y_i> > 0``" is applied per
  client: a client whose own pair has ``<s,y_i> <= 0`` uses ``B = B_i = 0`` while the others
  keep their correction.
* eq. 23 (``B = <s,y>/<s,s> I``, step ``<s,s>/<s,y>``) is the BB variant used; the paper
  mentions eq. 24 but adopts eq. 23 "for the rest of the paper".
* eq. 30's bounds are written ``[eta_max, eta_min]``; read as the clip interval
  ``[eta_min, eta_max]`` (``0 < eta_min < eta_max`` in the text; equality is accepted here).
* ``eta_0`` of 2BBS is not given for the experiments; it is this class's ``step``.

The paper writes Exp, Log and parallel transport; as for RFedSVRG these are the manifold's
retraction with an exact inverse and its default transport unless named.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from .._validation import POSITIVE
from .svrg import RFedSVRG, SVRGState

__all__ = ["RFedSVRG2BB", "RFedSVRG2BBS", "BBState"]


@dataclass(frozen=True)
class BBState(SVRGState):
    """Server state of RFedSVRG-2BB/-2BBS: :class:`SVRGState` plus the previous round.

    Parameters
    ----------
    x_prev : ndarray or None, M.shape
        ``x_{t-1}`` (``None`` before the first aggregation).
    g_prev : ndarray or None, M.shape
        ``g_{t-1} = grad f(x_{t-1})``.
    B : float
        This round's ``<s,y>/<s,s>`` (0 if not positive or at ``t = 0``).
    eta : float
        This round's local step (2BBS) or ``nan`` (2BB).
    """

    x_prev: np.ndarray | None = None
    g_prev: np.ndarray | None = None
    B: float = 0.0
    eta: float = float("nan")


def _scalar(v):
    return np.asarray(v, dtype=np.float64).reshape(())


@dataclass(frozen=True)
class RFedSVRG2BB(RFedSVRG):
    """RFedSVRG with a Barzilai-Borwein second-order correction (Xiao et al. 2024, Algorithm 1).

    Parameters
    ----------
    step : float or Schedule
        Local step ``eta`` (> 0).
    local_steps : int
        ``tau`` (>= 1).
    client_option, global_option, retraction, transport, consensus, beta, karcher_tol
        As :class:`~rfl_fast.algorithms.RFedSVRG`.
    full_gradient : {"all"}
        The BB pairs need every client's gradient at ``x_{t-1}`` and ``x_t``, so the prepare
        exchange always reaches all ``n`` clients (``"participants"`` is refused).

    Notes
    -----
    Client state rows: ``g_prev`` (``grad f_i(x_{t-1})``) and ``x_prev`` (``x_{t-1}``), one per
    client. Communication per round: ``x_t`` and ``grad f_i(x_t)`` with all ``n`` clients,
    then ``g_t``, ``s``, ``B`` (2BBS: and ``eta_t``) and the local result with the
    participants. See the module docstring for the formulas and the readings of the seed.
    """

    array_kinds = {**RFedSVRG.array_kinds, "s": "tangent", "B": "scalar"}
    _pooled_prepare = False   # every client keeps its own gradient at x_t
    _corrected = True         # _correction: the curvature pair's second-order term

    def __post_init__(self):
        super().__post_init__()
        if self.full_gradient != "all":
            raise ValueError(f"{self.name}: full_gradient={self.full_gradient!r} is not "
                             f"supported; the Barzilai-Borwein pairs (s, y, y_i) need every "
                             f"client's gradient at x_(t-1) and x_t (use 'all')")

    # ------------------------------------------------------------------ server
    def init_server(self, problem, x0, ctx):
        base = super().init_server(problem, x0, ctx)
        return BBState(x=base.x, pick=base.pick, x_out=base.x_out)

    def init_clients(self, problem, x0):
        n = problem.n_clients
        shape = (n,) + problem.manifold.shape
        return {"g_prev": np.zeros(shape), "x_prev": np.broadcast_to(x0, shape).copy()}

    def _pair(self, M, state, g):
        """``s``, ``<s,s>``, ``<s,y>`` of the server (zeros at ``t = 0``)."""
        if state.x_prev is None:
            return np.zeros_like(g), 0.0, 0.0
        transport = self._transport(M)
        x_prev, x = state.x_prev, state.x
        s = M.transport(x_prev, x, M.inv_retr(x_prev, x, self._retraction(M)), transport)
        y = g - M.transport(x_prev, x, state.g_prev, transport)
        return s, float(M.inner(x, s, s)), float(M.inner(x, s, y))

    def _step_of_round(self, first, ss, sy):
        return float("nan")

    def server_prepare(self, problem, state, idx, upload, ctx):
        g = self._gathered(problem, state, idx, upload)
        M = problem.manifold
        s, ss, sy = self._pair(M, state, g)
        B = sy / ss if (ss > 0 and sy > 0) else 0.0
        eta = self._step_of_round(state.x_prev is None, ss, sy)
        msg = {"g": g, "s": s, "B": _scalar(B)}
        if not np.isnan(eta):
            msg["eta"] = _scalar(eta)
        return replace(state, g=g, B=B, eta=eta), msg

    def _updated(self, problem, state, idx, upload, ctx):
        return {**super()._updated(problem, state, idx, upload, ctx), "x_prev": state.x,
                "g_prev": state.g}

    # ------------------------------------------------------------------ clients
    def client_prepare(self, problem, idx, msg, cstate, ctx):
        """Gradients at ``x_t`` (uploaded) and ``y_i`` (kept); the state rows move to ``x_t``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"x": x_t}``, the server point, M.shape.
        cstate : dict of str to ndarray
            ``{"x_prev", "g_prev"}``, each ``(k, *M.shape)``.
        ctx : rfl_fast.federation.ClientContext
            The round (unused).

        Returns
        -------
        upload : dict of str to ndarray
            ``{"grad": (k, *M.shape)}``.
        cstate : dict of str to ndarray
            ``x_prev = x_t`` and ``g_prev = grad f_i(x_t)``.
        memo : dict
            :meth:`RFedSVRG.client_prepare`'s memo plus ``{"y": (k, *M.shape)}``.
        """
        up, cstate, memo = super().client_prepare(problem, idx, msg, cstate, ctx)
        M = problem.manifold
        x_t, grad = memo["x"], memo["grad"]
        # x_t one point (the stacked view's row) against the rows: the manifolds broadcast it
        # (the same numbers; Lorentz's kernels then take the stack as it is)
        y = grad - M.transport(cstate["x_prev"], x_t[0], cstate["g_prev"], self._transport(M))
        cstate = {**cstate, "g_prev": grad, "x_prev": np.array(x_t, order="C")}
        return up, cstate, {**memo, "y": y}

    def _correction(self, problem, idx, x_t, msg, memo):
        M = problem.manifold
        B = float(msg["B"])
        if B <= 0.0:
            return None                                  # t = 0 or <s,y> <= 0: first order
        s = msg["s"]
        ss = float(M.inner(x_t, s, s))
        sy_i = np.asarray(M.inner(x_t, s, memo["y"]))   # one point against the stack: (k,)
        coef = np.where(sy_i > 0, B - sy_i / ss, 0.0)    # B - B_i, or 0 (first order)
        return coef if coef.any() else None             # of xi = R^-1_{x_t}(x)


@dataclass(frozen=True)
class RFedSVRG2BBS(RFedSVRG2BB):
    """RFedSVRG-2BB with Barzilai-Borwein step sizes (Xiao et al. 2024, section 3.4).

    Parameters
    ----------
    step : float
        ``eta_0`` (hat): the round-0 step is ``step / tau``.
    local_steps : int
        ``tau``.
    eta_min, eta_max : float, keyword-only
        Clip interval of the BB step ``<s,s>/<s,y>``, ``0 < eta_min <= eta_max``.
    **others
        As :class:`RFedSVRG2BB`.
    """

    eta_min: float | None = field(default=None, kw_only=True)
    eta_max: float | None = field(default=None, kw_only=True)

    array_kinds = {**RFedSVRG2BB.array_kinds, "eta": "scalar"}
    CHECKS = {**RFedSVRG2BB.CHECKS, "eta_min": POSITIVE, "eta_max": POSITIVE}

    def __post_init__(self):
        for name in ("eta_min", "eta_max"):
            if getattr(self, name) is None:
                raise TypeError(f"{self.name}: missing the keyword argument {name} (the clip "
                                f"interval of the BB step, e.g. eta_min=0.008, eta_max=0.8)")
        super().__post_init__()
        if self.eta_min > self.eta_max:
            raise ValueError(f"{self.name}: eta_min={self.eta_min:g} > eta_max="
                             f"{self.eta_max:g}; need 0 < eta_min <= eta_max")

    def _step_of_round(self, first, ss, sy):
        tau = self.local_steps
        if first:
            return self.step(0) / tau
        if sy <= 0:
            return self.eta_max / tau
        return min(self.eta_max, max(self.eta_min, ss / sy)) / tau

    def _local_step(self, msg, ctx):
        return float(msg["eta"])
