"""Running an experiment plan and writing its results folder (``rfl-fast run``).

:func:`execute` runs every algorithm of a :class:`~rfl_fast.app.config.RunPlan` and writes one
folder per run::

    <out>/config.toml             the experiment file as given (or .yaml)
    <out>/config_resolved.json    every setting with its default filled in, and the status
    <out>/summary.json            status, rounds run, final metrics and files per algorithm
    <out>/history_<label>.csv     per-round history (also .json) of each algorithm
    <out>/model_<label>.npy       the final model
    <out>/plot_<metric>.png       metric against rounds and CPU time, one line per algorithm
                                  (.pdf too with ``formats=("png", "pdf")``, ``--pdf``)

Every file is written to a temporary name and renamed, so a file is either complete or
absent. Ctrl-C stops cleanly: the first press finishes the current round, writes everything
run so far and marks the run ``"interrupted"`` (in ``summary.json`` and
``config_resolved.json``); a second press stops at once and still writes the rounds recorded
up to then.
"""

import json
import math
import os
import platform
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from .._files import atomic_write
from .._validation import brief
from ..kernels import available_backends
from .config import ConfigError

__all__ = ["execute", "RunOutcome", "InterruptGuard", "summary_table"]


# ------------------------------------------------------------------------------ files

def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return repr(obj)


def _write_json(path, obj):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(_jsonable(obj), fh, indent=1, allow_nan=False)
            fh.write("\n")

    return atomic_write(path, write)


def _write_text(path, text):
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return atomic_write(path, write)


def _write_npy(path, x):
    def write(tmp):
        with open(tmp, "wb") as fh:
            np.save(fh, np.asarray(x))

    return atomic_write(path, write)


# ------------------------------------------------------------------------------ Ctrl-C

class InterruptGuard:
    """Context manager turning the first Ctrl-C into a request to stop after the current
    round (``requested`` becomes True); a second Ctrl-C raises ``KeyboardInterrupt``.

    Only the main thread can handle signals; elsewhere the guard does nothing and Ctrl-C
    raises ``KeyboardInterrupt`` as usual.

    Parameters
    ----------
    notify : callable, optional
        ``notify(message)`` on the first Ctrl-C.
    """

    def __init__(self, notify=None):
        self.notify = notify
        self.requested = False
        self._old = None
        self._installed = False

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.notify is not None:
            self.notify("Ctrl-C: stopping after the current round and writing the results so "
                        "far (press Ctrl-C again to stop at once)")

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handler)
            self._installed = True
        return self

    def __exit__(self, *exc):
        if self._installed:
            signal.signal(signal.SIGINT, self._old)
            self._installed = False
        return False


# ------------------------------------------------------------------------------ results

@dataclass
class RunOutcome:
    """What :func:`execute` did.

    Attributes
    ----------
    out : str
        The run folder.
    status : {"completed", "interrupted", "failed"}
    histories : dict of str to History
        Per algorithm label (partial for an interrupted algorithm).
    models : dict of str to ndarray
        Final model per label (shape of a point of the problem's manifold).
    summary : dict
        The content of ``summary.json``.
    files : list of str
        Every file written.
    """

    out: str
    status: str
    histories: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    files: list = field(default_factory=list)


def summary_table(histories):
    """Rounds, final gradient norm, principal angle, f - f*, CPU time and upload of each
    history, as text (one line per algorithm)."""
    lines = [f"{'algorithm':16s} {'rounds':>6s} {'grad norm':>10s} {'angle':>10s} "
             f"{'f - f*':>10s} {'CPU s':>8s} {'MB up':>8s}"]
    for label, h in histories.items():
        cpu = float(np.sum(h["cpu_server"]) + np.sum(h["cpu_clients_max"]))
        rounds = int(h["round"][-1]) if len(h) else 0
        vals = [h.last(c) if c in h else math.nan for c in ("grad_norm", "angle", "f_gap")]
        lines.append(f"{label:16s} {rounds:6d} {vals[0]:10.2e} {vals[1]:10.2e} {vals[2]:10.2e} "
                     f"{cpu:8.3f} {np.sum(h['bytes_up']) / 1e6:8.3f}")
    return "\n".join(lines)


def _metrics_row0(problem, x0):
    try:
        row = dict(problem.metrics(x0))
    except NotImplementedError:
        row = {"grad_norm": float(problem.manifold.norm(x0, problem.grad(x0)))}
    return {"round": 0, "cpu_server": 0.0, "cpu_clients_max": 0.0, "wall": 0.0, **row}


