"""Side-by-side speed of every backend of every kernel against the NumPy reference.

One process, the same inputs for every backend, medians of several repeats after a warm-up
call, the backends of a kernel timed in turn within each repeat. Prints a table (speed-up of
each backend over the reference, and for memory-bound kernels the memory-traffic floor: bytes
read + written / measured copy bandwidth), the machine (CPU, BLAS kernel and threads) and
writes JSON.

    rfl-fast bench                      # the papers' shapes (or: python benchmarks/compare.py)
    rfl-fast bench --smoke              # tiny shapes: runs, and checks backends agree
    rfl-fast bench --only sym_ --json out.json
    rfl-fast bench --only clipped       # the fused DP clipped sum (m = 6000, d = 784, r = 5)
    rfl-fast bench --sweep [--only stiefel_proj]   # the shape sweep: auto's rules, each margin
    rfl-fast bench --scaling            # the kernels on 1, 2, 4, ... threads, with the floor
    rfl-fast bench --federated [--ks 10,100,1000] [--only kPCA] [--json out.json]
                                        # the workload matrix (rfl_fast.app.workloads)

Never used for assertions on time; only ``--smoke`` fails (exit 1) when a backend disagrees
with the reference (``--federated --smoke``: when a batched-NumPy floor's iterates differ from
the package's).
"""

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import rfl_fast as rf

from .. import kernels
from ..errors import BackendUnavailableError
from ..kernels.registry import FAMILIES, REGISTRY, bench_shapes
from ..kernels.testing import kernel_inputs
from .timing import AGREE_ATOL, WARMUP_S, agree, block_medians, median_time, scaled_error

#: (kernel, (N, n, p)) at the papers' shapes (vectors (N, d)): every registered kernel at its
#: ``registry.bench_shapes``
FULL_CASES = [(k, shape) for k in REGISTRY for shape in bench_shapes(k)]
#: every registered kernel at a tiny shape of its family
SMOKE_CASES = [(k, (3, 6, 2) if REGISTRY[k].family == "stiefel" else (3, 4)) for k in REGISTRY]


