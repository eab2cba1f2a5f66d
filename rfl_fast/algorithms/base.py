"""The protocol every federated algorithm of rfl_fast follows, and shared helpers.

An algorithm is a small frozen dataclass of hyperparameters. It owns no mutable state: the
server state and the clients' persistent states are explicit values that its methods take and
return, so the same methods drive the batched simulation engine
(:func:`rfl_fast.federation.run`) and, one client at a time, a real deployment (a Flower
strategy on the server, a Flower client per device).

A round is at most three exchanges; the engine calls, in order::

    # optional first exchange (``has_prepare``), e.g. RFedSVRG's full-gradient gathering
    msg0                  = alg.prepare_message(problem, state, sctx)           # server
    up0, cstate, memo     = alg.client_prepare(problem, idx, msg0, cstate, cctx)  # clients
    state, msg            = alg.server_prepare(problem, state, idx, up0, sctx)  # server
    # otherwise
    msg                   = alg.broadcast(problem, state, sctx)                 # server
    # main exchange
    up, cstate, memo      = alg.client_update(problem, idx, msg, cstate, memo, cctx)
    state, fmsg           = alg.server_update(problem, state, idx, up, sctx)
    # optional notification (``has_finalize``), e.g. RFedProj's drift correction
    cstate                = alg.client_finalize(problem, idx, fmsg, cstate, memo, cctx)

* ``idx`` (k,) are the participating clients; client-side functions are batched over them:
  every array in ``up`` and in ``cstate`` has a leading axis of length k (row j belongs to
  client ``idx[j]``). With k = 1 they are the per-device computation.
* Messages (``msg0``, ``msg``, ``fmsg``) are dicts of arrays sent by the server, the same to
  every recipient; uploads are dicts of stacked arrays. The engine counts their floats and
  bytes, so an algorithm's communication is exactly what its messages hold.
* ``cstate`` is the clients' persistent state (dict of arrays, rows of the participants;
  initialized by ``init_clients`` for all n clients). Non-participants keep theirs.
* ``memo`` is what a client remembers within the round (never sent, dropped at round end).
* ``cctx`` (:class:`~rfl_fast.federation.context.ClientContext`) gives the round and
  per-client random streams; ``sctx`` (:class:`~rfl_fast.federation.context.ServerContext`)
  the round, the number of rounds and the server's stream.
* ``point(problem, state)`` is the server's current model (metrics are taken there);
  ``output(problem, state)`` the algorithm's final answer.

Set-up: ``validate(problem)`` raises before any work if the manifold lacks an ingredient or a
hyperparameter does not fit the data; ``for_run(problem, participation, rounds)`` fixes what
the run decides (RFedAGS's true ``p_i``, PriRFed's noise and privacy ledger, whose ``row(t)``
the driver adds to every history row: ``ledger``); ``init_server(problem, x0, sctx)`` and
``init_clients(problem, x0)`` build the initial states.

Deployment: ``array_kinds`` (class attribute) names the kind of every array of the messages and
uploads, for the arrival checks (:mod:`rfl_fast.federation.arrival`), and ``uploads`` the
arrays each exchange's upload holds (an upload must hold exactly those).

Extending: a new algorithm subclasses :class:`FederatedAlgorithm` and fills in the parts it
needs. Client state that must survive rounds (corrections, previous gradients, privacy
budgets) goes into ``init_clients``; server memory (previous point and gradient, observed
participation counts) into its own frozen server-state dataclass; the kinds of its message
and upload arrays into ``array_kinds`` and the names of each exchange's upload into
``uploads``.
"""

import math

import numpy as np

from .._validation import COUNT, POSITIVE, Checked, Choice
from ..errors import InvalidParameterError
from ..problems import Problem
from ._checks import inverse_pair
from .consensus import _stack, _tangent_step, karcher_mean, tangent_mean
from .schedules import as_schedule

__all__ = ["FederatedAlgorithm", "check_problem", "stacked", "participant_weights"]


