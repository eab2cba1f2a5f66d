"""The privacy ledger of a PriRFed run: the run-level budget the round driver consults.

:meth:`PrivacyLedger.plan` fixes a run's noise (calibrated so that the whole run is ``(eps,
delta)``-DP, or given and checked) and the privacy spent after every round, by each
accountant the maximum over clients (the changed sample lives in one): the history's
``eps_<accountant>`` and ``delta`` columns, each client's an
:class:`~rfl_fast.privacy.Accountant` charged round by round; :meth:`~PrivacyLedger.resume`
continues them within the budget. The ``"pld"`` column is exact at every round when ``rounds
<= PLD_POINTS``, else at ``PLD_POINTS`` rounds spread geometrically (and the last), each other
row holding the next such round's value (an upper bound: ``eps`` grows with ``t``). Noise
publishing a step's data gives ``inf``, noise making the whole run ``(0, delta)``-DP 0
(:mod:`rfl_fast.privacy.accounting`), no noise ``inf``.

A ledger read back (a checkpoint) is untrusted: :meth:`PrivacyLedger.check_rebuilt` rebuilds it
from what the run's algorithm and problem give (the settings of every client, the noise, the
delta, the accountants, the budget) and refuses one that disagrees, naming the field; its
columns are recomputed, never read.
"""

import math
from dataclasses import dataclass, field, replace
from dataclasses import fields as _fields

import numpy as np

from .._validation import brief, check_int
from ..errors import InvalidParameterError
from .accountant import Accountant
from .accounting import _trivial_epsilon

__all__ = ["PrivacyLedger", "PLD_POINTS", "DEFAULT_DELTA", "COLUMN_RTOL"]

#: Rounds at which the PLD accountant is evaluated exactly (see the module docstring).
PLD_POINTS = 32
#: ``delta`` used to report the privacy of a run given ``sigma`` without ``target``/``delta``.
DEFAULT_DELTA = 1e-5
#: Relative difference allowed between a stored ledger's columns and the recomputed ones (the
#: accountants' arithmetic rounds differently on another machine or dp-accounting build; an
#: honest ledger agrees to ~1e-15, a tampered one differs in its leading digits).
COLUMN_RTOL = 1e-9


def _curve(kind, sigma, delta, st, rounds):
    """The epsilon after each round ``1..rounds`` of one client (``sigma > 0``)."""
    grid = np.arange(1, rounds + 1)
    if kind == "pld" and rounds > PLD_POINTS:
        geo = np.unique(np.round(np.geomspace(1, rounds, PLD_POINTS)).astype(np.int64))
        grid = np.union1d(geo, [rounds])
    acc, prev, vals = Accountant(kind), 0, np.empty(grid.size)
    for j, g in enumerate(grid.tolist()):
        vals[j] = acc.charge(sigma, st, g - prev).epsilon(delta)
        prev = g
    return vals[np.searchsorted(grid, np.arange(1, rounds + 1))]


