"""Shape sweep: every backend of every kernel over the registry's grid, against the reference.

    rfl-fast bench --sweep                          # print the table (and what auto chose)
    rfl-fast bench --sweep --only stiefel_proj --json sweep.json

At each grid point the backends are timed side by side in one process
(``timing.block_medians``: blocks of back-to-back calls, the backends alternating, medians). A
backend whose first call takes more than :data:`GIVE_UP` times the reference's (and over 0.2 s)
is timed by that one call. ``auto`` is reported as the time of the backend its declared rule
(``kernels.registry.declared_order``) chooses at that shape (raw kernels on both sides, so
dispatch overhead is not in the ratio; ``bench`` measures that separately): the table shows
each rule's margin, and the CI ratio gate (``benchmarks/gate.py``) holds ``auto`` to the
reference on the grid.
"""

import math
import time

import numpy as np

from .. import kernels
from ..kernels.registry import REGISTRY, handles, sweep_grid
from ..kernels.testing import kernel_inputs
from .timing import agree, block_medians

__all__ = ["run_sweep", "print_summary", "time_point", "auto_backend"]

GIVE_UP = 20.0


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


def run_sweep(names, repeats=3, out=print, quick=False, min_size=0):
    """Time every available backend of ``names`` over their grids (``quick``: the registry's
    sample of each grid; ``min_size``: only points whose size, the last core dimension, is at
    least this); a list of rows."""
    backends = kernels.available_backends()
    rows = []
    out(f"{'kernel':24s}{'point (N, dims)':>20s}" + "".join(f"{b + ' x':>10s}" for b in backends)
        + f"{'auto':>7s}{'auto x':>9s}{'/best':>7s}")
    for name in names:
        for point in sweep_grid(name, quick):
            if _size(name, point) < min_size:
                continue
            row = time_point(name, point, backends, repeats)
            t = row["times"]
            row["auto"] = a = auto_backend(name, point)
            cells = "".join(f"{'-':>10s}" if b not in t else f"{t['numpy'] / t[b]:10.2f}"
                            + ("!" if not row["agree"][b] else "") for b in backends)
            out(f"{name:24s}{str(tuple(point)):>20s}{cells}{a:>7s}{t['numpy'] / t[a]:9.2f}"
                f"{min(t.values()) / t[a]:7.2f}")
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
