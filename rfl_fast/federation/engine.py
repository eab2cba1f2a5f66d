"""The federated round loop: :func:`run` orchestrates an algorithm over a problem.

The engine holds no algorithm logic. Per round ``t`` it

1. draws the participants ``S_t`` (participation stream);
2. runs the algorithm's exchanges (see :mod:`rfl_fast.algorithms.base`): server message ->
   batched client work over all of ``S_t`` -> uploads -> server aggregation (and the
   optional prepare and finalize exchanges);
3. keeps the clients' persistent states (rows of the participants are replaced, the others
   kept);
4. accounts for communication (floats and bytes of every message times its recipients, every
   upload), CPU and wall time, and records the problem's metrics at the server's model.

Rounds where nobody takes part (``Bernoulli`` participation) keep the server state unchanged;
their row records the broadcast that went unanswered and ``n_participants = 0``.

Optional algorithm hooks (looked up with ``getattr``, so algorithms without them are
unaffected):

* ``algorithm.for_participation(participation, n) -> algorithm`` is called once before
  ``validate``; an algorithm that needs to know the participation model (RFedAGS reading the
  true ``p_i``) returns a specialized copy of itself, which the run then uses (and reports in
  ``Result.algorithm``).
* ``algorithm.prepare_recipients(n, idx) -> ids`` (sorted, a superset of ``idx``) names the
  clients the prepare exchange addresses (default: the participants ``idx``). RFedSVRG's
  full gradient ``grad f(x_t)`` is gathered from all ``n`` clients this way. The prepare
  exchange then runs batched over those ids; their persistent client rows are updated, and
  the within-round ``memo`` it returns must hold per-recipient rows only (every value an array
  with a leading axis over the recipients): the engine keeps the participants' rows for
  ``client_update``.
* ``algorithm.for_run(problem, participation, rounds) -> algorithm`` is called once after
  ``validate``, before any work; an algorithm that must fix something for the whole run (PriRFed:
  calibrating its noise to a privacy budget over ``rounds`` rounds, refusing impossible
  budgets) returns a specialized copy, which the run then uses.
* ``algorithm.for_resume(problem, participation, rounds) -> algorithm`` is called instead
  when a checkpointed run is resumed (e.g. PriRFed extends its privacy ledger, or refuses
  rounds past its budget);
* ``algorithm.history_row(problem, state, t) -> dict`` gives extra history columns for row
  ``t`` (0 = the initial point, then after each round); the keys of row 0 name the columns
  (PriRFed: the cumulative privacy spent, ``eps_rdp``, ``delta``, ...).
"""

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._typing import ArrayLike, FloatArray
from .._validation import check_int, check_positive
from ..algorithms._checks import check_point_arg
from ..algorithms.base import FederatedAlgorithm
from ..algorithms.participation import Full, Participation, as_participation
from ..kernels import limit_blas_threads
from ..problems import Problem
from . import checkpoint as _ckpt
from .arrival import check_upload, kinds_of
from .context import (STREAM_INIT, STREAM_PARTICIPATION, STREAM_SERVER, ClientContext,
                      ServerContext, resolve_seed, stream)
from .faults import Faults
from .history import BASE_COLUMNS, History

__all__ = ["run", "resume", "Result"]


