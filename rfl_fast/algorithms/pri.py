"""PriRFed: Riemannian federated learning with differential privacy (seed 002).

Round ``t`` (seed 002, Algorithm PriRFed):

1. the server samples ``S_t`` of size ``s`` without replacement (``Uniform(s)``; ``Full()`` is
   ``s = N``) and broadcasts ``x_t``;
2. each participant runs a private local trainer from ``x_t``:

   * **DP-RSGD** (seed 002, after [Han+24]): ``K`` steps; step ``k`` draws ``B_k`` of size
     ``b_i`` of its ``N_i`` samples without replacement and moves along
     ``eta_k = (1/b_i) sum_{p in B_k} clip_tau(grad f_ip(x)) + e``, ``e ~ N_x(0, sigma_i^2)``,
     ``x <- Exp_x(-a eta_k)``. Output option 1: ``x_K``; option 2: ``x_k``, ``k`` uniform in
     ``{0, .., K}``.
   * **DP-RSVRG** (seed 002, after [Upt+23]): ``K`` epochs with snapshot ``xs`` (``xs = x_t``
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
   ``w_i = N_i / sum_{j in S_t} N_j`` (seed 002's line 08; ``beta`` scales the mean as in
   seed 001, eq. 8). Global output option 1: ``x_T``; option 2: ``x_s``, ``s`` uniform in
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

Privacy (engine hooks ``for_run`` and ``history_row``). When a run starts,
``for_run(problem, participation, rounds)``

* refuses impossible budgets with a ``ValueError`` before any work: ``delta`` outside
  ``(0, 1)``, ``eps <= 0``, a given ``sigma`` whose spent ``eps`` exceeds the target, a zero
  noise or no clipping (``clip = inf``) with a target, a participation other than
  fixed-size sampling without replacement (``Bernoulli``), the PLD accountant for DP-RSVRG,
  a target no ``sigma`` up to the accountant's cap reaches;
* with ``target=(eps, delta)`` and ``sigma=None`` calibrates ``sigma_i`` per client
  (:func:`rfl_fast.privacy.calibrate_sigma`, the first of ``accountant``) so that the whole
  run of ``rounds`` rounds is ``(eps, delta)``-DP for every client's data;
* computes the privacy spent after each round ``t``, the maximum over clients (the changed
  sample lives in one client), for every accountant listed in ``accountant``: columns
  ``eps_rdp`` / ``eps_pld`` / ``eps_seed`` (row 0: 0) and ``delta`` of the history.

The ledger (:class:`rfl_fast.privacy.PrivacyLedger`, built by :mod:`rfl_fast.privacy.ledger`)
holds the noise and these columns.

Accountants (details and neighbouring relations in :mod:`rfl_fast.privacy.accounting`):
``"rdp"`` -- dp-accounting RDP, batches without replacement, replace-one relation, exact at
every round; ``"pld"`` -- dp-accounting PLD, DP-RSGD with the full batch only (``batch_size=None``:
fixed denominator ``N_i``, replace-one, what the mechanism does; fixed-size batches are refused
since dp-accounting's PLD has no sampling without replacement), exact at every round when
``rounds <= PLD_POINTS`` (32), else at ``PLD_POINTS`` rounds spread geometrically (and at the
last), each other row holding the value of the next such round, an upper bound since ``eps``
grows with ``t``;
``"seed"`` -- the seed's closed form and Theorem 9 (not certified with the default constant).
"""

import math
import numbers
from dataclasses import dataclass, field, replace

import numpy as np

from .._validation import (COUNT, POSITIVE, Bool, Choice, Optional, Real, Reals, check_choice,
                           brief, check_int, check_positive)
from ._checks import inverse_pair, transport_name
from .consensus import tangent_mean
from .participation import Full, Uniform
from .schedules import as_schedule
from ..privacy import accounting as _acc
from ..privacy.clipping import clip_factors
from ..privacy.ledger import (DEFAULT_DELTA, PLD_POINTS, PrivacyLedger, calibrated_sigma,
                              eps_total, ledger_columns)
from .base import FederatedAlgorithm, check_problem, stacked

__all__ = ["PriRFed", "PriState", "PrivacyLedger", "PLD_POINTS"]

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


# ---------------------------------------------------------------------------- algorithm

