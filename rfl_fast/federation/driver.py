"""The one round driver of a federated run, for the simulation and for a deployment.

:class:`RoundDriver` runs the rounds of :func:`rfl_fast.federation.run` and of the Flower
server (:func:`rfl_fast.flower.server.run_federation`); only the :class:`Link` that
reaches the clients differs. Per round ``t`` it

1. draws the participants ``S_t`` (participation stream);
2. runs the algorithm's exchanges (:mod:`rfl_fast.algorithms.base`): the optional prepare
   exchange with ``prepare_recipients(n, S_t)`` (RFedSVRG's full gradient from all ``n``), the
   main exchange (``broadcast`` or ``server_prepare``'s message -> ``client_update`` ->
   ``server_update``) and the optional finalize notification;
3. leaves out every client that fails (raises, does not answer, misses the deadline) or whose
   upload fails the arrival checks (:func:`~rfl_fast.federation.arrival.check_upload`, the
   upload holding exactly the arrays the algorithm declares for the exchange,
   ``FederatedAlgorithm.uploads``, whatever the others send): the
   reason goes to ``History.meta["rejected"]`` as ``[round, client, reason]`` (prefixed with
   the exchange, ``"prepare: "`` or ``"finalize: "``, outside the main one), the count to the
   column ``n_rejected``, and the round goes on with the others (a round without an accepted
   upload keeps the server state; a client left out keeps its persistent state);
4. records the round's row: accounting, metrics, the columns of the algorithm's ``ledger``
   (the run-level budget ``for_run`` fixed: PriRFed's privacy spent).

Links: :class:`InProcess` (the clients' hooks in this process, batched over all
addressed clients -- the fast path -- or one client at a time, timed and screened) and
:class:`rfl_fast.flower.server.MessageLink` (over the network).

Accounting (the history's columns):

* ``floats_down``/``bytes_down``: every server message times its recipients: the first message
  reaches ``participation.recipients(n, k)`` clients (all ``n`` under ``Bernoulli``, which
  the server cannot predict; at least the prepare exchange's recipients), later ones the
  clients they address; ``floats_up``/``bytes_up``: every upload that arrives, accepted or not;
* ``cpu_server``: CPU time of the server's hooks; ``cpu_clients_max``: the largest client CPU
  time of the round (a batched call counts its CPU time divided by its clients for each);
* ``wall``: the round's wall time (metrics excluded, ``wall_metrics``).
"""

import time
from dataclasses import dataclass, field

import numpy as np

from .._typing import FloatArray
from ..algorithms.base import FederatedAlgorithm
from ..errors import ParameterError
from .arrival import check_upload, kinds_of
from .context import (STREAM_INIT, STREAM_PARTICIPATION, STREAM_SERVER, ClientContext,
                      ServerContext, stream)
from .history import BASE_COLUMNS, History

__all__ = ["RoundDriver", "Link", "Replies", "InProcess", "Result", "specialize",
           "initial_point", "check_point_arg", "message_size", "upload_names"]


@dataclass(frozen=True)
class Result:
    """Outcome of a federated run (:func:`rfl_fast.federation.run`).

    Parameters
    ----------
    x : ndarray, M.shape
        The algorithm's output after the last round (e.g. ``P_M(xhat_{R+1})`` for RFedProj,
        a uniformly drawn iterate for RFedSVRG's global option 2).
    history : History
        Per-round metrics and accounting (row 0: the initial point).
    algorithm : FederatedAlgorithm
        The algorithm (its hyperparameters).
    seed : int
        The root seed; ``run(..., seed=result.seed)`` repeats the run bit for bit.
    rounds : int
        Rounds run (fewer than requested if the callback stopped the run).
    participation : Participation
        Who took part each round.
    x0 : ndarray, M.shape
        The initial point.
    state : object
        The final server state.
    client_state : dict of str to ndarray
        The final persistent client states (leading axis n; empty when they live on the
        clients of a deployment).
    """

    x: FloatArray
    history: History
    algorithm: object
    seed: int
    rounds: int
    participation: object
    x0: FloatArray
    state: object
    client_state: dict


