"""Privacy accounting for PriRFed (Huang et al. 2024): closed-form calibrations, Theorem 9, tight accountants.

Three ways to turn a noise level into a privacy guarantee, side by side (``privacy_report``):

* **the seed's closed forms** -- per-client noise for a local ``(eps, delta)`` target
  (``dp_rsgd_sigma``, ``dp_rsvrg_sigma``, ``gaussian_mechanism_sigma``) followed by the server-level
  composition of Huang et al. 2024, Theorem 9 (``epsilon_seed_composition``);
* **RDP** (Renyi DP, ``epsilon_rdp``): Google's ``dp-accounting`` formulas; sampling without
  replacement (what PriRFed runs) computed by :mod:`rfl_fast.privacy.rdp` (the same formulas in
  vectorized NumPy, checked against ``dp-accounting``; no ``dp-accounting`` needed), Poisson
  sampling by ``dp-accounting``;
* **PLD** (privacy loss distributions) with ``dp-accounting`` (``epsilon_pld``), the tightest.

Neighbouring relations (which pairs of datasets count as adjacent) differ by accountant and are
named in every docstring: *replace-one* (one sample replaced by another; the clipped sum moves by
at most ``2 tau``) and *add/remove-one* (one sample added or removed; it moves by at most
``tau``). Epsilons under different relations are not directly comparable: by group privacy an
add/remove ``(eps, delta)`` guarantee implies a replace-one ``(2 eps, (1 + e^eps) delta)`` one.

The mechanism being accounted (one client, one round; Huang et al. 2024):

* DP-RSGD: ``K`` steps, each releases ``(1/b) sum_{p in B} clip_tau(grad f_p(x)) + N_x(0, sigma^2)``
  with ``|B| = b`` of the client's ``N`` samples. Multiplying by ``b``, each step is a Gaussian
  mechanism on the clipped *sum* with noise standard deviation ``b sigma``, so its noise
  multiplier is ``b sigma / (2 tau)`` under replace-one and ``b sigma / tau`` under add/remove.
* DP-RSVRG: ``K`` epochs of ``m`` steps; step ``j`` releases
  ``clip(grad f_l(x)) - T(clip(grad f_l(xs)) - g) + N_x(0, sigma^2)`` with one uniformly picked
  sample ``l`` and the snapshot mean ``g = (1/N) sum_j clip(grad f_j(xs))`` (not subsampled). Under
  replace-one the picked-sample part moves by at most ``4 tau`` (only when ``l`` is the changed
  sample, probability ``1/N``) and ``T g`` by at most ``2 tau / N`` (always). Splitting the
  Gaussian noise as ``sigma^2 = lam sigma^2 + (1 - lam) sigma^2`` (``DPSettings.rsvrg_split``),
  each step is a post-processing of two independent releases: a Gaussian subsampled without
  replacement (``1`` of ``N``, noise multiplier ``sqrt(lam) sigma / (4 tau)``) and a plain Gaussian
  (noise multiplier ``sqrt(1 - lam) sigma N / (2 tau)``). Any ``lam`` in (0, 1) is valid.
* Server: each round samples ``s`` of the ``n`` clients without replacement, so the client
  holding the changed sample takes part with probability ``rho = s / n``, independently of the
  data. The tight accountants take the participation as **revealed** (the server knows which
  clients it asked): a round is the mixture "with probability ``rho`` the client's ``K``-step
  mechanism, else nothing", whose privacy-loss distribution is the mixture of the two (PLD:
  ``PrivacyLossDistribution.compute_mixture``; RDP:
  ``eps_round(a) = log(1 - rho + rho exp((a-1) eps_K(a))) / (a-1)``). This is valid whatever the
  adversary sees. Theorem 9's amplification (``log(1 + rho(e^eps - 1))``) treats the selection as
  secret; dp-accounting has no subsampling of a composed mechanism, so the tight accountants do
  not claim it. Passing ``clients_per_round = n_clients`` gives the bound for a client that
  takes part in every round.

A run's guarantee for the whole federated dataset is the largest over clients (the changed
sample lies in one client): call these functions per client with its ``n_samples`` (and
``sigma_i``) and take the maximum.

Sensitivity convention (replace-one, the relation the algorithm is accounted under). Replacing
one sample by another moves the clipped sum by at most ``2 tau`` (two clipped terms of norm
``<= tau``); with the noise ``b sigma`` on the sum, one DP-RSGD step is the Gaussian mechanism
with ``mu = 2 tau / (b sigma)`` (Gaussian differential privacy; ``K T`` full-batch steps
compose to ``mu sqrt(K T)``). dp-accounting describes that one step differently in its two
accountants, and each is given what it expects:

* RDP (``GaussianDpEvent(z)`` under ``REPLACE_ONE``): ``z`` is the noise over the *full*
  replace-one distance, ``z = b sigma / (2 tau) = 1 / mu``;
* PLD (``from_gaussian_mechanism(s, neighboring_relation=REPLACE_ONE)``): the two neighbouring
  outputs sit at ``+-1`` (distance 2) around the noise of standard deviation ``s``, i.e. ``s``
  is relative to *half* the replace-one distance, ``s = b sigma / tau = 2 / mu``. (Passing
  ``b sigma / (2 tau)`` there counts ``2 tau`` twice: full batch, N = 30, 20 steps,
  ``sigma = 0.2``, it reported eps = 16.5 where the exact mu-GDP value is 7.00.)

Bounded cost and extreme noise. The PLD's discretization interval is widened (never narrowed)
so that its distributions hold at most :data:`PLD_MAX_POINTS` values whatever ``sigma``
(:func:`pld_discretization`; the result stays a pessimistic upper bound within ``steps x
interval`` of the exact value). Noise so small that a step's GDP parameter exceeds
:data:`MU_REVEALING` (the noise is below a ten-thousandth of the sensitivity: the step publishes
its data) gives ``eps = inf``, a valid (trivial) bound, without running an accountant; noise
so large that the whole mechanism, unsampled, is ``(0, delta)``-DP (``delta >= erf(mu / (2
sqrt 2))``, the exact mu-GDP statement) gives ``eps = 0``. Neither ever raises an overflow.
"""

import contextlib
import functools
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import rdp
from .._validation import (COUNT, POSITIVE, Checked, Choice, Optional, Real, check_choice,
                           check_float, check_int, check_nonnegative, check_positive)

