"""The pymanopt adapter against pymanopt's own manifolds, side by side.

Per operation (retraction, projection, gradient conversion; SPD Exp/Log/dist) at a few shapes
(St(100, 5), St(784, 5), St(784, 10), St(1000, 20); SPD 9 x 9 and 64 x 64): microseconds per
call of ``rfl_fast.interop.pymanopt`` and of ``pymanopt.manifolds``, and their ratio. Then the
wall time of whole pymanopt solves both ways, with the iteration counts and seconds per
iteration: TrustRegions and ConjugateGradient on PCA on St(784, 5) and St(1000, 20), of a dense
covariance and of a diagonal one (whose O(np) cost leaves the manifold's operations and
pymanopt's overhead as the solve's time), and TrustRegions on the SPD log-det problem.

BLAS runs on one thread for both sides unless ``--blas-threads`` says otherwise; ``--backend``
forces our kernels' backend (default: ``auto``). Timings are medians of ``--repeats`` samples
taken alternately (ours, theirs, ours, ...) so a load change on a shared machine hits both
sides alike.

    python benchmarks/interop.py [--repeats 7] [--quick] [--blas-threads 1] [--backend B]
                                  [--json PATH]
"""

import argparse
import json
import sys
import time

import numpy as np


def _sample(fn, target=0.02):
    """Seconds per call of ``fn()``: loops of as many calls as fill ~``target`` seconds."""
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= target:
            return t / n
        n *= 2 if t == 0 else max(2, int(target / t * 1.2))


def _side_by_side(ours, theirs, repeats):
    """Medians (s per call) of interleaved samples of two callables."""
    a, b = [], []
    for _ in range(repeats):
        a.append(_sample(ours))
        b.append(_sample(theirs))
    return float(np.median(a)), float(np.median(b))


def operations(repeats, quick):
    """Rows ``(name, ours_us, theirs_us, ratio)`` for the single manifold operations."""
    import pymanopt.manifolds as pm

    from rfl_fast.interop import pymanopt as rp
    rows = []
    rng = np.random.default_rng(0)
    stiefel_shapes = [(100, 5), (784, 5)] if quick else [(100, 5), (784, 5), (784, 10),
                                                         (1000, 20)]
    for n, p in stiefel_shapes:
        for retraction in ("polar", "qr"):
            ours, theirs = rp.Stiefel(n, p, retraction=retraction), pm.Stiefel(
                n, p, retraction=retraction)
            x = ours.random_point()
            g = rng.standard_normal((n, p))
            u = 0.1 * ours.projection(x, g)
            t = _side_by_side(lambda: ours.retraction(x, u), lambda: theirs.retraction(x, u),
                              repeats)
            rows.append((f"St({n},{p}) retraction {retraction}", *t))
        t = _side_by_side(lambda: ours.projection(x, g), lambda: theirs.projection(x, g),
                          repeats)
        rows.append((f"St({n},{p}) projection", *t))
        t = _side_by_side(lambda: ours.euclidean_to_riemannian_hessian(x, g, g, u),
                          lambda: theirs.euclidean_to_riemannian_hessian(x, g, g, u), repeats)
        rows.append((f"St({n},{p}) ehess2rhess", *t))
    for n in ((9,) if quick else (9, 64)):
        ours, theirs = rp.SPD(n), pm.SymmetricPositiveDefinite(n)
        x, y = ours.random_point(), ours.random_point()
        g = rng.standard_normal((n, n))
        u = 0.5 * ours.random_tangent_vector(x)  # norm 0.5 in the affine-invariant metric
        for name, a, b in [
            ("exp", lambda: ours.exp(x, u), lambda: theirs.exp(x, u)),
            ("log", lambda: ours.log(x, y), lambda: theirs.log(x, y)),
            ("dist", lambda: ours.dist(x, y), lambda: theirs.dist(x, y)),
            ("retraction (ours exp, theirs 2nd order)", lambda: ours.retraction(x, u),
             lambda: theirs.retraction(x, u)),
            ("egrad2rgrad", lambda: ours.euclidean_to_riemannian_gradient(x, g),
             lambda: theirs.euclidean_to_riemannian_gradient(x, g)),
        ]:
            t = _side_by_side(a, b, repeats)
            rows.append((f"SPD({n}) {name}", *t))
    return [(name, 1e6 * a, 1e6 * b, b / a) for name, a, b in rows]


def _pca_problem(manifold, a):
    import pymanopt

    @pymanopt.function.numpy(manifold)
    def cost(x):
        return -np.trace(x.T @ a @ x)

    @pymanopt.function.numpy(manifold)
    def egrad(x):
        return -2.0 * a @ x

    @pymanopt.function.numpy(manifold)
    def ehess(x, u):
        return -2.0 * a @ u

    return pymanopt.Problem(manifold, cost, euclidean_gradient=egrad, euclidean_hessian=ehess)