@dataclass(frozen=True, eq=False)
class PrivacyLedger:
    """The noise and the privacy spent of one PriRFed run (module docstring).

    Parameters
    ----------
    sigma : ndarray, shape (n,)
        Every client's noise (calibrated or as given).
    settings : tuple of DPSettings, length n
        Every client's accounting settings (``rounds``: the planned horizon).
    delta : float
    rounds : int
        Rounds the columns cover.
    columns : dict of str to ndarray, shape (rounds + 1,)
        ``eps_<accountant>`` (row 0: 0) and ``delta``.
    accountants : tuple of str
        The first calibrates and checks the budget.
    target : (float, float) or None
        The run's budget ``(eps, delta)``.
    calibrated : bool
        Whether ``sigma`` was calibrated to ``target``.
    void : float or None
        Every epsilon of a run without a guarantee: NaN (``uncertified``), inf (no clipping).
    """

    sigma: np.ndarray
    settings: tuple
    delta: float
    rounds: int = 0
    columns: dict = field(default_factory=dict, repr=False)
    accountants: tuple = ("rdp",)
    target: tuple | None = None
    calibrated: bool = False
    void: float | None = None

    @property
    def batch(self):
        """The clients' batch sizes ``b_i`` (int64, shape (n,))."""
        return np.array([st.batch_size for st in self.settings], dtype=np.int64)

    @property
    def epsilon(self):
        """The spent epsilon of the whole run under each accountant (dict)."""
        return {k[4:]: float(v[-1]) for k, v in self.columns.items() if k.startswith("eps_")}

    def row(self, t):
        """Row ``t`` of the columns (dict of str to float), for the history.

        Parameters
        ----------
        t : int
            The row (0: before the first round; past ``rounds``: the last).
        """
        t = min(int(t), self.rounds)
        return {name: float(col[t]) for name, col in self.columns.items()}

    def check_rebuilt(self, settings_for, sigma, *, delta, accountants, target, void, most):
        """Check this ledger (read back from a file: untrusted) against the one the run's own
        algorithm and problem give; ``InvalidParameterError`` (``param`` "ledger") naming the
        first field that disagrees. Nothing of the stored ledger is believed: the settings,
        the noise, ``delta``, the accountants and ``void`` must be those given, the noise must
        meet ``target`` over the ledger's rounds, and every column is recomputed from them.

        Parameters
        ----------
        settings_for : callable
            ``settings_for(horizon)``: every client's DPSettings as the algorithm computes them
            for the problem, planned for ``horizon`` rounds (the stored one, checked: a
            resumed run's ``rounds`` may exceed the horizon its noise was planned for).
        sigma : ndarray (n,) or None
            The algorithm's noise; None: calibrated (the stored noise is then checked against
            ``target``).
        delta, accountants, target, void
            As :meth:`plan` takes them, from the algorithm.
        most : int
            The run's rounds: the most the ledger may cover (its columns cost what a fresh
            run's would).
        """
        def refuse(what, stored, expected):
            raise InvalidParameterError(
                "ledger", f"the stored privacy ledger disagrees with the run's algorithm and "
                f"problem: {what} is {brief(stored)}, they give {brief(expected)}; refusing to "
                f"resume with privacy state that was not computed for this run")

        from .accounting import DPSettings

        if not (isinstance(self.settings, tuple) and self.settings
                and all(isinstance(st, DPSettings) for st in self.settings)):
            refuse("settings", self.settings, "a DPSettings per client")
        horizon = self.settings[0].rounds
        settings = tuple(settings_for(horizon))
        n = len(settings)
        self._check_sizes([st.n_samples for st in settings])
        for i, (have, want) in enumerate(zip(self.settings, settings)):
            for f in (fl.name for fl in _fields(want)):
                a, b = getattr(have, f), getattr(want, f)
                if type(a) is not type(b) or a != b:
                    refuse(f"{f} of client {i}", a, b)
        rounds = self.rounds
        if type(rounds) is not int or not horizon <= max(rounds, 1) <= max(most, 1):
            refuse("rounds", rounds, f"an int in [{horizon}, {most}] (from the planned "
                   f"horizon to the run's rounds)")
        for what, have, want in (("delta", self.delta, float(delta)),
                                 ("accountants", self.accountants, tuple(accountants)),
                                 ("calibrated", self.calibrated, sigma is None)):
            if type(have) is not type(want) or have != want:
                refuse(what, have, want)
        if not (self.void is None and void is None or isinstance(self.void, float)
                and void is not None and (self.void == void or math.isnan(self.void)
                                          and math.isnan(void))):
            refuse("void (the run's guarantee)", self.void, void)
        stored = self.sigma
        if not (isinstance(stored, np.ndarray) and stored.shape == (n,)
                and stored.dtype == np.float64):
            refuse("sigma", stored, f"{n} float64 values")
        if sigma is not None:
            want = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,))
            bad = np.flatnonzero(stored != want)
            if bad.size:
                i = int(bad[0])
                refuse(f"sigma of client {i}", float(stored[i]), float(want[i]))
        elif not (np.isfinite(stored) & (stored > 0)).all():
            refuse("the calibrated sigma", stored, "finite values > 0")
        # the budget it was planned for (the algorithm's may be raised since): its delta
        if self.target is not None and not (isinstance(self.target, tuple)
                                            and len(self.target) == 2
                                            and self.target[1] == self.delta):
            refuse("target", self.target, f"None or (eps, {self.delta!r})")
        # the columns, recomputed (a calibrated noise checked against the algorithm's budget)
        fresh = replace(self, sigma=stored, calibrated=False)
        try:
            cols = fresh._columns(rounds, target if void is None else None)
        except InvalidParameterError as exc:
            raise InvalidParameterError("ledger", f"the stored privacy ledger's noise does "
                                        f"not meet the run's budget: {exc.reason}") from None
        if not isinstance(self.columns, dict) or list(self.columns) != list(cols):
            refuse("its columns",
                   sorted(map(str, self.columns)) if isinstance(self.columns, dict)
                   else self.columns, list(cols))
        for name, want in cols.items():
            have = self.columns[name]
            if not (isinstance(have, np.ndarray) and have.shape == want.shape
                    and have.dtype == np.float64):
                refuse(f"column {name!r}", have, f"{want.size} float64 values")
            close = np.isclose(have, want, rtol=COLUMN_RTOL, atol=0.0, equal_nan=True)
            if not close.all():
                t = int(np.flatnonzero(~close)[0])
                refuse(f"column {name!r} at round {t}", float(have[t]), float(want[t]))

    @property
    def _key(self):         # what the ledger was planned from
        return (self.settings, None if self.calibrated else tuple(self.sigma.tolist()),
                self.delta, self.rounds, self.accountants, self.target, self.void)

    @classmethod
    def plan(cls, settings, sigma, *, delta, rounds, accountants, target=None, void=None,
             previous=None):
        """The ledger of a run; :class:`~rfl_fast.errors.InvalidParameterError` when the
        ``target`` cannot be reached (``param`` "target") or a given sigma spends more
        (``param`` "sigma").

        Parameters
        ----------
        settings : sequence of DPSettings
            Every client's.
        sigma : float, ndarray (n,) or None
            The noise; None: calibrated to ``target`` by the first of ``accountants``.
        delta, rounds, accountants, target, void
            See the class.
        previous : PrivacyLedger, optional
            Returned as it is when planned from the same arguments (no second calibration).
        """
        n = len(settings)
        given = None if sigma is None else np.broadcast_to(sigma, (n,)).astype(np.float64)
        led = cls(given, tuple(settings), float(delta), rounds, {}, tuple(accountants), target,
                  sigma is None, void)
        if previous is not None and previous._key == led._key:
            return previous
        if given is None:
            given, groups = np.empty(n), {}
            for i, st in enumerate(settings):
                groups.setdefault(st, []).append(i)
            for st, members in groups.items():
                try:
                    given[members] = Accountant.calibrate(target[0], delta, st, accountants[0])
                except ValueError as exc:
                    raise InvalidParameterError(
                        "target", f"{target} cannot be reached for client {members[0]} (N_i "
                        f"= {st.n_samples}): {exc}") from None
        given.setflags(write=False)
        led = replace(led, sigma=given)
        return replace(led, columns=led._columns(rounds, None if led.calibrated else target))

    def _columns(self, rounds, target=None):
        """The columns of ``rounds`` rounds; a ``target`` the first accountant's spend must
        not pass."""
        first, cols = {}, {}
        for i, key in enumerate(zip(self.settings, self.sigma.tolist())):
            first.setdefault(key, i)
        for kind in self.accountants:
            curve = np.zeros(rounds + 1)
            for (st, sig), i in first.items() if rounds else ():
                st = replace(st, rounds=rounds)
                trivial = None if kind == "seed" else _trivial_epsilon(sig, self.delta, st)
                c = (self.void if self.void is not None else trivial if trivial is not None
                     else _curve(kind, sig, self.delta, st, rounds))
                curve[1:] = np.maximum(curve[1:], c)
                spent = float(np.broadcast_to(c, (rounds,))[-1])
                if target is not None and kind == self.accountants[0] and \
                        not spent <= target[0] * (1 + 1e-9):
                    raise InvalidParameterError(
                        "sigma", f"{sig:.6g} cannot reach the privacy target {target}: over "
                        f"{rounds} rounds client {i} spends eps = {spent:.4g} ({kind} "
                        f"accountant); use sigma >= "
                        f"{Accountant.calibrate(target[0], self.delta, st, kind):.6g} or "
                        f"sigma=None to calibrate")
            cols[f"eps_{kind}"] = curve
        cols["delta"] = np.full(rounds + 1, self.delta)
        return cols

    def _check_sizes(self, sizes):
        planned = [st.n_samples for st in self.settings]
        if sizes != planned:
            raise InvalidParameterError(
                "problem", f"the privacy ledger was accounted for clients with N_i = "
                f"{brief(planned)} samples, the problem has {brief(sizes)}; resuming on other "
                f"data would keep the wrong eps columns")

    def resume(self, sizes, rounds, budget=None):
        """The ledger continued to ``rounds`` rounds, the noise kept (``self`` within its
        columns); :class:`~rfl_fast.errors.InvalidParameterError` for other ``N_i``
        (``param`` "problem") or a spend past the budget (``param`` "rounds").

        Parameters
        ----------
        sizes : array_like of int, shape (n,)
            The clients' ``N_i`` (the ledger's).
        rounds : int
            The new total.
        budget : float, optional
            Default: the target's eps, else what the plan spends.
        """
        self._check_sizes([int(v) for v in np.asarray(sizes)])
        rounds = check_int(rounds, "rounds", min_value=0)
        if rounds <= self.rounds:
            return self
        first = self.accountants[0]
        if budget is None:
            budget = self.target[0] if self.target else float(self.columns[f"eps_{first}"][-1])
        cols = self._columns(rounds)
        spent = float(cols[f"eps_{first}"][-1])
        if spent > budget * (1 + 1e-9):
            raise InvalidParameterError(
                "rounds", f"resuming to {rounds} rounds would spend eps = {spent:.4g} ({first} "
                f"accountant, delta = {self.delta:g}), past this run's budget eps = "
                f"{budget:.4g} (planned for {self.rounds} rounds); raise it explicitly: "
                f"resume(..., algorithm=result.algorithm.raise_budget(eps))")
        return replace(self, rounds=rounds, columns=cols)
