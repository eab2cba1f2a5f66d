"""PriRFed: Riemannian federated learning with differential privacy (Huang et al. 2024).

Round ``t`` (Huang et al. 2024, Algorithm PriRFed):

1. the server samples ``S_t`` of size ``s`` without replacement (``Uniform(s)``; ``Full()`` is
   ``s = N``) and broadcasts ``x_t``;
2. each participant runs a private local trainer from ``x_t``:

   * **DP-RSGD** (Huang et al. 2024, after [Han+24]): ``K`` steps; step ``k`` draws ``B_k`` of size
     ``b_i`` of its ``N_i`` samples without replacement and moves along
     ``eta_k = (1/b_i) sum_{p in B_k} clip_tau(grad f_ip(x)) + e``, ``e ~ N_x(0, sigma_i^2)``,
     ``x <- Exp_x(-a eta_k)``. Output option 1: ``x_K``; option 2: ``x_k``, ``k`` uniform in
     ``{0, .., K}``.
   * **DP-RSVRG** (Huang et al. 2024, after [Upt+23]): ``K`` epochs with snapshot ``xs`` (``xs = x_t``
     at the first), the full clipped mean ``g = (1/N_i) sum_l clip_tau(grad f_il(xs))``, then
     ``m`` steps each picking one sample ``l`` uniformly:
     ``eta = clip_tau(grad f_il(x)) - T_{xs->x}(clip_tau(grad f_il(xs)) - g) + e``,
     ``x <- Exp_x(-a eta)``; the last point is the next snapshot. Output option 1: the last
     point ``x_{K,m}``; option 2: uniform over ``{x_{k+1,j}}``, ``j = 0..m-1``, ``k = 0..K-1``.
     Reading: the seed's slide writes ``Gamma(clip_tau(grad f_l(xs) - g))``; the project's
     restatement and the privacy analysis (``rfl_fast.privacy.accounting``) read it as
     ``T(clip_tau(grad f_l(xs)) - g)`` (per-sample clipping, Utpala et al.'s DP-SVRG), used
     here.

3. the server aggregates by the tangent-space mean ``Exp_x(sum_i w_i Log_x(x_i))`` with
   ``w_i = N_i / sum_{j in S_t} N_j`` (Huang et al. 2024's line 08; ``beta`` scales the mean as in
   Li & Ma 2022, eq. 8). Global output option 1: ``x_T``; option 2: ``x_s``, ``s`` uniform in
   ``{1, .., T}`` (drawn from the server stream when the run starts). One ``output_option``
   selects both the clients' and the server's option, as the seed ties them ("option 1 if
   Option 1 is chosen in PriRFed").

Maps. Local steps use the manifold's retraction named ``"exp"`` (Exp) where it has one --
Sphere, SPD, Lorentz, Euclidean and Stiefel (its geodesic exponential) -- else the manifold's
default retraction with an exact inverse; the server's tangent mean uses Exp/Log where both
exist, else the default exact pair (Stiefel: polar). Passing ``retraction="polar"`` (etc.)
makes both use that retraction. ``T`` is the manifold's default transport (parallel on
Sphere/SPD/Lorentz, projection on Stiefel) unless ``transport`` names another.

Clipping never materializes the ``N_i`` per-sample gradients where the problem has closed
forms: the clip factors come from ``problem.sample_rgrad_norms`` (sphere PCA / kPCA
``2 |(I - XX')z| |X'z|``, SPD and hyperbolic ``2 |a| dist``) and the clipped sum from
``problem.weighted_rgrad`` with ``coef = min(1, tau/|g_j|) / b``. With ``clip = inf`` the
batched ``problem.rgrad`` is used, and with ``sigma = 0`` no noise is drawn, so
``PriRFed(local="DP-RSGD", sigma=0, clip=inf)`` is exactly RFedAvg with the same steps,
batches (the same client streams) and ``N_i``-weighted tangent mean.

Randomness: batches, the DP-RSVRG sample picks, the noise and the option-2 picks come from the
client's own stream ``(seed, t, i)`` (:mod:`rfl_fast.federation.context`), so a client's draws
do not depend on the other participants.

Privacy. ``for_run`` fixes the noise and the run's privacy ledger
(:class:`rfl_fast.privacy.PrivacyLedger`: the history's ``eps_<accountant>`` and ``delta``
columns) before any work: ``sigma_i`` calibrated to ``target`` for the whole run, or given and
checked; refused: an unreachable budget, a participation other than ``s`` clients sampled
without replacement, a problem outside the accounting (``dp_unbounded``) unless
``uncertified``. A resumed run continues the ledger within its budget (:meth:`raise_budget`).
"""