__all__ = [
    "gaussian_mechanism_sigma", "gaussian_mechanism_epsilon",
    "dp_rsgd_sigma", "dp_rsgd_epsilon", "dp_rsvrg_sigma", "dp_rsvrg_epsilon",
    "epsilon_seed_composition", "epsilon_seed",
    "DPSettings", "epsilon_subsampled_gaussian", "epsilon_rdp", "epsilon_pld",
    "calibrate_sigma", "PrivacyBudget", "privacy_report", "pld_discretization",
    "PLD_MAX_POINTS", "MU_REVEALING",
]

TRAINERS = ("dp-rsgd", "dp-rsvrg")
ACCOUNTANTS = ("pld", "rdp", "seed")
SAMPLINGS = ("without_replacement", "poisson")
#: Most values a PLD built here holds (per distribution; its FFTs take a few times this many
#: complex numbers): bounds the PLD accountant's memory and time for every ``sigma``.
PLD_MAX_POINTS = 1 << 20
#: A step whose Gaussian-DP parameter exceeds this publishes its data: ``eps = inf`` (its noise
#: is below a ten-thousandth of its sensitivity; dp-accounting's PLD overflows past ~2.6e4).
MU_REVEALING = 1e4
#: dp-accounting's ``log_mass_truncation_bound`` (-50) cuts each Gaussian at about this many
#: standard deviations; a single step's privacy losses span ``mu^2 + 2 * this * mu``.
_PLD_TAIL_SD = 10.5
#: dp-accounting truncates a composition's tails at mass 1e-15: about this many standard
#: deviations of the composed privacy loss on each side.
_PLD_COMPOSED_SD = 8.5


# ---------------------------------------------------------------------------- validation

#: ``delta`` of an ``(eps, delta)`` guarantee (also ``delta_hat``, the split fractions).
DELTA = Real(0, 1, low_open=True, high_open=True)


# ---------------------------------------------------------------------------- closed forms

