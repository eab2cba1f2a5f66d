"""Shape sweep: every backend of every kernel over the registry's grid, against the reference.

    rfl-fast bench --sweep                          # print the table (and what auto chose)
    rfl-fast bench --sweep --only stiefel_proj --json sweep.json
    rfl-fast bench --sweep --write-auto             # also update kernels/auto_policy.json

At each grid point the backends are timed side by side in one process
(``timing.block_medians``: blocks of back-to-back calls, the backends alternating, medians). A
backend whose first call takes more than :data:`GIVE_UP` times the reference's (and over 0.2 s)
is timed by that one call. ``auto`` is reported as the time of the backend it chooses at that
shape (raw kernels on both sides, so dispatch overhead is not in the ratio; ``bench`` measures
that separately).

``auto``'s policy points (``derive_auto``) are built to survive a busy machine: a compiled
backend goes before the reference at a point only when it is at least :data:`MARGIN` times
faster in the median of the rounds timed there (``--rounds``: a point whose choice is close is
timed again) and no slower in any of them, so a shape where the routes are level, or where one
round has the backend behind the reference, keeps the reference. ``write_policy`` merges them
into a policy file (:mod:`rfl_fast.kernels.policy`): the shipped one, or a per-machine one
(``rfl-fast tune``).
"""

import math
import os
import statistics
import time

import numpy as np

from .. import kernels
from ..kernels import policy
from ..kernels.registry import REGISTRY, handles, sweep_grid
from ..kernels.testing import kernel_inputs
from .timing import agree, block_medians

__all__ = ["run_sweep", "derive_auto", "write_policy", "print_summary"]

GIVE_UP = 20.0
#: A compiled backend precedes the reference only when this much faster in the median round
#: (and not slower in any).
MARGIN = 1.1
#: A point whose best compiled speed-up (worst round) is within this factor of MARGIN, either
#: way, is timed again, up to ``rounds`` rounds.
CLOSE = 1.6


def _core_dims(name, point):
    """The grid point's dims as ``kernel_inputs`` takes them: a Lorentz grid d is the
    hyperboloid's dimension, its points live in R^(d+1)."""
    dims = list(point[1:])
    return [dims[0] + 1] if name.startswith("lorentz_") else dims


def _inputs(name, point):
    return tuple(np.ascontiguousarray(a) for a in
                 kernel_inputs(name, np.random.default_rng(0), point[0], *_core_dims(name, point)))


def _first_call(fn, args):
    """Seconds of one call after an untimed warm-up call (JIT compile, cache load), and the
    result."""
    fn(*args)
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def backend_fns(name, point, backends):
    """``{backend: raw kernel}`` of ``backends`` declared fit for ``point``
    (``registry.handles``)."""
    return {b: kernels.resolve(name, b)[1] for b in backends
            if handles(name, b, _size(name, point))}


def time_point(name, point, backends, repeats, fns=None):
    """``{"kernel", "point", "times": {backend: s}, "agree": {backend: bool}}`` at one point;
    backends not declared fit for the shape (``registry.handles``) are not timed. ``fns``:
    ``{backend: kernel function}`` to time instead of ``backend_fns`` (``"numpy"``, the
    reference, among them)."""
    args = _inputs(name, point)
    fns = backend_fns(name, point, backends) if fns is None else fns
    backends = list(fns)
    first, outs = {}, {}
    for b, fn in fns.items():
        first[b], outs[b] = _first_call(fn, args)
    want = outs["numpy"]
    cap = max(0.2, GIVE_UP * first["numpy"])
    given_up = {b for b in backends if first[b] > cap}
    calls = {b: (fns[b], args) for b in backends if b not in given_up}
    slow = tuple(b for b in calls if first[b] > 0.05)  # one call per block, fewer repeats
    times = block_medians(calls, repeats, once=slow, timed={b: [first[b]] for b in slow})
    times.update({b: first[b] for b in given_up})
    return {"kernel": name, "point": list(point), "times": times, "given_up": sorted(given_up),
            "agree": {b: agree(outs[b], want) for b in backends}}


def auto_backend(name, point):
    """The backend ``auto`` picks for kernel ``name`` at grid point ``point``."""
    return kernels.resolve(name, "auto", _shape(name, point))[0]


def _shape(name, point):
    """The shape of the first argument at grid point ``point``: ``(items, *core)`` (a square
    kernel's n stands for its (n, n) matrices), derived without building the inputs."""
    dims = _core_dims(name, point)
    if len(dims) < REGISTRY[name].args[0]:
        dims = dims * REGISTRY[name].args[0]
    return (point[0], *dims)


def _size(name, point):
    """The dimension ``auto`` keys on: the last of the first argument's core shape."""
    return _core_dims(name, point)[-1]


def _speedups(row, of=min):
    """``{backend: of(its speed-ups over the reference in the row's rounds)}``: the worst by
    default."""
    rounds = row.get("rounds", [row["times"]])
    return {b: of([t["numpy"] / t[b] for t in rounds]) for b in row["times"]}


def _close(row):
    """Whether the row's choice between the reference and a compiled backend is close."""
    best = max((s for b, s in _speedups(row).items() if b != "numpy" and row["agree"][b]),
               default=None)
    return best is not None and MARGIN / CLOSE <= best <= MARGIN * CLOSE