@dataclass(frozen=True)
class Result:
    """Outcome of :func:`run`.

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
        The final persistent client states (leading axis n).
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


def _size(msg):
    """(floats, bytes) held by a message or upload (dict of arrays)."""
    if not msg:
        return 0, 0
    arrs = [np.asarray(a) for a in msg.values()]
    return sum(a.size for a in arrs), sum(a.nbytes for a in arrs)


class _Metrics:
    """Calls ``problem.metrics``; a problem without a known solution gets ``grad_norm`` only."""

    def __init__(self, problem):
        self.problem = problem
        self.full = True
        self.note = None

    def __call__(self, x):
        if self.full:
            try:
                return dict(self.problem.metrics(x))
            except NotImplementedError as exc:  # e.g. no `solution()`: keep the gradient norm
                self.full = False
                self.note = f"problem.metrics unavailable ({type(exc).__name__}: {exc})"
        M = self.problem.manifold
        return {"grad_norm": float(M.norm(x, self.problem.grad(x)))}


def _screened_exchange(algorithm, problem, state, idx, msg, rows, memo, seed, t, sctx, cstore,
                       faults, deadline, kinds, acc, up, down, log):
    """The main exchange with per-client timing and arrival checks (``check_uploads``).

    Each participant's ``client_update`` runs alone (its rows of ``rows`` and of the prepare
    ``memo``, its own random stream), the fault injector is applied, and the upload is checked
    with :func:`~rfl_fast.federation.arrival.check_upload`. The accepted clients' uploads are
    aggregated; only they are notified (finalize) and have their persistent rows updated.
    Returns ``(state, client CPU seconds)``.
    """
    M = problem.manifold
    base = algorithm.point(problem, state)
    accepted, cpu = [], 0.0
    for j, i in enumerate(idx):
        one = idx[j:j + 1]
        rows_j = {name: arr[j:j + 1] for name, arr in rows.items()}
        memo_j = None if memo is None else {name: np.asarray(v)[j:j + 1]
                                            for name, v in memo.items()}
        ctx_j = ClientContext.create(seed, t, one)
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            upl, rows_j, memo_j = algorithm.client_update(problem, one, msg, rows_j, memo_j,
                                                          ctx_j)
            reason = None
        except Exception as exc:  # noqa: BLE001 - any client error leaves that client out
            upl, reason = None, f"client error: {type(exc).__name__}: {exc}"
        if faults is not None:
            upl = faults.apply(t, i, upl) if upl is not None else None
        wall = time.perf_counter() - w0
        cpu += time.process_time() - c0
        if upl is not None:
            up(upl)
        if reason is None and deadline is not None and wall > deadline:
            reason = f"timeout: client phase {wall:.3g} s > deadline {deadline:g} s"
        if reason is None:
            reason = check_upload(M, upl, kinds, base=base, rows=1)
        if reason is None:
            accepted.append((j, upl, rows_j, memo_j, ctx_j))
        else:
            log.append([t + 1, int(i), reason])
            acc["n_rejected"] = acc.get("n_rejected", 0) + 1
    acc.setdefault("n_rejected", 0)
    if not accepted:
        return state, cpu
    ok = idx[[a[0] for a in accepted]]
    upl = {name: np.concatenate([a[1][name] for a in accepted]) for name in accepted[0][1]}
    state, fmsg = algorithm.server_update(problem, state, ok, upl, sctx)
    if algorithm.has_finalize and fmsg is not None:
        down(fmsg, len(accepted))
    for j, _, rows_j, memo_j, ctx_j in accepted:
        if algorithm.has_finalize and fmsg is not None:
            c0 = time.process_time()
            rows_j = algorithm.client_finalize(problem, idx[j:j + 1], fmsg, rows_j, memo_j,
                                               ctx_j)
            cpu += time.process_time() - c0
        for name, arr in rows_j.items():
            cstore[name][idx[j]] = arr[0]
    return state, cpu


def first_message(algorithm, problem, state, sctx, n, idx, prepare_recipients):
    """The round's first server message: ``(pidx, msg, cpu)``. ``msg`` is the prepare message
    (algorithms with a prepare exchange) or the broadcast, ``cpu`` the server CPU seconds it
    took, ``pidx`` the clients the prepare exchange reaches (``prepare_recipients(n, idx)`` if
    given, else the participants ``idx``). Shared by ``run`` and the Flower server."""
    pidx = idx
    if algorithm.has_prepare and idx.size > 0 and prepare_recipients is not None:
        pidx = np.asarray(prepare_recipients(n, idx), dtype=np.int64)
    c0 = time.process_time()
    msg = (algorithm.prepare_message(problem, state, sctx) if algorithm.has_prepare
           else algorithm.broadcast(problem, state, sctx))
    return pidx, msg, time.process_time() - c0


def _check_rounds(rounds):
    return check_int(rounds, "rounds", min_value=0)


def run(problem: Problem, algorithm: FederatedAlgorithm, rounds: int,
        participation: Participation = Full(), x0: ArrayLike | None = None,
        seed: int | None = 0, metrics: bool = True, metrics_every: int = 1,
        callback: Callable[[int, np.ndarray, dict[str, Any]], bool | None] | None = None, *,
        checkpoint: str | os.PathLike[str] | None = None, checkpoint_every: int = 1,
        faults: Faults | None = None, client_deadline: float | None = None,
        check_uploads: bool | None = None, blas_threads: int | None = 1,
        _resume: Any = None) -> Result:
    """Run ``algorithm`` on ``problem`` for ``rounds`` communication rounds.

    Parameters
    ----------
    problem : Problem
        The federated objective (its ``manifold``, clients, gradients and metrics).
    algorithm : FederatedAlgorithm
        E.g. ``RFedAvg(step=0.1, local_steps=5)``.
    rounds : int
        Number of communication rounds (>= 0).
    participation : Participation
        ``Full()`` (default), ``Uniform(k)`` or ``Bernoulli(p)``.
    x0 : ndarray, M.shape, optional
        Initial server point (checked: shape and on the manifold); default a random point
        from the seed's init stream.
    seed : int or None
        Root of all randomness (participation, server draws, mini-batches, ``x0``); the same
        seed gives bit-identical histories (except the timing columns) and iterates. ``None``
        draws fresh entropy, reported as ``Result.seed``.
    metrics : bool
        Record ``problem.metrics`` (grad norm, f - f*, distance, angle, ...) of the server's
        model every ``metrics_every`` rounds, at round 0 and at the last round; NaN elsewhere.
        Their cost is timed separately (``wall_metrics``), not in the round's times.
    metrics_every : int
        Spacing of metric rows (>= 1).
    callback : callable, optional
        ``callback(t, x, row)`` after round ``t`` (1-based) with the server's model ``x`` and
        the round's row (dict); returning ``True`` stops the run.
    checkpoint : str or os.PathLike, optional
        Write the run's full state there after every ``checkpoint_every``-th round and after
        the last round (atomically; see :mod:`rfl_fast.federation.checkpoint`);
        ``rfl_fast.federation.resume(checkpoint, problem)`` continues bit-identically.
    checkpoint_every : int
        Rounds between checkpoints (>= 1).
    faults : Faults, optional
        Injected client faults (:class:`rfl_fast.federation.faults.Faults`), for tests.
    client_deadline : float, optional
        Seconds a participant's client phase (main exchange) may take, measured per client;
        slower clients are rejected (the simulation measures, it does not interrupt).
    check_uploads : bool, optional
        Check every main-exchange upload on arrival
        (:func:`rfl_fast.federation.arrival.check_upload`) and leave rejected clients out of
        the round. Default: on when ``faults`` or ``client_deadline`` is given. When on, the
        main exchange's client work runs one client at a time (so it can be timed and
        screened per client); the history gains the column ``n_rejected`` and
        ``History.meta["rejected"]`` lists ``[round, client, reason]``. A round without an
        accepted upload keeps the server state; rejected clients keep their persistent state.
    blas_threads : int or None
        Most threads BLAS (NumPy/SciPy's OpenBLAS/MKL) may use while the rounds run (default
        1; ``None`` leaves the process's setting). The compiled kernels run their own threads;
        BLAS worker threads, which keep spinning for a while after each call, would take their
        cores (measured at the MNIST kPCA shape, RFedAvg: 36 -> 23 ms per round), and the
        engine's BLAS calls are on per-client matrices too small to gain from threads.

    Returns
    -------
    Result

    Notes
    -----
    Accounting per round (columns of ``Result.history``):

    * ``floats_down``/``bytes_down``: every server message times its recipients (the first
      broadcast of a round reaches all ``n`` clients under ``Bernoulli`` participation, the
      participants otherwise); ``floats_up``/``bytes_up``: every upload of every participant.
    * ``cpu_server``: process CPU time of the server's functions (message, aggregation).
    * ``cpu_clients_max``: the papers' "max over agents" CPU time. The participants run as one
      batched computation over the client axis, so this is the CPU time of the batched client
      work divided by the number of participants k: the per-client cost when clients cost
      alike (all the built-in problems with equal client sizes); with unequal client sizes it
      is the mean, a lower bound of the max. A prepare exchange addressed to more clients than
      the participants (``prepare_recipients``) adds its batched CPU time divided by its
      number of recipients. "CPU time = server + max agent" is
      ``cpu_server + cpu_clients_max``.
    * A prepare exchange addressed to ``r`` clients counts its first message ``r`` times
      (``max(r, recipients)``) and ``r`` uploads.
    * ``wall``: wall time of the round (excluding metrics); ``wall_metrics``: of the metrics.

    CPU times are ``time.process_time`` (all threads of the process, so multi-threaded BLAS
    counts every thread).
    """
    # ---------------------------------------------------------------- checks, before any work
    if not hasattr(algorithm, "client_update") or not hasattr(algorithm, "server_update"):
        raise TypeError(f"algorithm: expected a federated algorithm (e.g. RFedAvg(...)), "
                        f"got {type(algorithm).__name__}")
    M = getattr(problem, "manifold", None)
    if M is None or not hasattr(problem, "n_clients"):
        raise TypeError(f"problem: expected a rfl_fast Problem, got {type(problem).__name__}")
    rounds = _check_rounds(rounds)
    participation = as_participation(participation)
    n = int(problem.n_clients)
    participation.validate(n)
    if _resume is None:  # (a resumed run's algorithm is already specialized)
        specialize = getattr(algorithm, "for_participation", None)
        if specialize is not None:
            algorithm = specialize(participation, n)
    algorithm.validate(problem)
    start = getattr(algorithm, "for_run", None)
    if start is not None and _resume is None:
        algorithm = start(problem, participation, rounds)
    elif _resume is not None and hasattr(algorithm, "for_resume"):
        algorithm = algorithm.for_resume(problem, participation, rounds)  # e.g. extend a ledger
    if checkpoint is not None:
        checkpoint_every = check_int(checkpoint_every, "checkpoint_every", min_value=1)
    if client_deadline is not None:
        client_deadline = check_positive(client_deadline, "client_deadline")
    screen = (faults is not None or client_deadline is not None) if check_uploads is None \
        else bool(check_uploads)
    metrics_every = check_int(metrics_every, "metrics_every", min_value=1)
    if blas_threads is not None:
        blas_threads = check_int(blas_threads, "blas_threads", min_value=1)
    if callback is not None and not callable(callback):
        raise TypeError("callback: expected a callable callback(t, x, row)")
    seed = resolve_seed(seed)
    if x0 is None:
        x0 = M.random_point(rng=stream(seed, STREAM_INIT))
    x0 = check_point_arg(M, x0, "x0")

    # ---------------------------------------------------------------- set-up
    prepare_recipients = getattr(algorithm, "prepare_recipients", None)
    prng = stream(seed, STREAM_PARTICIPATION)
    srng = stream(seed, STREAM_SERVER)
    if _resume is None:
        state = algorithm.init_server(problem, x0, ServerContext(0, rounds, srng))
        cstore = {k: np.array(v) for k, v in algorithm.init_clients(problem, x0).items()}
    else:
        state, cstore = _resume["state"], {k: np.array(v) for k, v in
                                           _resume["client_state"].items()}
        prng.bit_generator.state = _resume["prng"]
        srng.bit_generator.state = _resume["srng"]
    measure = _Metrics(problem) if metrics else None

    def metric_row(t, st):
        if measure is None or not (t % metrics_every == 0 or t == rounds):
            return {}
        w0 = time.perf_counter()
        row = measure(algorithm.point(problem, st))
        row["wall_metrics"] = time.perf_counter() - w0
        return row

    history_row = getattr(algorithm, "history_row", None)

    def algorithm_row(t, st):
        return {} if history_row is None else dict(history_row(problem, st, t))

    if _resume is None:
        first = {**metric_row(0, state), **algorithm_row(0, state)}
        extra = [c for c in first if c not in BASE_COLUMNS] + (["n_rejected"] if screen else [])
        hist = History._building(BASE_COLUMNS + tuple(extra),
                                 meta={"algorithm": repr(algorithm),
                                       "participation": repr(participation),
                                       "problem": type(problem).__name__, "manifold": repr(M),
                                       "n_clients": n, "seed": seed, "rounds": rounds,
                                       "metrics_every": metrics_every})
        if screen:
            hist.meta["rejected"] = []
        hist._append({"round": 0, "cpu_server": 0.0, "cpu_clients_max": 0.0, "wall": 0.0,
                      **first})
        t_start = 0
    else:
        saved = _resume["history"]
        hist = History._building(tuple(saved["columns"]), meta=saved["meta"])
        hist._cols = {c: v.tolist() for c, v in saved["columns"].items()}
        t_start = _resume["round"]
        if screen and "n_rejected" not in hist._cols:
            raise ValueError("resume: the checkpointed run did not check uploads; resume it "
                             "without faults/client_deadline/check_uploads")
        hist.meta["rounds"] = rounds
    kinds = kinds_of(algorithm)

    def save(t):
        _ckpt.save(checkpoint, _ckpt.state_payload(
            round=t, seed=seed, rounds=rounds, metrics=metrics, metrics_every=metrics_every,
            algorithm=algorithm, participation=participation, x0=x0, state=state,
            client_state=cstore, history=hist, prng=prng, srng=srng))

    # ---------------------------------------------------------------- rounds
    done = rounds
    with limit_blas_threads(blas_threads):
        for t in range(t_start, rounds):
            w0 = time.perf_counter()
            idx = participation.sample(prng, n)
            k = int(idx.size)
            sctx = ServerContext(t, rounds, srng)
            acc = {"round": t + 1, "n_participants": k, "cpu_server": 0.0, "cpu_clients_max": 0.0,
                   "floats_up": 0, "floats_down": 0, "bytes_up": 0, "bytes_down": 0}
            recipients = participation.recipients(n, k)

            def down(msg, count):
                fl, by = _size(msg)
                acc["floats_down"] += fl * count
                acc["bytes_down"] += by * count

            def up(msg):
                fl, by = _size(msg)
                acc["floats_up"] += fl
                acc["bytes_up"] += by

            cpu_c = cpu_p = 0.0
            pidx, msg, cpu_s = first_message(algorithm, problem, state, sctx, n, idx,
                                             prepare_recipients)
            down(msg, max(recipients, pidx.size) if algorithm.has_prepare else recipients)
            if k > 0:
                cctx = ClientContext.create(seed, t, idx)
                memo = None
                if algorithm.has_prepare and pidx.size != k:
                    # the prepare exchange reaches more clients than take part (e.g. all n)
                    prows = {name: arr[pidx] for name, arr in cstore.items()}
                    c0 = time.process_time()
                    upl, prows, memo = algorithm.client_prepare(
                        problem, pidx, msg, prows, ClientContext.create(seed, t, pidx))
                    cpu_p = (time.process_time() - c0) / pidx.size
                    up(upl)
                    for name, arr in prows.items():
                        cstore[name][pidx] = arr
                    keep = np.searchsorted(pidx, idx)
                    memo = {name: np.asarray(v)[keep] for name, v in memo.items()}
                    c0 = time.process_time()
                    state, msg = algorithm.server_prepare(problem, state, pidx, upl, sctx)
                    cpu_s += time.process_time() - c0
                    down(msg, k)
                rows = {name: arr[idx] for name, arr in cstore.items()}
                if algorithm.has_prepare and pidx.size == k:
                    c0 = time.process_time()
                    upl, rows, memo = algorithm.client_prepare(problem, idx, msg, rows, cctx)
                    cpu_c += time.process_time() - c0
                    up(upl)
                    c0 = time.process_time()
                    state, msg = algorithm.server_prepare(problem, state, idx, upl, sctx)
                    cpu_s += time.process_time() - c0
                    down(msg, k)
                if screen:
                    c0 = time.process_time()
                    state, cpu = _screened_exchange(
                        algorithm, problem, state, idx, msg, rows, memo, seed, t, sctx, cstore,
                        faults, client_deadline, kinds, acc, up, down, hist.meta["rejected"])
                    cpu_s += time.process_time() - c0 - cpu
                    cpu_c += cpu
                else:
                    c0 = time.process_time()
                    upl, rows, memo = algorithm.client_update(problem, idx, msg, rows, memo, cctx)
                    cpu_c += time.process_time() - c0
                    up(upl)
                    c0 = time.process_time()
                    state, fmsg = algorithm.server_update(problem, state, idx, upl, sctx)
                    cpu_s += time.process_time() - c0
                    if algorithm.has_finalize and fmsg is not None:
                        down(fmsg, k)
                        c0 = time.process_time()
                        rows = algorithm.client_finalize(problem, idx, fmsg, rows, memo, cctx)
                        cpu_c += time.process_time() - c0
                    for name, arr in rows.items():
                        cstore[name][idx] = arr
                cpu_c = cpu_c / k + cpu_p
            acc["cpu_server"], acc["cpu_clients_max"] = cpu_s, cpu_c
            acc["wall"] = time.perf_counter() - w0
            row = {**acc, **metric_row(t + 1, state), **algorithm_row(t + 1, state)}
            hist._append(row)
            if checkpoint is not None and ((t + 1) % checkpoint_every == 0 or t + 1 == rounds):
                save(t + 1)
            if callback is not None and \
                    callback(t + 1, algorithm.point(problem, state), row) is True:
                done = t + 1
                break

    hist.meta["rounds"] = done
    if measure is not None and measure.note:
        hist.meta["metrics_note"] = measure.note
    return Result(x=algorithm.output(problem, state), history=hist._freeze(),
                  algorithm=algorithm, seed=seed, rounds=done, participation=participation,
                  x0=x0, state=state, client_state=cstore)


def resume(path: str | os.PathLike[str], problem: Problem, rounds: int | None = None, *,
           callback: Callable[[int, np.ndarray, dict[str, Any]], bool | None] | None = None,
           checkpoint: str | os.PathLike[str] | None = None,
           checkpoint_every: int | None = None, algorithm: FederatedAlgorithm | None = None,
           **run_kwargs: Any) -> Result:
    """Continue the run checkpointed at ``path`` on ``problem``.

    Parameters
    ----------
    path : str or os.PathLike
        A checkpoint written by ``run(..., checkpoint=path)``.
    problem : Problem
        The same problem (data are not stored in the checkpoint).
    rounds : int, optional
        Total number of rounds (default: the original run's). Algorithms that read the total
        when the run starts (PriRFed's noise calibration, RFedSVRG's global option 2) keep
        their original set-up.
    callback : callable, optional
        As in :func:`~rfl_fast.federation.run`.
    checkpoint : str or os.PathLike, optional
        Where to keep checkpointing (default: ``path``).
    checkpoint_every : int, optional
        Default: 1.
    algorithm : FederatedAlgorithm, optional
        Use this algorithm object instead of the stored one (needed for algorithm classes
        outside ``rfl_fast``; it must be the run's specialized algorithm,
        ``Result.algorithm``).
    **run_kwargs
        ``faults``, ``client_deadline``, ``check_uploads`` as in ``run``.

    Returns
    -------
    Result
        As if the run had not been interrupted (``history`` holds every round from 0).
    """
    trusted = {"rfl_fast"}
    if algorithm is not None:
        trusted.add(type(algorithm).__module__)
    payload = _ckpt.load(path, trusted=trusted)
    if algorithm is not None:
        payload["algorithm"] = algorithm
    total = payload["rounds"] if rounds is None else rounds
    return run(problem, payload["algorithm"], total, payload["participation"],
               x0=payload["x0"], seed=payload["seed"], metrics=payload["metrics"],
               metrics_every=payload["metrics_every"], callback=callback,
               checkpoint=path if checkpoint is None else checkpoint,
               checkpoint_every=1 if checkpoint_every is None else checkpoint_every,
               _resume=payload, **run_kwargs)
