"""Seconds per communication round at the MNIST shape, rfl_fast against the reference path.

kPCA on St(784, 5), n = 200 clients x 300 samples (MNIST when ``$RFL_FAST_DATA/mnist`` has
the IDX files, else synthetic Gaussian data of that shape), k = 20 per round, tau = 5, for
RFedAvg and RFedSVRG (its full-gradient phase included), with and without the per-round
metrics (grad norm, principal angles, f - f*), side by side with
:mod:`rfl_fast.app.experiments.reference_path` (the papers' style: Python loops over clients and
steps, a d x d covariance per client, metrics from every client). Also reported:

* the largest difference between the two paths' server iterates (same seed, participants, x0);
* the memory-traffic floor: bytes of client data a round must read / measured copy bandwidth
  (STREAM convention: (read + write bytes) / time of ``np.copyto`` on 256 MiB); RFedSVRG's
  all-``n`` exchange counts all ``n`` clients' data. The last column divides by the data the
  fast path actually reads (its ``g_t`` comes from the pooled ``d x d`` matrix, see
  ``rfl_fast.algorithms.svrg``);
* peak traced memory (tracemalloc) of the fast path, data generation included, against the
  size of the client data.

Both paths run under the same thread settings (``--threads``, default 1): BLAS limited to that
many threads around each path (``run(..., blas_threads=)`` for the fast path,
:func:`rfl_fast.kernels.limit_blas_threads` around the reference), the same count for the C++
kernels and Numba. Without that, the reference's BLAS ran on every core while the fast path's
ran on one, and the speed-up mostly measured the machine's load.

    python benchmarks/rounds.py [--rounds 8] [--warmup 2] [--ref-rounds 4] [--quick]
                                [--threads 1] [--full-gradient all|participants] [--json PATH]
"""

import argparse
import json
import sys
import time
import tracemalloc

import numpy as np

D, R, N, M, K, TAU = 784, 5, 200, 300, 20, 5
STEP = 1e-3


def client_data(seed=0, n=N, m=M, d=D):
    """``(Z (n, m, d), source)``: MNIST rows (pixels / 255) if present, else Gaussian."""
    from rfl_fast.data import load_mnist
    try:
        X, _ = load_mnist(split="train")
        if d == X.shape[1] and X.shape[0] >= n * m:
            rng = np.random.default_rng(seed)
            return np.ascontiguousarray(X[rng.permutation(X.shape[0])[:n * m]].reshape(n, m, d)), \
                "mnist"
    except FileNotFoundError:
        pass
    return np.random.default_rng(seed).standard_normal((n, m, d)), "synthetic Gaussian"