def message_size(msg):
    """(floats, bytes) held by a message or upload (dict of arrays, or None)."""
    arrs = [np.asarray(a) for a in (msg or {}).values()]
    return sum(a.size for a in arrs), sum(a.nbytes for a in arrs)


def specialize(problem, algorithm, participation, rounds, resumed=False):
    """The algorithm as a run uses it: ``validate``, then ``for_run`` (which returns an
    algorithm already fixed for this run as it is: built once, checked once). An error about
    one of its arguments names the algorithm (``ParameterError.owner``).

    Parameters
    ----------
    problem : Problem
        The problem (the server's view of it in a deployment).
    algorithm : FederatedAlgorithm
        As the user gave it, or as an earlier ``specialize`` returned it.
    participation : Participation
        The run's participation model (validated).
    rounds : int
        Total number of rounds.
    resumed : bool
        Whether a checkpointed run continues.

    Returns
    -------
    FederatedAlgorithm
    """
    if not isinstance(algorithm, FederatedAlgorithm):
        raise TypeError(f"algorithm: expected a federated algorithm (e.g. RFedAvg(...)), "
                        f"got {type(algorithm).__name__}")
    try:
        algorithm.validate(problem)
        return algorithm.for_run(problem, participation, rounds, resumed=resumed)
    except ParameterError as exc:
        raise (exc if exc.owner else exc.within(algorithm.name)) from None


def initial_point(M, x0, seed):
    """``x0`` as one checked point of ``M`` (:func:`check_point_arg`), or the seed's
    init-stream point when it is None.

    Parameters
    ----------
    M : Manifold
    x0 : array_like or None
    seed : int
        The run's root seed.

    Returns
    -------
    ndarray, M.shape
    """
    return check_point_arg(M, M.random_point(rng=stream(seed, STREAM_INIT)) if x0 is None
                           else x0, "x0")


