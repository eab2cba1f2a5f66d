"""``rfl-fast tune``: measure this machine and write ``auto``'s per-machine policy.

    rfl-fast tune              # --quick: a short list of telling shapes, about 2 minutes
    rfl-fast tune --full       # every kernel over the sweep's sample grid: tens of minutes
    rfl-fast tune --dry-run    # measure and print, write nothing

As FFTW's wisdom: the shipped policy (``rfl_fast/kernels/auto_policy.json``) was measured on
one machine and made portable (the reference goes before every compiled route whose lead there
rested on that machine's BLAS and threads); ``tune`` times the backends side by side here, with
the C++ thread count in force (``--threads``; the file is kept per count), derives each point's
order by the same rule as the shipped policy (a compiled backend first only where it was 1.1x
the reference in the median round and not behind it in any), and where the C++ route's items
call BLAS it also times its two batch modes (``items``: the batch on the C++ threads, one BLAS
thread each; ``blas``: one item at a time on BLAS's threads) and keeps the faster by 1.1x. The
file goes to the user's cache folder (:func:`rfl_fast.kernels.policy.tuned_path`), keyed by CPU
model, core count, BLAS libraries and package version; from then on ``auto`` takes its points
over the shipped ones at the same shapes. ``rfl-fast info`` says which policy is in force.

Run it on an idle machine: busy cores make every threaded route look slow. Nothing here
asserts a time.
"""

import argparse
import os
import statistics
import sys
import time

from .. import kernels
from ..kernels import policy
from ..kernels.registry import REGISTRY, sweep_grid
from . import sweep
from .timing import block_medians

__all__ = ["main", "quick_points", "full_points", "tune"]

#: Seconds ``--quick`` spends timing (the command, imports and writing included, stays under
#: three minutes on 2 cores).
QUICK_BUDGET_S = 110.0

#: ``--quick``'s points, most telling first: where the shipped policy's portable rule put the
#: reference before a C++ route that makes its BLAS calls (here it may win), where the C++
#: route's items call BLAS (its batch mode), then the papers' shapes where threads decide.
_QUICK = (
    ("stiefel_proj", (16, 784, 16)), ("stiefel_proj", (200, 784, 32)),
    ("stiefel_proj", (16, 784, 64)), ("stiefel_proj", (1, 3072, 32)),
    ("spd_log", (16, 128)), ("sym_logm", (16, 256)), ("spd_dist", (16, 256)),
    ("stiefel_retr_polar", (200, 784, 32)), ("stiefel_inv_retr_polar", (16, 784, 32)),
    ("polar", (16, 784, 64)), ("stiefel_retr_qr", (16, 784, 32)),
    ("spd_exp", (16, 128)), ("sym_expm", (16, 256)),
    ("stiefel_retr_polar", (200, 784, 5)), ("stiefel_inv_retr_polar", (200, 784, 5)),
    ("stiefel_proj", (200, 784, 5)), ("stiefel_retr_qr", (200, 784, 5)),
    ("sym_logm", (200, 9)), ("spd_exp", (200, 9)), ("spd_dist", (200, 9)),
    ("sphere_exp", (10_000, 784)), ("sphere_log", (10_000, 100)),
    ("lorentz_exp", (10_000, 10)), ("lorentz_dist", (10_000, 100)),
    ("stiefel_proj", (16, 3072, 8)), ("polar", (1, 3072, 16)), ("sym_sqrtm", (16, 64)),
    ("spd_log", (200, 32)), ("sphere_transport", (200, 10_000)),
)


def quick_points():
    """``[(kernel, point)]`` of ``--quick``, in the order they are timed."""
    return list(_QUICK)


def full_points():
    """``[(kernel, point)]`` of ``--full``: every kernel over the sweep's sample grid."""
    return [(name, tuple(p)) for name in REGISTRY for p in sweep_grid(name, quick=True)]


def _mode_fns(name, point):
    """``{"items": fn, "blas": fn}`` where the C++ route's items call BLAS at ``point``."""
    return kernels.batch_modes(name, sweep._shape(name, point))


def _best_mode(name, point, repeats, threads):
    """``(mode or None, items time / blas time, the C++ kernel in that mode or None)``: the C++
    batch mode faster by the margin at ``point``'s core shape. The mode applies to every batch of that core shape (an item's bits
    must not depend on its batch), so it is timed on a batch of at least 4 items per thread, the
    throughput case: one item alone on BLAS's threads can be faster (St(3072, 32) projection,
    2 cores: 1.7x), a batch item by item on them slower (St(784, 32) x 200: 0.65x)."""
    batch = (max(point[0], 4 * threads),) + tuple(point[1:])
    fns = _mode_fns(name, batch)
    if fns is None:
        return None, None, None
    args = sweep._inputs(name, batch)
    times = block_medians({m: (f, args) for m, f in fns.items()}, repeats)
    ratio = times["items"] / times["blas"]
    mode = "items" if ratio * sweep.MARGIN <= 1.0 else "blas" if ratio >= sweep.MARGIN else None
    return mode, ratio, fns.get(mode)


