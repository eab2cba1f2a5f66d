"""
Federated kPCA on the wine data
===============================

The federated layer step by step: problem -> algorithms -> run -> history -> plot. Ten
clients hold label-skewed parts of the standardized wine data (d = 13); they look for the top
r = 3 principal subspace on the Stiefel manifold St(13, 3) without sharing rows.

Run it as ``python examples/kpca_wine.py [--small] [--out DIR]``; ``--small`` (or the
environment variable ``RFL_FAST_EXAMPLE_SMALL=1``) runs few rounds. Histories and plots go to
``DIR`` (default ``kpca_wine_out`` in ``RFL_FAST_EXAMPLE_OUT``, else the current folder).
"""

import argparse
import os

from rfl_fast import algorithms as alg
from rfl_fast.data import load_wine, split_dirichlet
from rfl_fast.federation import Uniform, run
from rfl_fast.problems import KPCA

DESCRIPTION = "Federated kPCA on the wine data"


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--small", action="store_true", help="few rounds (for the tests)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("RFL_FAST_EXAMPLE_OUT", "."),
                                                      "kpca_wine_out"),
                        help="folder for histories and plots")
    args = parser.parse_args()
    small = args.small or os.environ.get("RFL_FAST_EXAMPLE_SMALL") == "1"
    rounds = 30 if small else 300

    # 1. the problem: client data -> f(X) = sum_i w_i f_i(X) on St(13, 3)
    X, y = load_wine()                                   # (178, 13) standardized, labels (178,)
    clients = split_dirichlet(X, y, n_clients=10, alpha=0.5, rng=0)
    problem = KPCA(clients, r=3)
    x0 = problem.manifold.random_point(rng=0)            # (13, 3), one start for every run

    # 2. the algorithms (frozen dataclasses of hyperparameters)
    algorithms = [alg.RFedSVRG(step=0.02, local_steps=5),
                  alg.RFedAvg(step=0.02, local_steps=5),
                  alg.RFedProj(step=0.02, local_steps=5)]

    # 3. run: 5 of the 10 clients take part in each round
    histories = {}
    for a in algorithms:
        res = run(problem, a, rounds, participation=Uniform(5), x0=x0, seed=0)
        h = res.history                                  # 4. per-round columns
        histories[a.name] = h
        print(f"{a.name:9s} rounds {res.rounds}  grad norm {h.last('grad_norm'):.2e}  "
              f"principal angle {h.last('angle'):.2e}  "
              f"uploaded {h.totals()['bytes_up'] / 1e3:.0f} kB")

    # 5. histories as CSV/JSON and the papers' plot (log scale, rounds and CPU time)
    os.makedirs(args.out, exist_ok=True)
    for name, h in histories.items():
        h.to_csv(os.path.join(args.out, f"{name}.csv"))
    try:
        import matplotlib.pyplot as plt

        from rfl_fast.app.plotting import plot_histories
    except ImportError:
        print("install matplotlib for the plots")
        return
    files = plot_histories(histories, os.path.join(args.out, "angle"), y="angle",
                           title="federated kPCA on wine")
    print("plots:", ", ".join(os.path.basename(f) for f in files))
    fig, ax = plt.subplots(figsize=(6, 3.5))          # the same curves, shown here
    for name, h in histories.items():
        ax.semilogy(h["round"], h["angle"], label=name)
    ax.set(xlabel="round", ylabel="sum of principal angles to X*",
           title="federated kPCA on wine")
    ax.legend()
    fig.tight_layout()


if __name__ == "__main__":
    main()
