"""The privacy ledger of a PriRFed run: what ``PriRFed.for_run`` fixes (per-client noise,
batch sizes, ``delta``) and the cumulative privacy spent after every round under each
accountant (:mod:`rfl_fast.privacy.accounting`).

The ``"pld"`` curve is exact at every round when ``rounds <= PLD_POINTS``, else at
``PLD_POINTS`` rounds spread geometrically (and at the last), each other round holding the
value of the next such round (an upper bound, since ``eps`` grows with ``t``).
"""

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from . import accounting as _acc

__all__ = ["PrivacyLedger", "PLD_POINTS", "DEFAULT_DELTA", "ledger_columns", "calibrated_sigma",
           "eps_total"]

#: Rounds at which the PLD accountant is evaluated exactly (see the module docstring).
PLD_POINTS = 32
#: ``delta`` used to report the privacy of a run given ``sigma`` without ``target``/``delta``.
DEFAULT_DELTA = 1e-5


@dataclass(frozen=True, eq=False)
class PrivacyLedger:
    """What ``PriRFed.for_run`` fixed for one run.

    Parameters
    ----------
    sigma : ndarray, shape (n,)
        Noise standard deviation of every client (calibrated or as given).
    batch : ndarray of int64, shape (n,)
        DP-RSGD batch sizes ``b_i`` (``N_i`` for DP-RSVRG, unused).
    delta : float
        The run's ``delta``.
    rounds : int
        Rounds the columns cover.
    clients_per_round : int
        Clients sampled each round (``s``).
    columns : dict of str to ndarray, shape (rounds + 1,)
        Cumulative privacy spent after each round (``eps_<accountant>``, ``delta``).
    settings : dict of int to DPSettings
        The accounting settings of each client.
    calibrated : bool
        Whether ``sigma`` was calibrated from ``target``.
    """

    sigma: np.ndarray
    batch: np.ndarray
    delta: float
    rounds: int
    clients_per_round: int
    columns: dict
    settings: dict = field(repr=False)
    calibrated: bool = False

    @property
    def epsilon(self):
        """The spent epsilon of the whole run under each accountant (dict)."""
        return {k[4:]: float(v[-1]) for k, v in self.columns.items() if k.startswith("eps_")}


@functools.lru_cache(maxsize=256)
def _rdp_round(sigma, settings):
    """Orders and RDP of one round, as :func:`rfl_fast.privacy.epsilon_rdp` composes them (so
    ``t * rdp`` reproduces it exactly); cached per ``(sigma, settings)``."""
    return _acc._rdp_round(sigma, settings, "without_replacement")


def _rdp_curve(sigma, delta, st, rounds):
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod

    orders, rdp_round = _rdp_round(sigma, replace(st, rounds=1))
    out = np.empty(rounds)
    with _acc._quiet_absl():
        for t in range(1, rounds + 1):
            out[t - 1] = rdp_mod.compute_epsilon(orders, t * rdp_round, delta)[0]
    return out


def _pld_grid(rounds, points):
    """Every round up to ``points`` rounds, else ``points`` rounds spread geometrically."""
    if rounds <= points:
        return np.arange(1, rounds + 1, dtype=np.int64)
    g = np.unique(np.round(np.geomspace(1, rounds, points)).astype(np.int64))
    return np.union1d(g, [rounds])


def _pld_curve(sigma, delta, st, rounds, vdi=1e-4):
    if st.trainer != "dp-rsgd":
        raise ValueError("accountant: the PLD accountant covers DP-RSGD only; use 'rdp'")
    if st.batch_size != st.n_samples:
        raise ValueError(f"accountant 'pld': covers the full batch only (batch_size=None, "
                         f"fixed denominator N_i, replace-one); a client with batches of "
                         f"{st.batch_size} of its {st.n_samples} samples drawn without "
                         f"replacement needs accountant 'rdp' (dp-accounting's PLD has no "
                         f"sampling without replacement)")
    grid = _pld_grid(rounds, PLD_POINTS)
    vals = np.empty(grid.size)
    rnd = _acc._pld_round(sigma, replace(st, rounds=rounds), vdi)   # (its size: for `rounds`)
    with _acc._quiet_absl():
        total, prev = None, 0
        for j, g in enumerate(grid):
            inc = rnd.self_compose(int(g - prev)) if g - prev > 1 else rnd
            total = inc if total is None else total.compose(inc)
            vals[j] = total.get_epsilon_for_delta(delta)
            prev = g
    # row t holds eps at the first grid round >= t (exact on the grid, an upper bound between)
    return vals[np.searchsorted(grid, np.arange(1, rounds + 1))]


def _seed_curve(sigma, delta, st, rounds):
    return np.array([_acc.epsilon_seed(sigma, delta, replace(st, rounds=t))
                     for t in range(1, rounds + 1)])


_CURVES = {"rdp": _rdp_curve, "pld": _pld_curve, "seed": _seed_curve}


@functools.lru_cache(maxsize=256)
def calibrated_sigma(eps, delta, settings, accountant):
    """:func:`rfl_fast.privacy.calibrate_sigma`, cached per arguments."""
    return _acc.calibrate_sigma(eps, delta, settings, accountant=accountant)


def eps_total(accountant, sigma, delta, st):
    """The epsilon ``accountant`` gives a client with settings ``st`` after ``st.rounds``."""
    if accountant == "rdp":
        return float(_rdp_curve(sigma, delta, st, st.rounds)[-1])
    return float(_acc._epsilon(accountant, sigma, delta, st))


def ledger_columns(accountants, clip, sigma, settings, delta, rounds, uncertified):
    """The cumulative privacy columns (``eps_<accountant>`` for each of ``accountants``,
    ``delta``) of ``rounds`` rounds of clients with noise ``sigma`` (n,), clipping ``clip`` and
    accounting ``settings`` (client -> DPSettings): the maximum over clients of each
    accountant's curve (NaN when ``uncertified``, inf without noise or clipping), each column
    of shape (rounds + 1,)."""
    groups = {}
    for i, st in settings.items():
        groups.setdefault(st, []).append(i)
    cols = {}
    for acc in accountants:
        curve = np.zeros(rounds + 1)
        if rounds:
            for st, members in groups.items():
                for sig in np.unique(sigma[members]):
                    if uncertified:
                        c = np.full(rounds, math.nan)   # no guarantee (uncertified)
                    elif sig == 0.0 or not math.isfinite(clip):
                        c = np.full(rounds, math.inf)
                    elif acc != "seed" and _acc._trivial_epsilon(
                            float(sig), delta, replace(st, rounds=rounds)) is not None:
                        # inf (a step publishes its data) or 0 (the whole run is (0, delta)-DP)
                        c = np.full(rounds, _acc._trivial_epsilon(
                            float(sig), delta, replace(st, rounds=rounds)))
                    else:
                        c = _CURVES[acc](float(sig), delta, st, rounds)
                    curve[1:] = np.maximum(curve[1:], c)
        cols[f"eps_{acc}"] = curve
    cols["delta"] = np.full(rounds + 1, delta)
    return cols