def time_rounds(name, point, backends, repeats, rounds, fns=None):
    """``time_point`` at ``point`` (``fns``: as there), timed again while its choice is close, up
    to ``rounds`` rounds (a backend given up as too slow in the first is not timed again, the
    reference always is): ``times`` holds each backend's median over the rounds, ``rounds``
    every round's."""
    row = time_point(name, point, backends, repeats, fns=fns)
    row["rounds"] = [row["times"]]
    again = [b for b in row["times"] if b not in row["given_up"]]  # too slow: one round is plenty
    again_fns = None if fns is None else {b: fns[b] for b in again}
    while len(row["rounds"]) < rounds and _close(row):
        row["rounds"].append({**row["times"], **time_point(name, point, again, repeats,
                                                           fns=again_fns)["times"]})
    row["times"] = {b: statistics.median(t[b] for t in row["rounds"]) for b in row["times"]}
    return row


def run_sweep(names, repeats=3, out=print, quick=False, rounds=1, min_size=0):
    """Time every available backend of ``names`` over their grids (``quick``: the registry's
    sample of each grid; ``min_size``: only points whose size, the last core dimension, is at
    least this; ``rounds``: see ``time_rounds``); a list of rows."""
    backends = kernels.available_backends()
    rows = []
    out(f"{'kernel':24s}{'point (N, dims)':>20s}" + "".join(f"{b + ' x':>10s}" for b in backends)
        + f"{'auto':>7s}{'auto x':>9s}{'/best':>7s}{'rounds':>7s}")
    for name in names:
        for point in sweep_grid(name, quick):
            if _size(name, point) < min_size:
                continue
            row = time_rounds(name, point, backends, repeats, rounds)
            t = row["times"]
            row["auto"] = a = auto_backend(name, point)
            cells = "".join(f"{'-':>10s}" if b not in t else f"{t['numpy'] / t[b]:10.2f}"
                            + ("!" if not row["agree"][b] else "") for b in backends)
            out(f"{name:24s}{str(tuple(point)):>20s}{cells}{a:>7s}{t['numpy'] / t[a]:9.2f}"
                f"{min(t.values()) / t[a]:7.2f}{len(row['rounds']):7d}")
            rows.append(row)
    return rows


def _geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def print_summary(rows, out=print):
    """Per kernel: worst and geometric-mean ratio of auto to the reference and to the best."""
    out(f"\n{'kernel':24s}{'points':>7s}{'auto/ref min':>13s}{'geomean':>9s}{'auto/best min':>15s}")
    by = {}
    for r in rows:
        by.setdefault(r["kernel"], []).append(r)
    allr = []
    for name, rs in by.items():
        vs_ref = [r["times"]["numpy"] / r["times"][r["auto"]] for r in rs]
        vs_best = [min(r["times"].values()) / r["times"][r["auto"]] for r in rs]
        allr += vs_ref
        gm = _geomean(vs_ref)
        out(f"{name:24s}{len(rs):7d}{min(vs_ref):13.2f}{gm:9.2f}{min(vs_best):15.2f}")
    if allr:
        gm = _geomean(allr)
        out(f"{'all':24s}{len(allr):7d}{min(allr):13.2f}{gm:9.2f}")


def derive_auto(rows, margin=MARGIN):
    """``{kernel: (policy.Point, ...)}`` from sweep rows: at each point (the first argument's
    shape ``(items, *core)``) the order puts first the backends that agree with the reference,
    are at least ``margin`` times faster than it in the median of the rounds
    (``rows[i]["rounds"]``, else ``"times"``) and not slower in any round, fastest (median) first;
    then the reference; then the other agreeing backends, fastest first; then those that
    disagree. Each point records the backends' median speed-ups. ``auto`` uses the order of the
    nearest point."""
    table = {}
    for r in rows:
        speed, worst = _speedups(r, statistics.median), _speedups(r)
        fast = sorted((b for b in speed if b != "numpy"), key=lambda b: (
            not r["agree"].get(b, True), -speed[b]))
        ahead = [b for b in fast if r["agree"].get(b, True) and speed[b] >= margin
                 and worst[b] >= 1.0]
        order = ahead + ["numpy"] + [b for b in fast if b not in ahead]
        order += [b for b in kernels.BACKENDS if b not in order]
        ratios = tuple((b, round(speed[b], 4)) for b in sorted(speed) if b != "numpy")
        table.setdefault(r["kernel"], []).append(policy.Point(
            _shape(r["kernel"], r["point"]), tuple(order), ratios, r.get("parallel")))
    return {k: tuple(v) for k, v in table.items()}


def write_policy(table, path, note, machine, threads, portable, command):
    """Merge ``table`` (``derive_auto``'s points) into the policy file ``path`` point by point:
    a point of ``table`` replaces the same shape's, the other points stay, and so do the earlier
    notes unless ``table`` replaces every point. A file at ``path`` that is not a valid policy
    of the same kind (portable or not) is replaced whole. ``machine``, ``threads`` and
    ``command`` become the provenance; ``note`` is added to its notes."""
    old = None
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                old = policy.parse(f.read(policy.MAX_BYTES + 1), path)
        except (OSError, policy.PolicyError):
            old = None
    if old is not None and old.portable != portable:
        old = None
    merged = {k: {p.at: p for p in pts} for k, pts in (old.kernels if old else {}).items()}
    kept = any(shape not in {p.at for p in table.get(name, ())}
               for name, points in merged.items() for shape in points)
    for name, points in table.items():
        merged.setdefault(name, {}).update({p.at: p for p in points})
    notes = [" ".join(note.split())]
    if kept and old is not None:
        notes += ["Points this sweep did not time are kept from the policy before it:"]
        notes += old.provenance["notes"]
    same_calls = old.same_calls if old is not None else (
        policy.shipped().same_calls if portable else {})
    new = policy.Policy(
        {"machine": machine, "threads": threads, "date": policy.today(), "command": command,
         "notes": notes[:64]}, MARGIN, 1.0, portable, same_calls,
        {k: tuple(sorted(v.values(), key=lambda p: p.at)) for k, v in sorted(merged.items())},
        source=path)
    policy.write(new, path)
    return new
