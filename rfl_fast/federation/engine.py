"""The simulation: :func:`run` drives an algorithm over a problem in this process.

The rounds are :class:`~rfl_fast.federation.driver.RoundDriver`'s, the one round driver a
Flower deployment uses too; the clients run in this process
(:class:`~rfl_fast.federation.driver.InProcess`): batched over the participants (the fast
path), or one client at a time, timed and checked on arrival (``check_uploads``). The run keeps
the clients' persistent states (rows of the participants replaced, the others kept), records
the problem's metrics at the server's model and can checkpoint and resume bit-identically.

Rounds where nobody takes part (``Bernoulli`` participation) keep the server state unchanged;
their row records the broadcast that went unanswered and ``n_participants = 0``.

The algorithm's optional parts are members of
:class:`~rfl_fast.algorithms.base.FederatedAlgorithm` with defaults: ``for_run`` (fix the
algorithm for the run, or continue a resumed one), ``ledger`` (the run-level budget whose
``row(t)`` extends every history row: PriRFed's privacy ledger) and ``prepare_recipients``
(who the prepare exchange reaches).
"""

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .._typing import ArrayLike
from .._validation import check_int, check_positive
from ..algorithms.base import FederatedAlgorithm, check_problem
from ..algorithms.participation import Full, Participation, as_participation
from ..kernels import limit_blas_threads, warm_up
from ..problems import Problem
from . import checkpoint as _ckpt
from .context import resolve_seed
from .driver import InProcess, Result, RoundDriver, initial_point, specialize
from .faults import Faults
from .history import History

__all__ = ["run", "resume"]


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
        Run the clients one at a time, timed, and check every upload on arrival
        (:func:`rfl_fast.federation.arrival.check_upload`). Default: on when ``faults`` or
        ``client_deadline`` is given. Checked, a client that raises or sends a bad upload is
        left out of the round, as in a Flower deployment: the column ``n_rejected`` counts the
        clients left out, ``History.meta["rejected"]`` lists ``[round, client, reason]``. A
        round without an accepted upload keeps the server state; a client left out keeps its
        persistent state. Unchecked (batched), the clients are trusted code: a hook that
        raises stops the run with its error.
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
      participants otherwise); ``floats_up``/``bytes_up``: every upload that arrives
      (accepted or not).
    * ``cpu_server``: process CPU time of the server's functions (message, aggregation).
    * ``cpu_clients_max``: the papers' "max over agents" CPU time: the largest CPU time a
      client spent in the round. A batched call counts its CPU time divided by its number of
      clients for each of them: the per-client cost when clients cost alike (all the built-in
      problems with equal client sizes); with unequal client sizes it is the mean, a lower
      bound of the max. "CPU time = server + max agent" is ``cpu_server + cpu_clients_max``.
    * A prepare exchange addressed to ``r`` clients counts its first message ``r`` times
      (``max(r, recipients)``) and ``r`` uploads.
    * ``wall``: wall time of the round (excluding metrics); ``wall_metrics``: of the metrics.

    CPU times are ``time.process_time`` (all threads of the process, so multi-threaded BLAS
    counts every thread).
    """
    # ---------------------------------------------------------------- checks, before any work
    M = check_problem(problem, "problem")
    rounds = check_int(rounds, "rounds", min_value=0)
    participation = as_participation(participation)
    participation.validate(int(problem.n_clients))
    algorithm = specialize(problem, algorithm, participation, rounds, _resume is not None)
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
    x0 = initial_point(M, x0, seed)

    # ---------------------------------------------------------------- set-up
    source = algorithm.init_clients(problem, x0) if _resume is None else _resume["client_state"]
    cstore = {k: np.array(v) for k, v in source.items()}
    clients = InProcess(problem, algorithm, seed, cstore, per_client=screen, faults=faults,
                        deadline=client_deadline)
    driver = RoundDriver(problem, algorithm, participation, clients, seed=seed, rounds=rounds,
                         metrics=problem if metrics else None, metrics_every=metrics_every)
    if _resume is None:
        driver.start(x0)
    else:
        _restore(driver, _resume)

    def after_round(t, row):
        if checkpoint is not None and (t % checkpoint_every == 0 or t == rounds):
            _ckpt.save(checkpoint, _ckpt.state_payload(
                round=t, seed=seed, rounds=rounds, metrics=metrics, metrics_every=metrics_every,
                algorithm=algorithm, participation=participation, x0=x0, state=driver.state,
                client_state=cstore, history=driver.history, prng=driver.prng,
                srng=driver.srng, problem=problem))
        return callback is not None and \
            callback(t, algorithm.point(problem, driver.state), row) is True

    warm_up()  # backends load before the first timed round, not inside it
    with limit_blas_threads(blas_threads):
        history = driver.run(after_round)
    return Result(x=algorithm.output(problem, driver.state), history=history,
                  algorithm=algorithm, seed=seed, rounds=driver.done,
                  participation=participation, x0=x0, state=driver.state, client_state=cstore)


def _restore(driver, saved):
    """Set ``driver`` to the checkpointed run ``saved`` (a :func:`checkpoint.load` payload)."""
    driver.state, driver.done = saved["state"], saved["round"]
    driver.prng.bit_generator.state = saved["prng"]
    driver.srng.bit_generator.state = saved["srng"]
    hist = saved["history"]
    driver.history = History._building(tuple(hist["columns"]), meta=hist["meta"])
    driver.history._cols = {c: v.tolist() for c, v in hist["columns"].items()}
    driver.history.meta.setdefault("rejected", [])
    driver.history.meta["rounds"] = driver.rounds


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
        The same problem (data are not stored in the checkpoint): its type, manifold and
        clients' sample counts and weights must be the checkpoint's (a ``ValueError`` names
        the first difference; a privacy ledger, for one, was computed for those ``N_i``).
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

    Raises
    ------
    FileNotFoundError, rfl_fast.errors.CheckpointError
        No file, or a file that is not a run's checkpoint (naming it).
    ValueError
        ``problem`` differs from the checkpointed run's.
    """
    trusted = {"rfl_fast"}
    if algorithm is not None:
        trusted.add(type(algorithm).__module__)
    payload = _ckpt.read_run(path, trusted=trusted)
    check_problem(problem, "problem")
    _ckpt.check_problem_matches(payload["problem"], problem)
    _ckpt.check_state(payload, problem, os.fspath(path))
    if algorithm is not None:
        payload["algorithm"] = algorithm
    total = payload["rounds"] if rounds is None else rounds
    return run(problem, payload["algorithm"], total, payload["participation"],
               x0=payload["x0"], seed=payload["seed"], metrics=payload["metrics"],
               metrics_every=payload["metrics_every"], callback=callback,
               checkpoint=path if checkpoint is None else checkpoint,
               checkpoint_every=1 if checkpoint_every is None else checkpoint_every,
               _resume=payload, **run_kwargs)
