"""Shared helpers of the experiment modules (private): result files, algorithm factories,
history summaries, the results tables' cells and verdicts."""

import dataclasses
import json
import math
import os
import re
import time

import numpy as np

__all__ = ["Recorder", "ExperimentError", "make_svrg", "svrg_gradient_mode", "summarize",
           "jsonable", "mean_curve", "aggregate", "cell", "verdict", "lower_verdict",
           "first_round", "compare_rows"]


class ExperimentError(RuntimeError):
    """A declared run of an experiment did not produce a history (never dropped silently)."""


def jsonable(obj):
    """``obj`` with numpy scalars/arrays turned into Python values (NaN/inf kept as floats,
    written by ``json`` as NaN/Infinity)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return repr(obj)
    return obj


#: ``progress(exp_id, done, total, label, elapsed_s)``, called after each run's history
#: (set by :func:`rfl_fast.app.experiments.run_experiment`; ``None``: silent).
_PROGRESS = [None]


def set_progress(fn):
    """Install ``fn`` as the progress callback of the Recorders created next; returns the
    previous one."""
    old, _PROGRESS[0] = _PROGRESS[0], fn
    return old


def _slug(label):
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(label)).strip("_")


class Recorder:
    """Collects one experiment's settings, results, notes and histories; writes them to
    ``out`` (a folder) on :meth:`finish`.

    Every run is :meth:`declare`-d before it starts; :meth:`finish` raises
    :class:`ExperimentError` naming each declared run that neither recorded a
    :meth:`history` nor was :meth:`skip`-ped for missing local data (the only allowed skip).
    """

    def __init__(self, exp_id, title, source, small, seed, out):
        self.exp_id, self.title, self.source = exp_id, title, source
        self.small, self.seed, self.out = bool(small), int(seed), out
        self.settings, self.results, self.paper, self.notes = {}, {}, {}, []
        self._histories = {}
        self.declared, self.produced, self.skipped = [], set(), {}
        self.labels = {}        # file-name form (slug) -> the label as declared
        self._progress = _PROGRESS[0]
        self._t0 = time.perf_counter()
        self._c0 = time.process_time()

    def declare(self, *labels):
        """Announce runs (``<setting>_<algorithm>`` labels) that must produce a history."""
        self.declared += [_slug(lb) for lb in labels if _slug(lb) not in self.declared]
        self.labels.update({_slug(lb): str(lb) for lb in labels})

    def diverged(self, label, reason):
        """A declared run that ran but left the floating-point range: a result, noted."""
        self.produced.add(_slug(label))
        self.notes.append(f"{_slug(label)}: every repeat diverged ({reason})")
        self._report(label)

    def skip(self, label, reason):
        """Documented skip of a declared run whose local data files are missing."""
        self.skipped[_slug(label)] = reason
        self._report(label)

    def history(self, label, history):
        """Keep ``history`` (a :class:`~rfl_fast.federation.History`) for a CSV file."""
        self.produced.add(_slug(label))
        if self.out is not None:
            self._histories[_slug(label)] = history
        self._report(label)

    def _report(self, label):
        if self._progress is not None:
            done = len(self.produced) + len(self.skipped)
            self._progress(self.exp_id, done, max(done, len(self.declared)), _slug(label),
                           time.perf_counter() - self._t0)

    def finish(self):
        missing = [lb for lb in self.declared if lb not in self.produced
                   and lb not in self.skipped]
        if missing:
            raise ExperimentError(f"{self.exp_id}: declared runs produced no history: "
                                  f"{', '.join(missing)}")
        if self.skipped:
            self.notes.append("skipped for missing local data: " + ", ".join(self.skipped))
        every = sorted({int(h.meta.get("metrics_every", 1)) for h in self._histories.values()})
        if every and every[-1] > 1:
            self.notes.append(f"history files: metrics (grad_norm, angle, f_gap, dist) measured "
                              f"every {' or '.join(map(str, every))} rounds and at the last "
                              f"round; the rows between hold the round's time and bytes, their "
                              f"metric cells empty (nan)")
        res = {"experiment": self.exp_id, "title": self.title, "source": self.source,
               "small": self.small, "seed": self.seed, "settings": self.settings,
               "results": self.results, "paper": self.paper, "notes": self.notes,
               "elapsed_s": time.perf_counter() - self._t0,
               "cpu_s": time.process_time() - self._c0, "files": [],
               "runs": {"declared": list(self.declared), "skipped": dict(self.skipped),
                        "labels": dict(self.labels)}}
        if self.out is not None:
            os.makedirs(self.out, exist_ok=True)
            for label, h in self._histories.items():
                path = os.path.join(os.fspath(self.out), f"{self.exp_id}_{label}.csv")
                h.to_csv(path)
                res["files"].append(path)
            path = os.path.join(os.fspath(self.out), f"{self.exp_id}.json")
            res["files"].append(path)
            with open(path, "w") as fh:
                json.dump(jsonable(res), fh, indent=1)
        return jsonable(res)


def _fields(cls):
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def svrg_gradient_mode():
    """``"all"`` if RFedSVRG can gather ``g_t = grad f(x_t)`` over all n clients (the
    paper's Algorithm 1), else ``"participants"`` (older versions: ``g_t`` over ``S_t``)."""
    from ...algorithms import RFedSVRG
    return "all" if "full_gradient" in _fields(RFedSVRG) else "participants"


def make_svrg(step, local_steps, **kw):
    """RFedSVRG with the paper's full gradient over all clients where supported."""
    from ...algorithms import RFedSVRG
    if "full_gradient" in _fields(RFedSVRG):
        kw.setdefault("full_gradient", "all")
    return RFedSVRG(step, local_steps, **kw)


def _first_below(col, rounds, thr):
    ok = np.flatnonzero(np.nan_to_num(col, nan=np.inf) <= thr)
    return int(rounds[ok[0]]) if ok.size else None


def summarize(h):
    """Final and best values of a history's metrics and the first round below 1e-8."""
    out = {"rounds": int(h["round"][-1])}
    for c in ("grad_norm", "angle", "f_gap", "dist"):
        if c not in h.columns:
            continue
        col = np.asarray(h[c], dtype=float)
        if not np.isfinite(col).any():
            continue
        fin = col[np.isfinite(col)]
        out[f"{c}_first"] = float(fin[0])
        out[f"{c}_final"] = float(fin[-1])
        out[f"{c}_min"] = float(fin.min())
        out[f"{c}_round_below_1e-8"] = _first_below(col, h["round"], 1e-8)
    wall = np.asarray(h["wall"][1:], dtype=float)
    out["wall_per_round_s"] = float(np.median(wall)) if wall.size else math.nan
    out["cpu_per_round_s"] = float(np.median(np.asarray(h["cpu_server"][1:]) +
                                             np.asarray(h["cpu_clients_max"][1:]))) \
        if wall.size else math.nan
    return out


def mean_curve(histories, column, every):
    """Geometric mean over repeats of ``column`` sampled every ``every`` rounds:
    ``{"round": [...], column: [...]}`` (the papers average repeated runs)."""
    rounds = histories[0]["round"]
    sel = np.flatnonzero((rounds % every == 0) | (rounds == rounds[-1]))
    vals = np.array([np.asarray(h[column], dtype=float)[sel] for h in histories])
    with np.errstate(divide="ignore"):
        gm = np.exp(np.mean(np.log(np.maximum(vals, 1e-300)), axis=0))
    return {"round": rounds[sel].tolist(), column: gm.tolist()}


def aggregate(summaries, keys=("grad_norm_final", "angle_final", "f_gap_final")):
    """Geometric means (over repeats) of the given summary keys, plus min/max."""
    out = {"repeats": len(summaries)}
    for k in keys:
        v = np.array([s[k] for s in summaries if k in s], dtype=float)
        if v.size:
            out[k] = float(np.exp(np.mean(np.log(np.maximum(v, 1e-300)))))
            out[k + "_range"] = [float(v.min()), float(v.max())]
    for k in ("wall_per_round_s",):
        v = np.array([s[k] for s in summaries if k in s], dtype=float)
        if v.size:
            out[k] = float(np.median(v))
    return out


# ------------------------------------------------------------- results tables (table_rows)

def cell(v):
    """A number as a results table shows it (3 significant digits; "-" for None)."""
    if v is None:
        return "-"
    if isinstance(v, (bool, int, np.integer)):
        return str(v)
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.3g}"


def verdict(ok, partly=False):
    """"reproduced", "partly" or "not reproduced"."""
    return "reproduced" if ok else ("partly" if partly else "not reproduced")


def lower_verdict(a, others, factor=10.0):
    """'reproduced' if ``a`` is ``factor`` x below every other, 'partly' if below all."""
    return verdict(all(a * factor < o for o in others), all(a < o for o in others))


def first_round(rounds):
    """The median of the rounds a threshold was first reached in, None unless every run
    reached it."""
    hits = [r for r in rounds if r is not None]
    return float(np.median(hits)) if len(hits) == len(rounds) and hits else None


def compare_rows(setting, algs, key="grad_norm_final"):
    """One "figure only" row per algorithm of ``algs`` with ``key``."""
    return [(setting, f"{a}: {key}", cell(v.get(key)), "figure only", "")
            for a, v in algs.items() if isinstance(v, dict) and key in v]