def _diagonal_pca_problem(manifold, w):
    """PCA of ``diag(w)``: cost and gradients in O(np), so the manifold's operations and
    pymanopt's own overhead dominate the solve."""
    import pymanopt

    @pymanopt.function.numpy(manifold)
    def cost(x):
        return -np.sum(w[:, None] * x * x)

    @pymanopt.function.numpy(manifold)
    def egrad(x):
        return -2.0 * w[:, None] * x

    @pymanopt.function.numpy(manifold)
    def ehess(x, u):
        return -2.0 * w[:, None] * u

    return pymanopt.Problem(manifold, cost, euclidean_gradient=egrad, euclidean_hessian=ehess)


def _logdet_problem(manifold, s):
    import pymanopt

    @pymanopt.function.numpy(manifold)
    def cost(x):
        return np.trace(s @ x) - np.linalg.slogdet(x)[1]

    @pymanopt.function.numpy(manifold)
    def egrad(x):
        return s - np.linalg.inv(x)

    @pymanopt.function.numpy(manifold)
    def ehess(x, u):
        xi = np.linalg.inv(x)
        return xi @ u @ xi

    return pymanopt.Problem(manifold, cost, euclidean_gradient=egrad, euclidean_hessian=ehess)


def solves(repeats, quick):
    """Rows ``(name, ours_s, theirs_s, ratio, ours_iters, theirs_iters)`` of whole solves."""
    import warnings

    import pymanopt.manifolds as pm
    from pymanopt.optimizers import ConjugateGradient, TrustRegions

    import rfl_fast as rf
    from rfl_fast.interop import pymanopt as rp
    rows = []
    rng = np.random.default_rng(1)
    cases = []
    for n, p in ([(784, 5)] if quick else [(784, 5), (1000, 20)]):
        z = rng.standard_normal((2 * n, n)) * np.linspace(3.0, 0.5, n)
        a = z.T @ z / (2 * n)
        x0 = rf.Stiefel(n, p).random_point(rng=2)
        w = np.linspace(3.0, 0.5, n) ** 2
        for solver in (TrustRegions, ConjugateGradient):
            cases.append((f"{solver.__name__} PCA St({n},{p}) polar",
                          _pca_problem(rp.Stiefel(n, p), a),
                          _pca_problem(pm.Stiefel(n, p, retraction="polar"), a), solver, x0))
            cases.append((f"{solver.__name__} diag PCA St({n},{p}) polar",
                          _diagonal_pca_problem(rp.Stiefel(n, p), w),
                          _diagonal_pca_problem(pm.Stiefel(n, p, retraction="polar"), w),
                          solver, x0))
    for n in ((9,) if quick else (9, 64)):
        z = rng.standard_normal((4 * n, n))
        s = z.T @ z / (4 * n)
        cases.append((f"TrustRegions log-det SPD({n})", _logdet_problem(rp.SPD(n), s),
                      _logdet_problem(pm.SymmetricPositiveDefinite(n), s), TrustRegions,
                      np.eye(n)))
    for name, ours, theirs, solver, x0 in cases:
        times = {"ours": [], "theirs": []}
        iters = {}
        for _ in range(repeats):
            for side, problem in (("ours", ours), ("theirs", theirs)):
                with warnings.catch_warnings():  # pymanopt's own SPD warns near its optimum
                    warnings.simplefilter("ignore", RuntimeWarning)
                    t0 = time.perf_counter()
                    result = solver(verbosity=0, min_gradient_norm=1e-8,
                                    max_iterations=500).run(problem, initial_point=x0)
                    times[side].append(time.perf_counter() - t0)
                iters[side] = result.iterations
        a, b = float(np.median(times["ours"])), float(np.median(times["theirs"]))
        rows.append((name, a, b, b / a, iters["ours"], iters["theirs"]))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="fewer shapes")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads for both sides (default 1: on a shared machine "
                             "spinning BLAS workers distort the small operations)")
    parser.add_argument("--backend", default=None,
                        help="kernel backend for our side (default: the one in force, 'auto')")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    import rfl_fast as rf
    threadpool_limits(args.blas_threads)
    with rf.backend(args.backend or rf.get_backend()):
        return _report(args)


def _report(args):
    ops = operations(args.repeats, args.quick)
    print(f"{'operation':48s} {'ours us':>10s} {'pymanopt us':>12s} {'speed-up':>9s}")
    for name, a, b, r in ops:
        print(f"{name:48s} {a:10.1f} {b:12.1f} {r:8.1f}x")
    sol = solves(max(3, args.repeats // 2), args.quick)
    print(f"\n{'solve':42s} {'ours s':>8s} {'pymanopt s':>10s} {'speed-up':>9s} "
          f"{'iters':>11s} {'ms/iter ours, theirs':>22s}")
    for name, a, b, r, ia, ib in sol:
        print(f"{name:42s} {a:8.3f} {b:10.3f} {r:8.2f}x {ia:5d},{ib:5d} "
              f"{1e3 * a / max(ia, 1):10.2f},{1e3 * b / max(ib, 1):10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"operations": ops, "solves": sol}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