def check_problem(problem, who):
    """The problem's manifold, after checking the problem is a :class:`Problem` with one."""
    if not isinstance(problem, Problem) or problem.manifold is None:
        raise TypeError(f"{who}: expected a rfl_fast Problem (with `manifold`, `sizes`, "
                        f"`rgrad`), got {type(problem).__name__}")
    return problem.manifold


def stacked(x, k):
    """A read-only view of one point ``x`` repeated ``k`` times: shape (k, *x.shape)."""
    return np.broadcast_to(x, (k,) + np.shape(x))


def participant_weights(problem, idx):
    """The problem's client weights over the participants, normalized to sum to one."""
    w = np.asarray(problem.weights, dtype=np.float64)[idx]
    return w / w.sum()


class FederatedAlgorithm(Checked):
    """Base class with the default (no-op) parts of the protocol; see the module docstring.

    Subclasses implement ``validate``, ``init_server``, ``broadcast`` (or the prepare
    exchange), ``client_update``, ``server_update`` and ``point``, and declare their
    hyperparameters' constraints in ``CHECKS`` (:class:`rfl_fast._validation.Checked`).
    """

    #: Whether a round starts with the prepare exchange.
    has_prepare = False
    #: Whether the server notifies the participants after aggregating.
    has_finalize = False
    #: Kind of every array of this algorithm's messages and uploads, checked on arrival by
    #: the engine (``check_uploads``) and a Flower deployment
    #: (:mod:`rfl_fast.federation.arrival`): ``"point"`` (on the manifold), ``"tangent"``
    #: (tangent at the server point), ``"ambient"`` (shape only, off the manifold) or
    #: ``"scalar"``. Names not listed are checked for shape and finiteness only.
    array_kinds = {}
    #: The arrays each exchange's upload holds, exactly: ``{"update": ("x",)}``, plus
    #: ``"prepare"`` with ``has_prepare`` (names of ``array_kinds``). A screened run and a
    #: deployment refuse an upload holding anything else (a missing or an extra array).
    uploads = {}
    #: Mini-batch size of the local gradients (``None``: full); a field of the algorithms
    #: that have one.
    batch_size = None
    #: Whether each client of a deployment runs it with its own privacy parameters
    #: (``for_private_client``; PriRFed): the client, never the server, picks its noise.
    client_owns_privacy = False
    #: The run-level budget the round driver consults, fixed by :meth:`for_run`: ``None``,
    #: or an object whose ``row(t)`` gives history row ``t``'s extra columns (PriRFed: its
    #: :class:`~rfl_fast.privacy.PrivacyLedger`, the privacy spent after each round).
    ledger = None

    @property
    def name(self):
        return type(self).__name__

    # ------------------------------------------------------------------ set-up
    def validate(self, problem):
        """Raise a clear error if this algorithm cannot run on ``problem`` (before any work).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        """

    def init_server(self, problem, x0, ctx):
        """The server state at round 0 from the initial point ``x0``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        x0 : ndarray, shape ``(*manifold.shape)``
            The initial point.
        ctx : rfl_fast.federation.ServerContext
            The round, the number of rounds and the server's random stream.

        Returns
        -------
        dataclass
            The server state at round 0.
        """
        raise NotImplementedError

    def init_clients(self, problem, x0):
        """Persistent client states for all n clients: dict of arrays with leading axis n.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        x0 : ndarray, shape ``(*manifold.shape)``
            The initial point.

        Returns
        -------
        dict of str to ndarray
            Persistent states of all n clients, each array with leading axis n (empty by
            default).
        """
        return {}

    # ------------------------------------------------------------------ the run
    def for_run(self, problem, participation, rounds, resumed=False):
        """The algorithm fixed for a run of ``rounds`` rounds, called once after
        :meth:`validate`, before any work: RFedAGS reads the true ``p_i`` of the
        participation, PriRFed fixes its noise and its :attr:`ledger`. Given an algorithm
        already fixed for the same run it returns it as it is. Default: ``self``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        participation : rfl_fast.federation.Participation
            The run's participation model.
        rounds : int
            Number of rounds (the new total of a resumed run).
        resumed : bool
            A checkpointed run continues: the algorithm is the run's, fixed for its first
            part (PriRFed continues its ledger, within its budget).

        Returns
        -------
        FederatedAlgorithm
        """
        return self

    def prepare_recipients(self, n, idx):
        """Clients the prepare exchange addresses (sorted, a superset of ``idx``; RFedSVRG
        gathers its full gradient from all ``n``). Default: the participants ``idx``. The
        prepare exchange's ``memo`` holds rows only (every value an array with a leading axis
        over the recipients), so that the participants' rows can be kept for
        ``client_update``.

        Parameters
        ----------
        n : int
            Number of clients.
        idx : ndarray of int, shape (k,)
            The round's participants.

        Returns
        -------
        ndarray of int
        """
        return idx

    # ------------------------------------------------------------------ prepare exchange
    def prepare_message(self, problem, state, ctx):
        """The server's message of the prepare exchange (``has_prepare``).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).
        ctx : rfl_fast.federation.ServerContext
            The round, the number of rounds and the server's random stream.

        Returns
        -------
        dict of str to ndarray
            The first exchange's message.
        """
        raise NotImplementedError

    def client_prepare(self, problem, idx, msg, cstate, ctx):
        """The participants' part of the prepare exchange: returns ``(upload, cstate, memo)``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            The server's message (the same for every recipient).
        cstate : dict of str to ndarray
            The participants' persistent states, each array with leading axis k.
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams.

        Returns
        -------
        upload : dict of str to ndarray
            Leading axis k.
        cstate : dict of str to ndarray
            Updated persistent states.
        memo : dict
            Kept for the main exchange of this round.
        """
        raise NotImplementedError

    def server_prepare(self, problem, state, idx, upload, ctx):
        """The server's part of the prepare exchange: returns ``(state, msg)``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).
        idx : ndarray of int, shape (k,)
            The participating clients.
        upload : dict of str to ndarray
            The participants' uploads, each array with leading axis k.
        ctx : rfl_fast.federation.ServerContext
            The round, the number of rounds and the server's random stream.

        Returns
        -------
        state : dataclass
            The new server state.
        msg : dict of str to ndarray
            The main exchange's message.
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ main exchange
    def broadcast(self, problem, state, ctx):
        """The message the server sends the round's recipients (dict of arrays).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).
        ctx : rfl_fast.federation.ServerContext
            The round, the number of rounds and the server's random stream.

        Returns
        -------
        dict of str to ndarray
            The message to the round's recipients.
        """
        raise NotImplementedError

    def client_update(self, problem, idx, msg, cstate, memo, ctx):
        """Local work of the participants: returns ``(upload, cstate, memo)``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            The server's message (the same for every recipient).
        cstate : dict of str to ndarray
            The participants' persistent states, each array with leading axis k.
        memo : dict
            What the participants remembered earlier in this round (never sent).
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams.

        Returns
        -------
        upload : dict of str to ndarray
            Leading axis k (counted as ``bytes_up``).
        cstate : dict of str to ndarray
            Updated persistent states.
        memo : dict
            Kept for ``client_finalize``.
        """
        raise NotImplementedError

    def server_update(self, problem, state, idx, upload, ctx):
        """Aggregate: returns ``(state, finalize_message_or_None)``.

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).
        idx : ndarray of int, shape (k,)
            The participating clients.
        upload : dict of str to ndarray
            The participants' uploads, each array with leading axis k.
        ctx : rfl_fast.federation.ServerContext
            The round, the number of rounds and the server's random stream.

        Returns
        -------
        state : dataclass
            The new server state.
        fmsg : dict of str to ndarray or None
            The notification for ``client_finalize`` (``has_finalize``), else ``None``.
        """
        raise NotImplementedError

    def client_finalize(self, problem, idx, msg, cstate, memo, ctx):
        """The participants' reaction to the server's notification (``has_finalize``).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        idx : ndarray of int, shape (k,)
            The participating clients.
        msg : dict of str to ndarray
            The server's message (the same for every recipient).
        cstate : dict of str to ndarray
            The participants' persistent states, each array with leading axis k.
        memo : dict
            What the participants remembered earlier in this round (never sent).
        ctx : rfl_fast.federation.ClientContext
            The round and the participants' random streams.

        Returns
        -------
        dict of str to ndarray
            The participants' updated persistent states.
        """
        return cstate

    # ------------------------------------------------------------------ points
    def point(self, problem, state):
        """The server's current model (where the per-round metrics are evaluated).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).

        Returns
        -------
        ndarray, shape ``(*manifold.shape)``
            The server's current model.
        """
        return state.x

    def output(self, problem, state):
        """The algorithm's output after the last round (default: the current model).

        Parameters
        ----------
        problem : rfl_fast.problems.Problem
            The federated problem.
        state : dataclass
            The server state (e.g. :class:`PointState`).

        Returns
        -------
        ndarray, shape ``(*manifold.shape)``
            The final answer.
        """
        return self.point(problem, state)

    # ------------------------------------------------------------------ mini-batches
    # helpers of the algorithms with a ``batch_size`` field (None: full local gradients)
    def _check_batch(self, problem):
        b = self.batch_size
        if b is None:
            return
        smallest = int(np.min(problem.sizes))
        if b > smallest:
            who = int(np.argmin(problem.sizes))
            raise InvalidParameterError(
                "batch_size", f"{b} is larger than the data of client {who} "
                f"({smallest} samples); use batch_size <= {smallest} or None (full local "
                f"gradients)", self.name)

    def _batch(self, problem, idx, ctx):
        """Mini-batch indices (k, b) of the participants ``idx`` (k,) from their own
        streams, or ``None`` for full local gradients."""
        b = self.batch_size
        if b is None:
            return None
        return ctx.rng.batches(np.asarray(problem.sizes)[idx], b)


class _RetractionBased(FederatedAlgorithm):
    """Shared parts of the algorithms that step with a retraction and aggregate by the
    tangent-space mean or the Karcher mean (Li & Ma's RFedAvg, RFedProx, RFedSVRG)."""

    CHECKS = {"step": as_schedule, "local_steps": COUNT,
              "consensus": Choice("tangent", "karcher"), "beta": POSITIVE,
              "karcher_tol": POSITIVE}

    def __post_init__(self):
        super().__post_init__()
        if self.consensus == "karcher" and self.beta != 1.0:
            raise InvalidParameterError("beta", f"{self.beta:g} applies to the tangent-space "
                                        f"mean only; the Karcher mean has no moving-average form "
                                        f"(Li & Ma 2022)", self.name)

    def _retraction(self, M):
        return inverse_pair(M, self.retraction, self.name)

    def _aggregate(self, problem, x, idx, points):
        """Consensus of the uploaded ``points`` (k, *shape) around the server point ``x``."""
        M = problem.manifold
        w = participant_weights(problem, idx)
        method = self._retraction(M)
        if self.consensus == "tangent":
            pts, total = _stack(M, points), w.sum()
            if pts.shape[:1] != w.shape or not 0.0 < total < math.inf or (w < 0).any():
                return tangent_mean(M, x, points, weights=w, beta=self.beta,
                                    retraction=method)          # which raises the error
            # beta and method were checked when the algorithm was built and specialized; the
            # weights are normalized again as tangent_mean's normalized_weights does
            return _tangent_step(M, x, pts, w / total, self.beta, method)
        return karcher_mean(M, points, x, weights=w, tol=self.karcher_tol,
                            retraction=method).x
