"""The client's own privacy in a deployment: its secret, its noise, its budget, its ledger.

A Flower server is not trusted with a client's privacy. A node whose node config sets any
``dp-*`` key runs only private algorithms (``client_owns_privacy``, i.e. PriRFed) and refuses
every other one (:class:`~rfl_fast.flower.client.NodePolicy`); for a private algorithm the
client takes nothing privacy-relevant from the server:

* **randomness**: the client's stream is ``ClientRandom(secret, t, [i])`` with ``secret`` from the
  SuperNode's own ``dp-seed`` node config, else 128 bits of OS entropy drawn per message. The
  server's ``seed`` is ignored, so it can neither regenerate the noise nor choose it. A round
  number is released at most once (the ledger remembers them): two answers with the same
  ``(secret, t)`` noise on different server points would cancel the noise in their difference;
* **noise and clipping**: ``sigma`` and ``tau`` from the node config (``dp-sigma``, ``dp-clip``);
  the server's ``alg.sigma`` / ``clip`` are ignored (sending ``sigma = 0`` changes nothing);
* **budget**: ``(dp-epsilon, dp-delta)`` from the node config. Before each update the client
  accounts the round it is about to run with the parameters it will actually use (``K``, its
  batch size of its ``N_i`` samples, its ``sigma`` and ``tau``; participation in every round
  assumed, since the client cannot check the server's sampling), by RDP (dp-accounting's
  formulas, :mod:`rfl_fast.privacy.rdp`; replace-one, batches without replacement), and refuses the round if the total would exceed
  the budget. What the server chooses (``K``, batch size, rounds, how often it asks) can only
  cost utility (refusals), never privacy;
* **ledger**: the client's :class:`~rfl_fast.privacy.Accountant` (its saved state: the RDP
  spent at each order), the released rounds and the count live in a JSON file
  (``dp-ledger`` node config, required), written atomically *before* the update is computed,
  so a crash or a restart never forgets a release. A missing file starts at zero; an
  unreadable one is an error (never a silent reset).

Node config keys: ``dp-sigma`` (> 0), ``dp-clip`` (> 0), ``dp-epsilon`` (> 0), ``dp-delta``
(in (0, 1)), ``dp-ledger`` (path), ``dp-seed`` (optional int >= 0; reproducible noise for tests
and audits, which then must stay secret). A key that looks like one but is not (``dp_sigma``,
``DP-SIGMA``, ``dp-sigam``, ``dpclip``: any key beginning with "dp" once case and separators
are dropped) is refused (:func:`private_keys`): a typo must not make a node non-private.

The ledger file records, besides the accountant's state, every mechanism charged (its sigma,
its DPSettings and how many rounds); reading it rebuilds the accountant from those events
through DPSettings' own checks and refuses a file whose stored RDP, epsilon, release count or
rounds disagree with the recomputation, naming the field.
"""

import json
import math
import os
import re
import secrets
from dataclasses import asdict

import numpy as np

from .._files import atomic_write
from .._validation import brief
from ..privacy import Accountant, DPSettings

__all__ = ["ClientPrivacy", "PrivacyRefused", "KEYS", "private_keys"]

KEYS = ("dp-sigma", "dp-clip", "dp-epsilon", "dp-delta", "dp-ledger", "dp-seed")
LEDGER_VERSION = 3
#: Relative difference allowed between a ledger file's stored RDP / epsilon and the values
#: recomputed from its events (another machine's rounding; a tampered value differs more).
LEDGER_RTOL = 1e-9


def private_keys(node_config):
    """The ``dp-*`` keys a node config sets (sorted; empty: the node is not private).

    Raises
    ------
    ValueError
        A key that looks like a privacy key but is none of :data:`KEYS` (its letters and
        digits, lower-cased, begin with "dp"): refused, naming it and the known keys, rather
        than ignored (the node would silently run without its privacy).
    """
    found = []
    for key in node_config:
        name = str(key)
        if name in KEYS:
            found.append(name)
        elif re.sub(r"[^a-z0-9]", "", name.casefold()).startswith("dp"):
            raise ValueError(f"node config {brief(name)}: not a privacy key of rfl_fast (known: "
                             f"{', '.join(KEYS)}); refusing to run rather than ignore it (a "
                             f"misspelt key would leave this node without its privacy)")
    return tuple(sorted(found))


