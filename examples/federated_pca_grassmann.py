"""
Federated PCA on the Grassmann manifold, compared with Stiefel
==============================================================

PCA looks for the subspace spanned by the top eigenvectors of the pooled covariance
:math:`A = \\sum_i w_i A_i`. Its objective :math:`f(X) = -\\operatorname{tr}(X^\\top A X)`
does not change when the basis turns, :math:`f(XQ) = f(X)`: it is a function on the
Grassmann manifold :math:`\\mathrm{Gr}(d, r)` of subspaces, which rfl_fast represents by
orthonormal bases (:class:`rfl_fast.manifolds.Grassmann`). Three comparisons with the Stiefel manifold
:math:`\\mathrm{St}(d, r)`, where the same matrices are points with a basis:

1. a federated run (RFedSVRG) on each: the local steps are the same (same gradients, same
   polar retraction, the Stiefel kernel), only the server's consensus differs;
2. clients that report their points in bases of their own choosing: Grassmann's consensus
   does not depend on them, Stiefel's does;
3. one-shot federated PCA: every client sends its local top-r eigenvectors once and the
   server averages them (Karcher mean): on Grassmann the mean of the subspaces, on Stiefel a
   mean that changes with the signs the clients' eigensolvers happened to choose.

Run it as ``python examples/federated_pca_grassmann.py [--small]``.
"""

import argparse
import os

import matplotlib.pyplot as plt
import numpy as np

import rfl_fast as rf
from rfl_fast import algorithms
from rfl_fast.data import load_breast_cancer, split_dirichlet
from rfl_fast.federation import Uniform, karcher_mean, run, tangent_mean
from rfl_fast.problems import KPCA

parser = argparse.ArgumentParser(description="Federated PCA on Grassmann and Stiefel")
parser.add_argument("--small", action="store_true", help="few rounds (for the tests)")
args, _ = parser.parse_known_args()
small = args.small or os.environ.get("RFL_FAST_EXAMPLE_SMALL") == "1"
rounds = 60 if small else 300

# %%
# The problem on both manifolds
# -----------------------------
# Ten clients hold label-skewed parts of the breast cancer data (d = 30); the top r = 3
# principal subspace is wanted. ``KPCA(..., manifold="grassmann")`` is the same objective on
# Gr(30, 3).

X, y = load_breast_cancer()                      # (569, 30), standardized
clients = split_dirichlet(X, y, n_clients=10, alpha=0.5, rng=0)
r = 3
problems = {name: KPCA(clients, r=r, manifold=name) for name in ("stiefel", "grassmann")}
x0 = rf.Stiefel(30, r).random_point(rng=1)       # one start, a basis of a subspace
solution = problems["grassmann"].solution()      # top-3 eigenvectors of the pooled matrix
print(problems["stiefel"].manifold, problems["grassmann"].manifold)

# %%
# 1. RFedSVRG on each manifold
# ----------------------------
# Five clients per round, five local steps. The principal angle to the solution is a
# property of the subspace, so the two runs are measured the same way.

histories = {}
for name, problem in problems.items():
    result = run(problem, algorithms.RFedSVRG(step=0.01, local_steps=5), rounds,
                 participation=Uniform(5), x0=x0, seed=0)
    histories[name] = result.history
    print(f"{name:9s}  principal angle after {rounds} rounds: "
          f"{result.history.last('angle'):.2e}  gradient norm "
          f"{result.history.last('grad_norm'):.2e}")

fig, ax = plt.subplots(figsize=(6, 3.5))
for (name, h), style in zip(histories.items(), ("-", "--")):    # the curves nearly coincide
    ax.semilogy(h["round"], h["angle"], style, lw=2, label=name)
ax.set_xlabel("round")
ax.set_ylabel("sum of principal angles to the solution")
ax.set_title("RFedSVRG, federated PCA (breast cancer, r = 3)")
ax.legend()
fig.tight_layout()

# %%
# 2. Clients that choose their own bases
# --------------------------------------
# After a local step each client holds a point near the server's; suppose each reports it in
# a basis of its own (a rotation :math:`Q_i`, as an eigensolver or a QR factorization might
# return). The server's tangent-space mean reads the points through the inverse retraction:
# on Grassmann :math:`(I - XX^\top) Y (X^\top Y)^{-1}` does not see :math:`Q_i`, on Stiefel
# the polar inverse does: it refuses the rotated bases, which no tangent vector reaches.

server = x0                                                         # the server's point
steps = [0.2 * problems["grassmann"].manifold.random_tangent(server, rng=10 + i)
         for i in range(5)]
points = np.stack([problems["grassmann"].manifold.retr(server, s) for s in steps])
turns = rf.Stiefel(r, r).random_point(5, rng=20)                    # five rotations Q_i
for name, problem in problems.items():
    M = problem.manifold
    same = tangent_mean(M, server, points)
    try:
        turned = tangent_mean(M, server, points @ turns)
    except rf.errors.NoSolutionError:
        # no tangent vector of the server's basis retracts (polar) to a rotated basis
        print(f"{name:9s}  the clients' rotated bases: refused, the polar retraction from the "
              f"server's basis reaches none of them")
        continue
    print(f"{name:9s}  angle between the means with and without the clients' rotations: "
          f"{rf.Grassmann(30, r).dist(same, turned):.2e}")

# %%
# 3. One-shot federated PCA
# -------------------------
# Each client computes its own top-3 eigenvectors and sends them once; the server takes the
# Karcher mean. An eigenvector's sign is arbitrary: a second eigensolver may return some
# columns negated. The mean of the subspaces (Grassmann) is the same for both; the Stiefel mean
# of the bases moves, or does not exist (bases the polar retraction does not reach). (Local subspaces differ, the clients' data being label-skewed, so a
# one-shot mean only approximates the pooled solution that the federated runs reach.)

local = np.stack([np.linalg.eigh(rows.T @ rows)[1][:, ::-1][:, :r]
                  for rows in clients.to_list()])                   # (10, 30, 3)
signs = np.where(np.random.default_rng(30).random((len(local), 1, r)) < 0.5, -1.0, 1.0)
gr = rf.Grassmann(30, r)
for M in (gr, rf.Stiefel(30, r)):
    try:
        a = karcher_mean(M, local, local[0], tol=1e-10).x
        b = karcher_mean(M, local * signs, local[0], tol=1e-10).x
    except rf.errors.NoSolutionError:
        # bases with negated columns, or far apart, are not reached by the polar retraction
        # from one another: the Stiefel mean of the bases does not exist there
        print(f"{type(M).__name__:9s}  one-shot mean: refused (the polar retraction from a "
              f"client's basis does not reach the others')")
        continue
    print(f"{type(M).__name__:9s}  one-shot mean: {gr.dist(a, solution):.3f} rad from the "
          f"pooled solution; with other signs {gr.dist(b, solution):.3f} rad "
          f"(the two means {gr.dist(a, b):.1e} rad apart)")
print(f"the clients' own subspaces: {np.mean(gr.dist(local, solution)):.3f} rad on average")

plt.show()