def _history_from_rows(rows, meta):
    """A History from the rows seen by the callback (used when a run was cut short by a
    KeyboardInterrupt inside the engine)."""
    from ..federation import History
    from ..federation.history import BASE_COLUMNS, INT_COLUMNS

    names = list(BASE_COLUMNS)
    for row in rows:
        names += [k for k in row if k not in names]
    cols = {n: [row.get(n, 0 if n in INT_COLUMNS else math.nan) for row in rows] for n in names}
    return History(cols, meta=meta)


def _final(h, name):
    if name not in h or len(h) == 0:
        return None
    v = h.last(name)
    return float(v) if v == v else None


def _check_out(out, overwrite):
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise ConfigError("out", f"{brief(out)} exists and is not a folder")
        if os.listdir(out) and not overwrite:
            raise ConfigError("out", f"folder {brief(out)} exists and is not empty; choose another "
                              f"folder (--out DIR) or pass --overwrite")


def execute(plan, *, overwrite=False, progress=True, verbose=False, quiet=False,
            callback=None, stream=None, formats=("png",)):
    """Run every algorithm of ``plan`` and write the results folder.

    Parameters
    ----------
    plan : rfl_fast.app.config.RunPlan
    overwrite : bool
        Allow writing into a non-empty ``plan.out``.
    progress : bool
        Draw a tqdm progress bar per algorithm (on stderr; needs tqdm).
    verbose : bool
        Report metrics about every tenth of the rounds and tracebacks of failures.
    quiet : bool
        No messages (errors excepted).
    callback : callable, optional
        ``callback(label, t, x, row)`` after every round; returning True stops the run as a
        Ctrl-C does (used by the tests to simulate an interrupt; raising
        ``KeyboardInterrupt`` there simulates a second Ctrl-C).
    stream : file, optional
        Where messages go (default ``sys.stdout``).
    formats : sequence of {"png", "pdf", "svg"}
        The figures' file formats.

    Returns
    -------
    RunOutcome

    Raises
    ------
    ConfigError
        ``plan.out`` exists and is not empty (without ``overwrite``); nothing is written.
    """
    from ..federation import run

    stream = sys.stdout if stream is None else stream
    cfg = plan.config
    out = cfg["out"]
    _check_out(out, overwrite)
    tqdm = None
    if progress and not quiet:
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None

    def say(msg):
        if quiet:
            return
        if tqdm is not None:
            tqdm.write(msg, file=stream)
        else:
            print(msg, file=stream)

    def debug(msg):
        if verbose:
            say(msg)

    os.makedirs(out, exist_ok=True)
    files = []
    debug(f"backends {', '.join(available_backends())}")
    problem = plan.problem
    M = problem.manifold
    x0 = M.random_point(rng=cfg["seed"])
    meta = {"rfl_fast": _version(), "python": platform.python_version(),
            "source": plan.source, "data": plan.data_info}
    resolved = {**cfg, "status": "running", "run": meta}
    if plan.text is not None:
        ext = os.path.splitext(plan.source or "")[1] or ".toml"
        files.append(_write_text(os.path.join(out, f"config{ext}"), plan.text))
    files.append(_write_json(os.path.join(out, "config_resolved.json"), resolved))
    debug("resolved configuration:\n" + json.dumps(_jsonable(cfg), indent=1))
    say(f"{cfg['problem']['type']} on {cfg['data']['source']}: {problem.n_clients} clients, "
        f"{M!r}, {cfg['rounds']} rounds, algorithms "
        f"{', '.join(label for label, _ in plan.algorithms)}")

    try:
        histories, models, per_alg = {}, {}, {}
        status = "completed"
        rounds = cfg["rounds"]
        every = max(1, rounds // 10)
        with InterruptGuard(notify=say) as guard:
            for label, algorithm in plan.algorithms:
                if guard.requested or status == "interrupted":
                    per_alg[label] = {"status": "not run", "rounds": 0}
                    continue
                rows, last = [], {"x": x0}
                bar = (tqdm(total=rounds, desc=f"{label:12s}", unit="round", leave=True,
                            file=sys.stderr, dynamic_ncols=True) if tqdm is not None else None)
                stopped = {"by": None}

                def on_round(t, x, row, label=label, rows=rows, last=last, bar=bar,
                             stopped=stopped):
                    rows.append(dict(row))
                    last["x"] = x
                    if bar is not None:
                        bar.update(1)
                        g = row.get("grad_norm", math.nan)
                        if g == g:
                            bar.set_postfix_str(f"grad {g:.2e}", refresh=False)
                    if verbose and (t % every == 0 or t == rounds):
                        parts = [f"{k} {row[k]:.3e}" for k in ("grad_norm", "angle", "f_gap")
                                 if k in row and row[k] == row[k]]
                        debug(f"{label} round {t}: " + ", ".join(parts))
                    if callback is not None and callback(label, t, x, row) is True:
                        stopped["by"] = "callback"
                        return True
                    if guard.requested:
                        stopped["by"] = "Ctrl-C"
                        return True
                    return False

                w0 = time.perf_counter()
                entry = {"algorithm": repr(algorithm)}
                try:
                    res = run(problem, algorithm, rounds, participation=plan.participation, x0=x0,
                              seed=cfg["seed"], metrics_every=cfg["metrics_every"],
                              callback=on_round)
                    h, x = res.history, res.x
                    entry["status"] = "completed" if stopped["by"] is None else "interrupted"
                except KeyboardInterrupt:
                    h = _history_from_rows([_metrics_row0(problem, x0)] + rows,
                                           meta={"algorithm": repr(algorithm),
                                                 "rounds": len(rows), "seed": cfg["seed"],
                                                 "reconstructed":
                                                     "run stopped by KeyboardInterrupt"})
                    x = last["x"]
                    entry["status"] = "interrupted"
                    entry["model"] = "the last server point (the algorithm's output step not run)"
                    stopped["by"] = "KeyboardInterrupt"
                except Exception as exc:  # a numerical failure of one algorithm: keep the others
                    h = _history_from_rows([_metrics_row0(problem, x0)] + rows,
                                           meta={"algorithm": repr(algorithm),
                                                 "rounds": len(rows), "seed": cfg["seed"]})
                    x = last["x"]
                    entry["status"] = "failed"
                    entry["error"] = f"{type(exc).__name__}: {exc}"
                    print(f"rfl-fast run: {label} failed after {len(rows)} rounds: "
                          f"{entry['error']}", file=sys.stderr)
                    if verbose:
                        traceback.print_exc()
                finally:
                    if bar is not None:
                        bar.close()
                entry["wall_s"] = time.perf_counter() - w0
                if entry["status"] == "interrupted":
                    status = "interrupted"
                    entry["stopped_by"] = stopped["by"]
                    say(f"{label}: interrupted after round {len(rows)} of {rounds}")
                elif entry["status"] == "failed" and status == "completed":
                    status = "failed"
                entry["rounds"] = len(rows)
                histories[label], models[label] = h, np.asarray(x)
                files.append(atomic_write(os.path.join(out, f"history_{label}.csv"), h.to_csv))
                files.append(atomic_write(os.path.join(out, f"history_{label}.json"), h.to_json))
                files.append(_write_npy(os.path.join(out, f"model_{label}.npy"), x))
                entry.update({m: _final(h, m) for m in ("grad_norm", "angle", "f_gap", "dist")})
                entry["files"] = files[-3:]
                per_alg[label] = entry

        notes = []
        plots = []
        if cfg["metrics_every"] > 1:
            notes.append(f"metrics (grad_norm, angle, f_gap, dist) are measured every "
                         f"{cfg['metrics_every']} rounds (metrics_every) and at the last; the "
                         f"histories' other rows hold the round's time and bytes with empty "
                         f"metric cells")
        if cfg["plots"] and histories:
            try:
                from .plotting import has_values, plot_metrics

                title = (f"{cfg['problem']['type']} on {cfg['data']['source']} "
                         f"({problem.n_clients} clients)")
                t0 = time.perf_counter()
                shown = sum(has_values(histories, y) for y in cfg["plots"])
                say(f"plotting {shown} figures ({', '.join(formats)}; --no-plots skips them) "
                    f"...")
                plots = plot_metrics(histories, out, cfg["plots"], title=title, prefix="plot_",
                                     formats=formats)
                say(f"{len(plots)} plot files in {time.perf_counter() - t0:.1f} s")
            except ImportError as exc:
                notes.append(f"plots skipped: {exc}")
        files += plots
        summary = {"name": cfg["name"], "status": status, "rounds_requested": rounds,
                   "algorithms": per_alg, "plots": plots, "notes": notes, **meta}
        files.append(_write_json(os.path.join(out, "summary.json"), summary))
        resolved["status"] = status
        if status != "completed":
            resolved["status_detail"] = {k: v["status"] for k, v in per_alg.items()}
        _write_json(os.path.join(out, "config_resolved.json"), resolved)
        say(summary_table(histories))
        for note in notes:
            say(f"note: {note}")
        say(f"{status}: results in {out}{os.sep}")
        return RunOutcome(out=out, status=status, histories=histories, models=models,
                          summary=summary, files=files)
    except BaseException as exc:  # any failure outside one algorithm's run: say so on disk
        resolved["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        resolved["error"] = f"{type(exc).__name__}: {exc}"
        _write_json(os.path.join(out, "config_resolved.json"), resolved)
        raise


def _version():
    try:
        from .. import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "unknown"