class PrivacyRefused(RuntimeError):
    """The client refuses a round: its budget would be exceeded, or a round is repeated."""


def _num(node_config, key, check, what):
    if key not in node_config:
        raise ValueError(f"node config {key!r}: this client runs a private algorithm and needs "
                         f"its own {what} (start the SuperNode with --node-config "
                         f"'... {key}=<value>'); the server's value is not trusted")
    try:
        v = float(node_config[key])
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"node config {key!r}: expected a number ({what}), got "
                         f"{brief(node_config[key])}") from None
    if not check(v):
        raise ValueError(f"node config {key!r}: {what} out of range: "
                         f"{brief(node_config[key])}")
    return v


class ClientPrivacy:
    """The privacy settings of one SuperNode, from its node config (module docstring).

    Parameters
    ----------
    node_config : mapping
    cid : int
        The client id this node holds.
    """

    def __init__(self, node_config, cid):
        private_keys(node_config)
        self.cid = int(cid)
        self.sigma = _num(node_config, "dp-sigma", lambda v: 0 < v < math.inf,
                          "noise standard deviation sigma > 0")
        self.clip = _num(node_config, "dp-clip", lambda v: 0 < v < math.inf,
                         "clipping threshold tau > 0")
        self.epsilon = _num(node_config, "dp-epsilon", lambda v: 0 < v < math.inf,
                            "privacy budget epsilon > 0")
        self.delta = _num(node_config, "dp-delta", lambda v: 0 < v < 1,
                          "privacy budget delta in (0, 1)")
        if not str(node_config.get("dp-ledger", "")).strip():
            raise ValueError("node config 'dp-ledger': this client runs a private algorithm and "
                             "needs a file for its privacy ledger (what it has spent, kept "
                             "across restarts), e.g. dp-ledger='/var/lib/rfl/client0.json'")
        self.ledger_path = os.path.expanduser(str(node_config["dp-ledger"]))
        seed = node_config.get("dp-seed")
        if seed is None:
            self._seed = None
        else:
            # the messages never show the value: it is a secret, and errors reach the server
            try:
                self._seed = int(seed)
            except (TypeError, ValueError, OverflowError):
                raise ValueError("node config 'dp-seed': expected an int >= 0 (value not "
                                 "shown: it is secret)") from None
            if self._seed < 0:
                raise ValueError("node config 'dp-seed': expected an int >= 0 (value not "
                                 "shown: it is secret)")

    def secret(self):
        """The root of the client's random stream: ``dp-seed`` or fresh OS entropy."""
        return self._seed if self._seed is not None else secrets.randbits(128)

    # ------------------------------------------------------------------ ledger

    def read_ledger(self):
        """The ledger dict (its ``"accountant"`` rebuilt from its ``"events"``, an
        :class:`Accountant`), or ``None`` when the file does not exist yet.

        Raises
        ------
        ValueError
            The file exists but is not a ledger of this client, or its stored values disagree
            with those recomputed from its events (never reset silently).
        """
        path = self.ledger_path
        if not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as fh:
                led = json.load(fh)
            ok = (isinstance(led, dict) and led.get("version") == LEDGER_VERSION
                  and type(led.get("client")) is int and led["client"] == self.cid)
            if ok:
                led["accountant"] = self._rebuilt(led)
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise ValueError(f"privacy ledger {path}: unreadable ({brief(str(exc))}); refusing "
                             f"to run rather than forget what was spent") from None
        if not ok:
            raise ValueError(f"privacy ledger {path}: not a version-{LEDGER_VERSION} ledger of "
                             f"client {self.cid}; refusing to run rather than forget what "
                             f"was spent")
        return led

    @staticmethod
    def _rebuilt(led):
        """The accountant of the ledger dict ``led`` (from a file), recomputed from its events
        and checked against what the file states (``ValueError`` naming the field)."""
        def disagree(field, stored, computed):
            raise ValueError(f"{field} is {brief(stored)}, its events give {brief(computed)}")

        events, rounds = led["events"], led["released_rounds"]
        if not isinstance(events, list) or not isinstance(rounds, list):
            raise ValueError("'events' and 'released_rounds' must be lists")
        acc = Accountant("rdp")
        for ev in events:
            if not (isinstance(ev, dict) and set(ev) == {"sigma", "settings", "rounds"}
                    and isinstance(ev["settings"], dict) and type(ev["rounds"]) is int
                    and ev["rounds"] >= 1):
                raise ValueError(f"event {brief(ev)}: expected {{'sigma', 'settings', "
                                 f"'rounds' >= 1}}")
            acc.charge(ev["sigma"], DPSettings(**ev["settings"]), ev["rounds"])
        if not all(type(t) is int and t >= 0 for t in rounds) or len(set(rounds)) != len(rounds):
            raise ValueError("'released_rounds' must be distinct ints >= 0")
        if type(led["releases"]) is not int or led["releases"] != len(rounds):
            disagree("releases", led["releases"], len(rounds))
        if acc.rounds != len(rounds):
            disagree("the number of released rounds", len(rounds), acc.rounds)
        state = acc.state()
        stored = led["accountant"]
        if not isinstance(stored, dict) or Accountant.restore(stored).rounds != acc.rounds:
            disagree("accountant.rounds", brief(stored), acc.rounds)
        have, want = np.asarray(stored["rdp"], dtype=np.float64), np.asarray(state["rdp"])
        if not np.allclose(have, want, rtol=LEDGER_RTOL, atol=0.0):
            disagree("accountant.rdp", have, want)
        delta = led["delta"] if events else None
        eps = acc.epsilon(delta) if events else 0.0
        spent = led["epsilon_spent"]
        if not isinstance(spent, (int, float)) or isinstance(spent, bool) or not (
                spent == eps or abs(spent - eps) <= LEDGER_RTOL * abs(eps)):
            disagree("epsilon_spent", spent, eps)
        return acc

    def charge(self, round_settings, t):
        """Account one round before running it; returns the updated ledger (as written).

        Parameters
        ----------
        round_settings : rfl_fast.privacy.DPSettings
            The round this client is about to run (one round, ``clients_per_round =
            n_clients = 1``, its own ``tau``).
        t : int
            The round number the server asked for (released at most once).

        Raises
        ------
        PrivacyRefused
            The round was released already, or the budget would be exceeded.
        """
        led = self.read_ledger() or {"releases": 0, "released_rounds": [], "events": [],
                                     "accountant": Accountant("rdp"), "epsilon_spent": 0.0}
        if int(t) in led["released_rounds"]:
            raise PrivacyRefused(f"client {self.cid}: round {t} was released already; a second "
                                 f"answer with fresh data would break the accounting")
        acc = led["accountant"].charge(self.sigma, round_settings)
        eps = acc.epsilon(self.delta)
        if not eps <= self.epsilon:
            raise PrivacyRefused(
                f"client {self.cid}: round {t} would spend eps = {eps:.4g} in total (delta = "
                f"{self.delta:g}), over this client's budget eps = {self.epsilon:g}; refused "
                f"(ledger {self.ledger_path}: {led['releases']} rounds released, eps = "
                f"{led['epsilon_spent']:.4g})")
        events = [dict(ev) for ev in led["events"]]
        event = {"sigma": self.sigma, "settings": asdict(round_settings)}
        if events and {k: events[-1][k] for k in event} == event:
            events[-1]["rounds"] += 1
        else:
            events.append({**event, "rounds": 1})
        led = {"version": LEDGER_VERSION, "client": self.cid, "accountant": acc.state(),
               "events": events, "released_rounds": led["released_rounds"] + [int(t)],
               "releases": int(led["releases"]) + 1, "epsilon_spent": eps, "delta": self.delta}

        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(led, fh)
        os.makedirs(os.path.dirname(os.path.abspath(self.ledger_path)), exist_ok=True)
        atomic_write(self.ledger_path, write, fsync=True)
        return led
