"""Shared helpers of the experiment modules (private): result files, algorithm factories,
history summaries."""

import dataclasses
import json
import math
import os
import re
import time

import numpy as np

__all__ = ["Recorder", "make_svrg", "svrg_gradient_mode", "summarize", "jsonable",
           "mean_curve", "optional_algorithm", "aggregate"]


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


def _slug(label):
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(label)).strip("_")


class Recorder:
    """Collects one experiment's settings, results, notes and histories; writes them to
    ``out`` (a folder) on :meth:`finish`."""

    def __init__(self, exp_id, title, source, small, seed, out):
        self.exp_id, self.title, self.source = exp_id, title, source
        self.small, self.seed, self.out = bool(small), int(seed), out
        self.settings, self.results, self.paper, self.notes = {}, {}, {}, []
        self._histories = {}
        self._t0 = time.perf_counter()

    def history(self, label, history):
        """Keep ``history`` (a :class:`~rfl_fast.federation.History`) for a CSV file."""
        if self.out is not None:
            self._histories[_slug(label)] = history

    def finish(self):
        res = {"experiment": self.exp_id, "title": self.title, "source": self.source,
               "small": self.small, "seed": self.seed, "settings": self.settings,
               "results": self.results, "paper": self.paper, "notes": self.notes,
               "elapsed_s": time.perf_counter() - self._t0, "files": []}
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
    from ..algorithms import RFedSVRG
    return "all" if "full_gradient" in _fields(RFedSVRG) else "participants"


def make_svrg(step, local_steps, **kw):
    """RFedSVRG with the paper's full gradient over all clients where supported."""
    from ..algorithms import RFedSVRG
    if "full_gradient" in _fields(RFedSVRG):
        kw.setdefault("full_gradient", "all")
    return RFedSVRG(step, local_steps, **kw)


def optional_algorithm(name, *args, **kw):
    """``(algorithm, None)`` for ``rfl_fast.algorithms.<name>(*args, **kw)``, or
    ``(None, reason)`` when that algorithm is not available (or refuses the arguments)."""
    from .. import algorithms
    cls = getattr(algorithms, name, None)
    if cls is None:
        return None, f"{name} is not available in rfl_fast.algorithms"
    if "full_gradient" in _fields(cls):
        kw.setdefault("full_gradient", "all")
    try:
        return cls(*args, **kw), None
    except (TypeError, ValueError) as exc:
        return None, f"{name}{args}{kw} could not be built: {exc}"


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