def gaussian_mechanism_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise for the (tangent) Gaussian mechanism, Huang et al. 2024: ``sigma^2 = 2 log(1.25/delta) D^2/eps^2``.

    ``H(D) + N_x(0, sigma^2)`` with ``D = sup |H(D) - H(D')|_x`` is ``(eps, delta)``-DP. The
    classical proof (Dwork & Roth 2014, Theorem A.1) needs ``eps < 1``; the seed states the
    formula without that condition, and it is returned for any ``eps > 0`` as the seed does.

    Parameters
    ----------
    eps : float, > 0
    delta : float, in (0, 1)
    sensitivity : float, > 0
        ``D``, in the metric of the tangent space the noise lives in.

    Returns
    -------
    sigma : float
    """
    eps, delta = check_positive(eps, "eps"), DELTA(delta, "delta")
    sens = check_positive(sensitivity, "sensitivity")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sens / eps


def gaussian_mechanism_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Inverse of ``gaussian_mechanism_sigma``: ``eps = sqrt(2 log(1.25/delta)) D / sigma``.

    Parameters
    ----------
    sigma : float, >= 0
    delta : float, in (0, 1)
    sensitivity : float, > 0
        ``D``, the L2 sensitivity.

    Returns
    -------
    float
        ``inf`` for ``sigma = 0``.
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    sens = check_positive(sensitivity, "sensitivity")
    if sigma == 0.0:
        return math.inf
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sens / sigma


_CONSTANT_NOTE = """
    Huang et al. 2024 (after Algorithms DP-RSGD / DP-RSVRG) states the calibration with a constant
    (``o_i`` resp. ``sigma~_i``) and does not give its value. It is the absolute constant of
    the moments-accountant theorem the seed cites ([Han+24, Theorem 3] for DP-RSGD, following
    Abadi et al. 2016, Theorem 1; [Upt+23] for DP-RSVRG), which holds under side conditions of
    the form ``eps <= c1 (b/N)^2 K``. The seed's experiments give ``eps, delta, K, b_i, m, tau``
    but no ``o_i``; the reference code of [Han+24] (DP-RiemOpt, same authors' group) uses
    ``sigma^2 = K log(1/delta) L0^2 / (n^2 eps^2)``, i.e. the constant 1, which is the default
    here. The closed form is not itself a certified guarantee: use ``calibrate_sigma``
    (RDP/PLD) for a certified noise level. For reference, the constant the tight accountants
    imply, ``o = sigma^2 N^2 eps^2 / (K log(1/delta) tau^2)`` with ``sigma`` from
    ``calibrate_sigma`` (one local run, delta = 1e-4; DP-RSGD with b = N/2 unless noted):

    ====================  ==============================  ==============================
    N, K, eps             PLD, Poisson, add/remove-one    RDP, w/o replacement, replace-one
    ====================  ==============================  ==============================
    70, 5, 0.15           0.75                            16.4
    70, 1, 0.15 (b = N)   0.72                            3.7
    1000, 3, 0.15         0.76                            14.6
    70, 5, 1.0            1.32                            13.8
    ====================  ==============================  ==============================

    so at the seed's experimental ``eps = 0.15`` the default ``o = 1`` is certified under
    add/remove-one with Poisson sampling, but not under replace-one with fixed-size batches.
"""


def dp_rsgd_sigma(eps: float, delta: float, *, n_samples: int, local_steps: int,
                  tau: float = 1.0, o: float = 1.0) -> float:
    """Huang et al. 2024's DP-RSGD noise: ``sigma_i^2 = o_i K log(1/delta) tau^2 / (N_i^2 eps^2)``.

    Parameters
    ----------
    eps : float, > 0
        Target of one local training run (``K`` steps).
    delta : float, in (0, 1)
    n_samples : int
        ``N_i``, the client's number of samples.
    local_steps : int
        ``K``.
    tau : float, > 0
        Clipping threshold.
    o : float, > 0
        The seed's constant ``o_i`` (see Notes).

    Returns
    -------
    sigma : float
        Standard deviation of the tangent Gaussian added to the averaged clipped gradient.

    Notes
    -----"""
    eps, delta = check_positive(eps, "eps"), DELTA(delta, "delta")
    n = check_int(n_samples, "n_samples", min_value=1)
    k = check_int(local_steps, "local_steps", min_value=1)
    tau, o = check_positive(tau, "tau"), check_positive(o, "o")
    return math.sqrt(o * k * math.log(1.0 / delta)) * tau / (n * eps)


dp_rsgd_sigma.__doc__ += _CONSTANT_NOTE


def dp_rsgd_epsilon(sigma: float, delta: float, *, n_samples: int, local_steps: int,
                    tau: float = 1.0, o: float = 1.0) -> float:
    """Inverse of ``dp_rsgd_sigma``: the local ``eps`` that ``sigma`` buys (inf for sigma = 0).

    Parameters
    ----------
    sigma : float, >= 0
        Standard deviation of the tangent Gaussian added to the averaged clipped gradient.
    delta : float, in (0, 1)
    n_samples : int
        ``N_i``, the client's number of samples.
    local_steps : int
        ``K``.
    tau : float, > 0
        Clipping threshold.
    o : float, > 0
        The seed's constant ``o_i`` (see :func:`dp_rsgd_sigma`).

    Returns
    -------
    eps : float
        Of one local training run (``K`` steps); ``inf`` for ``sigma = 0``.
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    n = check_int(n_samples, "n_samples", min_value=1)
    k = check_int(local_steps, "local_steps", min_value=1)
    tau, o = check_positive(tau, "tau"), check_positive(o, "o")
    if sigma == 0.0:
        return math.inf
    return math.sqrt(o * k * math.log(1.0 / delta)) * tau / (n * sigma)


def dp_rsvrg_sigma(eps: float, delta: float, *, n_samples: int, local_steps: int,
                   inner_steps: int, tau: float = 1.0, sigma_tilde: float = 1.0) -> float:
    """Huang et al. 2024's DP-RSVRG noise: ``sigma_i^2 = sigma~_i m K log(1/delta) tau^2 / (N_i^2 eps^2)``.

    Parameters
    ----------
    eps : float, > 0
    delta : float, in (0, 1)
    n_samples : int
        ``N_i``.
    local_steps : int
        ``K``, the number of epochs (snapshots).
    inner_steps : int
        ``m``, steps per epoch.
    tau : float, > 0
    sigma_tilde : float, > 0
        The seed's constant ``sigma~_i`` (see Notes).

    Returns
    -------
    sigma : float

    Notes
    -----"""
    eps, delta = check_positive(eps, "eps"), DELTA(delta, "delta")
    n = check_int(n_samples, "n_samples", min_value=1)
    k = check_int(local_steps, "local_steps", min_value=1)
    m = check_int(inner_steps, "inner_steps", min_value=1)
    tau, c = check_positive(tau, "tau"), check_positive(sigma_tilde, "sigma_tilde")
    return math.sqrt(c * m * k * math.log(1.0 / delta)) * tau / (n * eps)


dp_rsvrg_sigma.__doc__ += _CONSTANT_NOTE


def dp_rsvrg_epsilon(sigma: float, delta: float, *, n_samples: int, local_steps: int,
                     inner_steps: int, tau: float = 1.0, sigma_tilde: float = 1.0) -> float:
    """Inverse of ``dp_rsvrg_sigma`` (inf for sigma = 0).

    Parameters
    ----------
    sigma : float, >= 0
    delta : float, in (0, 1)
    n_samples : int
        ``N_i``.
    local_steps : int
        ``K``, the number of epochs (snapshots).
    inner_steps : int
        ``m``, steps per epoch.
    tau : float, > 0
    sigma_tilde : float, > 0
        The seed's constant ``sigma~_i`` (see :func:`dp_rsvrg_sigma`).

    Returns
    -------
    eps : float
        ``inf`` for ``sigma = 0``.
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    n = check_int(n_samples, "n_samples", min_value=1)
    k = check_int(local_steps, "local_steps", min_value=1)
    m = check_int(inner_steps, "inner_steps", min_value=1)
    tau, c = check_positive(tau, "tau"), check_positive(sigma_tilde, "sigma_tilde")
    if sigma == 0.0:
        return math.inf
    return math.sqrt(c * m * k * math.log(1.0 / delta)) * tau / (n * sigma)


def epsilon_seed_composition(eps: float, delta: float, *, rounds: int, clients_per_round: int,
                             n_clients: int, delta_hat: float) -> tuple[float, float]:
    """Huang et al. 2024, Theorem 9: the guarantee of PriRFed from an ``(eps, delta)`` local trainer.

    With ``rho = s/N``, ``eps~ = log(1 + rho (exp(s eps) - 1))`` and ``delta~ = rho s delta``,
    PriRFed over ``T`` rounds is ``(eps', delta')``-DP with

    ``eps' = min(T eps~, sqrt(2 T ln(1/delta_hat)) eps~ + T eps~ (exp(eps~) - 1))``,
    ``delta' = delta_hat + T delta~``,

    the better of basic (Theorem 3) and advanced (Theorem 4) composition after subsampling
    amplification (Lemma 6) and the ``s``-stable pre-processing (Theorem 8). Implemented
    exactly as stated (including the factor ``s`` in ``exp(s eps)`` and ``rho s delta``).

    Parameters
    ----------
    eps : float, > 0
        Local guarantee of one client's training in one round.
    delta : float, in (0, 1)
    rounds : int
        ``T``.
    clients_per_round : int
        ``s``, clients sampled per round without replacement, ``1 <= s <= N``.
    n_clients : int
        ``N``.
    delta_hat : float, in (0, 1)
        The free parameter of advanced composition.

    Returns
    -------
    (eps_prime, delta_prime) : tuple of float
        ``delta_prime`` may exceed 1 (then the guarantee is void; check it).
    """
    eps, delta = check_positive(eps, "eps"), DELTA(delta, "delta")
    t = check_int(rounds, "rounds", min_value=1)
    s = check_int(clients_per_round, "clients_per_round", min_value=1)
    n = check_int(n_clients, "n_clients", min_value=1)
    if s > n:
        raise ValueError(f"clients_per_round: expected s <= n_clients = {n}, got {s}")
    delta_hat = DELTA(delta_hat, "delta_hat")
    rho = s / n
    # eps~ = log(1 - rho + rho e^{s eps}), evaluated without overflow
    if rho == 1.0:
        eps_t = s * eps
    elif s * eps < 700.0:
        eps_t = math.log1p(rho * math.expm1(s * eps))
    else:
        eps_t = float(np.logaddexp(math.log1p(-rho), math.log(rho) + s * eps))
    delta_t = rho * s * delta
    basic = t * eps_t
    if eps_t < 700.0:
        advanced = math.sqrt(2.0 * t * math.log(1.0 / delta_hat)) * eps_t \
            + t * eps_t * math.expm1(eps_t)
    else:
        advanced = math.inf
    return min(basic, advanced), delta_hat + t * delta_t


# ---------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class DPSettings(Checked):
    """The settings of one client's private training that its privacy depends on.

    Parameters
    ----------
    n_samples : int
        ``N_i``, the client's number of samples.
    local_steps : int
        ``K``: DP-RSGD steps, or DP-RSVRG epochs, per round.
    batch_size : int or None
        ``b_i`` (DP-RSGD), ``1 <= b_i <= N_i``; ``None`` means the full batch ``N_i``.
    trainer : {"dp-rsgd", "dp-rsvrg"}
    inner_steps : int
        ``m``, DP-RSVRG steps per epoch (ignored by DP-RSGD).
    tau : float
        Clipping threshold (> 0).
    rounds : int
        ``T``, server rounds.
    clients_per_round : int
        ``s``, clients sampled per round without replacement.
    n_clients : int
        ``N``, number of clients.
    o, sigma_tilde : float
        Constants of the seed's closed forms (see ``dp_rsgd_sigma``); default 1.
    rsvrg_split : float in (0, 1)
        Share ``lam`` of the DP-RSVRG noise variance attributed to the subsampled part in the
        tight accountants (see the module docstring).
    delta_hat_fraction : float in (0, 1)
        For the seed's composition at a total ``delta``: ``delta_hat = fraction * delta`` and
        the local delta is ``(1 - fraction) delta / (T rho s)`` so that Theorem 9's
        ``delta' = delta_hat + T rho s delta_local`` equals ``delta``.
    """

    n_samples: int
    local_steps: int = 1
    batch_size: int | None = None
    trainer: str = "dp-rsgd"
    inner_steps: int = 1
    tau: float = 1.0
    rounds: int = 1
    clients_per_round: int = 1
    n_clients: int = 1
    o: float = 1.0
    sigma_tilde: float = 1.0
    rsvrg_split: float = 0.9
    delta_hat_fraction: float = 0.5

    CHECKS = {"n_samples": COUNT, "local_steps": COUNT, "batch_size": Optional(COUNT),
              "trainer": Choice(*TRAINERS), "inner_steps": COUNT, "tau": POSITIVE,
              "rounds": COUNT, "clients_per_round": COUNT, "n_clients": COUNT, "o": POSITIVE,
              "sigma_tilde": POSITIVE, "rsvrg_split": DELTA, "delta_hat_fraction": DELTA}

    def __post_init__(self):
        super().__post_init__()
        n, b = self.n_samples, self.batch_size
        if b is None:
            object.__setattr__(self, "batch_size", n)
        elif b > n:
            raise ValueError(f"DPSettings: batch_size: expected b <= n_samples = {n}, got {b}")
        if self.clients_per_round > self.n_clients:
            raise ValueError(f"DPSettings: clients_per_round: expected s <= n_clients = "
                             f"{self.n_clients}, got {self.clients_per_round}")

    @property
    def sample_rate(self):
        """``b/N`` (DP-RSGD) or ``1/N`` (DP-RSVRG): a sample's chance to enter one step."""
        return (self.batch_size if self.trainer == "dp-rsgd" else 1) / self.n_samples

    @property
    def client_rate(self):
        """``rho = s/n``: the client's chance to take part in one round."""
        return self.clients_per_round / self.n_clients

    @property
    def steps_per_round(self):
        """Noisy releases per round: ``K`` (DP-RSGD) or ``K m`` (DP-RSVRG)."""
        return self.local_steps * (self.inner_steps if self.trainer == "dp-rsvrg" else 1)


# ---------------------------------------------------------------------------- dp-accounting

def _dp():
    try:
        import dp_accounting
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the PLD accountant and Poisson sampling need Google's "
                          "dp-accounting (the RDP of batches drawn without replacement does "
                          "not): pip install dp-accounting (or '.[privacy]' in the rfl_fast "
                          "source folder)") from exc
    return dp_accounting


@contextlib.contextmanager
def _quiet_absl():
    """dp-accounting logs a warning through absl for every fractional RDP order near 1 it
    skips; silence that logger for the duration of a call (restored afterwards)."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def epsilon_subsampled_gaussian(noise_multiplier: float, sample_rate: float, steps: int,
                                delta: float, *, accountant: str = "rdp",
                                sampling: str = "poisson", dataset_size: int | None = None
                                ) -> float:
    """Epsilon of ``steps`` compositions of a subsampled Gaussian mechanism (dp-accounting).

    Parameters
    ----------
    noise_multiplier : float, > 0
        Noise standard deviation over the L2 sensitivity under the chosen relation.
    sample_rate : float, in (0, 1]
        Poisson sampling probability, or ``b/N`` for sampling without replacement.
    steps : int
    delta : float, in (0, 1)
    accountant : {"rdp", "pld"}
    sampling : {"poisson", "without_replacement"}
        ``"poisson"``: add/remove-one relation (RDP and PLD). ``"without_replacement"``:
        fixed-size batches of ``round(sample_rate * dataset_size)``, replace-one relation,
        RDP only (the only combination dp-accounting supports).
    dataset_size : int
        Needed for ``"without_replacement"``.

    Returns
    -------
    eps : float
    """
    dpa = _dp()
    z = check_positive(noise_multiplier, "noise_multiplier")
    q = check_float(sample_rate, "sample_rate", low=0, high=1, low_open=True)
    steps = check_int(steps, "steps", min_value=1)
    delta = DELTA(delta, "delta")
    check_choice(accountant, "accountant", ("rdp", "pld"))
    check_choice(sampling, "sampling", SAMPLINGS)
    if sampling == "poisson":
        event = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z))
        rel = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
    else:
        if accountant == "pld":
            raise ValueError("accountant: dp-accounting's PLD accountant does not support "
                             "sampling without replacement; use 'rdp' or sampling='poisson'")
        n = check_int(dataset_size, "dataset_size", min_value=1)
        b = int(round(q * n))
        if not 1 <= b <= n:
            raise ValueError(f"sample_rate: {q} x dataset_size {n} is not a batch size in [1, {n}]")
        event = dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(z))
        rel = dpa.NeighboringRelation.REPLACE_ONE
    event = dpa.SelfComposedDpEvent(event, steps)
    with _quiet_absl():
        if accountant == "rdp":
            acc = dpa.rdp.RdpAccountant(neighboring_relation=rel)
        else:
            acc = dpa.pld.PLDAccountant(neighboring_relation=rel)
        acc.compose(event)
        return float(acc.get_epsilon(delta))


def _step_event(sigma, settings, sampling):
    """The dp-accounting event of one noisy local step (see the module docstring)."""
    dpa = _dp()
    st = settings
    if st.trainer == "dp-rsgd":
        b, n, tau = st.batch_size, st.n_samples, st.tau
        if sampling == "poisson":  # add/remove-one: the clipped sum moves by <= tau
            return dpa.PoissonSampledDpEvent(b / n, dpa.GaussianDpEvent(b * sigma / tau))
        return dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(b * sigma / (2 * tau)))
    if sampling == "poisson":
        raise ValueError("sampling: DP-RSVRG picks one sample uniformly per step (sampling "
                         "without replacement, replace-one relation); the Poisson/add-remove "
                         "accountants do not describe it. Use sampling='without_replacement' "
                         "with the RDP accountant")
    lam, n, tau = st.rsvrg_split, st.n_samples, st.tau
    picked = dpa.SampledWithoutReplacementDpEvent(
        n, 1, dpa.GaussianDpEvent(math.sqrt(lam) * sigma / (4 * tau)))
    snapshot = dpa.GaussianDpEvent(math.sqrt(1 - lam) * sigma * n / (2 * tau))
    return dpa.ComposedDpEvent([picked, snapshot])


def epsilon_rdp(sigma: float, delta: float, settings: "DPSettings", *,
                sampling: str = "without_replacement") -> float:
    """Epsilon of PriRFed by the RDP accountant of dp-accounting.

    Parameters
    ----------
    sigma : float, >= 0
        ``sigma_i``: standard deviation of the tangent Gaussian added to each step's direction
        (the averaged clipped gradient for DP-RSGD). ``0`` gives ``inf``.
    delta : float, in (0, 1)
    settings : DPSettings
    sampling : {"without_replacement", "poisson"}
        ``"without_replacement"`` (default): batches of exactly ``b`` of ``N`` as in the seed's
        algorithm, **replace-one** relation (sensitivity of the clipped sum ``2 tau``).
        ``"poisson"``: each sample enters a step with probability ``b/N`` (the sum still
        divided by ``b``), **add/remove-one** relation (sensitivity ``tau``); DP-RSGD only.

    Returns
    -------
    eps : float
        For ``T`` rounds with client participation probability ``s/n`` revealed to the server
        (module docstring); ``inf`` when a step publishes its data, ``0`` when the mechanism is
        ``(0, delta)``-DP (module docstring), never an overflow.
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    check_choice(sampling, "sampling", SAMPLINGS)
    trivial = _trivial_epsilon(sigma, delta, settings, sampling)
    if trivial is not None:
        return trivial
    orders, rdp_round = _rdp_round(sigma, settings, sampling)
    return rdp.epsilon(orders, settings.rounds * rdp_round, delta)


@functools.lru_cache(maxsize=256)
def _rdp_round(sigma, settings, sampling="without_replacement"):
    """:func:`_rdp_round_computed`, kept per ``(sigma, settings, sampling)`` (a pure function of
    them; a client's every round, a node's every message, charge the same mechanism): the
    arrays are read-only, shared by every caller."""
    orders, rdp_round = _rdp_round_computed(sigma, settings, sampling)
    orders.setflags(write=False)
    rdp_round.setflags(write=False)
    return orders, rdp_round


def _rdp_round_computed(sigma, settings, sampling="without_replacement"):
    """RDP orders and the RDP of one round (``steps_per_round`` noisy steps, mixed with the
    no-op mechanism at the client rate); ``t`` rounds compose to ``t * rdp``. Shared by
    :func:`epsilon_rdp` and PriRFed's per-round privacy columns (unchecked arguments).

    Sampling without replacement (what PriRFed runs) is computed by :mod:`.rdp`, the
    dp-accounting formulas in vectorized NumPy; Poisson sampling by dp-accounting's RDP
    accountant. Noise so large that the formulas overflow (a step's GDP parameter below
    ``1e-100``) or leave their domain (the sampled-Gaussian formulas meet ``log(0)`` once ``1 -
    exp(-mu^2)`` rounds to 0) takes the unsampled Gaussian's RDP ``a mu^2 / 2`` per step
    instead, an upper bound of the sampled one (sampling only amplifies privacy)."""
    st = settings
    orders = rdp.ORDERS
    mu_step = _step_mu(sigma, st, sampling)
    if not mu_step <= MU_REVEALING:                 # a step publishes its data
        rdp_round = np.full_like(orders, math.inf)
    elif mu_step < 1e-100:
        rdp_round = st.steps_per_round * orders * mu_step ** 2 / 2
    else:
        step = _rdp_step(sigma, st, sampling)             # its refusals are named
        try:
            rdp_round = st.steps_per_round * step()
        except (ValueError, ArithmeticError):
            # the sampled formulas' log(0) for a tiny mu (from sigma ~ 1e8 at b = 10): the
            # unsampled bound, as for the smallest mu above
            rdp_round = st.steps_per_round * orders * mu_step ** 2 / 2
    rho = st.client_rate
    if rho < 1.0:  # revealed participation: mixture with the no-op mechanism
        with np.errstate(over="ignore"):
            rdp_round = np.logaddexp(math.log1p(-rho),
                                     math.log(rho) + (orders - 1) * rdp_round) / (orders - 1)
    return np.array(orders), rdp_round


def _rdp_step(sigma, settings, sampling):
    """The computation of one noisy local step's RDP at :data:`.rdp.ORDERS` (the events of
    :func:`_step_event`): a function of no arguments, returned once the step is known to be
    one the accountants describe (a refusal is raised here, not by the function)."""
    st = settings
    if sampling == "poisson":
        event = _step_event(sigma, st, sampling)
        dpa = _dp()

        def step():
            with _quiet_absl():
                acc = dpa.rdp.RdpAccountant(rdp.ORDERS,
                                            dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
                acc.compose(event)
                return np.asarray(acc.rdp, float)
        return step
    if st.trainer == "dp-rsgd":
        b, n, tau = st.batch_size, st.n_samples, st.tau
        return lambda: rdp.sampled_gaussian(b / n, b * sigma / (2 * tau))
    lam, n, tau = st.rsvrg_split, st.n_samples, st.tau
    return lambda: (rdp.sampled_gaussian(1 / n, math.sqrt(lam) * sigma / (4 * tau))
                    + rdp.gaussian(math.sqrt(1 - lam) * sigma * n / (2 * tau)))


def epsilon_pld(sigma: float, delta: float, settings: "DPSettings", *,
                sampling: str = "without_replacement",
                value_discretization_interval: float = 1e-4) -> float:
    """Epsilon of PriRFed by the PLD accountant of dp-accounting (the tightest here).

    DP-RSGD only (see ``epsilon_rdp`` for DP-RSVRG). Client participation with probability
    ``s/n`` per round, revealed to the server (module docstring). The PLD is discretized
    pessimistically: the result is an upper bound up to ``value_discretization_interval`` per
    composition.

    Parameters
    ----------
    sigma : float, >= 0
    delta : float, in (0, 1)
    settings : DPSettings
    sampling : {"without_replacement", "poisson"}
        ``"without_replacement"`` (default, what DP-RSGD does): only the full batch
        (``batch_size == n_samples``) is covered -- each step is then a Gaussian on the
        clipped sum with fixed denominator ``N`` under the **replace-one** relation
        (sensitivity ``2 tau``). dp-accounting's PLD has no sampling without replacement, so
        a fixed-size batch ``b < N`` raises ``ValueError``: use :func:`epsilon_rdp`.
        ``"poisson"``: each sample enters a step with probability ``b/N`` (sum divided by
        ``b``), **add/remove-one** (sensitivity ``tau``) -- a *different* mechanism from the
        one PriRFed runs, kept for comparison (``privacy_report``).
    value_discretization_interval : float, > 0
        The finest interval used; widened where ``sigma`` is so small that the PLD would hold
        more than :data:`PLD_MAX_POINTS` values (:func:`pld_discretization`), so memory and
        time stay bounded for every ``sigma``.

    Returns
    -------
    eps : float
        An upper bound, within ``K T x`` the interval used of the exact value; ``inf`` when a
        step publishes its data, ``0`` when the mechanism is ``(0, delta)``-DP (module
        docstring).
    """
    _dp()

    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    check_choice(sampling, "sampling", SAMPLINGS)
    vdi = check_positive(value_discretization_interval, "value_discretization_interval")
    st = settings
    if st.trainer != "dp-rsgd":
        raise ValueError("settings.trainer: the PLD accountant covers DP-RSGD only (DP-RSVRG's "
                         "single-sample pick is sampling without replacement, which "
                         "dp-accounting's PLD does not support); use epsilon_rdp")
    _check_pld_batch(st, sampling)
    trivial = _trivial_epsilon(sigma, delta, st, sampling)
    if trivial is not None:
        return trivial
    rnd = _pld_round(sigma, st, vdi, sampling)
    with _quiet_absl():
        total = rnd.self_compose(st.rounds) if st.rounds > 1 else rnd
        return float(total.get_epsilon_for_delta(delta))


def _check_pld_batch(st, sampling):
    if sampling == "without_replacement" and st.batch_size != st.n_samples:
        raise ValueError(
            f"settings.batch_size: the PLD accountant covers the full batch only "
            f"(batch_size = n_samples = {st.n_samples}); batches of {st.batch_size} drawn "
            f"without replacement need the RDP accountant (dp-accounting's PLD has no "
            f"sampling without replacement, and Poisson sampling is another mechanism)")


def _step_mu(sigma, settings, sampling="without_replacement"):
    """The Gaussian-DP parameter of one noisy step without its sampling (an upper bound of the
    sampled step's privacy loss): DP-RSGD ``2 tau / (b sigma)`` under replace-one (``tau / (b
    sigma)`` under add/remove-one), DP-RSVRG the picked and snapshot parts together (module
    docstring). ``sigma > 0``."""
    st = settings
    if st.trainer == "dp-rsgd":
        return (2.0 if sampling == "without_replacement" else 1.0) * (st.tau / st.batch_size) \
            / sigma
    lam = st.rsvrg_split
    return math.hypot(4.0 * st.tau / math.sqrt(lam), 2.0 * st.tau / (st.n_samples *
                                                                     math.sqrt(1 - lam))) / sigma


def _trivial_epsilon(sigma, delta, settings, sampling="without_replacement"):
    """``inf`` without noise or when a step publishes its data (GDP parameter above
    :data:`MU_REVEALING`), ``0.0`` when the whole mechanism, unsampled, is mu-GDP with
    ``delta >= erf(mu / (2 sqrt 2))`` (then it is ``(0, delta)``-DP), else ``None``: the
    accountant decides. Shared by the accountants and the ledger's curves."""
    if sigma == 0.0:
        return math.inf
    mu_step = _step_mu(sigma, settings, sampling)
    if not mu_step <= MU_REVEALING:
        return math.inf
    mu = mu_step * math.sqrt(settings.steps_per_round * settings.rounds)
    if math.erf(mu / (2.0 * math.sqrt(2.0))) <= delta:
        return 0.0
    return None


def pld_discretization(sigma, settings, value_discretization_interval=1e-4,
                       sampling="without_replacement"):
    """The discretization interval the PLD accountant uses: ``value_discretization_interval``,
    widened so that no distribution it builds for the run holds more than
    :data:`PLD_MAX_POINTS` values.

    With a step's GDP parameter ``mu``, ``K`` steps a round, ``T`` rounds and the client rate
    ``rho``, the privacy losses span about: one step ``mu^2 + 21 mu`` (dp-accounting cuts the
    Gaussian at ``~10.5`` standard deviations); one round ``K mu^2 / 2 [rho < 1] + 17 sqrt(K)
    mu`` (its mixture with the identity reaches down to 0); the run ``17 s`` with ``s^2 = T
    (rho K mu^2 + rho (1 - rho) K^2 mu^4 / 4)`` the variance of the composed loss
    (dp-accounting cuts the composition's ``1e-15`` tails at ~8.5 standard deviations). The
    interval is the largest span over :data:`PLD_MAX_POINTS` where that exceeds the one asked
    for. The accountant stays pessimistic: the epsilon stays an upper bound, within ``K T``
    intervals of the exact value.

    Parameters
    ----------
    sigma : float, > 0
    settings : DPSettings
    value_discretization_interval : float, > 0
    sampling : {"without_replacement", "poisson"}

    Returns
    -------
    float
    """
    st = settings
    mu, k, rho = _step_mu(sigma, st, sampling), st.local_steps, st.client_rate
    cut = 2 * _PLD_COMPOSED_SD
    step = mu * mu + 2 * _PLD_TAIL_SD * mu
    rnd = (k * mu * mu / 2 if rho < 1 else 0.0) + cut * math.sqrt(k) * mu
    run = cut * math.sqrt(st.rounds * (rho * k * mu * mu + rho * (1 - rho) * (k * mu * mu) ** 2
                                       / 4))
    return max(float(value_discretization_interval), max(step, rnd, run) / PLD_MAX_POINTS)


def _pld_round(sigma, settings, vdi, sampling="without_replacement"):
    """The privacy loss distribution of one DP-RSGD round, mixed with the identity at the
    client rate: full batch under replace-one (``without_replacement``), or Poisson-sampled
    steps under add/remove-one (``poisson``), discretized at :func:`pld_discretization` of
    ``vdi`` (``settings.rounds`` rounds will be composed). Shared by :func:`epsilon_pld` and
    PriRFed's per-round privacy columns (unchecked arguments)."""
    dpa = _dp()
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    st = settings
    b, n = st.batch_size, st.n_samples
    if not 1e-100 <= _step_mu(sigma, st, sampling) <= MU_REVEALING:
        raise ValueError(f"sigma = {sigma:g}: outside what the PLD accountant resolves (a step's "
                         f"GDP parameter must lie in [1e-100, {MU_REVEALING:g}]); such noise "
                         f"gives eps = 0 at any delta above 1e-100 and eps = inf below the "
                         f"range (epsilon_pld answers those without this accountant)")
    vdi = pld_discretization(sigma, st, vdi, sampling)
    with _quiet_absl():
        if sampling == "poisson":  # add/remove-one: the sum moves by <= tau
            step = pld_mod.from_gaussian_mechanism(
                standard_deviation=b * sigma / st.tau, sampling_prob=b / n,
                value_discretization_interval=vdi)
        else:     # full batch, fixed denominator N, replace-one: dp-accounting places the
            # neighbours at +-1 (module docstring), so the deviation is over tau, not 2 tau
            step = pld_mod.from_gaussian_mechanism(
                standard_deviation=b * sigma / st.tau, value_discretization_interval=vdi,
                neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
        rnd = step.self_compose(st.local_steps) if st.local_steps > 1 else step
        if st.client_rate < 1.0:
            rnd = rnd.compute_mixture(pld_mod.identity(vdi), st.client_rate)
    return rnd


def _seed_split(delta, settings):
    st = settings
    delta_hat = st.delta_hat_fraction * delta
    delta_local = (1.0 - st.delta_hat_fraction) * delta / (
        st.rounds * st.client_rate * st.clients_per_round)
    return delta_hat, min(delta_local, 0.5)


def _seed_local_sigma(eps_local, delta_local, st):
    if st.trainer == "dp-rsgd":
        return dp_rsgd_sigma(eps_local, delta_local, n_samples=st.n_samples,
                             local_steps=st.local_steps, tau=st.tau, o=st.o)
    return dp_rsvrg_sigma(eps_local, delta_local, n_samples=st.n_samples,
                          local_steps=st.local_steps, inner_steps=st.inner_steps, tau=st.tau,
                          sigma_tilde=st.sigma_tilde)


def _seed_local_eps(sigma, delta_local, st):
    if st.trainer == "dp-rsgd":
        return dp_rsgd_epsilon(sigma, delta_local, n_samples=st.n_samples,
                               local_steps=st.local_steps, tau=st.tau, o=st.o)
    return dp_rsvrg_epsilon(sigma, delta_local, n_samples=st.n_samples,
                            local_steps=st.local_steps, inner_steps=st.inner_steps, tau=st.tau,
                            sigma_tilde=st.sigma_tilde)


def epsilon_seed(sigma: float, delta: float, settings: "DPSettings") -> float:
    """Epsilon of PriRFed by the seed's own analysis at a total ``delta``.

    The local ``eps`` that ``sigma`` buys by the seed's closed form (``dp_rsgd_epsilon`` /
    ``dp_rsvrg_epsilon``, constants ``settings.o`` / ``settings.sigma_tilde``) at the local
    delta of ``DPSettings.delta_hat_fraction``, then Theorem 9 (``epsilon_seed_composition``).
    Inherits the closed forms' caveat: with the default constant 1 it is not certified.

    Parameters
    ----------
    sigma : float, >= 0
        ``sigma_i``; ``0`` gives ``inf``.
    delta : float, in (0, 1)
        The run's total delta.
    settings : DPSettings

    Returns
    -------
    float
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    if sigma == 0.0:
        return math.inf
    st = settings
    delta_hat, delta_local = _seed_split(delta, st)
    eps_local = _seed_local_eps(sigma, delta_local, st)
    return epsilon_seed_composition(eps_local, delta_local, rounds=st.rounds,
                                    clients_per_round=st.clients_per_round,
                                    n_clients=st.n_clients, delta_hat=delta_hat)[0]


def _epsilon(accountant, sigma, delta, settings, **options):
    if accountant == "pld":
        return epsilon_pld(sigma, delta, settings, **options)
    if accountant == "rdp":
        return epsilon_rdp(sigma, delta, settings, **options)
    return epsilon_seed(sigma, delta, settings)


def calibrate_sigma(target_eps: float, target_delta: float, settings: "DPSettings", *,
                    accountant: str = "rdp", rtol: float = 1e-3, sigma_max: float = 1e6,
                    **options: Any) -> float:
    """The smallest noise ``sigma_i`` whose epsilon under ``accountant`` is ``<= target_eps``.

    Bisection in ``log sigma`` on the decreasing ``eps(sigma)``, to relative width ``rtol``;
    the returned sigma is the upper end of the final bracket, so ``eps(sigma) <= target_eps``
    always holds for the returned value.

    Parameters
    ----------
    target_eps : float, > 0
    target_delta : float, in (0, 1)
    settings : DPSettings
    accountant : {"pld", "rdp", "seed"}
        ``"seed"`` inverts Theorem 9 and the closed form (continuous, so exact up to ``rtol``).
    rtol : float
        Relative precision of the returned sigma.
    sigma_max : float
        Largest sigma tried, as a multiple of ``settings.tau``.
    **options
        Passed to the accountant (``sampling`` for RDP, ``value_discretization_interval`` for
        PLD).

    Returns
    -------
    sigma : float

    Raises
    ------
    ValueError
        Invalid targets, or no sigma up to ``sigma_max * tau`` reaches ``target_eps`` (every
        ``eps > 0`` is reachable with enough noise, so this names a cap or settings that make
        the target unreachable in practice).
    """
    target_eps = check_positive(target_eps, "target_eps")
    target_delta = DELTA(target_delta, "target_delta")
    check_choice(accountant, "accountant", ACCOUNTANTS)
    rtol = check_positive(rtol, "rtol")
    st = settings
    if accountant == "seed":
        return _calibrate_seed(target_eps, target_delta, st)
    cache = {}

    def eps_of(sigma):
        if sigma not in cache:
            cache[sigma] = _epsilon(accountant, sigma, target_delta, st, **options)
        return cache[sigma]

    top = check_positive(sigma_max, "sigma_max") * st.tau
    # bracket [lo, hi] with eps(lo) > target >= eps(hi), growing/shrinking by 4x from a
    # starting point at noise multiplier ~1 on the clipped sum
    hi = lo = min(st.tau / st.batch_size, top)
    if eps_of(hi) <= target_eps:
        lo = hi / 4.0
        while eps_of(lo) <= target_eps:  # eps(sigma) -> inf as sigma -> 0: terminates
            hi, lo = lo, lo / 4.0
    else:
        while True:
            if hi >= top:
                raise ValueError(
                    f"target_eps: no sigma up to sigma_max * tau = {top:g} reaches eps <= "
                    f"{target_eps:g} at delta = {target_delta:g} with the {accountant} "
                    f"accountant (eps({top:g}) = {eps_of(top):.4g}); raise the target or "
                    f"change the settings")
            lo, hi = hi, min(hi * 4.0, top)
            if eps_of(hi) <= target_eps:
                break
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) <= target_eps:
            hi = mid
        else:
            lo = mid
    return hi


def _calibrate_seed(target_eps, target_delta, st):
    from scipy.optimize import brentq

    delta_hat, delta_local = _seed_split(target_delta, st)

    def gap(log_eps_local):
        e = epsilon_seed_composition(math.exp(log_eps_local), delta_local, rounds=st.rounds,
                                     clients_per_round=st.clients_per_round,
                                     n_clients=st.n_clients, delta_hat=delta_hat)[0]
        return math.log(e) - math.log(target_eps)

    lo, hi = math.log(target_eps) - 60.0, math.log(target_eps) + 5.0
    while gap(hi) < 0:
        hi += 5.0
    eps_local = math.exp(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12))
    return _seed_local_sigma(eps_local, delta_local, st)


# ---------------------------------------------------------------------------- report

@dataclass(frozen=True)
class PrivacyBudget:
    """The privacy spent by a noise level ``sigma`` under each accountant, side by side.

    Parameters
    ----------
    sigma, delta : float
        Noise standard deviation per step and the total delta of every entry.
    eps_seed : float
        The seed's closed form + Theorem 9 (not certified with the default constants).
    eps_rdp : float
        RDP, sampling without replacement as in the algorithm, replace-one relation.
    eps_rdp_poisson, eps_pld_poisson : float or None
        RDP and PLD with Poisson sampling, add/remove-one relation (``None`` for DP-RSVRG).
    settings : DPSettings
        The accounting settings the entries were computed for.
    """

    sigma: float
    delta: float
    eps_seed: float
    eps_rdp: float
    eps_rdp_poisson: float | None = None
    eps_pld_poisson: float | None = None
    settings: DPSettings | None = field(default=None, repr=False)

    def as_dict(self):
        return {"sigma": self.sigma, "delta": self.delta, "eps_seed": self.eps_seed,
                "eps_rdp": self.eps_rdp, "eps_rdp_poisson": self.eps_rdp_poisson,
                "eps_pld_poisson": self.eps_pld_poisson}

    def __str__(self):
        rows = [("seed (closed form + Theorem 9)", self.eps_seed),
                ("RDP, without replacement, replace-one", self.eps_rdp),
                ("RDP, Poisson, add/remove-one", self.eps_rdp_poisson),
                ("PLD, Poisson, add/remove-one", self.eps_pld_poisson)]
        lines = [f"privacy of sigma = {self.sigma:.6g} at delta = {self.delta:g}:"]
        lines += [f"  {name:40s} eps = {'n/a' if e is None else f'{e:.4g}'}" for name, e in rows]
        return "\n".join(lines)


def privacy_report(sigma: float, delta: float, settings: DPSettings) -> PrivacyBudget:
    """A ``PrivacyBudget``: the epsilon of ``sigma`` at ``delta`` under every accountant.

    Parameters
    ----------
    sigma : float, >= 0
    delta : float, in (0, 1)
    settings : DPSettings

    Returns
    -------
    PrivacyBudget
        ``eps_seed``, ``eps_rdp`` and, for DP-RSGD, the Poisson-sampling RDP and PLD values
        (for comparison; ``None`` otherwise).
    """
    sigma, delta = check_nonnegative(sigma, "sigma"), DELTA(delta, "delta")
    st = settings
    poisson = st.trainer == "dp-rsgd"
    return PrivacyBudget(
        sigma=sigma, delta=delta, eps_seed=epsilon_seed(sigma, delta, st),
        eps_rdp=epsilon_rdp(sigma, delta, st),
        eps_rdp_poisson=epsilon_rdp(sigma, delta, st, sampling="poisson") if poisson else None,
        eps_pld_poisson=epsilon_pld(sigma, delta, st, sampling="poisson") if poisson else None,
        settings=st)