def copy_bandwidth(nbytes=2**28, repeats=5):
    """STREAM-style copy bandwidth in bytes/s: 2 * size / best time of ``np.copyto``."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def bytes_per_round(alg, n=N, m=M, d=D, k=K, tau=TAU, full_gradient="all"):
    """Client-data bytes a round must read: one pass per gradient evaluation of a client."""
    per_client = m * d * 8
    if alg == "RFedAvg":
        return tau * k * per_client
    gathered = n if full_gradient == "all" else k
    return (gathered + (tau - 1) * k) * per_client      # g_t, then tau - 1 local gradients


def bytes_touched(alg, n=N, m=M, d=D, k=K, tau=TAU, full_gradient="all"):
    """Client-data bytes rfl_fast's simulation actually reads per round: RFedSVRG's all-``n``
    exchange takes ``g_t`` from the pooled ``d x d`` matrix (read once, ``d^2`` doubles) and
    only the participants evaluate their own ``grad f_i(x_t)``."""
    if alg == "RFedAvg" or full_gradient != "all":
        return bytes_per_round(alg, n, m, d, k, tau, full_gradient)
    return tau * k * m * d * 8 + d * d * 8


def make_algorithm(name, full_gradient="all"):
    from rfl_fast.algorithms import RFedAvg, RFedSVRG
    if name == "RFedAvg":
        return RFedAvg(STEP, TAU)
    return RFedSVRG(STEP, TAU, full_gradient=full_gradient)


def set_compiled_threads(threads):
    """``threads`` threads for the C++ kernels and Numba (BLAS is limited per path); a
    description."""
    import rfl_fast as rf
    from rfl_fast import kernels
    said = [f"BLAS {threads}"]
    if kernels.is_available("cpp"):
        rf.set_threads(threads)
        said.append(f"C++ {threads}")
    if kernels.is_available("numba"):
        import numba
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        said.append(f"Numba {numba.get_num_threads()}")
    return ", ".join(said)


def time_fast(P, name, x0, rounds, warmup, metrics, seed=0, full_gradient="all", threads=1):
    """Median seconds per round (wall, + metrics when on) after ``warmup`` rounds, BLAS on
    ``threads`` threads; final x."""
    from rfl_fast.federation import Uniform, run
    res = run(P, make_algorithm(name, full_gradient), warmup + rounds, participation=Uniform(K),
              x0=x0, seed=seed, metrics=metrics, blas_threads=threads)
    h = res.history
    per = np.asarray(h.wall[1 + warmup:], dtype=float)
    if metrics:
        per = per + np.asarray(h.wall_metrics[1 + warmup:], dtype=float)
    return float(np.median(per)), res.x


def time_reference(RP, name, x0, rounds, warmup, metrics, seed=0, full_gradient="all",
                   threads=1):
    """As :func:`time_fast` for the reference path, BLAS on ``threads`` threads."""
    from rfl_fast.app.experiments.reference_path import run_reference
    from rfl_fast.kernels import limit_blas_threads
    with limit_blas_threads(threads):
        x, rows = run_reference(RP, name, warmup + rounds, K, x0, seed=seed, step=STEP,
                                local_steps=TAU, metrics=metrics, full_gradient=full_gradient)
    per = [r["wall"] + r.get("wall_metrics", 0.0) for r in rows[warmup:]]
    return float(np.median(per)), x


def peak_memory(seed=0, rounds=2, full_gradient="all"):
    """(peak traced bytes, client-data bytes) of data + problem + rounds of both algorithms
    with metrics."""
    from rfl_fast.federation import Uniform, run
    from rfl_fast.problems import KPCA
    tracemalloc.start()
    Z, _ = client_data(seed)
    P = KPCA(Z, R)
    x0 = P.manifold.random_point(rng=1)
    for name in ("RFedAvg", "RFedSVRG"):
        run(P, make_algorithm(name, full_gradient), rounds, participation=Uniform(K), x0=x0,
            seed=seed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, Z.nbytes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="timed rounds, fast path")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--ref-rounds", type=int, default=4, help="timed rounds, reference path")
    ap.add_argument("--full-gradient", default="all", choices=("all", "participants"))
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of BLAS, C++ and Numba, the same for both paths")
    ap.add_argument("--quick", action="store_true", help="fewer rounds, no memory run")
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup, args.ref_rounds = 3, 1, 2
    if args.threads < 1:
        ap.error(f"--threads: expected an integer >= 1, got {args.threads}")
    threads = set_compiled_threads(args.threads)

    from rfl_fast.app.experiments.reference_path import ReferenceKPCA
    from rfl_fast.kernels import limit_blas_threads
    from rfl_fast.problems import KPCA
    fg = args.full_gradient
    Z, source = client_data(0)
    with limit_blas_threads(args.threads):     # set-up times under the same settings
        t0 = time.perf_counter()
        P = KPCA(Z, R)
        P.solution()
        P.f_star()
        t_fast_setup = time.perf_counter() - t0
        t0 = time.perf_counter()
        RP = ReferenceKPCA(list(Z), R)
        t_ref_setup = time.perf_counter() - t0
    x0 = P.manifold.random_point(rng=1)
    bw = copy_bandwidth()
    print(f"kPCA St({D},{R}), n={N} x {M} samples ({source}), k={K}, tau={TAU}, "
          f"RFedSVRG g_t over {'all n' if fg == 'all' else 'participants'}; threads of both "
          f"paths: {threads}")
    print(f"client data {Z.nbytes / 2**20:.0f} MiB; reference covariances "
          f"{N * D * D * 8 / 2**20:.0f} MiB; copy bandwidth {bw / 1e9:.1f} GB/s; "
          f"set-up fast {t_fast_setup:.1f} s, reference {t_ref_setup:.1f} s")
    head = (f"{'algorithm':9} {'metrics':7} {'fast s/rnd':>10} {'ref s/rnd':>10} "
            f"{'speed-up':>8} {'floor s':>8} {'fast/floor':>10} {'max|dx|':>9} "
            f"{'touched/floor':>13}")
    print(head)
    print("-" * len(head))
    rows = []
    for name in ("RFedAvg", "RFedSVRG"):
        floor = bytes_per_round(name, full_gradient=fg) / bw
        for metrics in (False, True):
            tf, xf = time_fast(P, name, x0, args.rounds, args.warmup, metrics, full_gradient=fg,
                               threads=args.threads)
            tr, xr = time_reference(RP, name, x0, args.ref_rounds, args.warmup, metrics,
                                    full_gradient=fg, threads=args.threads)
            # same number of rounds for the iterate comparison
            _, xf2 = time_fast(P, name, x0, args.ref_rounds, args.warmup, False,
                               full_gradient=fg, threads=args.threads)
            dx = float(np.max(np.abs(xf2 - xr)))
            touched = bytes_touched(name, full_gradient=fg) / bw
            row = {"algorithm": name, "metrics": metrics, "fast_s": tf, "reference_s": tr,
                   "speedup": tr / tf, "floor_s": floor, "fast_over_floor": tf / floor,
                   "touched_floor_s": touched, "fast_over_touched": tf / touched,
                   "max_abs_dx": dx}
            rows.append(row)
            print(f"{name:9} {'yes' if metrics else 'no':7} {tf:10.4f} {tr:10.4f} "
                  f"{tr / tf:7.1f}x {floor:8.4f} {tf / floor:9.1f}x {dx:9.1e} "
                  f"{tf / touched:12.1f}x")
    out = {"shape": {"d": D, "r": R, "n": N, "m": M, "k": K, "tau": TAU}, "source": source,
           "threads": args.threads,
           "full_gradient": fg, "copy_bandwidth_Bps": bw, "rows": rows}
    if not args.quick:
        del RP
        peak, data = peak_memory(full_gradient=fg)
        out.update(peak_bytes=peak, data_bytes=data)
        print(f"peak traced memory (data + problem + 2 rounds each, metrics on): "
              f"{peak / 2**20:.0f} MiB = {peak / data:.2f} x the client data "
              f"({data / 2**20:.0f} MiB)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
