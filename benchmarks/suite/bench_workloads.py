"""asv: the workload matrix of ``rfl-fast bench --federated`` (:mod:`rfl_fast.app.workloads`):
one communication round of every algorithm on every problem the package accepts, k clients of
the matrix's shapes, Full participation, next to the same round as one batched NumPy
computation (the floor, which computes the same iterates). See ``rfl-fast bench --federated``
for the table with the flop and memory-traffic floors, peak memory and the ratios.

Pairs the package refuses (``workloads.accepted``: RFedProj without a projection, PriRFed on
a problem outside the privacy accounting) are skipped (``NotImplementedError`` in setup).
"""

import numpy as np

from rfl_fast.app import workloads as W

KS = [10, 100, 1000]


class Workloads:
    """One round (after a warm-up round) per (problem, algorithm, k, path); BLAS on one thread
    in the package's rounds (``run``'s default), the floor under the process's setting."""

    params = [list(W.PROBLEMS), [c[0] for c in W.ALGORITHM_CASES], KS,
              ["rfl_fast", "numpy_floor"]]
    param_names = ["problem", "algorithm", "k", "path"]
    timeout = 600
    number = 1
    repeat = (3, 5, 60.0)

    def setup(self, problem, algorithm, k, path):
        from rfl_fast.algorithms.participation import Full
        from rfl_fast.federation import run

        shapes = W.Shapes()
        rng = np.random.default_rng(0)
        data = W.make_data(problem, k, shapes, rng)
        x0 = W.initial_point(problem, shapes, rng)
        P = W.build_problem(problem, data, shapes)
        spec, why = W.accepted(P, W.make_algorithm(algorithm, problem), 2)
        if spec is None:
            raise NotImplementedError(why)
        if path == "rfl_fast":
            def one_round():
                run(P, spec, 1, Full(), x0=x0, seed=0, metrics=False)
        else:
            def one_round():
                W.floor_rounds(problem, data, shapes, spec, P.manifold, x0, 1)
        self.one_round = one_round
        one_round()   # warm-up (compilation, caches, RFedSVRG's pooled matrix)

    def time_round(self, problem, algorithm, k, path):
        self.one_round()