def copy_bandwidth(n_bytes=256 * 2**20, repeats=5, threads=1):
    """Bytes moved (read + write) per second by a large ``np.copyto``, split over ``threads``
    threads (equal slices, copied at once: NumPy releases the GIL while it copies)."""
    a = np.ones(n_bytes // 8)
    b = np.empty_like(a)
    if threads == 1:
        return 2 * a.nbytes / median_time(np.copyto, (b, a), repeats)
    from concurrent.futures import ThreadPoolExecutor

    cuts = np.linspace(0, a.size, threads + 1).astype(int)
    with ThreadPoolExecutor(threads) as pool:
        def copy():
            list(pool.map(lambda i: np.copyto(b[cuts[i]:cuts[i + 1]], a[cuts[i]:cuts[i + 1]]),
                          range(threads)))
        return 2 * a.nbytes / median_time(copy, (), repeats)


#: ``--scaling``'s workloads (label, kernel, (N, *dims)): the papers' large batches
SCALING_CASES = [
    ("St(784,5) x 2e4 polar retr", "stiefel_retr_polar", (20_000, 784, 5)),
    ("St(784,5) x 2e4 polar inv_retr", "stiefel_inv_retr_polar", (20_000, 784, 5)),
    ("St(784,32) x 500 polar retr", "stiefel_retr_polar", (500, 784, 32)),
    ("SPD(9) x 1e5 sym_logm", "sym_logm", (100_000, 9)),
    ("Sphere(784) x 1e5 exp", "sphere_exp", (100_000, 784)),
]
#: ``--scaling --smoke``: the same kernels at tiny shapes (the test suite's run)
SMOKE_SCALING = [
    ("St(20,5) x 8 polar retr", "stiefel_retr_polar", (8, 20, 5)),
    ("St(20,5) x 8 polar inv_retr", "stiefel_inv_retr_polar", (8, 20, 5)),
    ("St(40,32) x 4 polar retr", "stiefel_retr_polar", (4, 40, 32)),
    ("SPD(9) x 16 sym_logm", "sym_logm", (16, 9)),
    ("Sphere(20) x 16 exp", "sphere_exp", (16, 20)),
]


def thread_counts(cores):
    """1, 2, 4, ... below ``cores``, then ``cores``."""
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return counts + [cores]


def scaling(cases, repeats=5, cores=None, bandwidth_bytes=256 * 2**20):
    """Each case's ``auto`` route (raw kernel, as chosen at that thread count) at 1, 2, 4, ...
    threads for C++, BLAS and Numba alike, the thread counts alternating within each repeat
    (one untimed call first, then a timed one); medians. The floor: bytes read and written /
    the copy bandwidth with every thread."""
    cores = cores or rf.get_threads()
    counts = thread_counts(cores)
    before = rf.get_threads()
    numba = None
    if kernels.is_available("numba"):
        import numba
    bandwidth = {t: copy_bandwidth(bandwidth_bytes, threads=t) for t in (1, cores)}
    rows = []
    try:
        for label, name, shape in cases:
            args = tuple(np.ascontiguousarray(a) for a in kernel_inputs(
                name, np.random.default_rng(0), *shape))
            times = {t: [] for t in counts}
            route = {}
            for _ in range(repeats):
                for t in counts:
                    with kernels.limit_blas_threads(t):
                        rf.set_threads(t)
                        if numba is not None:
                            numba.set_num_threads(min(t, numba.config.NUMBA_NUM_THREADS))
                        route[t], fn = kernels.resolve(name, "auto", args[0].shape)
                        out = fn(*args)
                        t0 = time.perf_counter()
                        fn(*args)
                        times[t].append(time.perf_counter() - t0)
            med = {t: statistics.median(v) for t, v in times.items()}
            moved = sum(a.nbytes for a in args) + out.nbytes
            rows.append({"workload": label, "kernel": name, "shape": list(shape),
                         "route": {str(t): r for t, r in route.items()},
                         "seconds": {str(t): v for t, v in med.items()},
                         "floor_s": moved / bandwidth[cores], "bytes": moved})
            del args, out
    finally:
        rf.set_threads(before)
        if numba is not None:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return {"threads": counts, "copy_bandwidth_GBps": {str(t): b / 1e9 for t, b in
                                                        bandwidth.items()}, "rows": rows}


def print_scaling(result):
    counts = result["threads"]
    top = str(counts[-1])
    bw = result["copy_bandwidth_GBps"]
    print(f"copy bandwidth (read + write): {bw['1']:.1f} GB/s on 1 thread, {bw[top]:.1f} GB/s "
          f"on {top}")
    head = "".join(f"{c:>9d}" for c in counts)
    print(f"\n{'workload (ms, median; auto route)':34s}{head}{'1 -> ' + top:>10s}"
          f"{'floor ms':>10s}{'x floor':>9s}  route")
    for r in result["rows"]:
        s = r["seconds"]
        cells = "".join(f"{s[str(c)] * 1e3:9.3g}" for c in counts)
        routes = sorted(set(r["route"].values()))
        print(f"{r['workload']:34s}{cells}{s['1'] / s[top]:9.2f}x{r['floor_s'] * 1e3:10.3g}"
              f"{s[top] / r['floor_s']:8.1f}x  {'/'.join(routes)}")
    print(f"floor: bytes read + written / the copy bandwidth on {top} threads; "
          f"x floor: the time on {top} threads over it")


def cpu_model():
    """The CPU's model name (``/proc/cpuinfo``: x86 "model name", Arm "Model" or "Hardware";
    elsewhere ``platform``)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine():
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "rfl_fast": rf.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)")}
    info["cpu"] = cpu_model()
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [f"{p.get('internal_api')} {p.get('version')} kernel="
                        f"{p.get('architecture')} threads={p.get('num_threads')}"
                        for p in threadpool_info()]
    except ImportError:
        info["blas"] = ["(threadpoolctl not installed)"]
    if kernels.is_available("numba"):
        import numba

        info["numba_threads"] = numba.get_num_threads()
    if kernels.is_available("cpp"):
        info["cpp_threads"] = rf.get_threads()
    return info


def run(cases, repeats, bandwidth, warmup_s=WARMUP_S):
    backends = kernels.available_backends()
    rows = []
    for name, shape in cases:
        rng = np.random.default_rng(0)
        args = tuple(np.ascontiguousarray(a) for a in kernel_inputs(name, rng, *shape))
        want = kernels.resolve(name, "numpy")[1](*args)  # the reference, declared or not
        row = {"kernel": name, "shape": list(shape), "times": {}, "agree": {}, "error": {}}
        calls = {}
        for b in backends:
            try:
                _, fn = kernels.resolve(name, b)
            except BackendUnavailableError:  # a kernel this backend does not compile
                continue
            got = fn(*args)
            row["agree"][b] = agree(got, want)
            row["error"][b] = scaled_error(got, want)
            calls[b] = (fn, args)
        row["times"] = block_medians(calls, repeats, warmup_s=warmup_s)
        if FAMILIES[REGISTRY[name].family].memory_bound:
            moved = sum(a.nbytes for a in args) + want.nbytes
            row["floor"] = moved / bandwidth
        rows.append(row)
        print_row(row, backends)
    return rows


def print_header(backends):
    cols = "".join(f"{b + ' ms (x)':>20s}" for b in backends)
    print(f"{'kernel':24s}{'shape':>18s}{cols}{'floor ms':>10s}{'best/floor':>11s}")


def print_row(row, backends):
    ref_t = row["times"].get("numpy")
    cells = ""
    for b in backends:
        t = row["times"].get(b)
        if t is None:
            cells += f"{'-':>20s}"
            continue
        mark = "" if row["agree"][b] else " DIFF"
        cells += f"{t * 1e3:11.3f} ({ref_t / t:5.1f}x){mark}"[:20].rjust(20)
    floor = row.get("floor")
    best = min(row["times"].values())
    tail = f"{floor * 1e3:10.3f}{best / floor:10.1f}x" if floor else f"{'':10s}{'':11s}"
    print(f"{row['kernel']:24s}{str(tuple(row['shape'])):>18s}{cells}{tail}")


def extra_baselines(repeats):
    """Baselines users run today besides the reference: a scipy.linalg.logm loop."""
    import scipy.linalg

    x = kernel_inputs("sym_logm", np.random.default_rng(0), 1_000, 9)[0]
    t_loop = median_time(lambda a: [scipy.linalg.logm(m) for m in a], (x,), max(1, repeats // 3))
    _, fn = kernels.resolve("sym_logm", "auto", (1, 9, 9))
    t_fast = median_time(fn, (x,), repeats)
    print(f"\nsym_logm 1000 x 9x9: scipy.linalg.logm loop {t_loop * 1e3:.1f} ms, "
          f"auto backend {t_fast * 1e3:.3f} ms: {t_loop / t_fast:.0f}x")
    return {"scipy_logm_loop_1000x9": t_loop, "auto_sym_logm_1000x9": t_fast}


def clipped_sum_rows(repeats, shape=(6000, 784, 5), bandwidth=None):
    """Fused clipped per-sample gradient sum of kPCA at ``shape = (m, d, r)`` (Huang et al. 2024's
    MNIST shape), side by side in one loop (alternating, medians): every route of
    ``privacy.clipped_sum_pca``, against materializing the (m, d, r) per-sample gradients with
    NumPy (``clipped_sum_reference``) and against the plain non-private gradient
    ``-c (I - XX') Z'(ZX)`` (BLAS). Printed as ratios; the floor is one read of Z / copy
    bandwidth. Each repeat runs every route as a block: :data:`WARMUP_S` seconds of untimed
    calls, then :data:`BLOCK_CALLS` timed ones (the materialized route: one timed call)."""
    from .. import privacy as P

    m, d, r = shape
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((m, d)) / np.sqrt(d)
    M = rf.Stiefel(d, r)
    X = M.random_point(rng=1)
    c, tau = 2.0, 0.5

    def nonprivate():
        S = Z.T @ (Z @ X)
        return -c * (S - X @ (X.T @ S))

    def materialized():
        return P.clipped_sum_reference(M, X, P.pca_sample_rgrads(Z, X, c), tau)

    cases = {"non-private gradient (BLAS)": nonprivate, "materialized (m,d,r) NumPy": materialized}
    routes = ["numpy"] + (["numba"] if kernels.is_available("numba") else [])
    from ..kernels import fused
    if fused.compiled_available():
        routes.append("cpp")
    for b in routes:
        cases[f"fused clipped sum, {b}"] = (lambda b=b: P.clipped_sum_pca(Z, X, tau, c,
                                                                          backend=b))
    want = materialized()
    agree_ = {k: (agree(f(), want) if k.startswith("fused") else True) for k, f in cases.items()}
    med = block_medians({k: (f, ()) for k, f in cases.items()}, repeats,
                        once=("materialized (m,d,r) NumPy",))
    base, mat = med["non-private gradient (BLAS)"], med["materialized (m,d,r) NumPy"]
    floor = Z.nbytes / bandwidth if bandwidth else None
    print(f"\nclipped per-sample gradient sum, kPCA m={m} d={d} r={r} (tau={tau}):")
    print(f"{'route':34s}{'ms':>9s}{'x non-private':>15s}{'materialized/x':>16s}"
          f"{'x floor':>9s}")
    rows = []
    for k, t in med.items():
        mark = "" if agree_[k] else " DIFF"
        tail = f"{t / floor:9.1f}" if floor else ""
        print(f"{k:34s}{t * 1e3:9.2f}{t / base:15.2f}{mat / t:16.1f}{tail}{mark}")
        rows.append({"route": k, "seconds": t, "over_nonprivate": t / base,
                     "speedup_vs_materialized": mat / t, "agree": agree_[k]})
    return {"shape": list(shape), "tau": tau, "floor_s": floor, "rows": rows}


def dispatch_overhead(repeats, number=100):
    """Public ``Stiefel(784, 5)`` methods on one matrix against their raw kernels, timed in
    blocks of ``number`` calls by ``block_medians`` (warm-up, routes alternating); medians per
    call."""
    M = rf.Stiefel(784, 5)
    x = M.random_point(rng=0)
    u = M.random_tangent(x, rng=1)

    def block(fn, *args):
        def run():
            for _ in range(number):
                fn(*args)
        return run, ()

    rows = {}
    for method, kernel in (("retr", "stiefel_retr_polar"), ("proj", "stiefel_proj")):
        name, fn = kernels.resolve(kernel, "auto", (1, 784, 5))
        med = block_medians({"raw": block(fn, x[None], u[None]),
                             "public": block(getattr(M, method), x, u)}, repeats)
        raw, public = med["raw"] / number, med["public"] / number
        print(f"dispatch overhead, Stiefel(784, 5).{method} on one matrix ({name}): "
              f"public {public * 1e6:.1f} us, raw kernel {raw * 1e6:.1f} us, "
              f"overhead {(public - raw) * 1e6:.1f} us")
        rows[method] = {"public_us": public * 1e6, "raw_us": raw * 1e6}
    return rows


def agreement_summary(rows, verbose=False):
    """What a run checked: which kernels, which backends agreed with the reference, to what
    tolerance (and with ``verbose`` each kernel's largest scaled error per backend)."""
    kernels_seen = list(dict.fromkeys(r["kernel"] for r in rows if "error" in r))
    backends = [b for b in dict.fromkeys(b for r in rows for b in r.get("error", {}))
                if b != "numpy"]
    lines = [f"checked {len(kernels_seen)} kernels against the NumPy reference "
             f"(agree: |backend - reference| <= {AGREE_ATOL:g} * max(1, max|reference|), "
             f"NaN where it is NaN): {', '.join(kernels_seen)}"]
    for b in backends:
        mine = [r for r in rows if b in r.get("error", {})]
        ok = sum(r["agree"][b] for r in mine)
        worst = max((r["error"][b] for r in mine), default=0.0)
        lines.append(f"  {b:6s} {ok}/{len(mine)} agree, largest scaled error {worst:.1e}")
    if not backends:
        lines.append("  no compiled backend available: only the reference ran")
    if verbose:
        for r in rows:
            if "error" in r:
                errs = ", ".join(f"{b} {e:.1e}" for b, e in r["error"].items() if b != "numpy")
                lines.append(f"    {r['kernel']:24s} {str(tuple(r['shape'])):>14s}  {errs}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="rfl-fast bench", description=__doc__.split("\n\n")[0])
    level = parser.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", action="store_true",
                       help="print only what was checked (and disagreements)")
    level.add_argument("-v", "--verbose", action="store_true",
                       help="also each kernel's largest error against the reference")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, check agreement")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (median)")
    parser.add_argument("--only", default="", help="run kernels whose name contains this")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--sweep", action="store_true",
                        help="every kernel over the registry's shape grid (see rfl_fast.app.sweep)")
    parser.add_argument("--scaling", action="store_true",
                        help="the large-batch workloads on 1, 2, 4, ... threads (up to the "
                             "C++ thread setting), with the copy-bandwidth floor (--smoke: tiny)"),
    parser.add_argument("--federated", action="store_true",
                        help="the workload matrix: every algorithm x problem at k participants "
                             "against the batched-NumPy and flop/memory floors (--smoke: toy "
                             "shapes, k = 3, one round)")
    parser.add_argument("--ks", default=None,
                        help="with --federated: participant counts, comma-separated (default "
                             "10,100; the issue's full list: 10,100,1000,10000)")
    parser.add_argument("--no-memory", action="store_true",
                        help="with --federated: skip the peak-memory pass")
    parser.add_argument("--quick", action="store_true",
                        help="with --sweep: the registry's sample of each grid (minutes)")
    parser.add_argument("--min-size", type=int, default=0,
                        help="with --sweep: only grid points whose last core dimension "
                             "(Stiefel p, matrix n, vector d) is at least this")
    args = parser.parse_args(argv)
    if args.min_size and not args.sweep:
        parser.error("--min-size needs --sweep")
    if sum((args.scaling, args.sweep, args.federated)) > 1:
        parser.error("--scaling, --sweep and --federated are different runs")
    if (args.ks is not None or args.no_memory) and not args.federated:
        parser.error("--ks and --no-memory need --federated")
    if args.federated:
        return _federated(args, parser)
    if args.scaling:
        return _scaling(args)
    if args.quiet:  # the tables go nowhere; the summary and errors are printed below
        with contextlib.redirect_stdout(io.StringIO()):
            rows, status = _sweep(args) if args.sweep else _compare(args)
    else:
        rows, status = _sweep(args) if args.sweep else _compare(args)
    if not args.sweep:  # the sweep prints its own summary
        print(agreement_summary(rows, verbose=args.verbose))
    return status


def _federated(args, parser):
    """``--federated``: the workload matrix (:mod:`rfl_fast.app.workloads`); exit 1 when a
    floor's iterates differ from the package's (more than :data:`FLOOR_ATOL`, scaled)."""
    from . import workloads as W

    if args.ks is None:
        ks = (3,) if args.smoke else W.DEFAULT_KS
    else:
        try:
            ks = tuple(int(v) for v in args.ks.split(","))
        except ValueError:
            parser.error(f"--ks: expected comma-separated integers, got {args.ks!r}")
        if not ks or min(ks) < 1:
            parser.error(f"--ks: expected participant counts >= 1, got {args.ks!r}")
    repeats = args.repeats or (1 if args.smoke else 3)
    if repeats < 1:
        parser.error(f"--repeats: expected an integer >= 1, got {repeats}")
    shapes = W.Shapes.tiny() if args.smoke else W.Shapes()
    problems = [p for p in W.PROBLEMS if args.only in p] or W.PROBLEMS
    algorithms = [c[0] for c in W.ALGORITHM_CASES if args.only in c[0]] or None
    if args.only and problems is W.PROBLEMS and algorithms is None:
        parser.error(f"--only {args.only!r}: no problem or algorithm of the matrix matches "
                     f"({', '.join(W.PROBLEMS)}; {', '.join(c[0] for c in W.ALGORITHM_CASES)})")
    info = machine()
    info["load_average"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    rates = {"dgemm_flops": W.dgemm_rate(256 if args.smoke else 1024),
             "copy_Bps": copy_bandwidth(4 * 2**20 if args.smoke else 256 * 2**20)}
    if not args.quiet:
        for k, v in info.items():
            print(f"{k}: {v}")
        print(W.describe_rates(rates, repeats))
        print(W.HEADER)
    result = W.run_matrix(ks, shapes, repeats, problems, algorithms, memory=not args.no_memory,
                          rates=rates,
                          progress=None if args.quiet else lambda r: print(W.format_row(r),
                                                                           flush=True))
    result["machine"] = info
    if not args.quiet:
        W.print_table(result, rows=False)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    bad = [(r["problem"], r["algorithm"], r["k"], r["max_dx"]) for r in result["rows"]
           if not r.get("max_dx", 0.0) <= FLOOR_ATOL]
    print(f"{len(result['rows'])} cells, {len(result['refused'])} pairs refused by the package; "
          f"floors agree with the package's iterates in {len(result['rows']) - len(bad)}")
    if bad:
        print(f"floors disagree with the package: {bad}", file=sys.stderr)
        return 1
    return 0


#: ``--federated``: a floor agrees with the package when their server points differ by at most
#: this, scaled by max(1, max|x|)
FLOOR_ATOL = 1e-9


def _scaling(args):
    """``--scaling``: the table of :func:`scaling`; never checks agreement (``--smoke`` does)."""
    cases = [c for c in (SMOKE_SCALING if args.smoke else SCALING_CASES) if args.only in c[1]]
    info = machine()
    if not args.quiet:
        for k, v in info.items():
            print(f"{k}: {v}")
    result = scaling(cases, repeats=args.repeats or (1 if args.smoke else 5),
                     bandwidth_bytes=(4 if args.smoke else 256) * 2**20)
    result["machine"] = info
    if not args.quiet:
        print_scaling(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


def _compare(args):
    """The side-by-side table at the papers' (or smoke) shapes: ``(rows, exit status)``."""
    repeats = args.repeats or (2 if args.smoke else 7)
    cases = [c for c in (SMOKE_CASES if args.smoke else FULL_CASES) if args.only in c[0]]

    info = machine()
    bandwidth = copy_bandwidth(16 * 2**20 if args.smoke else 256 * 2**20)
    info["copy_bandwidth_GBps"] = bandwidth / 1e9
    for k, v in info.items():
        print(f"{k}: {v}")
    backends = kernels.available_backends()
    print()
    print_header(backends)
    rows = run(cases, repeats, bandwidth, 0.0 if args.smoke else WARMUP_S)
    print("floor: bytes read + written / the copy bandwidth of one thread on a 256 MB array "
          "(memory);\n  below 1x, the data came from the last-level cache or several threads "
          "moved it")
    result = {"machine": info, "repeats": repeats, "rows": rows}
    if args.only in "clipped_sum_pca":
        shape = (50, 12, 3) if args.smoke else (6000, 784, 5)
        result["clipped_sum"] = clipped_sum_rows(repeats, shape, bandwidth)
        if not all(r["agree"] for r in result["clipped_sum"]["rows"]):
            rows.append({"kernel": "clipped_sum_pca", "agree": {"fused": False}})
    if not args.smoke and not args.only:
        result["baselines"] = extra_baselines(repeats)
        result["dispatch"] = dispatch_overhead(repeats)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    bad = [(r["kernel"], b) for r in rows for b, ok in r["agree"].items() if not ok]
    if bad:
        print(f"\nbackends disagree with the reference: {bad}", file=sys.stderr)
        return rows, 1
    return rows, 0


def _sweep(args):
    """The shape sweep (``rfl_fast.app.sweep``): ``(rows, exit status)``."""
    from . import sweep
    from ..kernels import KERNELS

    info = machine()
    for k, v in info.items():
        print(f"{k}: {v}")
    names = [k for k in KERNELS if args.only in k]
    rows = sweep.run_sweep(names, repeats=args.repeats or 3, quick=args.quick,
                           min_size=args.min_size)
    sweep.print_summary(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
    bad = [(r["kernel"], r["point"], b) for r in rows for b, ok in r["agree"].items() if not ok]
    if bad:
        print(f"\nbackends disagree with the reference: {bad}", file=sys.stderr)
        return rows, 1
    return rows, 0


if __name__ == "__main__":
    sys.exit(main())
