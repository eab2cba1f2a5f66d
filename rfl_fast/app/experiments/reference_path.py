"""The reference path: kPCA federated rounds written the way the papers' published code is.

This is the baseline the Speed section of the project measures against (``benchmarks/
rounds.py``, ``benchmarks/suite/bench_rounds.py``) and the oracle of the iterate-equality
test (``tests/test_experiments.py``). It is deliberately plain:

* one ``d x d`` covariance ``A_i = Z_i' Z_i / m_i`` per client, formed once (the papers'
  ``A_i``);
* a Python loop over the participating clients and, inside, over the local steps, one
  ``A_i @ X`` per gradient;
* Stiefel operations in NumPy/SciPy per client: tangent projection ``U - X sym(X'U)``, the
  polar retraction by an SVD of ``X + U``, its inverse by a Sylvester solve
  ``(X'Y) S + S (Y'X) = 2I``, projection transport;
* metrics recomputed from every client each round (``|grad f|`` and ``f - f*`` as sums of
  per-client terms, principal angles to ``X*``).

It computes the same mathematics as :func:`rfl_fast.federation.run` with
:class:`~rfl_fast.algorithms.RFedAvg` / :class:`~rfl_fast.algorithms.RFedSVRG` on
:class:`~rfl_fast.problems.KPCA` (rows form, ``f_i(X) = -tr(X' A_i X)``, uniform weights,
polar retraction, tangent-space mean with ``beta = 1``), with the same participants (the
engine's participation stream for a given seed), so the iterates agree to rounding.
"""

import time

import numpy as np
import scipy.linalg

from ...federation.context import STREAM_PARTICIPATION, stream

__all__ = ["ReferenceKPCA", "run_reference", "sample_participants"]


def _sym(a):
    return 0.5 * (a + a.T)


def proj(x, u):
    """Tangent projection on St(d, r)."""
    return u - x @ _sym(x.T @ u)


def retr_polar(x, u):
    """Polar retraction: the polar factor of ``X + U`` (by SVD)."""
    w, _, vt = np.linalg.svd(x + u, full_matrices=False)
    return w @ vt


def inv_retr_polar(x, y):
    """Inverse polar retraction: ``U = Y S - X`` with ``(X'Y) S + S (Y'X) = 2I``."""
    a = x.T @ y
    s = scipy.linalg.solve_sylvester(a, a.T, 2.0 * np.eye(a.shape[0]))
    return y @ s - x


def tangent_mean(x, points):
    """``R_x(mean_i R_x^{-1}(x_i))``."""
    xi = sum(inv_retr_polar(x, p) for p in points) / len(points)
    return retr_polar(x, xi)


def principal_angles(x, y):
    """Principal angles (sines and cosines combined, accurate for small angles)."""
    xty = x.T @ y
    cos = np.linalg.svd(xty, compute_uv=False)
    sin = np.linalg.svd(y - x @ xty, compute_uv=False)[::-1]
    return np.arctan2(np.clip(sin, 0.0, 1.0), np.clip(cos, 0.0, 1.0))


class ReferenceKPCA:
    """kPCA ``f(X) = (1/n) sum_i -tr(X' A_i X)``, ``A_i = Z_i'Z_i / m_i``, per-client loops.

    Parameters
    ----------
    clients : sequence of ndarray (m_i, d)
        Client rows.
    r : int
    """

    def __init__(self, clients, r):
        self.A = [z.T @ z / z.shape[0] for z in clients]
        self.n = len(self.A)
        self.d, self.r = self.A[0].shape[0], int(r)
        a = sum(self.A) / self.n
        _, v = np.linalg.eigh(a)
        self.x_star = v[:, ::-1][:, :self.r].copy()
        self.f_star = self.f(self.x_star)

    def egrad(self, i, x):
        return -2.0 * (self.A[i] @ x)

    def rgrad(self, i, x):
        return proj(x, self.egrad(i, x))

    def loss(self, i, x):
        return -float(np.sum(x * (self.A[i] @ x)))

    def f(self, x):
        return sum(self.loss(i, x) for i in range(self.n)) / self.n

    def grad(self, x, clients=None):
        clients = range(self.n) if clients is None else clients
        return sum(self.rgrad(i, x) for i in clients) / len(clients)

    def metrics(self, x):
        """From every client: ``grad_norm``, ``f_gap``, ``angle`` (sum of principal angles)."""
        return {"grad_norm": float(np.linalg.norm(self.grad(x))),
                "f_gap": self.f(x) - self.f_star,
                "angle": float(np.sum(principal_angles(x, self.x_star)))}


def sample_participants(seed, rounds, n, k):
    """The engine's ``Uniform(k)`` draws for ``seed``: list of sorted id arrays."""
    rng = stream(seed, STREAM_PARTICIPATION)
    return [np.sort(rng.choice(n, k, replace=False)) for _ in range(rounds)]


def rfedavg_round(P, x, idx, eta, tau):
    pts = []
    for i in idx:
        y = x
        for _ in range(tau):
            y = retr_polar(y, -eta * P.rgrad(i, y))
        pts.append(y)
    return tangent_mean(x, pts)


def rfedsvrg_round(P, x, idx, eta, tau, full_gradient="all"):
    gather = range(P.n) if full_gradient == "all" else idx
    grads = {i: P.rgrad(i, x) for i in gather}            # full local gradients at x_t
    g = sum(grads[i] for i in gather) / len(gather)        # g_t
    pts = []
    for i in idx:
        y = x
        for _ in range(tau):                               # eq. (9), written out literally
            d = P.rgrad(i, y) - proj(y, grads[i] - g)
            y = retr_polar(y, -eta * d)
        pts.append(y)
    return tangent_mean(x, pts)


def run_reference(P, algorithm, rounds, k, x0, seed=0, step=1e-3, local_steps=5,
                  metrics=True, full_gradient="all", callback=None):
    """Run ``rounds`` rounds of ``"RFedAvg"`` or ``"RFedSVRG"`` on a :class:`ReferenceKPCA`.

    Returns
    -------
    x : ndarray (d, r)
        The last server point.
    rows : list of dict
        Per round: ``wall`` (the round), ``wall_metrics`` and the metrics when ``metrics``.
    """
    step_fn = {"RFedAvg": lambda x, idx: rfedavg_round(P, x, idx, step, local_steps),
               "RFedSVRG": lambda x, idx: rfedsvrg_round(P, x, idx, step, local_steps,
                                                         full_gradient)}[algorithm]
    x = np.array(x0, dtype=np.float64)
    rows = []
    for t, idx in enumerate(sample_participants(seed, rounds, P.n, k)):
        w0 = time.perf_counter()
        x = step_fn(x, idx)
        row = {"round": t + 1, "wall": time.perf_counter() - w0}
        if metrics:
            w0 = time.perf_counter()
            row.update(P.metrics(x))
            row["wall_metrics"] = time.perf_counter() - w0
        rows.append(row)
        if callback is not None:
            callback(t + 1, x)
    return x, rows
