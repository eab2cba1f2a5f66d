"""One client's privacy as rounds of its training compose: :class:`Accountant`, after
dp-accounting's ``compose(event)`` / ``get_epsilon(delta)`` (an event: one round with noise
``sigma`` and :class:`~rfl_fast.privacy.DPSettings`; the mechanisms:
:mod:`rfl_fast.privacy.accounting`). A run's :class:`~rfl_fast.privacy.PrivacyLedger` and a
Flower client's ledger file (:mod:`rfl_fast.flower.guard`) both account through it.
"""

import math
from dataclasses import replace

import numpy as np

from . import rdp
from .._validation import check_choice, check_int, check_nonnegative
from ..errors import InvalidParameterError, ParameterTypeError
from .accounting import (ACCOUNTANTS, DELTA, MU_REVEALING, DPSettings, _pld_round,
                         _quiet_absl, _rdp_round, _step_mu, calibrate_sigma, epsilon_seed)

__all__ = ["Accountant"]

_REVEALED = object()


def _orders():
    """The RDP orders every curve is computed at (:data:`.rdp.ORDERS`, read-only)."""
    return rdp.ORDERS


class Accountant:
    """The privacy one client's data has spent, its ``rounds`` charged so far composed.

    Parameters
    ----------
    kind : {"rdp", "pld", "seed"}
        ``"rdp"``: RDP (dp-accounting's formulas in :mod:`.rdp`; replace-one, batches drawn
        without replacement, the client's participation revealed), any rounds composed order
        by order; its state saves and restores. ``"pld"``: its PLD (DP-RSGD with the full batch, discretized for
        the horizon ``settings.rounds``); ``"seed"``: the seed's closed form and Theorem 9
        (not certified with the default constants). These two compose one mechanism.

    Examples
    --------
    >>> st = DPSettings(n_samples=100, local_steps=5, batch_size=10, rounds=20,
    ...                 clients_per_round=3, n_clients=10)
    >>> acc = Accountant("rdp").charge(0.5, st, rounds=20)   # 20 rounds, sigma = 0.5
    >>> eps = acc.epsilon(1e-5)
    >>> sigma = Accountant.calibrate(1.0, 1e-5, st)         # eps = 1 after st.rounds
    >>> Accountant.restore(acc.state()).epsilon(1e-5) == eps
    True
    """

    def __init__(self, kind="rdp"):
        self.kind = check_choice(kind, "kind", ACCOUNTANTS)
        self.rounds = 0
        self._charged = {}      # rdp: (sigma, settings) or None (restored) -> [RDP, rounds]
        self._event = None      # pld, seed: the one mechanism (sigma, settings)
        self._one = None        # pld: its round's PLD (None: a round publishes the data)
        self._pld = None        # pld: the rounds' PLD composed (_REVEALED: eps = inf)

    def charge(self, sigma, settings, rounds=1):
        """Compose ``rounds`` rounds of the client's training; returns ``self``.

        Parameters
        ----------
        sigma : float
            The noise (>= 0; 0: ``eps = inf``).
        settings : DPSettings
            The round's mechanism (its ``rounds``: the horizon, not the count charged).
        rounds : int
            How many (>= 0).
        """
        sigma = check_nonnegative(sigma, "sigma")
        rounds = check_int(rounds, "rounds", min_value=0)
        if not isinstance(settings, DPSettings):
            raise ParameterTypeError("settings", expected="a DPSettings",
                                     got=type(settings).__name__)
        key = (sigma, settings)
        if self.kind == "rdp":
            if key not in self._charged:
                one = (np.full(_orders().size, math.inf) if sigma == 0.0
                       else _rdp_round(sigma, settings)[1])
                self._charged[key] = [one, 0]
            self._charged[key][1] += rounds
        elif self._event not in (None, key):
            raise InvalidParameterError("settings", f"the {self.kind!r} accountant composes "
                                        f"rounds of one mechanism; use 'rdp' for others")
        elif self.kind == "pld":
            if self._event is None:
                self._one = _pld_one(sigma, settings)
            if rounds and self._pld is not _REVEALED:
                if self._one is None:
                    self._pld = _REVEALED
                else:
                    with _quiet_absl():
                        inc = self._one.self_compose(rounds) if rounds > 1 else self._one
                        self._pld = inc if self._pld is None else self._pld.compose(inc)
        self._event = key
        self.rounds += rounds
        return self

    def epsilon(self, delta):
        """The epsilon spent by every round charged (0 before any; inf once a round without
        noise, or publishing its data, is).

        Parameters
        ----------
        delta : float
            In (0, 1).
        """
        delta = DELTA(delta, "delta")
        if self.rounds == 0:
            return 0.0
        if self.kind == "seed":
            sigma, st = self._event
            return epsilon_seed(sigma, delta, replace(st, rounds=self.rounds))
        if self._pld is _REVEALED:
            return math.inf
        if self.kind == "pld":
            with _quiet_absl():
                return float(self._pld.get_epsilon_for_delta(delta))
        return rdp.epsilon(_orders(), self._spent(), delta)

    def _spent(self):
        spent = np.zeros(_orders().size)
        for one, count in self._charged.values():
            if count:
                spent = spent + count * one
        return spent

    @staticmethod
    def calibrate(eps, delta, settings, kind="rdp"):
        """The smallest ``sigma`` (within a relative 1e-3) whose ``settings.rounds`` rounds
        spend at most ``eps`` at ``delta`` (:func:`~rfl_fast.privacy.calibrate_sigma`;
        ``ValueError`` when no ``sigma`` up to its cap does).

        Parameters
        ----------
        eps, delta : float
            The target, ``eps > 0``, ``delta`` in (0, 1).
        settings : DPSettings
        kind : {"rdp", "pld", "seed"}
        """
        return calibrate_sigma(eps, delta, settings, accountant=kind)

    def state(self):
        """The ``"rdp"`` accountant as JSON-able values: ``{"kind", "orders", "rdp",
        "rounds"}`` (the RDP orders, :data:`.rdp.ORDERS`, and the RDP spent at each)."""
        if self.kind != "rdp":
            raise InvalidParameterError("kind", f"only 'rdp' has a state to save, not "
                                        f"{self.kind!r}")
        return {"kind": "rdp", "orders": _orders().tolist(), "rdp": self._spent().tolist(),
                "rounds": self.rounds}

    @classmethod
    def restore(cls, state):
        """The accountant continuing a state (``ValueError`` for anything else, RDP orders
        other than :data:`.rdp.ORDERS` included: they are never mixed).

        Parameters
        ----------
        state : dict
            From :meth:`state` (untrusted, e.g. read from a file: every entry is checked).
        """
        orders = _orders()
        try:
            rounds = state["rounds"]
            ok = state["kind"] == "rdp" and type(rounds) is int and rounds >= 0
            given, rdp = (np.array(state[k], dtype=np.float64) for k in ("orders", "rdp"))
        except (KeyError, TypeError, ValueError, OverflowError):
            ok = False
        if not ok or given.shape != orders.shape or rdp.shape != orders.shape:
            raise ValueError(f"accountant state: expected {{'kind': 'rdp', 'orders': [...], "
                             f"'rdp': [...], 'rounds': int >= 0}} with the "
                             f"{orders.size} orders of rfl_fast.privacy.rdp.ORDERS")
        if not np.array_equal(given, orders):
            raise ValueError("accountant state: RDP orders differ from rfl_fast.privacy.rdp.ORDERS; "
                             "refusing to mix them")
        if not (np.isfinite(rdp) & (rdp >= 0)).all() or (rounds == 0 and rdp.any()):
            raise ValueError("accountant state: RDP values must be finite and >= 0 (and 0 "
                             "before any round)")
        acc = cls("rdp")
        acc._charged[None], acc.rounds = [rdp, 1], rounds
        return acc


def _pld_one(sigma, st):
    """One round's PLD, or None when it publishes the data (no noise, or a step's GDP
    parameter above ``MU_REVEALING``)."""
    if st.trainer != "dp-rsgd" or st.batch_size != st.n_samples:
        raise InvalidParameterError(
            "accountant", f"'pld' covers DP-RSGD with the full batch only (batch_size=None, "
            f"fixed denominator N_i, replace-one); batches of {st.batch_size} of "
            f"{st.n_samples} samples drawn without replacement, or DP-RSVRG, need accountant "
            f"'rdp' (dp-accounting's PLD has no sampling without replacement)")
    if sigma == 0.0 or not _step_mu(sigma, st) <= MU_REVEALING:
        return None
    return _pld_round(sigma, st, 1e-4)
