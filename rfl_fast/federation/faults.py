"""Fault injection for the simulation engine: clients that drop, are slow, or upload garbage.

Pass ``faults=Faults({client: kind, ...})`` to :func:`rfl_fast.federation.run`. The engine
then runs the main exchange's client work one client at a time, applies the fault to the
named clients' uploads, times each client (``client_deadline``) and checks every upload on
arrival (:func:`rfl_fast.federation.arrival.check_upload`); rejected clients are left out of
the round, with the reason in ``History.meta["rejected"]`` and the count in the column
``n_rejected``.

Kinds:

* ``"drop"``: nothing arrives;
* ``"nan"``: the first entry of every uploaded array is NaN;
* ``"off_manifold"``: every uploaded array is shifted by 0.1 (points leave the manifold,
  tangent vectors their tangent space; ambient arrays stay acceptable);
* ``"wrong_shape"``: every uploaded array loses its last entry along the last axis;
* ``"slow"``: the client sleeps ``delay`` seconds inside its timed client phase (rejected
  when ``client_deadline`` is shorter).
"""

import time
from dataclasses import dataclass

import numpy as np

from .._validation import NONNEGATIVE, Checked

__all__ = ["Faults", "FAULT_KINDS"]

FAULT_KINDS = ("drop", "nan", "off_manifold", "wrong_shape", "slow")


@dataclass(frozen=True, eq=False)
class Faults(Checked):
    """Which clients misbehave, how, and when.

    Parameters
    ----------
    plan : dict of int to str
        Client id -> one of :data:`FAULT_KINDS`.
    rounds : iterable of int, optional
        Rounds (0-based) in which the faults happen; ``None`` (default): every round.
    delay : float
        Seconds a ``"slow"`` client sleeps (>= 0).
    """

    plan: dict
    rounds: object = None
    delay: float = 0.05

    CHECKS = {"delay": NONNEGATIVE}

    def __post_init__(self):
        super().__post_init__()
        plan = {}
        for client, kind in dict(self.plan).items():
            if kind not in FAULT_KINDS:
                raise ValueError(f"Faults: client {client}: unknown fault {kind!r}; expected "
                                 f"one of {FAULT_KINDS}")
            plan[int(client)] = kind
        object.__setattr__(self, "plan", plan)
        if self.rounds is not None:
            object.__setattr__(self, "rounds", frozenset(int(r) for r in self.rounds))

    def __repr__(self):
        return f"Faults(plan={self.plan}, rounds={self.rounds}, delay={self.delay:g})"

    def kind(self, t, client):
        """The fault of ``client`` in round ``t``.

        Parameters
        ----------
        t : int
            Round (0-based).
        client : int
            Client id.

        Returns
        -------
        str or None
            One of :data:`FAULT_KINDS`, or ``None`` if the client behaves in round ``t``.
        """
        if self.rounds is not None and int(t) not in self.rounds:
            return None
        return self.plan.get(int(client))

    def apply(self, t, client, upload):
        """``upload`` as it arrives at the server (a ``"slow"`` client sleeps ``delay`` first).

        Parameters
        ----------
        t : int
            Round (0-based).
        client : int
            Client id.
        upload : dict of str to ndarray
            One client's upload (no leading client axis).

        Returns
        -------
        dict of str to ndarray or None
            ``upload`` itself (no fault, ``"slow"``), ``None`` (``"drop"``), or float64 copies
            with the fault applied: a NaN first entry (``"nan"``), ``+ 0.1`` everywhere
            (``"off_manifold"``) or the last axis shortened by one (``"wrong_shape"``).
        """
        kind = self.kind(t, client)
        if kind is None:
            return upload
        if kind == "drop":
            return None
        if kind == "slow":
            time.sleep(self.delay)
            return upload
        out = {}
        for name, value in upload.items():
            a = np.array(value, dtype=np.float64)
            if kind == "nan":
                a.reshape(-1)[:1] = np.nan
            elif kind == "off_manifold":
                a = a + 0.1
            else:  # wrong_shape
                a = a[..., :-1]
            out[name] = a
        return out