@dataclass(frozen=True, eq=False)
class PriRFed(FederatedAlgorithm):
    """PriRFed (seed 002) with DP-RSGD or DP-RSVRG local training; see the module docstring.

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
        Seed 002's option 1 (last iterates) or 2 (uniformly drawn iterates), clients and
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
              "delta": Optional(_acc.DELTA), "beta": POSITIVE, "uncertified": Bool()}

    def __post_init__(self):
        super().__post_init__()
        name = "PriRFed"
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        if self.local == "DP-RSVRG":
            if self.inner_steps is None:
                raise ValueError(f"{name}: local='DP-RSVRG' needs inner_steps (m, steps per "
                                 f"epoch), e.g. inner_steps=10")
            if self.batch_size is not None:
                raise ValueError(f"{name}: batch_size applies to DP-RSGD only (DP-RSVRG picks "
                                 f"one sample per step); leave it None")
        elif self.inner_steps is not None:
            raise ValueError(f"{name}: inner_steps applies to DP-RSVRG only")
        acc = (self.accountant,) if isinstance(self.accountant, str) else tuple(self.accountant)
        if not acc:
            raise ValueError(f"{name}: accountant: expected at least one of {_acc.ACCOUNTANTS}")
        for a in acc:
            check_choice(a, f"{name}: accountant", _acc.ACCOUNTANTS)
        if "pld" in acc and self.local == "DP-RSVRG":
            raise ValueError(f"{name}: accountant 'pld' covers DP-RSGD only (DP-RSVRG's "
                             f"single-sample pick is sampling without replacement, which the "
                             f"PLD accountant does not support); use 'rdp' or 'seed'")
        set_("accountant", acc if len(acc) > 1 else acc[0])
        if self.target is not None:
            try:
                eps, delta = self.target
            except (TypeError, ValueError):
                raise TypeError(f"{name}: target: expected a pair (eps, delta), got "
                                f"{self.target!r}") from None
            set_("target", (check_positive(eps, f"{name}: target eps"),
                            _acc.DELTA(delta, f"{name}: target delta")))
            if self.delta is not None and self.delta != self.target[1]:
                raise ValueError(f"{name}: delta={self.delta!r} differs from the target's delta "
                                 f"{self.target[1]!r}; give one of them")
            if self.clip == math.inf:
                raise ValueError(f"{name}: a privacy target needs a finite clip threshold tau "
                                 f"(clip=inf leaves the sensitivity unbounded)")
        if self.uncertified and self.target is not None:
            raise ValueError(f"{name}: uncertified=True runs without a guarantee; it cannot "
                             f"meet a privacy target {self.target}")
        if self.sigma is None:
            if self.target is None:
                raise ValueError(f"{name}: give the noise sigma (0 for a non-private run) or a "
                                 f"privacy target=(eps, delta) to calibrate it")
        elif self.target is not None and (self.sigma == 0).any():
            raise ValueError(f"{name}: sigma = 0 cannot reach the privacy target "
                             f"{self.target}; use sigma=None to calibrate it")
        b = self.batch_size
        if b is not None:
            if isinstance(b, numbers.Real) and not isinstance(b, numbers.Integral) \
                    and not isinstance(b, (bool, np.bool_)):
                if not 0.0 < float(b) < 1.0:
                    raise ValueError(f"{name}: batch_size: a fraction of N_i must lie in (0, 1), "
                                     f"got {b!r}; pass an int for a fixed size")
                set_("batch_size", float(b))
            elif np.ndim(b) == 0:
                set_("batch_size", check_int(b, f"{name}: batch_size", min_value=1))
            else:
                arr = np.asarray(b)
                if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr < 1).any():
                    raise ValueError(f"{name}: batch_size: expected ints >= 1 (one per client), "
                                     f"got {b!r}")
                arr = arr.astype(np.int64)
                arr.setflags(write=False)
                set_("batch_size", arr)
        opts = dict(self.dp_options or {})
        bad = sorted(set(opts) - set(_DP_OPTIONS))
        if bad:
            raise ValueError(f"{name}: dp_options: unknown keys {bad}; known: {_DP_OPTIONS}")

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
                raise ValueError(f"{self.name}: batch_size: {b.size} values for "
                                 f"{sizes.size} clients")
            return b.copy()
        return np.full(sizes.shape, b, dtype=np.int64)

    def validate(self, problem):
        M = check_problem(problem, self.name)
        self._server_method(M)
        local = self._local_method(M)
        if local not in M.retractions:
            raise ValueError(f"{self.name}: manifold {M!r} has no retraction {local!r}; "
                             f"available: {M.retractions}")
        if not M.has_tangent_gaussian:
            raise ValueError(f"{self.name}: manifold {M!r} has no tangent Gaussian "
                             f"(`tangent_gaussian`) for the privacy noise")
        if self.local == "DP-RSVRG":
            self._transport(M)
        sizes = np.asarray(problem.sizes, dtype=np.int64)
        b = self._batches(sizes)
        over = np.flatnonzero(b > sizes)
        if over.size:
            i = int(over[0])
            raise ValueError(f"{self.name}: batch_size b_i = {int(b[i])} exceeds the N_i = "
                             f"{int(sizes[i])} samples of client {i} (batches are drawn without "
                             f"replacement: need b_i <= N_i)")
        if self.sigma is not None and self.sigma.ndim == 1 and self.sigma.size != sizes.size:
            raise ValueError(f"{self.name}: sigma has {self.sigma.size} values but the problem "
                             f"has {sizes.size} clients")

    def for_run(self, problem, participation, rounds):
        """Fix the noise and the privacy ledger of a run (engine hook, before any work).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem (n clients with ``sizes`` ``N_i``).
        participation : rfl_fast.federation.Full or rfl_fast.federation.Uniform
            Who takes part each round; the accounting needs a fixed number ``s`` of clients
            sampled without replacement.
        rounds : int
            Number of rounds of the run (>= 0).

        Returns
        -------
        PriRFed
            A copy whose ``ledger`` (:class:`PrivacyLedger`) holds the per-client ``sigma``
            (calibrated from ``target`` if ``sigma`` is None) and the cumulative privacy spent
            after every round.

        Raises
        ------
        ValueError
            Impossible budgets, an unsupported participation, or a problem outside the
            accounting without ``uncertified=True`` (module docstring).
        """
        self.validate(problem)
        why = problem.dp_unbounded
        claims = self.target is not None or (math.isfinite(self.clip)
                                             and bool((np.asarray(self.sigma) > 0).any()))
        if why and not claims:
            why = None          # sigma = 0 or clip = inf: eps = inf, no privacy claimed anyway
        if why and not self.uncertified:
            raise ValueError(f"{self.name}: {type(problem).__name__} is not covered by the "
                             f"privacy accounting: {why}. Pass uncertified=True to add the "
                             f"noise without a guarantee (the eps columns are then NaN)")
        n = int(problem.n_clients)
        if isinstance(participation, Full):
            s = n
        elif isinstance(participation, Uniform):
            s = int(participation.k)
        else:
            raise ValueError(f"{self.name}: participation {participation!r} is not covered by "
                             f"the privacy accounting, which needs a fixed number of clients "
                             f"sampled without replacement each round: use Uniform(s) or Full()")
        rounds = check_int(rounds, "rounds", min_value=0)
        sizes = np.asarray(problem.sizes, dtype=np.int64)
        batch = self._batches(sizes)
        delta = self.target[1] if self.target else (self.delta if self.delta is not None
                                                    else DEFAULT_DELTA)
        opts = dict(self.dp_options or {})
        trainer = self.local.lower()
        settings, groups = {}, {}
        for i in range(n):
            tau = self.clip if math.isfinite(self.clip) else 1.0
            st = _acc.DPSettings(
                n_samples=int(sizes[i]), local_steps=self.local_steps,
                batch_size=int(batch[i]), trainer=trainer,
                inner_steps=self.inner_steps or 1, tau=tau, rounds=max(rounds, 1),
                clients_per_round=s, n_clients=n, **opts)
            settings[i] = st
            groups.setdefault(st, []).append(i)
        first = self.accountants[0]
        if self.sigma is None:
            sigma = np.empty(n)
            for st, members in groups.items():
                try:
                    sig = calibrated_sigma(self.target[0], delta, st, first)
                except ValueError as exc:
                    raise ValueError(f"{self.name}: the privacy target {self.target} cannot be "
                                     f"reached for client {members[0]} (N_i = {st.n_samples}): "
                                     f"{exc}") from None
                sigma[members] = sig
        else:
            sigma = np.broadcast_to(self.sigma, (n,)).astype(np.float64)
            if self.target is not None:
                for st, members in groups.items():
                    for sig in np.unique(sigma[members]):
                        spent = eps_total(first, float(sig), delta, st)
                        if not spent <= self.target[0] * (1 + 1e-9):
                            raise ValueError(
                                f"{self.name}: sigma = {sig:.6g} cannot reach the privacy "
                                f"target {self.target}: over {rounds} rounds client "
                                f"{members[0]} spends eps = {spent:.4g} ({first} accountant); "
                                f"use sigma >= "
                                f"{calibrated_sigma(self.target[0], delta, st, first):.6g} or "
                                f"sigma=None to calibrate")
        sigma.setflags(write=False)
        cols = ledger_columns(self.accountants, self.clip, sigma, settings, delta, rounds,
                              bool(why))
        ledger = PrivacyLedger(sigma=sigma, batch=batch, delta=float(delta), rounds=rounds,
                               clients_per_round=s, columns=cols, settings=settings,
                               calibrated=self.sigma is None)
        return replace(self, ledger=ledger)

    def for_resume(self, problem, participation, rounds):
        """Continue the ledger of a resumed run to ``rounds`` rounds (engine hook).

        The noise stays what the run fixed; the privacy columns are extended so that they keep
        growing past the original horizon. Going past the run's budget -- the target's eps,
        else what the original plan spends, by the first accountant -- is refused unless the
        user raises it explicitly (:meth:`raise_budget`).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem: its clients' sample counts must be the ledger's ``N_i``
            (the eps columns were accounted for them).
        participation : rfl_fast.federation.Participation
            The run's participation model (unused, as for ``problem``).
        rounds : int
            The new total number of rounds (>= 0).

        Returns
        -------
        PriRFed
            ``self`` if ``rounds`` is within the ledger, else a copy whose ledger's columns
            have ``rounds + 1`` rows.

        Raises
        ------
        ValueError
            ``rounds`` would spend more than the budget, or ``problem``'s sample counts are not
            the ledger's.
        """
        led = self._plan()
        planned = [led.settings[i].n_samples for i in sorted(led.settings)]
        sizes = [int(v) for v in np.asarray(problem.sizes)]
        if sizes != planned:
            raise ValueError(f"{self.name}: the privacy ledger was accounted for clients with "
                             f"N_i = {brief(planned)} samples, the problem has {brief(sizes)}; "
                             f"resuming on other data would keep the wrong eps columns")
        rounds = check_int(rounds, "rounds", min_value=0)
        if rounds <= led.rounds:
            return self
        first = self.accountants[0]
        budget = (self.target[0] if self.target is not None
                  else float(led.columns[f"eps_{first}"][-1]))
        uncertified = bool(np.isnan(led.columns[f"eps_{first}"][1:]).any())
        cols = ledger_columns(self.accountants, self.clip, led.sigma, led.settings, led.delta,
                              rounds, uncertified)
        spent = float(cols[f"eps_{first}"][-1])
        if spent > budget * (1 + 1e-9):
            raise ValueError(
                f"{self.name}: resuming to {rounds} rounds would spend eps = {spent:.4g} "
                f"({first} accountant, delta = {led.delta:g}), past this run's budget "
                f"eps = {budget:.4g} (planned for {led.rounds} rounds); raise it explicitly: "
                f"resume(..., algorithm=result.algorithm.raise_budget(eps))")
        ledger = replace(led, rounds=rounds, columns=cols)
        return replace(self, ledger=ledger)

    def raise_budget(self, eps):
        """A copy whose privacy budget is ``(eps, delta)`` of the run (the noise and the ledger
        kept): pass it to ``resume(..., algorithm=...)`` to run past the original budget.

        Parameters
        ----------
        eps : float
            The new budget's epsilon (finite, > 0); ``delta`` stays the run's.

        Returns
        -------
        PriRFed
            A copy with ``target = (eps, ledger.delta)``.
        """
        led = self._plan()
        eps = check_positive(eps, f"{self.name}: raise_budget eps")
        return replace(self, target=(eps, led.delta), delta=None)

    def history_row(self, problem, state, t):
        """Extra history columns of row ``t`` (engine hook): the privacy spent so far.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem (unused).
        state : PriState
            The server state (unused).
        t : int
            The round (clipped to the ledger's rounds).

        Returns
        -------
        dict of str to float
            ``eps_<accountant>`` and ``delta`` after round ``t`` (empty before ``for_run``).
        """
        if self.ledger is None:
            return {}
        t = min(int(t), self.ledger.rounds)
        return {name: float(col[t]) for name, col in self.ledger.columns.items()}

    def client_settings(self, i):
        """What client ``i`` of a deployment needs of the ledger: its ``sigma`` and batch
        size, the ``delta`` and the number of rounds (deployment hook).

        Parameters
        ----------
        i : int
            The client's index (0 <= i < n).

        Returns
        -------
        dict of str to int or float
            ``{"sigma", "batch", "delta", "rounds"}``; empty before ``for_run``.
        """
        if self.ledger is None:
            return {}
        ledger = self.ledger
        return {"sigma": float(ledger.sigma[i]), "batch": int(ledger.batch[i]),
                "delta": float(ledger.delta), "rounds": int(ledger.rounds)}

    def for_client(self, settings):
        """A copy for one client of a deployment: its one-client ledger from
        :meth:`client_settings` (deployment hook).

        Parameters
        ----------
        settings : dict of str to int or float
            What :meth:`client_settings` returned on the server (``sigma``, ``batch``,
            ``rounds``, optionally ``delta``).

        Returns
        -------
        PriRFed
            A copy with a one-client :class:`PrivacyLedger`; ``self`` if ``settings`` is
            empty.
        """
        if not settings:
            return self
        ledger = PrivacyLedger(sigma=np.array([float(settings["sigma"])]),
                               batch=np.array([int(settings["batch"])], dtype=np.int64),
                               delta=float(settings.get("delta", 0.0)),
                               rounds=int(settings["rounds"]), clients_per_round=0,
                               columns={}, settings={})
        return replace(self, ledger=ledger)

    def for_private_client(self, problem, sigma, clip):
        """A copy for one client of a deployment that owns its privacy (``flower.guard``), and
        the :class:`~rfl_fast.privacy.DPSettings` of one of its rounds.

        ``sigma`` and ``clip`` are the client's own; its batch size follows from the run's
        ``batch_size`` and its own ``N_i`` (``problem`` holds this one client). The settings
        describe the round as it will run (``K``, ``b_i``, trainer, ``tau = clip``) with the
        client taking part in every round (``clients_per_round = n_clients = 1``: it cannot
        check the server's sampling). Refuses a problem with ``dp_unbounded``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            This one client's problem (``sizes`` of shape (1,)).
        sigma : float
            The client's noise standard deviation.
        clip : float
            The client's clipping threshold ``tau``.

        Returns
        -------
        alg : PriRFed
            A copy with this client's ``sigma``, ``clip`` and a one-client ledger.
        settings : rfl_fast.privacy.DPSettings
            The accounting settings of one of its rounds.

        Raises
        ------
        ValueError
            The problem is outside the accounting, holds more than one client, or its ``N``
            is smaller than the batch size.
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
        batch = alg._batches(sizes)
        if batch[0] > sizes[0]:
            raise ValueError(f"{self.name}: batch_size b = {int(batch[0])} exceeds this "
                             f"client's N = {int(sizes[0])} samples")
        opts = dict(self.dp_options or {})
        st = _acc.DPSettings(n_samples=int(sizes[0]), local_steps=self.local_steps,
                             batch_size=int(batch[0]), trainer=self.local.lower(),
                             inner_steps=self.inner_steps or 1, tau=float(clip), rounds=1,
                             clients_per_round=1, n_clients=1, **opts)
        sig = np.array([float(sigma)])
        sig.setflags(write=False)
        ledger = PrivacyLedger(sigma=sig, batch=batch, delta=0.0, rounds=0,
                               clients_per_round=1, columns={}, settings={0: st})
        return replace(alg, ledger=ledger), st

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
        """Private local training of the participants (DP-RSGD or DP-RSVRG).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            ``{"x": server point, M.shape}``.
        cstate, memo : dict
            Passed through unchanged.
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams (noise and batches).

        Returns
        -------
        upload : dict of str to ndarray
            ``{"x": (k, *M.shape)}``, the participants' last (or picked) local iterates.
        cstate, memo : dict
            Unchanged.
        """
        plan = self._plan()
        if self.local == "DP-RSGD":
            x = self._dp_rsgd(problem, idx, msg["x"], plan, ctx)
        else:
            x = self._dp_rsvrg(problem, idx, msg["x"], plan, ctx)
        return {"x": x}, cstate, memo

    def _noise(self, M, x, sig, ctx):
        """Tangent Gaussian ``N_x(0, sigma_j^2)`` per participant from its own stream (zero
        rows, without draws, where ``sigma_j = 0``)."""
        e = np.zeros(x.shape)
        for j in np.flatnonzero(sig > 0):
            e[j] = M.tangent_gaussian(x[j], sig[j], rng=ctx.rng.generator(j))
        return e

    def _clipped_mean(self, problem, idx, x, batch, counts):
        """``(1/b_j) sum_{p in B_j} clip_tau(grad f_ip(x_j))`` for every participant.

        ``batch``: None (all samples), (k, b) indices, or a list of per-client index arrays.
        """
        tau = self.clip
        if tau == math.inf:
            if batch is None or isinstance(batch, np.ndarray):
                return problem.rgrad(idx, x, batch)
            return np.stack([problem.rgrad(idx[j:j + 1], x[j:j + 1], batch[j][None])[0]
                             for j in range(idx.size)])
        out = np.empty(x.shape)
        for j, i in enumerate(idx):
            bj = None if batch is None else batch[j]
            norms = problem.sample_rgrad_norms(int(i), x[j], bj)
            coef = clip_factors(norms, tau) / counts[j]
            out[j] = problem.weighted_rgrad(int(i), x[j], coef, bj)
        return out

    def _draw_batches(self, sizes, b, ctx):
        if (b == sizes).all():
            return None
        if (b == b[0]).all():
            return ctx.rng.batches(sizes, int(b[0]))
        return [ctx.rng.generator(j).choice(int(m), int(bj), replace=False)
                for j, (m, bj) in enumerate(zip(sizes, b))]

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
        for _ in range(self.local_steps):
            batch = self._draw_batches(sizes, b, ctx)
            d = self._clipped_mean(problem, idx, x, batch, b)
            if (sig > 0).any():
                d = d + self._noise(M, x, sig, ctx)
            x = M.retr(x, -eta * d, method)
            if path is not None:
                path.append(x)
        if path is None:
            return x
        pick = ctx.rng.integers(0, self.local_steps + 1)       # k uniform in {0, .., K}
        return np.stack([path[pick[j]][j] for j in range(k)])

    def _dp_rsvrg(self, problem, idx, x_t, plan, ctx):
        M = problem.manifold
        method, transport = self._local_method(M), self._transport(M)
        eta = self.step(ctx.round)
        tau, K, m = self.clip, self.local_steps, self.inner_steps
        out = np.empty((idx.size,) + M.shape)
        for j, i in enumerate(idx):
            i = int(i)
            gen = ctx.rng.generator(j)
            n_i = int(problem.sizes[i])
            sig = float(plan.sigma[i])
            xs = np.array(x_t)
            path = [] if self.output_option == 2 else None
            for _ in range(K):
                cs = clip_factors(problem.sample_rgrad_norms(i, xs), tau)   # (N_i,)
                g = problem.weighted_rgrad(i, xs, cs / n_i)                 # full clipped mean
                x = xs
                for _ in range(m):
                    if path is not None:
                        path.append(x)
                    sel = np.array([gen.integers(n_i)])
                    c = clip_factors(problem.sample_rgrad_norms(i, x, sel), tau)
                    a = problem.weighted_rgrad(i, x, c, sel)
                    v = problem.weighted_rgrad(i, xs, cs[sel], sel) - g
                    d = a - M.transport(xs, x, v, transport)
                    if sig > 0:
                        d = d + M.tangent_gaussian(x, sig, rng=gen)
                    x = M.retr(x, -eta * d, method)
                xs = x
            out[j] = xs if path is None else path[int(gen.integers(len(path)))]
        return out
