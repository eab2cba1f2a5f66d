"""
A federated digits classifier with a loss in PyTorch
====================================================

A small model with a manifold parameter and a Euclidean one, federated from a loss written in
torch: an orthonormal feature layer ``W`` on the Stiefel manifold St(64, k) and a linear head
``B`` (k x 10), trained with a softmax cross-entropy on scikit-learn's digits (8 x 8 images,
standardized). The parameter space is ``Product(Stiefel(64, k), Euclidean(k, 10))``; the loss
gets ``(W, B)`` and one sample (its 64 features, then its one-hot label). The gradients, per
client and per sample (for PriRFed's clipping), come from torch's autodiff batched over the
clients (:class:`rfl_fast.problems.LossProblem`).

Twenty clients hold label-skewed parts of the training set (the rows sorted by label, cut into
40 shards, two shards per client: most clients see two or three digits). Three trainers:

* RFedAvg (Riemannian local steps, tangent-space averaging on the server),
* PriRFed (DP-RSGD local steps: per-sample clipping and Gaussian noise),
* Euclidean FedAvg that projects after averaging: plain gradient steps on ``(W, B)`` in the
  ambient space, the server averages and puts ``W`` back on St(64, k) by its polar factor.

Each prints the test accuracy and its time. Run it as ``python examples/digits_torch.py
[--small]``; ``--small`` (or ``RFL_FAST_EXAMPLE_SMALL=1``) runs fewer rounds. Needs PyTorch
(``pip install 'rfl_fast[torch]'``); without it the script says so and stops.
"""

import argparse
import os
import time

import numpy as np

import rfl_fast as rf
from rfl_fast import algorithms as alg
from rfl_fast.data import load_digits
from rfl_fast.federation import run
from rfl_fast.problems import LossProblem

DESCRIPTION = "A federated digits classifier with a loss in PyTorch"
K = 16                      # columns of the orthonormal feature layer
N_CLIENTS = 20


def label_skewed_clients(X, y, n_clients, rng):
    """Rows sorted by label, cut into ``2 n_clients`` shards, two random shards per client;
    each client's samples are its rows followed by their one-hot labels (m_i, 64 + 10)."""
    order = np.argsort(y, kind="stable")
    shards = np.array_split(order, 2 * n_clients)
    pick = rng.permutation(2 * n_clients).reshape(n_clients, 2)
    rows = [np.concatenate([shards[a], shards[b]]) for a, b in pick]
    onehot = np.eye(10)[y]
    return [np.hstack([X[r], onehot[r]]) for r in rows]


def accuracy(M, x, X, y):
    W, B = M.split(x)
    return float(np.mean(np.argmax(X @ W @ B, axis=1) == y))


def fedavg_project(problem, M, x0, rounds, step, local_steps):
    """Euclidean FedAvg on the ambient ``(W, B)`` of ``problem`` (a LossProblem on
    ``Euclidean(64, k) x Euclidean(k, 10)``), projecting ``W`` onto St(64, k) after averaging;
    every client's local steps batched (one autodiff call per step)."""
    idx = np.arange(problem.n_clients)
    stiefel = M.factors[0]
    x = x0
    for _ in range(rounds):
        xs = np.broadcast_to(x, (idx.size,) + x.shape).copy()
        for _ in range(local_steps):
            xs -= step * problem.egrad(idx, xs)
        W, B = M.split(problem.weights @ xs)
        x = M.join(stiefel.project(W), B)
    return x


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--small", action="store_true", help="fewer rounds (for the tests)")
    args = parser.parse_args()
    small = args.small or os.environ.get("RFL_FAST_EXAMPLE_SMALL") == "1"
    rounds = 30 if small else 100
    try:
        import torch
    except ImportError:
        print("this example needs PyTorch: pip install 'rfl_fast[torch]'")
        return
    torch.set_num_threads(1)              # small batched ops: one thread is the fastest

    X, y = load_digits()                                 # (1797, 64) standardized, (1797,)
    rng = np.random.default_rng(0)
    test = rng.permutation(y.size)[:360]
    train = np.setdiff1d(np.arange(y.size), test)
    clients = label_skewed_clients(X[train], y[train], N_CLIENTS, rng)

    def loss(params, sample):
        """Softmax cross-entropy of the head on the orthonormal features of one sample."""
        W, B = params
        logits = (sample[:64] @ W) @ B
        return torch.logsumexp(logits, 0) - logits @ sample[64:]

    M = rf.Product(rf.Stiefel(64, K), rf.Euclidean(K, 10))
    problem = LossProblem(loss, clients, M)
    x0 = M.random_point(rng=0)
    print(f"{N_CLIENTS} clients, {problem.sizes.min()}-{problem.sizes.max()} samples each, "
          f"{np.mean([len(set(np.argmax(c[:, 64:], 1))) for c in clients]):.1f} digits per "
          f"client on average; {M!r}, {rounds} rounds")
    print(f"start     test accuracy {accuracy(M, x0, X[test], y[test]):.3f}")

    trainers = {"RFedAvg": alg.RFedAvg(step=0.05, local_steps=5),
                # noise std 0.1 on a mean of 36 gradients clipped at 2 (noise multiplier 1.8):
                # a weak guarantee on 72 samples a client, the epsilon printed says how weak
                "PriRFed": alg.PriRFed(step=0.1, local_steps=5, sigma=0.1, clip=2.0,
                                       batch_size=36)}
    for name, a in trainers.items():
        t0 = time.perf_counter()
        res = run(problem, a, rounds, x0=x0, seed=0, metrics=False)
        wall = time.perf_counter() - t0
        eps = [c for c in res.history.columns if c.startswith("eps_")]
        spent = f"  epsilon {res.history.last(eps[0]):.0f} (delta 1e-5)" if eps else ""
        print(f"{name:9s} test accuracy {accuracy(M, res.x, X[test], y[test]):.3f}  "
              f"loss {problem.f(res.x):.3f}  time {wall:.2f} s{spent}")

    ambient = LossProblem(loss, clients, rf.Product(rf.Euclidean(64, K), rf.Euclidean(K, 10)))
    t0 = time.perf_counter()
    x = fedavg_project(ambient, M, x0, rounds, step=0.05, local_steps=5)
    wall = time.perf_counter() - t0
    print(f"{'FedAvg+P':9s} test accuracy {accuracy(M, x, X[test], y[test]):.3f}  "
          f"loss {problem.f(x):.3f}  time {wall:.2f} s")


if __name__ == "__main__":
    main()