def check_point_arg(M, x, name):
    """``x`` as one float point of ``M`` (exactly ``M.shape``, finite, on the manifold)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected a real array, got dtype {arr.dtype}")
    arr = np.array(arr, dtype=np.float64)
    if arr.shape != M.shape:
        raise ValueError(f"{name}: expected one point of {M!r} of shape {M.shape}, "
                         f"got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: contains NaN or inf")
    ok, reason = M.check_point(arr)
    if not ok:
        raise ValueError(f"{name}: not a point of {M!r}: {reason}")
    return arr


# ---------------------------------------------------------------------------- transports

@dataclass
class Replies:
    """What came back from one exchange.

    Parameters
    ----------
    ids : list of int
        Clients that answered, in request order.
    uploads : list of dict
        Their uploads, one per client of ``ids`` (arrays with a leading axis of 1).
    stacked : dict of str to ndarray, optional
        Instead of ``uploads``, from a batch computed in this process: the uploads stacked
        (leading axis ``len(ids)``), trusted (not checked on arrival).
    failed : list of (int, str)
        Clients that failed, and why.
    cpu : dict of int to float
        CPU seconds each client spent.
    """

    ids: list = field(default_factory=list)
    uploads: list = field(default_factory=list)
    stacked: dict | None = None
    failed: list = field(default_factory=list)
    cpu: dict = field(default_factory=dict)


class Link:
    """How the server reaches the clients, which hold their persistent states. A screening
    link (Flower, :class:`InProcess` per client) reports a client that fails in
    :attr:`Replies.failed`; the unscreened batched :class:`InProcess` raises its error."""

    def exchange(self, phase, t, ids, msg, fresh):
        """Send ``msg`` to the clients ``ids`` and collect their uploads.

        Parameters
        ----------
        phase : {"prepare", "update"}
            ``client_prepare``, or ``client_update`` (with the round's prepare memo).
        t : int
            The round (0-based).
        ids : ndarray of int, shape (m,)
            The addressed clients, sorted.
        msg : dict of str to ndarray
            The server's message.
        fresh : bool
            The clients start their random streams ``(seed, t, i)`` afresh; else they
            continue them from the round's prepare exchange.

        Returns
        -------
        Replies
        """
        raise NotImplementedError

    def finish(self, t, ids, fmsg):
        """End round ``t`` for the clients ``ids`` whose main upload was accepted: they keep
        their new persistent state (the others their earlier one) and, when ``fmsg`` is not
        None, run ``client_finalize`` on it, continuing their streams.

        Parameters
        ----------
        t : int
        ids : ndarray of int, shape (m,)
        fmsg : dict of str to ndarray or None

        Returns
        -------
        Replies
            No uploads.
        """
        raise NotImplementedError


def _why(exc):
    return f"client error: {type(exc).__name__}: {exc}"


def _same(a, b):
    """Whether the id arrays ``a`` and ``b`` are equal: ``np.isin(a, b).all()`` for the sorted
    unique ids of an exchange, ~1 us instead of isin's ~25 us on a few ids."""
    return a.shape == b.shape and bool((a == b).all())


def _rows(d, have, want):
    """Rows ``want`` of ``d`` (dict of arrays, leading axis over the sorted ids ``have``)."""
    if d is None or np.array_equal(have, want):
        return d
    pos = np.searchsorted(have, want)
    return {name: np.asarray(v)[pos] for name, v in d.items()}


class InProcess(Link):
    """The clients' hooks run in this process on the problem's data.

    Batched (default, unscreened): one call of a hook for all the addressed clients (the fast
    path); an exception is raised to the caller (in a simulation of trusted code a raising hook
    is a bug, not a client to leave out). ``per_client=True`` (screened): one client at a time,
    each timed; a client that raises is left out with its reason, the main exchange's uploads
    get the injected ``faults`` and a client slower than ``deadline`` seconds is left out (the
    simulation measures, it does not interrupt).

    Parameters
    ----------
    problem : Problem
        The problem, with every client's data.
    algorithm : FederatedAlgorithm
        The run's algorithm.
    seed : int
        The run's root seed (the clients' streams ``(seed, t, i)``).
    cstore : dict of str to ndarray
        The persistent states of all n clients (leading axis n), updated in place.
    per_client : bool
    faults : Faults, optional
    deadline : float, optional
    """

    def __init__(self, problem, algorithm, seed, cstore, *, per_client=False, faults=None,
                 deadline=None):
        self.problem, self.algorithm, self.seed, self.cstore = problem, algorithm, seed, cstore
        self.per_client, self.faults, self.deadline = per_client, faults, deadline
        self._t = None

    def exchange(self, phase, t, ids, msg, fresh):
        if t != self._t:       # by client: the prepare memos and the main exchange's results
            self._t, self._memo, self._held = t, {}, {}
        if fresh:
            self._pool = {}    # the round's random generators, by client
        return self._run(phase, t, ids, msg)

    def finish(self, t, ids, fmsg):
        if fmsg is not None:
            return self._run("finalize", t, ids, fmsg)
        for group in {id(g): g for g in map(self._held.get, ids.tolist())}.values():
            have, rows, _ = group
            if _same(have, ids):             # every client of the batch accepted
                self._commit(have, rows)
                continue
            keep = np.isin(have, ids)
            self._commit(have[keep], rows if keep.all() else
                         {name: arr[keep] for name, arr in rows.items()})
        return Replies(ids.tolist())

    def _run(self, phase, t, ids, msg):
        if not self.per_client:  # unscreened: a raising hook is a bug, raised to the caller
            up, cpu = self._call(phase, t, ids, msg)
            return Replies(ids.tolist(), stacked=up, cpu=dict.fromkeys(ids.tolist(), cpu))
        rep = Replies()
        for i in ids.tolist():
            w0 = time.perf_counter()
            try:
                up, rep.cpu[i] = self._call(phase, t, np.array([i], dtype=np.int64), msg)
                if phase == "update" and self.faults is not None:
                    up = self.faults.apply(t, i, up)
            except Exception as exc:  # noqa: BLE001 - any client error leaves that client out
                rep.failed.append((i, _why(exc)))
                continue
            wall = time.perf_counter() - w0
            if phase == "update" and self.deadline is not None and wall > self.deadline:
                rep.failed.append((i, f"timeout: client phase {wall:.3g} s > deadline "
                                      f"{self.deadline:g} s"))
            else:
                rep.ids.append(i)
                rep.uploads.append(up)
        return rep

    def _call(self, phase, t, ids, msg):
        """The client hook of ``phase`` for the clients ``ids`` together: ``(upload, CPU
        seconds per client)``. Keeps the results by client until the round needs them."""
        alg, P = self.algorithm, self.problem
        if phase == "finalize":             # (the main exchange's group: the same clients)
            _, rows, memo = self._held[int(ids[0])]
        else:
            rows = {name: arr[ids] for name, arr in self.cstore.items()}
            have, memo = self._memo.get(int(ids[0]), (ids, None))
            memo = _rows(memo, have, ids)
        ctx = ClientContext.create(self.seed, t, ids, self._pool)
        c0 = time.process_time()
        if phase == "prepare":
            up, rows, memo = alg.client_prepare(P, ids, msg, rows, ctx)
        elif phase == "update":
            up, rows, memo = alg.client_update(P, ids, msg, rows, memo, ctx)
        else:
            up, rows = None, alg.client_finalize(P, ids, msg, rows, memo, ctx)
        cpu = (time.process_time() - c0) / ids.size
        if phase == "update":
            self._held.update(dict.fromkeys(ids.tolist(), (ids, rows, memo)))
        else:
            self._commit(ids, rows)
        if phase == "prepare":
            self._memo.update(dict.fromkeys(ids.tolist(), (ids, memo)))
        return up, cpu

    def _commit(self, ids, rows):
        for name, arr in rows.items():
            self.cstore[name][ids] = arr


# ---------------------------------------------------------------------------- the driver

class _Metrics:
    """Calls ``problem.metrics``; a problem without a known solution gets ``grad_norm`` only."""

    def __init__(self, problem):
        self.problem = problem
        self.note = None

    def __call__(self, x):
        if self.note is None:
            try:
                return dict(self.problem.metrics(x))
            except NotImplementedError as exc:  # e.g. no `solution()`: keep the gradient norm
                self.note = f"problem.metrics unavailable ({type(exc).__name__}: {exc})"
        M = self.problem.manifold
        return {"grad_norm": float(M.norm(x, self.problem.grad(x)))}


class _Tally:
    """One round's row in the making: counts, server CPU, client CPU, exclusions."""

    def __init__(self, t, k):
        self.t = t
        self.row = {"round": t + 1, "n_participants": k, "n_rejected": 0, "cpu_server": 0.0,
                    "floats_up": 0, "floats_down": 0, "bytes_up": 0, "bytes_down": 0}
        self.cpu, self.rejected = {}, []

    def down(self, msg, count):
        fl, by = message_size(msg)
        self.row["floats_down"] += fl * count
        self.row["bytes_down"] += by * count

    def up(self, upload):
        fl, by = message_size(upload)
        self.row["floats_up"] += fl
        self.row["bytes_up"] += by

    def server(self, hook, *args):
        c0 = time.process_time()
        out = hook(*args)
        self.row["cpu_server"] += time.process_time() - c0
        return out

    def heard(self, rep, phase):
        for i, s in rep.cpu.items():
            self.cpu[i] = self.cpu.get(i, 0.0) + s
        for i, why in rep.failed:
            self.reject(i, phase, why)

    def reject(self, i, phase, why):
        self.rejected.append([self.t + 1, int(i), why if phase == "update" else f"{phase}: {why}"])
        self.row["n_rejected"] += 1


def upload_names(algorithm, phase):
    """The arrays ``algorithm``'s upload of exchange ``phase`` holds, exactly (its
    ``uploads``); ``TypeError`` when it does not declare them."""
    names = type(algorithm).uploads.get(phase)
    if names is None or not all(n in algorithm.array_kinds for n in names):
        raise TypeError(f"{algorithm.name}: declare the arrays of its {phase!r} upload in the "
                        f"class attribute `uploads` (names of `array_kinds`), e.g. uploads = "
                        f"{{'update': ('x',)}}; screened runs and deployments accept exactly "
                        f"those")
    return tuple(names)


class RoundDriver:
    """The rounds of one federated run over a :class:`Link` (module docstring).

    Parameters
    ----------
    problem : Problem
        The problem the server hooks see (a deployment's :class:`RemoteProblem`).
    algorithm : FederatedAlgorithm
        Specialized for the run (:func:`specialize`).
    participation : Participation
    link : Link
    seed : int
        The run's root seed (participation and server streams).
    rounds : int
        Total number of rounds.
    metrics : Problem, optional
        Record ``metrics.metrics`` at the server's model every ``metrics_every`` rounds, at
        round 0 and at the last round (NaN elsewhere).
    metrics_every : int
    atol : float
        Tolerance of the arrival checks.
    log : callable, optional
        ``log(str)`` for every client left out.

    After :meth:`start` (or setting ``state``, the streams and ``history`` of a checkpoint),
    :meth:`run` plays the rounds; ``state``, ``prng``, ``srng``, ``history`` and ``done``
    (rounds played) are the run's state between rounds.
    """

    def __init__(self, problem, algorithm, participation, link, *, seed, rounds,
                 metrics=None, metrics_every=1, atol=1e-7, log=None):
        self.problem, self.algorithm = problem, algorithm
        self.participation, self.link = participation, link
        self.seed, self.rounds, self.n = seed, rounds, int(problem.n_clients)
        self.measure = None if metrics is None else _Metrics(metrics)
        self.metrics_every, self.atol, self.log = metrics_every, atol, log
        self.kinds = kinds_of(algorithm)
        self.prng = stream(seed, STREAM_PARTICIPATION)
        self.srng = stream(seed, STREAM_SERVER)
        self.state = self.history = None
        self.done = 0

    def start(self, x0, meta=None):
        """The server state at ``x0`` and the history's row 0; ``meta`` adds to its meta."""
        alg, P = self.algorithm, self.problem
        self.state = alg.init_server(P, x0, ServerContext(0, self.rounds, self.srng))
        first = self._extra_row(0)
        extra = tuple(c for c in first if c not in BASE_COLUMNS)
        self.history = History._building(BASE_COLUMNS + extra, meta={
            "algorithm": repr(alg), "participation": repr(self.participation),
            "problem": type(P).__name__, "manifold": repr(P.manifold), "n_clients": self.n,
            "seed": self.seed, "rounds": self.rounds, "metrics_every": self.metrics_every,
            "rejected": [], **(meta or {})})
        self.history._append({"round": 0, "cpu_server": 0.0, "cpu_clients_max": 0.0,
                              "wall": 0.0, **first})

    def run(self, after_round=None):
        """Play the rounds from ``done`` on; ``after_round(t, row)`` returning True stops.
        Freezes the history."""
        hist = self.history
        for t in range(self.done, self.rounds):
            w0 = time.perf_counter()
            row, rejected = self.play(t)
            row["wall"] = time.perf_counter() - w0
            row.update(self._extra_row(t + 1))
            hist._append(row)
            hist.meta["rejected"].extend(rejected)
            self.done = t + 1
            if after_round is not None and after_round(t + 1, row) is True:
                break
        hist.meta["rounds"] = self.done
        if self.measure is not None and self.measure.note:
            hist.meta["metrics_note"] = self.measure.note
        return hist._freeze()

    def play(self, t):
        """Round ``t`` (0-based): updates ``state``; returns its row and exclusions."""
        alg, P = self.algorithm, self.problem
        idx = self.participation.sample(self.prng, self.n)
        k = int(idx.size)
        sctx = ServerContext(t, self.rounds, self.srng)
        tally = _Tally(t, k)
        first = self.participation.recipients(self.n, k)
        pidx = idx
        if alg.has_prepare:
            if k > 0:
                pidx = np.asarray(alg.prepare_recipients(self.n, idx), dtype=np.int64)
            msg = tally.server(alg.prepare_message, P, self.state, sctx)
            first = max(first, pidx.size)
        else:
            msg = tally.server(alg.broadcast, P, self.state, sctx)
        tally.down(msg, first)
        if k > 0:
            self._exchanges(t, idx, pidx, msg, sctx, tally)
        tally.row["cpu_clients_max"] = max(tally.cpu.values(), default=0.0)
        if self.log is not None:
            for _, i, why in tally.rejected:
                self.log(f"round {t + 1}: client {i}: {why}")
        return tally.row, tally.rejected

    def _exchanges(self, t, idx, pidx, msg, sctx, tally):
        """The exchanges of round ``t`` with the participants ``idx`` (prepare: ``pidx``)."""
        alg, P, clients = self.algorithm, self.problem, self.link
        ids = idx
        if alg.has_prepare:
            got, upload = self._accept(clients.exchange("prepare", t, pidx, msg, True),
                                       "prepare", tally)
            if got.size == 0:
                return
            self.state, msg = tally.server(alg.server_prepare, P, self.state, got, upload,
                                           sctx)
            ids = idx if _same(idx, got) else idx[np.isin(idx, got)]
            tally.down(msg, ids.size)
            if ids.size == 0:
                return
        fresh = not (alg.has_prepare and pidx.size == idx.size)
        got, upload = self._accept(clients.exchange("update", t, ids, msg, fresh), "update",
                                   tally)
        fmsg = None
        if got.size > 0:
            self.state, fmsg = tally.server(alg.server_update, P, self.state, got, upload, sctx)
            fmsg = fmsg if alg.has_finalize else None
            tally.down(fmsg, got.size)
        tally.heard(clients.finish(t, got, fmsg), "finalize")

    def _accept(self, rep, phase, tally):
        """The accepted clients of an exchange (ndarray) and their stacked uploads."""
        tally.heard(rep, phase)
        if rep.stacked is not None:                   # a batch computed in place: trusted
            tally.up(rep.stacked)
            return np.asarray(rep.ids, dtype=np.int64), rep.stacked
        names = upload_names(self.algorithm, phase)
        good, base = [], None
        for i, up in zip(rep.ids, rep.uploads):
            tally.up(up)
            if base is None:                          # tangent vectors: at the server point
                base = self.algorithm.point(self.problem, self.state)
            why = check_upload(self.problem.manifold, up, self.kinds, base=base, rows=1,
                               expect=names, exact=True, atol=self.atol)
            if why is None:
                good.append((i, up))
            else:
                tally.reject(i, phase, why)
        if not good:
            return np.zeros(0, dtype=np.int64), None
        stacked = {name: np.concatenate([up[name] for _, up in good]) for name in names}
        return np.array([i for i, _ in good], dtype=np.int64), stacked

    def _extra_row(self, t):
        """Row ``t``'s metrics (when due) and the columns of the algorithm's ledger."""
        row = {}
        if self.measure is not None and (t % self.metrics_every == 0 or t == self.rounds):
            w0 = time.perf_counter()
            row = self.measure(self.algorithm.point(self.problem, self.state))
            row["wall_metrics"] = time.perf_counter() - w0
        ledger = self.algorithm.ledger
        return row if ledger is None else {**row, **ledger.row(t)}