def tune(points, budget_s=None, repeats=3, rounds=2, out=print, verbose=False):
    """Time ``points`` (``[(kernel, point)]``, in order) until ``budget_s`` seconds are spent;
    ``(table, rows)``: ``sweep.derive_auto``'s points (with the C++ batch mode where one was
    faster) and the timed rows."""
    backends = kernels.warm_up(name for name, _ in points)
    t0 = time.perf_counter()
    threads = kernels.get_threads()
    rows, slowest, modes = [], 0.0, {}
    out(f"{'kernel':24s}{'point (N, dims)':>18s}" + "".join(f"{b + ' x':>9s}" for b in backends)
        + f"{'mode':>7s}  {'shipped':22s} {'tuned':22s}")
    for name, point in points:
        left = None if budget_s is None else budget_s - (time.perf_counter() - t0)
        if left is not None and (left <= 0 or left < slowest):
            out(f"time budget {budget_s:.0f} s spent: {len(points) - len(rows)} of "
                f"{len(points)} points not timed")
            break
        t_point = time.perf_counter()
        core = (name, tuple(point[1:]))
        if core not in modes:  # one mode per core shape, timed once
            modes[core] = _best_mode(name, point, repeats, threads)
        mode, ratio, fn = modes[core]
        fns = None
        if mode is not None:  # the C++ route timed in its faster mode
            fns = {**sweep.backend_fns(name, point, backends), "cpp": fn}
        row = sweep.time_rounds(name, point, backends, repeats, rounds, fns=fns)
        row["parallel"] = mode
        rows.append(row)
        slowest = max(slowest, time.perf_counter() - t_point)
        t = row["times"]
        (p,) = sweep.derive_auto([row])[name]
        shipped = kernels.auto_order(name, p.at)
        cells = "".join(f"{t['numpy'] / t[b]:9.2f}" if b in t else f"{'-':>9s}"
                        for b in backends)
        mark = "" if p.order[0] == shipped[0] else "  <- changed"
        out(f"{name:24s}{str(tuple(point)):>18s}{cells}{mode or '-':>7s}  "
            f"{' '.join(shipped):22s} {' '.join(p.order):22s}{mark}")
        if verbose:
            out("    ms: " + ", ".join(f"{b} {v * 1e3:.3g}" for b, v in t.items())
                + (f"; C++ items / blas mode {ratio:.2f}" if ratio is not None else ""))
    return sweep.derive_auto(rows), rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rfl-fast tune", description=__doc__.split("\n\n")[0])
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true", help="print only the result")
    level.add_argument("-v", "--verbose", action="store_true",
                       help="also each point's times (ms) and the C++ batch modes' ratio")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help=f"a short list of telling shapes, about {QUICK_BUDGET_S:.0f} s of "
                           "timing (the default)")
    size.add_argument("--full", action="store_true",
                      help="every kernel over the sweep's sample grid (tens of minutes)")
    parser.add_argument("--threads", type=int, default=None,
                        help="C++ threads to tune for (default: the setting in force); the "
                             "policy is kept per thread count")
    parser.add_argument("--budget-s", type=float, default=None,
                        help=f"stop timing new points after this many seconds (--quick: "
                             f"{QUICK_BUDGET_S:.0f})")
    parser.add_argument("--dry-run", action="store_true", help="measure and print; write nothing")
    parser.add_argument("--out", default=None,
                        help="write the policy here instead of the cache folder (it is used "
                             "only where RFL_FAST_POLICY names it)")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads: expected an integer >= 1, got {args.threads}")
    import rfl_fast as rf

    t0 = time.perf_counter()
    if args.threads is not None:
        rf.set_threads(args.threads)
    threads = rf.get_threads()
    budget = args.budget_s if args.budget_s is not None else (None if args.full
                                                              else QUICK_BUDGET_S)
    points = full_points() if args.full else quick_points()
    say = (lambda *a, **k: None) if args.quiet else print
    key = policy.machine_key()
    say(f"tuning auto for {key['cpu']} ({key['cores']} cores), {threads} C++ threads, BLAS "
        f"{'; '.join(key['blas'])}, rfl_fast {key['package']}: {len(points)} points"
        + (f", at most {budget:.0f} s" if budget else ""))
    table, rows = tune(points, budget, repeats=3 if args.full else 2,
                       rounds=3 if args.full else 2, out=say, verbose=args.verbose)
    changed = [(n, p.at) for n, pts in table.items() for p in pts
               if p.order[0] != kernels.auto_order(n, p.at)[0]]
    modes = sum(p.parallel is not None for pts in table.values() for p in pts)
    bad = [(r["kernel"], r["point"], b) for r in rows for b, ok in r["agree"].items() if not ok]
    print(f"timed {len(rows)} points in {time.perf_counter() - t0:.0f} s: auto's first choice "
          f"changes at {len(changed)} of them"
          + (f" ({', '.join(f'{n} {a}' for n, a in changed)})" if changed else "")
          + f"; C++ batch mode fixed at {modes}")
    if bad:
        print(f"backends disagree with the reference (kept after it): {bad}", file=sys.stderr)
    if args.dry_run or not rows:
        print("nothing written" + (" (--dry-run)" if args.dry_run else ""))
        return 0
    path = args.out or policy.tuned_path(threads, key)
    command = "rfl-fast tune " + " ".join(sys.argv[1:] if argv is None else argv)
    note = (f"Measured by `{command.strip()}` ({len(rows)} points, "
            f"{statistics.median(len(r['rounds']) for r in rows):.0f} rounds each, median).")
    sweep.write_policy(table, path, note, key, threads, portable=False, command=command.strip())
    kernels.reload_policy()
    print(f"wrote {path}" + ("" if args.out is None else
                             f" (used where {policy.ENV}={os.path.abspath(path)})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