import math
import numbers
from dataclasses import dataclass, field, replace
from itertools import repeat

import numpy as np

from .._validation import (COUNT, POSITIVE, Bool, Choice, Optional, Real, Reals, brief,
                           check_choice, check_int, check_positive)
from ..errors import InvalidParameterError, ParameterError, ParameterTypeError
from ..privacy.accounting import ACCOUNTANTS, DELTA, DPSettings
from ..privacy.ledger import DEFAULT_DELTA, PrivacyLedger
from ._checks import inverse_pair, transport_name
from .base import FederatedAlgorithm, check_problem, stacked
from .consensus import tangent_mean
from .participation import Full, Uniform
from .schedules import as_schedule

__all__ = ["PriRFed", "PriState"]

LOCALS = ("DP-RSGD", "DP-RSVRG")
_DP_OPTIONS = ("o", "sigma_tilde", "rsvrg_split", "delta_hat_fraction")


@dataclass(frozen=True)
class PriState:
    """Server state of PriRFed.

    Parameters
    ----------
    x : ndarray, M.shape
        The server point ``x_t``.
    pick : int
        Output option 2: the round ``s`` whose point is the output (0 for option 1).
    x_out : ndarray or None
        Output option 2: ``x_s`` once reached.
    """

    x: np.ndarray
    pick: int = 0
    x_out: np.ndarray | None = None


def _add_noise(M, d, x, sig, noisy, ctx, streams=None):
    """``d[j] += N_x(0, sig_j^2)`` for the participants at positions ``noisy`` (those with
    ``sig_j > 0``), in place: one batched ``tangent_gaussian`` whose row ``j`` comes from
    participant ``j``'s own stream. When every participant is noisy (the usual case) no
    ``(k, ...)`` copies of ``x`` and ``d`` are gathered and scattered back: the same sums.
    ``streams``: every participant's ``ctx.rng.streams()``, made once for a round's steps
    (it holds the generators, no draws: the same numbers as one made per step)."""
    if not noisy.size:
        return
    if noisy.size == sig.size:
        np.add(d, M.tangent_gaussian(x, sig, rng=streams if streams is not None else ctx.rng.streams()), out=d)
    else:
        d[noisy] += M.tangent_gaussian(x[noisy], sig[noisy], rng=ctx.rng.streams(noisy))


def _picked(path, pick):
    """Item ``j`` of ``path[pick[j]]`` for every ``j`` (a new array): one masked copy per
    iterate of the path, not one per item."""
    out = np.empty(np.shape(path[0]), dtype=np.result_type(path[0]))
    for s in np.unique(pick).tolist():
        rows = pick == s
        out[rows] = path[s][rows]
    return out


# ---------------------------------------------------------------------------- algorithm

