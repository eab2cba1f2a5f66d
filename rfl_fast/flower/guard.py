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
  assumed, since the client cannot check the server's sampling), by dp-accounting's RDP
  (replace-one, batches without replacement), and refuses the round if the total would exceed
  the budget. What the server chooses (``K``, batch size, rounds, how often it asks) can only
  cost utility (refusals), never privacy;
* **ledger**: the client's :class:`~rfl_fast.privacy.Accountant` (its saved state: the RDP
  spent at each order), the released rounds and the count live in a JSON file
  (``dp-ledger`` node config, required), written atomically *before* the update is computed,
  so a crash or a restart never forgets a release. A missing file starts at zero; an
  unreadable one is an error (never a silent reset).

Node config keys: ``dp-sigma`` (> 0), ``dp-clip`` (> 0), ``dp-epsilon`` (> 0), ``dp-delta``
(in (0, 1)), ``dp-ledger`` (path), ``dp-seed`` (optional int >= 0; reproducible noise for tests
and audits, which then must stay secret).
"""

import json
import math
import os
import secrets

from .._files import atomic_write
from .._validation import brief
from ..privacy import Accountant

__all__ = ["ClientPrivacy", "PrivacyRefused", "KEYS"]

KEYS = ("dp-sigma", "dp-clip", "dp-epsilon", "dp-delta", "dp-ledger", "dp-seed")
LEDGER_VERSION = 2


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
        """The ledger dict (its ``"accountant"`` restored, an :class:`Accountant`), or
        ``None`` when the file does not exist yet.

        Raises
        ------
        ValueError
            The file exists but is not a ledger of this client (never reset silently).
        """
        path = self.ledger_path
        if not os.path.exists(path):
            return None
        try:
            with open(path, encoding="utf-8") as fh:
                led = json.load(fh)
            ok = (isinstance(led, dict) and led.get("version") == LEDGER_VERSION
                  and int(led["client"]) == self.cid and int(led["releases"]) >= 0
                  and isinstance(led["epsilon_spent"], (int, float))
                  and all(isinstance(t, int) for t in led["released_rounds"]))
            if ok:
                led["accountant"] = Accountant.restore(led["accountant"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise ValueError(f"privacy ledger {path}: unreadable ({brief(str(exc))}); refusing "
                             f"to run rather than forget what was spent") from None
        if not ok:
            raise ValueError(f"privacy ledger {path}: not a version-{LEDGER_VERSION} ledger of "
                             f"client {self.cid}; refusing to run rather than forget what "
                             f"was spent")
        return led

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
        led = self.read_ledger() or {"releases": 0, "released_rounds": [],
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
        led = {"version": LEDGER_VERSION, "client": self.cid, "accountant": acc.state(),
               "released_rounds": led["released_rounds"] + [int(t)],
               "releases": int(led["releases"]) + 1, "epsilon_spent": eps, "delta": self.delta}

        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(led, fh)
        os.makedirs(os.path.dirname(os.path.abspath(self.ledger_path)), exist_ok=True)
        atomic_write(self.ledger_path, write, fsync=True)
        return led
