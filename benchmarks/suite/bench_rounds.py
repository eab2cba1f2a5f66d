"""asv: seconds per communication round at the MNIST shape (kPCA St(784, 5), n = 200 x 300
samples, k = 20, tau = 5), rfl_fast against the papers'-style reference path
(:mod:`rfl_fast.app.experiments.reference_path`); see ``benchmarks/rounds.py`` for the
side-by-side table, the memory-traffic floor and the peak memory."""

import numpy as np

D, R, N, M, K, TAU, STEP = 784, 5, 200, 300, 20, 5, 1e-3


def _data():
    return np.random.default_rng(0).standard_normal((N, M, D))


class Rounds:
    """One round (after set-up and a warm-up round) per (algorithm, metrics, path); with
    metrics on, both paths also evaluate them at the start point (as the engine records row 0).
    BLAS runs on one thread in both paths (``run``'s default ``blas_threads=1``; the reference
    inside ``limit_blas_threads(1)``)."""

    params = [["RFedAvg", "RFedSVRG"], [False, True], ["rfl_fast", "reference"]]
    param_names = ["algorithm", "metrics", "path"]
    timeout = 600
    number = 1
    repeat = (3, 5, 120.0)

    def setup_cache(self):
        # shared by every parameter combination (asv pickles it once)
        return _data()

    def setup(self, Z, algorithm, metrics, path):
        from rfl_fast.algorithms import RFedAvg, RFedSVRG
        from rfl_fast.federation import Uniform, run
        from rfl_fast.problems import KPCA
        self.x0 = np.linalg.qr(np.random.default_rng(1).standard_normal((D, R)))[0]
        if path == "rfl_fast":
            P = KPCA(Z, R)
            P.f_star()
            alg = RFedAvg(STEP, TAU) if algorithm == "RFedAvg" else RFedSVRG(STEP, TAU)

            def one_round():
                run(P, alg, 1, participation=Uniform(K), x0=self.x0, seed=0, metrics=metrics)
        else:
            from rfl_fast.app.experiments.reference_path import ReferenceKPCA, run_reference
            from rfl_fast.kernels import limit_blas_threads
            RP = ReferenceKPCA(list(Z), R)

            def one_round():
                with limit_blas_threads(1):
                    run_reference(RP, algorithm, 1, K, self.x0, seed=0, step=STEP,
                                  local_steps=TAU, metrics=metrics)
        self.one_round = one_round
        one_round()  # warm-up (compilation, caches)

    def time_round(self, Z, algorithm, metrics, path):
        self.one_round()