@dataclass(frozen=True, eq=False)
class PriRFed(FederatedAlgorithm):
    """PriRFed (Huang et al. 2024) with DP-RSGD or DP-RSVRG local training; see the module docstring.

    Parameters
    ----------
    step : float or Schedule
        Local step size ``a`` (> 0), fixed or a schedule of the round.
    local_steps : int
        ``K``: DP-RSGD steps, or DP-RSVRG epochs, per round (>= 1).
    local : {"DP-RSGD", "DP-RSVRG"}
        The private local trainer.
    sigma : float, array_like (n,) or None
        Standard deviation of the tangent Gaussian ``N_x(0, sigma_i^2)`` added to every local
        direction, one value or one per client. ``None``: calibrated from ``target`` when the
        run starts. ``0`` disables the noise (no draws).
    clip : float
        Clipping threshold ``tau`` (> 0; ``inf`` disables clipping: the non-private direction).
    batch_size : int, float, array_like (n,) or None
        DP-RSGD batch size ``b_i`` (``1 <= b_i <= N_i``): one int for all clients, one per
        client, a fraction in (0, 1) of ``N_i`` (rounded, at least 1; 0.5 is the seed's
        ``b_i = N_i/2``), or ``None`` for the full batch. Not used by DP-RSVRG.
    inner_steps : int
        DP-RSVRG: ``m`` steps per epoch (required there).
    output_option : {1, 2}
        Huang et al. 2024's option 1 (last iterates) or 2 (uniformly drawn iterates), clients and
        server alike.
    target : (eps, delta), optional
        Privacy budget of the whole run; ``sigma=None`` calibrates the noise to it, a given
        ``sigma`` is checked against it.
    accountant : {"rdp", "pld", "seed"} or tuple of them
        Accountants whose spent epsilon the history records (``eps_<name>`` columns); the
        first calibrates ``sigma``.
    delta : float, optional
        The ``delta`` of the recorded epsilons when no ``target`` is given (default
        ``DEFAULT_DELTA`` = 1e-5).
    retraction : str, optional
        See the module docstring ("Maps").
    transport : str, optional
        DP-RSVRG's vector transport (default: the manifold's first).
    beta : float
        Server step of the tangent-space mean (1: the seed's plain mean).
    dp_options : dict, optional
        Accounting constants passed to :class:`rfl_fast.privacy.DPSettings` (``o``,
        ``sigma_tilde``, ``rsvrg_split``, ``delta_hat_fraction``).
    uncertified : bool
        Run a problem whose per-sample clipping does not bound one sample's influence
        (``problem.dp_unbounded``, e.g. HyperbolicPrediction) anyway: the noise is added but
        there is no guarantee, and its ``eps_*`` columns are NaN. Without it such a problem is
        refused. Incompatible with ``target``.
    ledger : PrivacyLedger
        Set by ``for_run`` (do not pass).
    """

    client_owns_privacy = True

    step: object
    local_steps: int
    local: str = "DP-RSGD"
    sigma: object = None
    clip: float = 1.0
    batch_size: object = None
    inner_steps: int | None = None
    output_option: int = 1
    target: tuple | None = None
    accountant: object = "rdp"
    delta: float | None = None
    retraction: str | None = None
    transport: str | None = None
    beta: float = 1.0
    dp_options: dict | None = None
    uncertified: bool = False
    ledger: PrivacyLedger | None = field(default=None, repr=False)

    array_kinds = {"x": "point"}
    uploads = {"update": ("x",)}

    CHECKS = {"step": as_schedule, "local_steps": COUNT, "local": Choice(*LOCALS),
              "sigma": Optional(Reals(0)), "clip": Real(0, low_open=True, allow_inf=True),
              "inner_steps": Optional(COUNT), "output_option": Choice(1, 2),
              "delta": Optional(DELTA), "beta": POSITIVE, "uncertified": Bool()}

    def __post_init__(self):
        super().__post_init__()
        try:
            self._cross_field_checks()
        except ParameterError as exc:
            raise (exc if exc.owner else exc.within(self.name)) from None

    def _cross_field_checks(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if self.local == "DP-RSVRG":
            if self.inner_steps is None:
                raise InvalidParameterError("inner_steps", "local='DP-RSVRG' needs m, the steps "
                                            "per epoch, e.g. inner_steps=10")
            if self.batch_size is not None:
                raise InvalidParameterError("batch_size", "applies to DP-RSGD only (DP-RSVRG "
                                            "picks one sample per step); leave it None")
        elif self.inner_steps is not None:
            raise InvalidParameterError("inner_steps", "applies to DP-RSVRG only")
        acc = (self.accountant,) if isinstance(self.accountant, str) else tuple(self.accountant)
        if not acc:
            raise InvalidParameterError("accountant", expected=f"one or more of {ACCOUNTANTS}",
                                        got="none")
        acc = tuple(check_choice(a, "accountant", ACCOUNTANTS) for a in acc)
        if "pld" in acc and self.local == "DP-RSVRG":
            raise InvalidParameterError("accountant", "'pld' covers DP-RSGD only (DP-RSVRG's "
                                        "single-sample pick is sampling without replacement, "
                                        "which the PLD accountant does not support); use 'rdp' "
                                        "or 'seed'")
        set_("accountant", acc if len(acc) > 1 else acc[0])
        if self.target is not None:
            try:
                eps, delta = self.target
            except (TypeError, ValueError):
                raise ParameterTypeError("target", expected="a pair (eps, delta)",
                                         got=brief(self.target)) from None
            try:
                set_("target", (check_positive(eps, "eps"), DELTA(delta, "delta")))
            except ParameterError as exc:
                raise type(exc)("target", f"{exc.param}: {exc.reason}") from None
            if self.delta is not None and self.delta != self.target[1]:
                raise InvalidParameterError("delta", f"{self.delta!r} differs from the target's "
                                            f"delta {self.target[1]!r}; give one of them")
            if self.clip == math.inf:
                raise InvalidParameterError("clip", "a privacy target needs a finite clip "
                                            "threshold tau (clip=inf leaves the sensitivity "
                                            "unbounded)")
            if self.uncertified:
                raise InvalidParameterError("uncertified", f"True runs without a guarantee; it "
                                            f"cannot meet a privacy target {self.target}")
        if self.sigma is None and self.target is None:
            raise InvalidParameterError("sigma", "give the noise sigma (0 for a non-private "
                                        "run) or a privacy target=(eps, delta) to calibrate it")
        if self.sigma is not None and self.target is not None and (self.sigma == 0).any():
            raise InvalidParameterError("sigma", f"sigma = 0 cannot reach the privacy target "
                                        f"{self.target}; use sigma=None to calibrate it")
        b = self.batch_size
        if isinstance(b, numbers.Real) and not isinstance(b, (numbers.Integral, bool, np.bool_)):
            if not 0.0 < float(b) < 1.0:
                raise InvalidParameterError("batch_size", f"a fraction of N_i must lie in "
                                            f"(0, 1), got {b!r}; pass an int for a fixed size")
            set_("batch_size", float(b))
        elif b is not None and np.ndim(b) == 0:
            set_("batch_size", check_int(b, "batch_size", min_value=1))
        elif b is not None:
            arr = np.asarray(b)
            if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr < 1).any():
                raise InvalidParameterError("batch_size", expected="ints >= 1 (one per client)",
                                            got=brief(b))
            arr = arr.astype(np.int64)
            arr.setflags(write=False)
            set_("batch_size", arr)
        unknown = sorted(set(self.dp_options or {}) - set(_DP_OPTIONS))
        if unknown:
            raise InvalidParameterError("dp_options", f"unknown keys {unknown}; known: "
                                        f"{_DP_OPTIONS}")

    @property
    def name(self):
        return "PriRFed"

    @property
    def accountants(self):
        """The accountants as a tuple (the first calibrates)."""
        return (self.accountant,) if isinstance(self.accountant, str) else self.accountant

    # ------------------------------------------------------------------ maps
    def _server_method(self, M):
        return inverse_pair(M, self.retraction, self.name)

    def _local_method(self, M):
        if self.retraction is not None:
            return self.retraction
        return "exp" if "exp" in M.retractions else self._server_method(M)

    def _transport(self, M):
        return transport_name(M, self.transport, self.name, "DP-RSVRG's variance correction")

    # ------------------------------------------------------------------ set-up
    def _batches(self, sizes):
        b = self.batch_size
        if self.local == "DP-RSVRG" or b is None:
            return sizes.copy()
        if isinstance(b, float):
            return np.maximum(1, np.round(b * sizes)).astype(np.int64)
        if isinstance(b, np.ndarray):
            if b.shape != sizes.shape:
                raise InvalidParameterError("batch_size", f"{b.size} values for {sizes.size} "
                                            f"clients", self.name)
            return b.copy()
        return np.full(sizes.shape, b, dtype=np.int64)

    def _settings(self, sizes, s, rounds):
        """Every client's DPSettings: ``rounds`` rounds, ``s`` clients of ``sizes`` each."""
        tau = self.clip if math.isfinite(self.clip) else 1.0
        return tuple(DPSettings(n_samples=int(m), local_steps=self.local_steps, batch_size=int(b),
                                trainer=self.local.lower(), inner_steps=self.inner_steps or 1,
                                tau=tau, rounds=max(rounds, 1), clients_per_round=s,
                                n_clients=sizes.size, **(self.dp_options or {}))
                     for m, b in zip(sizes, self._batches(sizes)))

    def validate(self, problem):
        M = check_problem(problem, self.name)
        self._server_method(M)
        local = self._local_method(M)
        if local not in M.retractions:
            raise InvalidParameterError("retraction", f"manifold {M!r} has no retraction "
                                        f"{local!r}; available: {M.retractions}", self.name)
        if not M.has_tangent_gaussian:
            raise ValueError(f"{self.name}: manifold {M!r} has no tangent Gaussian "
                             f"(`tangent_gaussian`) for the privacy noise")
        if self.local == "DP-RSVRG":
            transport = self._transport(M)
            if transport not in getattr(M, "nonexpanding_transports", ()):
                # T(clip(grad f_l(xs)) - g) is accounted with |T v|_x <= |v|_xs (a clipped term
                # stays clipped); a transport that can stretch it would under-count eps
                raise InvalidParameterError(
                    "transport", f"{transport!r} of {M!r} is not declared non-expanding "
                    f"(`nonexpanding_transports`: {getattr(M, 'nonexpanding_transports', ())}); "
                    f"DP-RSVRG's privacy accounting assumes the transported clipped term is no "
                    f"longer than before, which a stretching transport breaks", self.name)
        sizes = np.asarray(problem.sizes, dtype=np.int64)
        b = self._batches(sizes)
        over = np.flatnonzero(b > sizes)
        if over.size:
            i = int(over[0])
            raise InvalidParameterError(
                "batch_size", f"b_i = {int(b[i])} exceeds the N_i = {int(sizes[i])} samples of "
                f"client {i} (batches are drawn without replacement: need b_i <= N_i)",
                self.name)
        if self.sigma is not None and self.sigma.ndim == 1 and self.sigma.size != sizes.size:
            raise InvalidParameterError("sigma", f"{self.sigma.size} values but the problem has "
                                        f"{sizes.size} clients", self.name)

    def for_run(self, problem, participation, rounds, resumed=False):
        why = problem.dp_unbounded
        if why and (self.target is not None or (math.isfinite(self.clip) and bool(
                (np.asarray(self.sigma) > 0).any()))):
            if not self.uncertified:
                raise InvalidParameterError(
                    "uncertified", f"{type(problem).__name__} is not covered by the privacy "
                    f"accounting: {why}. Pass uncertified=True to add the noise without a "
                    f"guarantee (the eps columns are then NaN)")
        else:
            why = None          # sigma = 0 or clip = inf: eps = inf, no privacy claimed anyway
        if isinstance(participation, (Full, Uniform)):
            s = participation.k if isinstance(participation, Uniform) else problem.n_clients
        else:
            raise InvalidParameterError("participation", f"{participation!r} is not covered by "
                                        f"the privacy accounting, which needs a fixed number "
                                        f"of clients sampled without replacement each round: "
                                        f"use Uniform(s) or Full()")
        rounds = check_int(rounds, "rounds", min_value=0)
        delta = (self.target[1] if self.target else self.delta if self.delta is not None
                 else DEFAULT_DELTA)
        sizes = np.asarray(problem.sizes, dtype=np.int64)
        void = math.nan if why else None if math.isfinite(self.clip) else math.inf
        if resumed:
            # the ledger comes from a file: rebuilt from this algorithm and the problem, and
            # refused (naming the field) where it disagrees, before it is continued
            led = self._plan()
            if not isinstance(led, PrivacyLedger):
                raise InvalidParameterError("ledger", expected="a PrivacyLedger",
                                            got=type(led).__name__)
            led.check_rebuilt(lambda horizon: self._settings(sizes, int(s), horizon),
                              self.sigma, delta=delta, accountants=self.accountants,
                              target=self.target, void=void, most=rounds)
            return replace(self, ledger=led.resume(
                problem.sizes, rounds, None if self.target is None else self.target[0]))
        ledger = PrivacyLedger.plan(
            self._settings(sizes, int(s), rounds),
            self.sigma, delta=delta, rounds=rounds, accountants=self.accountants,
            target=self.target, void=void, previous=self.ledger)
        return self if ledger is self.ledger else replace(self, ledger=ledger)

    def raise_budget(self, eps):
        """A copy whose budget is ``(eps, delta)``, the noise, ``delta`` and the ledger the
        run's: pass it to ``resume(..., algorithm=...)`` to go past the budget.

        Parameters
        ----------
        eps : float
            The new budget (> 0).
        """
        led = self._plan()
        eps = check_positive(eps, f"{self.name}: raise_budget eps")
        return replace(self, target=(eps, led.delta), delta=None)

    def for_private_client(self, problem, sigma, clip):
        """A copy for one client of a deployment that owns its privacy (``flower.guard``), and
        the :class:`~rfl_fast.privacy.DPSettings` of one of its rounds as it will run, taking
        part in every round (``clients_per_round = n_clients = 1``: the client cannot check
        the server's sampling).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            This one client's (``sizes`` (1,), ``N`` >= the batch, not ``dp_unbounded``).
        sigma, clip : float
            The client's own noise and clipping threshold ``tau``.
        """
        why = problem.dp_unbounded
        if why:
            raise ValueError(f"{self.name}: {type(problem).__name__} is not covered by the "
                             f"privacy accounting: {why}")
        alg = replace(self, sigma=float(sigma), clip=float(clip), target=None, delta=None,
                      ledger=None, uncertified=False)
        sizes = np.asarray(problem.sizes, dtype=np.int64)
        if sizes.shape != (1,):
            raise ValueError(f"{self.name}: a private client holds one client's data, got "
                             f"{sizes.size} clients")
        b = int(alg._batches(sizes)[0])
        if b > sizes[0]:
            raise InvalidParameterError("batch_size", f"b = {b} "
                                        f"exceeds this client's N = {int(sizes[0])} samples",
                                        self.name)
        alg.validate(problem)       # the server's choices pass the checks of a local run
        st, = alg._settings(sizes, 1, 1)
        return replace(alg, ledger=PrivacyLedger(np.array([float(sigma)]), (st,), 0.0)), st

    def _plan(self):
        if self.ledger is None:
            raise RuntimeError(f"{self.name}: the run's noise and privacy ledger are not fixed; "
                               f"run it with rfl_fast.federation.run, or call "
                               f"alg = alg.for_run(problem, participation, rounds) first")
        return self.ledger

    # ------------------------------------------------------------------ server
    def init_server(self, problem, x0, ctx):
        pick = 0
        if self.output_option == 2 and ctx.rounds > 0:
            pick = int(ctx.rng.integers(1, ctx.rounds + 1))
        return PriState(x=np.array(x0), pick=pick, x_out=np.array(x0) if pick else None)

    def broadcast(self, problem, state, ctx):
        return {"x": state.x}

    def server_update(self, problem, state, idx, upload, ctx):
        M = problem.manifold
        w = np.asarray(problem.sizes, dtype=np.float64)[idx]
        w = w / w.sum()
        x = tangent_mean(M, state.x, upload["x"], weights=w, beta=self.beta,
                         retraction=self._server_method(M))
        x_out = x if ctx.round + 1 == state.pick else state.x_out
        return replace(state, x=x, x_out=x_out), None

    def output(self, problem, state):
        return state.x_out if self.output_option == 2 and state.x_out is not None else state.x

    # ------------------------------------------------------------------ clients
    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        trainer = self._dp_rsgd if self.local == "DP-RSGD" else self._dp_rsvrg
        return {"x": trainer(problem, idx, msg["x"], self._plan(), ctx)}, cstate, memo

    def _private_direction(self, problem, idx, x, batch, counts, sig, ctx, streams=None):
        """The clip -> noise transform of one DP-RSGD step, for every participant ``j`` at
        once: ``(1/b_j) sum_{p in B_j} clip_tau(grad f_ip(x_j)) + N_x(0, sigma_j^2)`` (no draws
        where ``sigma_j = 0``; ``tau = inf``: the plain mean). ``batch``: None (all samples),
        (k, b) indices, or a list of per-client index arrays. The clipped sums are one call of
        ``problem.clipped_rgrad_sum``; the noise is one batched ``tangent_gaussian`` whose row
        ``j`` is drawn from participant ``j``'s own stream (the draws of a client alone)."""
        M, tau = problem.manifold, self.clip
        if tau == math.inf and (batch is None or isinstance(batch, np.ndarray)):
            d = problem.rgrad(idx, x, batch)
        else:
            d = problem.clipped_rgrad_sum(idx, x, tau, batch)
            d /= np.asarray(counts, dtype=np.float64)[(...,) + (None,) * M.core_ndim]
        _add_noise(M, d, x, sig, np.flatnonzero(sig > 0), ctx, streams)
        return d

    def _draw_batches(self, sizes, b, ctx):
        if (b == sizes).all():
            return None
        if (b == b[0]).all():
            return ctx.rng.batches(sizes, int(b[0]))
        # g.choice(N_j, b_j, replace=False) per client, iterated in C (no Python loop)
        return list(map(np.random.Generator.choice, ctx.rng.generators(), sizes.tolist(),
                        b.tolist(), repeat(False)))

    def _dp_rsgd(self, problem, idx, x_t, plan, ctx):
        M = problem.manifold
        method = self._local_method(M)
        eta = self.step(ctx.round)
        k = idx.size
        sizes = np.asarray(problem.sizes, dtype=np.int64)[idx]
        b = plan.batch[idx]
        sig = plan.sigma[idx]
        x = stacked(x_t, k)
        path = [x] if self.output_option == 2 else None
        streams = ctx.rng.streams() if (sig > 0).all() else None
        for _ in range(self.local_steps):
            batch = self._draw_batches(sizes, b, ctx)
            d = self._private_direction(problem, idx, x, batch, b, sig, ctx, streams)
            x = M.retr(x, -eta * d, method)                                      # step
            if path is not None:
                path.append(x)
        if path is None:
            return x
        pick = ctx.rng.integers(0, self.local_steps + 1)       # k uniform in {0, .., K}
        return _picked(path, pick)

    def _dp_rsvrg(self, problem, idx, x_t, plan, ctx):
        """DP-RSVRG for every participant at once: each epoch one batched full clipped mean at
        the snapshots, each inner step one batched pick (client ``j``'s sample from its own
        stream), clipped terms, transport, noise and retraction. Each client's stream is drawn
        in the order of a client alone: per step its pick, then its noise; the option-2 pick
        last."""
        M = problem.manifold
        method, transport = self._local_method(M), self._transport(M)
        eta = self.step(ctx.round)
        tau, K, m = self.clip, self.local_steps, self.inner_steps
        k = idx.size
        sizes = np.asarray(problem.sizes, dtype=np.int64)[idx]
        per_item = (...,) + (None,) * M.core_ndim
        gens = ctx.rng.generators()
        sig = plan.sigma[idx]
        noisy = np.flatnonzero(sig > 0)
        streams = ctx.rng.streams() if noisy.size == k else None
        xs = stacked(x_t, k)
        path = [] if self.output_option == 2 else None
        both = np.repeat(idx, 2)
        n_list = sizes.tolist()
        # client j's x and xs side by side, for the picked sample's terms at both
        pair = np.empty((k, 2) + xs.shape[1:], dtype=np.result_type(xs, np.float64))
        for _ in range(K):
            g = problem.clipped_rgrad_sum(idx, xs, tau) / sizes[per_item]   # full clipped mean
            x = xs
            pair[:, 1] = xs                         # (written once an epoch)
            for _ in range(m):
                if path is not None:
                    path.append(x)
                sel = np.fromiter(map(np.random.Generator.integers, gens, n_list),
                                  dtype=np.int64, count=k)[:, None]   # gen.integers(N_j)
                # the picked sample's clipped term at x and at xs: one call on 2k rows, client
                # j's two side by side (its sample read once while in cache; each row's sum is
                # its own, as in a call of its own)
                pair[:, 0] = x
                try:
                    av = problem.clipped_rgrad_sum(both, pair.reshape((2 * k,) + x.shape[1:]),
                                                   tau, np.repeat(sel, 2, axis=0))
                    av = av.reshape((k, 2) + av.shape[1:])
                    a, v = av[:, 0], av[:, 1] - g
                except ValueError:      # a sample refused: the calls of one point each, whose
                    # errors name the participant's position as a call of k rows does
                    a = problem.clipped_rgrad_sum(idx, x, tau, sel)
                    v = problem.clipped_rgrad_sum(idx, xs, tau, sel) - g
                d = a - M.transport(xs, x, v, transport)                    # clipped
                _add_noise(M, d, x, sig, noisy, ctx, streams)               # noise
                x = M.retr(x, -eta * d, method)                              # step
            xs = x
        if path is None:
            return xs
        picks = np.fromiter(map(np.random.Generator.integers, gens, repeat(len(path))),
                            dtype=np.int64, count=k)
        return _picked(path, picks)
