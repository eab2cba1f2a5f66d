"""The workload matrix (issue 37's yardstick): every federated algorithm on every problem it
accepts, at k participants, against two floors measured in the same run.

A cell is one (algorithm, problem, k): ``k`` clients, each with the same number of samples,
Full participation (all ``k`` clients take part every round), full local gradients, the run's
own ``federation.run`` with ``metrics=False``. Reported per cell:

* ``us_per_client_step``: the median round time / (k * local steps), in microseconds;
* ``numpy_floor``: the same rounds written as one batched NumPy computation over all
  participants per local step (:func:`floor_rounds`: einsum/matmul over the stacked
  ``(k, m, ...)`` client data, batched ``np.linalg`` factorizations and the NumPy reference
  maps of :mod:`rfl_fast.kernels.reference`), timed the same way; ``over_numpy`` is the
  package's round over the floor's. The floors compute the package's iterates to rounding
  (``max_dx``, checked by the tests on a tiny case); PriRFed's noise comes from one batched draw,
  so its agreement is checked on a noiseless (``sigma = 0``) twin run with the same clipping;
* ``flop_floor``: an estimate of the round's floating-point operations
  (:data:`PROBLEMS`' ``flops``: gradient and step per client-step) at this machine's measured
  DGEMM rate (:func:`dgemm_rate`); for kPCA, SpherePCA and Brockett also the memory-traffic
  floor (bytes each client-step must read / the measured copy bandwidth,
  :func:`rfl_fast.app.bench.copy_bandwidth`); ``over_physical`` is the round over the larger;
* ``peak_over_data``: the client data plus the peak traced memory (tracemalloc: NumPy's and
  Python's allocations, not the C++ core's) of building the problem and running one round,
  over the client data's size (1 = nothing but the data);
* PriRFed: ``over_twin``, the private round over its non-private twin's (the same trainer,
  local steps and retraction with ``sigma = 0``, ``clip = inf``), and where the manifold has
  both (Stiefel, Grassmann) ``exp_over_polar``, its default Exp local steps over the same run
  with ``retraction="polar"`` (the server's consensus is the polar pair in both); RFedSVRG:
  ``first_over_later``, its first round over the median of the later ones.

Times are medians of the rounds after a warm-up round (each round is one repeat), with their
spread (min-max). Never used for assertions on time.

Shapes (``m`` samples per client; one point per client step): kPCA and PCA on Grassmann:
m = 60 rows in R^784, r = 5 (St(784, 5) / Gr(784, 5)); SpherePCA: m = 60 rows in R^784;
Brockett: m = 10 symmetric 30 x 30 matrices, p = 5; SPDMean: m = 10 SPD(9) matrices;
HyperbolicPrediction: m = 60 weighted points of H^10. Five local steps everywhere (PriRFed
DP-RSVRG: one epoch of five steps).
"""

import math
import statistics
import time
import tracemalloc
from dataclasses import dataclass, replace

import numpy as np

from ..algorithms import (ALGORITHMS, PriRFed, RFedAGS, RFedAvg, RFedProj, RFedProx, RFedSVRG,
                          RFedSVRG2BB, RFedSVRG2BBS)
from ..errors import InvalidParameterError
from ..kernels import reference as R

__all__ = ["PROBLEMS", "ALGORITHM_CASES", "Shapes", "build_problem", "make_algorithm",
           "accepted", "floor_rounds", "floor_agreement", "dgemm_rate", "measure_cell",
           "run_matrix", "print_table", "format_row", "describe_rates", "HEADER", "DEFAULT_KS",
           "FULL_KS",
           "make_data", "initial_point", "twin", "client_steps", "step_cost", "dp_rsvrg_picks",
           "STEPS", "LOCAL_STEPS"]

#: ``--federated``'s default participant counts (a run of a few minutes) and the full list
DEFAULT_KS = (10, 100)
FULL_KS = (10, 100, 1_000, 10_000)
LOCAL_STEPS = 5


def _t(a):
    return np.swapaxes(a, -1, -2)


def _sym(a):
    return 0.5 * (a + _t(a))


# ------------------------------------------------------------------------------ shapes, data

@dataclass(frozen=True)
class Shapes:
    """Per-client shapes of the problems (``m`` samples each; see the module docstring)."""

    pca_m: int = 60
    pca_d: int = 784
    pca_r: int = 5
    brockett_m: int = 10
    brockett_d: int = 30
    brockett_p: int = 5
    spd_m: int = 10
    spd_n: int = 9
    hyp_m: int = 60
    hyp_d: int = 10

    @classmethod
    def tiny(cls):
        """Toy shapes for the tests."""
        return cls(pca_m=6, pca_d=8, pca_r=2, brockett_m=3, brockett_d=5, brockett_p=2,
                   spd_m=3, spd_n=3, hyp_m=5, hyp_d=3)


def _spd(rng, shape, n):
    a = rng.standard_normal(shape + (n, n)) / math.sqrt(n)
    return a @ _t(a) + 0.5 * np.eye(n)


def _lorentz_points(rng, shape, d, scale=0.5):
    v = scale * rng.standard_normal(shape + (d,))
    x = np.empty(shape + (d + 1,))
    x[..., 1:] = v
    x[..., 0] = np.sqrt(1.0 + np.sum(v * v, axis=-1))
    return x


def make_data(name, k, shapes, rng):
    """The stacked client data of problem ``name`` for ``k`` clients: a dict of arrays with a
    leading axis ``k`` (what both the package's problem and the NumPy floor read)."""
    s = shapes
    if name in ("kPCA", "GrassmannPCA", "SpherePCA"):
        return {"Z": rng.standard_normal((k, s.pca_m, s.pca_d))}
    if name == "Brockett":
        b = rng.standard_normal((k, s.brockett_m, s.brockett_d, s.brockett_d))
        return {"A": (b + _t(b)) / math.sqrt(s.brockett_d)}
    if name == "SPDMean":
        return {"Z": _spd(rng, (k, s.spd_m), s.spd_n)}
    if name == "HyperbolicPrediction":
        return {"Y": _lorentz_points(rng, (k, s.hyp_m), s.hyp_d),
                "alpha": rng.uniform(0.5, 1.5, (k, s.hyp_m))}
    raise KeyError(name)


def build_problem(name, data, shapes):
    """The package's problem ``name`` on the stacked ``data`` of :func:`make_data`."""
    from ..problems import KPCA, SPDMean, Brockett, HyperbolicPrediction, SpherePCA
    if name == "kPCA":
        return KPCA(data["Z"], shapes.pca_r)
    if name == "GrassmannPCA":
        return KPCA(data["Z"], shapes.pca_r, manifold="grassmann")
    if name == "SpherePCA":
        return SpherePCA(data["Z"])
    if name == "Brockett":
        return Brockett(data["A"], shapes.brockett_p)
    if name == "SPDMean":
        return SPDMean(data["Z"])
    if name == "HyperbolicPrediction":
        return HyperbolicPrediction.from_weights(data["Y"], data["alpha"])
    raise KeyError(name)


def initial_point(name, shapes, rng):
    """A start point of problem ``name`` (the same for the package and the floor)."""
    s = shapes
    if name in ("kPCA", "GrassmannPCA"):
        q, r = np.linalg.qr(rng.standard_normal((s.pca_d, s.pca_r)))
        return q * np.sign(np.diag(r))
    if name == "SpherePCA":
        x = rng.standard_normal(s.pca_d)
        return x / np.linalg.norm(x)
    if name == "Brockett":
        q, r = np.linalg.qr(rng.standard_normal((s.brockett_d, s.brockett_p)))
        return q * np.sign(np.diag(r))
    if name == "SPDMean":
        return _spd(rng, (), s.spd_n)
    if name == "HyperbolicPrediction":
        return _lorentz_points(rng, (), s.hyp_d)
    raise KeyError(name)


# ------------------------------------------------------------------------------ NumPy floors:
# manifold maps (batched over a leading axis; server maps broadcast the server point)

def _b(x, like):
    return np.broadcast_to(x, like.shape)


def _expm(a, degree=16):
    """Batched matrix exponential by scaling and squaring a Taylor polynomial (matmuls over the
    whole stack; ``scipy.linalg.expm`` runs its Pade step item by item)."""
    norm = float(np.max(np.sum(np.abs(a), axis=-1), initial=0.0))
    s = max(0, math.ceil(math.log2(norm / 0.25))) if norm > 0.25 else 0
    a = a / 2.0**s
    eye = np.broadcast_to(np.eye(a.shape[-1]), a.shape)
    e = eye + a / degree
    for j in range(degree - 1, 0, -1):
        e = eye + (a @ e) / j
    for _ in range(s):
        e = e @ e
    return e


class _StiefelOps:
    kind = "stiefel"

    def proj(self, x, u):
        return R.stiefel_proj(_b(x, u), u)

    def retr(self, x, u, method):
        x = _b(x, u)
        if method == "polar":
            return R.stiefel_retr_polar(x, u)
        if method == "exp":                      # Edelman's geodesic, batched expm
            p = x.shape[-1]
            a, s = _t(x) @ u, _t(u) @ u
            eye = np.broadcast_to(np.eye(p), a.shape)
            block = np.concatenate([np.concatenate([a, -s], -1),
                                    np.concatenate([eye, a], -1)], -2)
            e = _expm(block)[..., :, :p]
            return np.concatenate([x, u], -1) @ e @ _expm(-a)
        raise KeyError(method)

    def inv_retr(self, x, y, method):
        """``Y S - X`` with ``(X'Y) S + S (Y'X) = 2I``: one batched solve of the Kronecker
        form ``(M (x) I + I (x) M) vec(S) = vec(2I)`` (p^2 unknowns per item)."""
        assert method == "polar"
        x = _b(x, y)
        m = _t(x) @ y
        p = m.shape[-1]
        eye = np.eye(p)
        kron = (m[..., :, None, :, None] * eye[:, None, :]
                + eye[:, None, :, None] * m[..., None, :, None, :])
        kron = kron.reshape(m.shape[:-2] + (p * p, p * p))
        rhs = np.broadcast_to((2.0 * eye).reshape(p * p, 1), m.shape[:-2] + (p * p, 1))
        s = np.linalg.solve(kron, rhs).reshape(m.shape)
        return y @ s - x

    def transport(self, x, y, v, method):
        shape = np.broadcast_shapes(np.shape(y), np.shape(v))
        return R.stiefel_proj(np.broadcast_to(y, shape), np.broadcast_to(v, shape))

    def project(self, z):
        return R.polar(z[None])[0] if z.ndim == 2 else R.polar(z)

    def inner(self, x, u, v):
        return np.sum(u * v, axis=(-2, -1))

    def gauss(self, x, sigma, rng):
        return self.proj(x, sigma * rng.standard_normal(x.shape))


class _GrassmannOps(_StiefelOps):
    kind = "grassmann"

    def proj(self, x, u):
        x = _b(x, u)
        return u - x @ (_t(x) @ u)

    def retr(self, x, u, method):
        if method == "polar":
            return R.stiefel_retr_polar(_b(x, u), u)
        if method == "exp":
            x = _b(x, u)
            a, sig, bt = np.linalg.svd(u, full_matrices=False)
            y = (x @ (_t(bt) * np.cos(sig)[..., None, :]) + a * np.sin(sig)[..., None, :]) @ bt
            return 1.5 * y - 0.5 * y @ (_t(y) @ y)
        raise KeyError(method)

    def inv_retr(self, x, y, method):
        """``(I - XX') Y (X'Y)^-1``, the polar/QR pair's exact inverse."""
        assert method == "polar"
        x = _b(x, y)
        m = _t(x) @ y
        return _t(np.linalg.solve(_t(m), _t(y - x @ m)))

    def transport(self, x, y, v, method):
        """``(I - YY') V Q``, ``Q`` the polar factor of ``X'Y``."""
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(v))
        x, y, v = (np.broadcast_to(a, shape) for a in (x, y, v))
        p, _, rt = np.linalg.svd(_t(x) @ y)
        return (v - y @ (_t(y) @ v)) @ (p @ rt)


class _SphereOps:
    kind = "sphere"

    def proj(self, x, u):
        x = _b(x, u)
        return u - np.sum(x * u, -1, keepdims=True) * x

    def retr(self, x, u, method):
        x = _b(x, u)
        if method == "exp":
            return R.sphere_exp(x, u)
        z = x + u
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def inv_retr(self, x, y, method):
        assert method == "exp"
        return R.sphere_log(_b(x, y), y)

    def transport(self, x, y, v, method):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(v))
        x, y, v = (np.broadcast_to(a, shape) for a in (x, y, v))
        if method == "projection":
            return self.proj(y, v)
        return R.sphere_transport(x, y, v)

    def project(self, z):
        return z / np.linalg.norm(z, axis=-1, keepdims=True)

    def inner(self, x, u, v):
        return np.sum(u * v, axis=-1)

    def gauss(self, x, sigma, rng):
        return self.proj(x, sigma * rng.standard_normal(x.shape))


class _SPDOps:
    kind = "spd"

    def retr(self, x, u, method):
        assert method == "exp"
        return R.spd_exp(_b(x, u), u)

    def inv_retr(self, x, y, method):
        assert method == "exp"
        return R.spd_log(_b(x, y), y)

    def transport(self, x, y, v, method):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(v))
        x, y, v = (np.broadcast_to(a, shape) for a in (x, y, v))
        if method == "projection":
            return _sym(v)
        c, ci = R.sym_sqrtm(x), R.sym_invsqrtm(x)
        e = c @ R.sym_sqrtm(_sym(ci @ y @ ci)) @ ci
        return _sym(e @ v @ _t(e))

    def inner(self, x, u, v):
        xi = np.linalg.inv(x)
        return np.sum((xi @ u) * _t(xi @ v), axis=(-2, -1))

    def gauss(self, x, sigma, rng):
        s = sigma * _sym(rng.standard_normal(x.shape))
        c = R.sym_sqrtm(x)
        return _sym(c @ s @ c)


class _LorentzOps:
    kind = "lorentz"

    @staticmethod
    def _ldot(a, b):
        return np.sum(a * b, axis=-1, keepdims=True) - 2.0 * a[..., :1] * b[..., :1]

    def proj(self, x, u):
        return u + self._ldot(_b(x, u), u) * _b(x, u)

    def retr(self, x, u, method):
        return R.lorentz_exp(_b(x, u), u)

    def inv_retr(self, x, y, method):
        return R.lorentz_log(_b(x, y), y)

    def transport(self, x, y, v, method):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(v))
        x, y, v = (np.broadcast_to(a, shape) for a in (x, y, v))
        if method == "projection":
            return self.proj(y, v)
        return R.lorentz_transport(x, y, v)

    def inner(self, x, u, v):
        return self._ldot(u, v)[..., 0]


# ------------------------------------------------------------------------------ NumPy floors:
# the problems' batched gradients over the stacked data (all k clients at once)

class _QuadraticFloor:
    """kPCA / PCA on Grassmann / SpherePCA: ``f_i(X) = -tr(X' Z_i'Z_i X) / m``."""

    def __init__(self, Z, ops, vector):
        self.Z, self.ops, self.vector = Z, ops, vector

    def _m(self, x):
        return x[..., None] if self.vector else x

    def _u(self, g):
        return g[..., 0] if self.vector else g

    def rgrad(self, x):
        xm = self._m(x)
        g = (-2.0 / self.Z.shape[1]) * (_t(self.Z) @ (self.Z @ xm))
        return self.ops.proj(x, self._u(g))

    def _parts(self, x):
        xm = self._m(x)
        y = self.Z @ xm                               # (k, m, r)  X'z
        p = self.Z - y @ _t(xm)                       # (k, m, d)  (I - XX') z
        return y, p

    def subset(self, sel):
        """The floor of one sample per client (``sel`` (k,))."""
        return _QuadraticFloor(self.Z[np.arange(sel.size), sel][:, None], self.ops, self.vector)

    def sample_norms(self, x):
        y, p = self._parts(x)
        return 2.0 * np.linalg.norm(p, axis=-1) * np.linalg.norm(y, axis=-1)

    def clipped_mean(self, x, tau):
        """The clipped per-sample gradients' mean, from one residual ``P = Z - Z X X'``."""
        y, p = self._parts(x)
        norms = 2.0 * np.linalg.norm(p, axis=-1) * np.linalg.norm(y, axis=-1)
        coef = _clip(norms, tau) / norms.shape[1]
        return self._u(-2.0 * _t(p) @ (coef[..., None] * y))

    def weighted(self, x, coef):
        y, p = self._parts(x)
        return self._u(-2.0 * _t(p) @ (coef[..., None] * y))


class _BrockettFloor:
    def __init__(self, A, p, ops):
        self.A, self.ops = A, ops
        self.mean = A.mean(axis=1)
        self.h = np.arange(p, 0, -1, dtype=np.float64)

    def rgrad(self, x):
        return self.ops.proj(x, 2.0 * (self.mean @ x) * self.h)

    def subset(self, sel):
        one = _BrockettFloor.__new__(_BrockettFloor)
        one.A, one.ops, one.h = self.A[np.arange(sel.size), sel][:, None], self.ops, self.h
        return one

    def _samples(self, x):
        g = 2.0 * (self.A @ x[:, None]) * self.h       # (k, m, d, p)
        return self.ops.proj(x[:, None], g)

    def sample_norms(self, x):
        return np.linalg.norm(self._samples(x), axis=(-2, -1))

    def weighted(self, x, coef):
        return np.einsum("km,kmdp->kdp", coef, self._samples(x))


class _SPDFloor:
    def __init__(self, Z):
        self.Z = Z

    def subset(self, sel):
        return _SPDFloor(self.Z[np.arange(sel.size), sel][:, None])

    def _logs(self, x):
        lo = np.linalg.cholesky(x)
        linv = np.linalg.solve(lo, np.broadcast_to(np.eye(x.shape[-1]), lo.shape))
        c = linv[:, None] @ self.Z @ _t(linv)[:, None]
        lam, q = np.linalg.eigh(_sym(c))
        return lam, (q * np.log(lam)[..., None, :]) @ _t(q), lo

    def rgrad(self, x):
        _, lg, lo = self._logs(x)
        g = -2.0 * lo @ lg.mean(axis=1) @ _t(lo)
        return _sym(g)

    def sample_norms(self, x):
        lam, _, _ = self._logs(x)
        return 2.0 * np.sqrt(np.sum(np.log(lam) ** 2, axis=-1))

    def weighted(self, x, coef):
        _, lg, lo = self._logs(x)
        return _sym(-2.0 * lo @ np.einsum("km,kmij->kij", coef, lg) @ _t(lo))


class _HyperbolicFloor:
    def __init__(self, Y, alpha, ops):
        self.Y, self.alpha, self.ops = Y, alpha, ops
        self.JY = Y.copy()
        self.JY[..., 0] *= -1.0

    def rgrad(self, x):
        ip = np.sum(x[:, None] * self.Y, -1) - 2.0 * x[:, None, 0] * self.Y[..., 0]
        th = np.arccosh(np.maximum(-ip, 1.0))
        small = th < 1e-6
        ratio = np.where(small, 1.0 - th * th / 6.0, th / np.sinh(np.where(small, 1.0, th)))
        g = (-2.0 / self.Y.shape[1]) * np.einsum("km,kmd->kd", self.alpha * ratio, self.JY)
        g[:, 0] = -g[:, 0]                            # egrad2rgrad: proj(x, J g)
        return self.ops.proj(x, g)


def _floor_problem(name, data, shapes):
    """``(gradient floor, manifold ops)`` of problem ``name``."""
    if name == "kPCA":
        ops = _StiefelOps()
        return _QuadraticFloor(data["Z"], ops, False), ops
    if name == "GrassmannPCA":
        ops = _GrassmannOps()
        return _QuadraticFloor(data["Z"], ops, False), ops
    if name == "SpherePCA":
        ops = _SphereOps()
        return _QuadraticFloor(data["Z"], ops, True), ops
    if name == "Brockett":
        ops = _StiefelOps()
        return _BrockettFloor(data["A"], shapes.brockett_p, ops), ops
    if name == "SPDMean":
        return _SPDFloor(data["Z"]), _SPDOps()
    if name == "HyperbolicPrediction":
        ops = _LorentzOps()
        return _HyperbolicFloor(data["Y"], data["alpha"], ops), ops
    raise KeyError(name)


# ------------------------------------------------------------------------------ NumPy floors:
# the algorithms' rounds (Full participation, uniform weights, full local gradients)

def _tangent_mean(ops, x, pts, method, beta=1.0):
    w = np.full(pts.shape[0], 1.0 / pts.shape[0])
    xi = np.tensordot(w, ops.inv_retr(x, pts, method), axes=1)
    return ops.retr(x[None], (beta * xi)[None], method)[0]


def _round_avg(alg, g, ops, x_t, st, names, rng):
    eta = alg.step(st["t"])
    k = st["k"]
    x = np.broadcast_to(x_t, (k,) + x_t.shape)
    method = names["pair"]
    for _ in range(alg.local_steps):
        d = g.rgrad(x)
        if isinstance(alg, RFedProx) and alg.mu != 0.0:
            d = d - alg.mu * ops.inv_retr(x, np.broadcast_to(x_t, x.shape), method)
        x = ops.retr(x, -eta * d, method)
    return _tangent_mean(ops, x_t, x, method, alg.beta)


def _round_svrg(alg, g, ops, x_t, st, names, rng):
    k = st["k"]
    method, transport = names["pair"], names["transport"]
    xs = np.broadcast_to(x_t, (k,) + x_t.shape)
    grad = g.rgrad(xs)
    gt = grad.mean(axis=0)
    diff = grad - gt
    coef = None
    if isinstance(alg, RFedSVRG2BB):
        if st.get("x_prev") is not None:                  # server pair s, y; clients' y_i
            x_prev = st["x_prev"]
            s = ops.transport(x_prev, x_t, ops.inv_retr(x_prev[None], x_t[None], method)[0],
                              transport)
            y = gt - ops.transport(x_prev, x_t, st["g_prev"], transport)
            ss, sy = float(ops.inner(x_t, s, s)), float(ops.inner(x_t, s, y))
            B = sy / ss if (ss > 0 and sy > 0) else 0.0
            if B > 0:
                yi = grad - ops.transport(st["xs_prev"], xs, st["grad_prev"], transport)
                sy_i = ops.inner(xs, np.broadcast_to(s, xs.shape), yi)
                coef = np.where(sy_i > 0, B - sy_i / ss, 0.0)
        else:
            ss = sy = 0.0
        if isinstance(alg, RFedSVRG2BBS):
            tau = alg.local_steps
            eta = (alg.step(0) / tau if st.get("x_prev") is None else alg.eta_max / tau
                   if sy <= 0 else min(alg.eta_max, max(alg.eta_min, ss / sy)) / tau)
        else:
            eta = alg.step(st["t"])
        st.update(x_prev=x_t, g_prev=gt, xs_prev=xs, grad_prev=grad)
    else:
        eta = alg.step(st["t"])
    expand = (slice(None),) + (None,) * x_t.ndim
    x = ops.retr(xs, np.broadcast_to(-eta * gt, xs.shape), method)
    for _ in range(1, alg.local_steps):
        v = diff if coef is None else diff - coef[expand] * ops.inv_retr(xs, x, method)
        d = g.rgrad(x) - ops.transport(xs, x, v, transport)
        x = ops.retr(x, -eta * d, method)
    return _tangent_mean(ops, x_t, x, method, alg.beta)


def _round_ags(alg, g, ops, x_t, st, names, rng):
    a = alg.step(st["t"])
    k = st["k"]
    method, transport = names["retr"], names["transport"]
    xs = np.broadcast_to(x_t, (k,) + x_t.shape)
    x = xs
    zeta = np.zeros(xs.shape)
    for step in range(alg.local_steps):
        v = a * g.rgrad(x)
        zeta += v if step == 0 else ops.transport(x, xs, v, transport)
        if step + 1 < alg.local_steps:
            x = ops.retr(x, -v, method)
    return ops.retr(x_t[None], -zeta.mean(axis=0)[None], method)[0]


def _round_proj(alg, g, ops, xhat, st, names, rng):
    eta = alg.step(st["t"])
    k = st["k"]
    p = ops.project(xhat)
    c = st.setdefault("c", np.zeros((k,) + xhat.shape))
    zhat = np.broadcast_to(p, (k,) + p.shape)
    z, gsum = zhat, 0.0
    for _ in range(alg.local_steps):
        gr = g.rgrad(z)
        zhat = zhat - eta * (gr + c)
        z = ops.project(zhat)
        gsum = gsum + gr
    xhat_new = p + alg.step_global * (zhat.mean(axis=0) - p)
    tau = alg.local_steps
    st["c"] = (p - xhat_new) / (alg.step_global * eta * tau) - gsum / tau
    return xhat_new


def _clip(norms, tau):
    coef = np.ones(norms.shape)
    np.divide(tau, norms, out=coef, where=norms > tau)
    return coef


def _private_direction(alg, g, ops, x, sigma, rng):
    if math.isinf(alg.clip):
        d = g.rgrad(x)
    elif hasattr(g, "clipped_mean"):
        d = g.clipped_mean(x, alg.clip)
    else:
        norms = g.sample_norms(x)
        d = g.weighted(x, _clip(norms, alg.clip) / norms.shape[1])
    return d if sigma == 0 else d + ops.gauss(x, sigma, rng)


def _round_pri(alg, g, ops, x_t, st, names, rng):
    eta = alg.step(st["t"])
    k = st["k"]
    local, method = names["local"], names["pair"]
    sigma = float(np.max(alg.sigma)) if alg.sigma is not None else 0.0
    x = np.broadcast_to(x_t, (k,) + x_t.shape)
    if alg.local == "DP-RSGD":
        for _ in range(alg.local_steps):
            x = ops.retr(x, -eta * _private_direction(alg, g, ops, x, sigma, rng), local)
    else:   # DP-RSVRG: one sample per client and step, picked from the round's own stream
        transport = names["transport"]
        picks = st["picks"]
        kk = np.arange(k)
        xs = x
        for epoch in range(alg.local_steps):
            if math.isinf(alg.clip):
                full = g.rgrad(xs)
                cs = None
            else:
                norms = g.sample_norms(xs)
                cs = np.ones(norms.shape)
                np.divide(alg.clip, norms, out=cs, where=norms > alg.clip)
                full = g.weighted(xs, cs / norms.shape[1])
            x = xs
            for j in range(alg.inner_steps):
                sel = picks[st["t"], epoch, j]
                one = g.subset(sel)                                    # one sample per client
                ns = one.sample_norms(x)
                c = np.ones(ns.shape)
                np.divide(alg.clip, ns, out=c, where=ns > alg.clip)
                a = one.weighted(x, c)
                cs_sel = np.ones((k, 1)) if cs is None else cs[kk, sel][:, None]
                d = a - ops.transport(xs, x, one.weighted(xs, cs_sel) - full, transport)
                if sigma > 0:
                    d = d + ops.gauss(x, sigma, rng)
                x = ops.retr(x, -eta * d, local)
            xs = x
        x = xs
    return _tangent_mean(ops, x_t, x, method, alg.beta)


def _sample_count(g):
    for attr in ("Z", "A", "Y"):
        if hasattr(g, attr):
            return getattr(g, attr).shape[:2]
    raise AttributeError("samples")


_ROUNDS = {RFedAvg: _round_avg, RFedProx: _round_avg, RFedSVRG: _round_svrg,
           RFedSVRG2BB: _round_svrg, RFedSVRG2BBS: _round_svrg, RFedAGS: _round_ags,
           RFedProj: _round_proj, PriRFed: _round_pri}


def _map_names(alg, M):
    """The retraction and transport names the package's algorithm uses on ``M``."""
    pairs = tuple(r for r in M.retractions if r in M.inverse_retractions)
    names = {"pair": getattr(alg, "retraction", None) or (pairs[0] if pairs else None),
             "retr": getattr(alg, "retraction", None) or M.retractions[0],
             "transport": getattr(alg, "transport", None) or (M.transports[0] if M.transports
                                                               else None)}
    if isinstance(alg, PriRFed):
        names["pair"] = alg.retraction or pairs[0]
        names["local"] = alg.retraction or ("exp" if "exp" in M.retractions else names["pair"])
    return names


def dp_rsvrg_picks(alg, sizes, rounds, seed):
    """DP-RSVRG's sample picks ``(rounds, epochs, steps, k)`` as the package draws them with
    ``sigma = 0`` and output option 1 (one ``integers(N_i)`` per step from each client's own
    stream)."""
    from ..federation.context import ClientRandom
    k = sizes.size
    out = np.empty((rounds, alg.local_steps, alg.inner_steps, k), dtype=np.int64)
    for t in range(rounds):
        cr = ClientRandom(seed, t, np.arange(k))
        for j in range(k):
            gen = cr.generator(j)
            for e in range(alg.local_steps):
                for s in range(alg.inner_steps):
                    out[t, e, s, j] = gen.integers(int(sizes[j]))
    return out


def floor_rounds(name, data, shapes, alg, M, x0, rounds, seed=0, picks=None):
    """The NumPy floor of ``rounds`` rounds of ``alg`` (as the package specialized it) on
    problem ``name``: ``(final server point, [seconds per round])``. ``picks``: DP-RSVRG's
    sample picks (:func:`dp_rsvrg_picks`; drawn uniformly from ``seed`` when omitted)."""
    g, ops = _floor_problem(name, data, shapes)
    k = next(iter(data.values())).shape[0]
    names = _map_names(alg, M)
    rng = np.random.default_rng(seed)
    st = {"k": k}
    if isinstance(alg, PriRFed) and alg.local == "DP-RSVRG":
        m = _sample_count(g)[1]
        st["picks"] = picks if picks is not None else rng.integers(
            m, size=(rounds, alg.local_steps, alg.inner_steps, k))
    step = _ROUNDS[type(alg)]
    x = np.array(x0, dtype=np.float64)
    times = []
    for t in range(rounds):
        st["t"] = t
        t0 = time.perf_counter()
        x = step(alg, g, ops, x, st, names, rng)
        times.append(time.perf_counter() - t0)
    if isinstance(alg, RFedProj):
        x = ops.project(x)
    return x, times


# ------------------------------------------------------------------------------ algorithms

#: ``(label, algorithm class name, step scale, extra keyword arguments)``; the class names are
#: those of :data:`rfl_fast.algorithms.ALGORITHMS`
ALGORITHM_CASES = (
    ("RFedAvg", "RFedAvg", {}),
    ("RFedProx", "RFedProx", {"mu": 0.1}),
    ("RFedSVRG", "RFedSVRG", {}),
    ("2BB", "RFedSVRG2BB", {}),
    ("2BBS", "RFedSVRG2BBS", {"eta_min": None, "eta_max": None}),
    ("RFedProj", "RFedProj", {}),
    ("RFedAGS", "RFedAGS", {}),
    ("PriRFed/DP-RSGD", "PriRFed", {"local": "DP-RSGD", "sigma": 1e-3, "clip": 0.1}),
    ("PriRFed/DP-RSVRG", "PriRFed", {"local": "DP-RSVRG", "sigma": 1e-3, "clip": 0.1,
                                     "inner_steps": LOCAL_STEPS}),
)

#: the local step size per problem (small enough that no run leaves the manifold's range)
STEPS = {"kPCA": 1e-3, "GrassmannPCA": 1e-3, "SpherePCA": 1e-3, "Brockett": 1e-3,
         "SPDMean": 0.05, "HyperbolicPrediction": 0.05}

PROBLEMS = ("kPCA", "SpherePCA", "Brockett", "SPDMean", "HyperbolicPrediction", "GrassmannPCA")


def make_algorithm(label, problem_name):
    """The algorithm of ``label`` (:data:`ALGORITHM_CASES`) with the step of ``problem_name``."""
    _, cls_name, extra = next(c for c in ALGORITHM_CASES if c[0] == label)
    cls = ALGORITHMS[cls_name]
    step = STEPS[problem_name]
    kw = dict(extra)
    if cls_name == "RFedSVRG2BBS":
        kw.update(eta_min=step, eta_max=10 * step)
    if cls_name == "PriRFed":
        steps = 1 if kw["local"] == "DP-RSVRG" else LOCAL_STEPS
        return cls(step, steps, **kw)
    return cls(step, LOCAL_STEPS, **kw)


def twin(alg):
    """PriRFed's non-private twin: the same trainer, steps and retraction, no clip, no noise."""
    return replace(alg, sigma=0.0, clip=math.inf, ledger=None)


def client_steps(alg):
    """Local steps one client takes per round."""
    if isinstance(alg, PriRFed) and alg.local == "DP-RSVRG":
        return alg.local_steps * alg.inner_steps
    return alg.local_steps


def accepted(problem, alg, rounds=3):
    """``(specialized algorithm, None)`` when the package runs ``alg`` on ``problem`` (its own
    ``validate`` and ``for_run``), else ``(None, reason)``."""
    from ..algorithms.participation import Full
    from ..federation.driver import specialize
    try:
        return specialize(problem, alg, Full(), rounds), None
    except (InvalidParameterError, ValueError, TypeError) as exc:
        return None, str(exc).splitlines()[0]


# ------------------------------------------------------------------------------ the floors'
# machine rates and flop/byte counts

def dgemm_rate(n=1024, repeats=5):
    """Flops per second of a square float64 matrix product (BLAS, its own thread setting)."""
    a = np.random.default_rng(0).standard_normal((n, n))
    b = np.empty_like(a)
    np.matmul(a, a, out=b)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(a, a, out=b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


def step_cost(name, shapes, alg):
    """``(flops, bytes)`` of one client-step: the local gradient and the step, roughly the
    least arithmetic (products counted 2 per multiply-add; factorizations of small matrices
    by their textbook counts) and the client data it must read (``None`` for SPDMean and
    HyperbolicPrediction, whose steps are bound by the arithmetic on small matrices). A step
    of a full local gradient reads every sample of the client (Brockett: its mean matrix, one
    ``d x d``, unless the per-sample gradients are clipped); a DP-RSVRG step reads two samples
    plus its share of the epoch's full clipped pass (``m / inner_steps`` samples)."""
    s = shapes
    private = isinstance(alg, PriRFed) and not math.isinf(alg.clip)
    samples = {"Brockett": s.brockett_m, "SPDMean": s.spd_m, "HyperbolicPrediction": s.hyp_m
               }.get(name, s.pca_m)
    if isinstance(alg, PriRFed) and alg.local == "DP-RSVRG":
        reads = samples / alg.inner_steps + 2
    else:
        reads = samples
    if name in ("kPCA", "GrassmannPCA", "SpherePCA"):
        d = s.pca_d
        r = 1 if name == "SpherePCA" else s.pca_r
        per = 4 * d * r + (2 * d * r if private else 0)      # z'X, z y' (+ the residual)
        return reads * per + 8 * d * r * r + 30 * r**3, reads * d * 8
    if name == "Brockett":
        d, p = s.brockett_d, s.brockett_p
        step = 4 * d * p * p + 8 * d * p * p + 30 * p**3
        if private or reads != samples:
            return reads * 2 * d * d * p + step, reads * d * d * 8
        return 2 * d * d * p + step, d * d * 8
    if name == "SPDMean":
        n = s.spd_n
        return reads * (4 * n**3 + 9 * n**3 + 2 * n**3) + 30 * n**3, None  # congruence, eigh,
    if name == "HyperbolicPrediction":                                       # logm; the step
        d = s.hyp_d + 1
        return reads * (4 * d + 20) + 10 * d, None
    raise KeyError(name)


# ------------------------------------------------------------------------------ one cell

def _spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def _package_rounds(problem, alg, x0, rounds, seed=0):
    from ..algorithms.participation import Full
    from ..federation import run
    res = run(problem, alg, rounds, Full(), x0=x0, seed=seed, metrics=False)
    return res.x, [float(w) for w in res.history.wall[1:]]


def _peak(name, data, shapes, alg, x0):
    """Peak bytes of the client data (held by the caller) plus what building the problem and
    one round allocate at most on top of it (tracemalloc: NumPy's and Python's allocations),
    after an untraced warm-up of the same (a first use's imports, compiled kernels and caches
    are the process's, not proportional to the data)."""
    P = build_problem(name, data, shapes)
    _package_rounds(P, accepted(P, alg, 1)[0], x0, 1)
    del P
    tracemalloc.start()
    try:
        P = build_problem(name, data, shapes)
        spec, _ = accepted(P, alg, 1)
        _package_rounds(P, spec, x0, 1)
        return sum(a.nbytes for a in data.values()) + tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _scaled(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) / max(1.0, float(np.max(
        np.abs(b))))


def measure_cell(name, label, k, shapes, repeats, rates, seed=0, memory=True, floors=True):
    """One cell of the matrix: a dict (see the module docstring), or ``None`` when the package
    refuses the pair (``{"refused": reason}``)."""
    rng = np.random.default_rng(seed)
    data = make_data(name, k, shapes, rng)
    x0 = initial_point(name, shapes, rng)
    data_bytes = sum(a.nbytes for a in data.values())
    alg = make_algorithm(label, name)
    rounds = repeats + 1
    P = build_problem(name, data, shapes)
    spec, why = accepted(P, alg, rounds)
    if spec is None:
        return {"problem": name, "algorithm": label, "k": k, "refused": why}
    steps = client_steps(spec)
    x_pkg, walls = _package_rounds(P, spec, x0, rounds, seed)
    later = walls[1:]
    row = {"problem": name, "algorithm": label, "k": k, "client_steps": steps,
           "data_bytes": data_bytes, "round_s": _spread(later),
           "us_per_client_step": statistics.median(later) / (k * steps) * 1e6}
    t_pkg = row["round_s"]["median"]
    if isinstance(spec, RFedSVRG) and len(walls) > 1:
        row["first_over_later"] = walls[0] / t_pkg
    if isinstance(spec, PriRFed):
        tw, _ = accepted(P, twin(alg), rounds)
        _, tw_walls = _package_rounds(P, tw, x0, rounds, seed)
        row["twin_round_s"] = _spread(tw_walls[1:])
        row["over_twin"] = t_pkg / row["twin_round_s"]["median"]
        if spec.retraction is None and "exp" in P.manifold.retractions and \
                "polar" in P.manifold.retractions:   # the default Exp steps vs polar ones
            po, _ = accepted(P, replace(alg, retraction="polar"), rounds)
            _, po_walls = _package_rounds(P, po, x0, rounds, seed)
            row["polar_round_s"] = _spread(po_walls[1:])
            row["exp_over_polar"] = t_pkg / row["polar_round_s"]["median"]
    if floors:
        x_fl, f_times = floor_rounds(name, data, shapes, spec, P.manifold, x0, rounds, seed)
        row["numpy_floor_s"] = _spread(f_times[1:])
        row["over_numpy"] = t_pkg / row["numpy_floor_s"]["median"]
        if isinstance(spec, PriRFed):     # noise from other streams: a noiseless pair of runs
            row["max_dx"], row["moved"] = floor_agreement(name, data, shapes, spec, P, x0,
                                                          seed, rounds=min(rounds, 2))
        else:
            row["max_dx"], row["moved"] = _scaled(x_fl, x_pkg), _scaled(x0, x_pkg)
    flops, nbytes = step_cost(name, shapes, spec)
    row["flop_floor_s"] = flops * k * steps / rates["dgemm_flops"]
    physical = row["flop_floor_s"]
    if nbytes is not None:
        row["memory_floor_s"] = nbytes * k * steps / rates["copy_Bps"]
        physical = max(physical, row["memory_floor_s"])
    row["physical_floor_s"] = physical
    row["over_physical"] = t_pkg / physical
    if memory:
        del P
        row["peak_over_data"] = _peak(name, data, shapes, spec, x0) / data_bytes
    return row


def floor_agreement(name, data, shapes, spec, P, x0, seed=0, x_pkg=None, rounds=2):
    """``(dx, moved)``: the largest scaled difference between the package's and the floor's
    server point after ``rounds`` rounds from ``x0`` (PriRFed: both without noise, the same
    clipping; DP-RSVRG with the package's sample picks), and how far the package's moved from
    ``x0`` (same scale)."""
    picks = None
    if isinstance(spec, PriRFed):
        spec, _ = accepted(P, replace(spec, sigma=0.0, ledger=None), rounds)
        x_pkg = None
        if spec.local == "DP-RSVRG":
            picks = dp_rsvrg_picks(spec, np.asarray(P.sizes), rounds, seed)
    if x_pkg is None:
        x_pkg, _ = _package_rounds(P, spec, x0, rounds, seed)
    x_fl, _ = floor_rounds(name, data, shapes, spec, P.manifold, x0, rounds, seed, picks)
    return _scaled(x_fl, x_pkg), _scaled(x0, x_pkg)


# ------------------------------------------------------------------------------ the matrix

def run_matrix(ks=DEFAULT_KS, shapes=None, repeats=3, problems=PROBLEMS, algorithms=None,
               memory=True, seed=0, *, rates, progress=None):
    """Every accepted (algorithm, problem) pair at every ``k``: ``{"rates", "rows",
    "refused"}``. ``rates``: ``{"dgemm_flops": ..., "copy_Bps": ...}`` of this machine
    (:func:`dgemm_rate`, :func:`rfl_fast.app.bench.copy_bandwidth`); ``progress(row)`` is
    called after each cell."""
    shapes = shapes or Shapes()
    labels = algorithms or [c[0] for c in ALGORITHM_CASES]
    rows, refused = [], []
    for name in problems:
        for label in labels:
            for k in ks:
                row = measure_cell(name, label, k, shapes, repeats, rates, seed, memory)
                if "refused" in row:
                    refused.append(row)
                    break                       # refused at every k alike
                rows.append(row)
                if progress is not None:
                    progress(row)
    return {"rates": rates, "rows": rows, "refused": refused, "repeats": repeats,
            "ks": list(ks), "shapes": shapes.__dict__}


HEADER = (f"{'problem':12s} {'algorithm':17s} {'k':>6s} {'us/cl-step':>10s} {'round ms':>9s} "
          f"{'spread ms':>15s} {'numpy ms':>9s} {'x numpy':>8s} {'phys ms':>8s} {'x phys':>7s} "
          f"{'peak/data':>9s} {'x twin':>7s} {'exp/polar':>9s} {'1st/later':>9s} "
          f"{'max dx':>8s}")


def format_row(r):
    """One printed line of a cell."""
    s = r["round_s"]

    def opt(key, fmt, width):
        v = r.get(key)
        return f"{'-':>{width}s}" if v is None else format(v, fmt).rjust(width)
    numpy_ms = r.get("numpy_floor_s", {}).get("median")
    return (f"{r['problem'][:12]:12s} {r['algorithm']:17s} {r['k']:6d} "
            f"{r['us_per_client_step']:10.1f} {s['median'] * 1e3:9.2f} "
            f"{s['min'] * 1e3:7.2f}-{s['max'] * 1e3:<7.2f} "
            f"{'-' if numpy_ms is None else f'{numpy_ms * 1e3:.2f}':>9s} "
            f"{opt('over_numpy', '.2f', 8)} {r['physical_floor_s'] * 1e3:8.2f} "
            f"{opt('over_physical', '.1f', 7)} {opt('peak_over_data', '.2f', 9)} "
            f"{opt('over_twin', '.2f', 7)} {opt('exp_over_polar', '.2f', 9)} "
            f"{opt('first_over_later', '.2f', 9)} "
            f"{opt('max_dx', '.1e', 8)}")


def describe_rates(rates, repeats):
    """The line above the table: the machine's rates the floors use."""
    return (f"DGEMM {rates['dgemm_flops'] / 1e9:.1f} GFLOP/s, copy bandwidth "
            f"{rates['copy_Bps'] / 1e9:.1f} GB/s; medians of {repeats} rounds after a warm-up "
            f"round")


def print_table(result, file=None, rows=True):
    """The matrix as a table (``rows=False``: only the refused pairs and the legend)."""
    if rows:
        print(describe_rates(result["rates"], result["repeats"]), file=file)
        print(HEADER, file=file)
        for r in result["rows"]:
            print(format_row(r), file=file)
    for r in result["refused"]:
        print(f"refused: {r['algorithm']} on {r['problem']}: {r['refused'][:100]}", file=file)
    print("x numpy: round / batched-NumPy floor's round; phys: max(flop floor at the DGEMM "
          "rate, memory-traffic floor (kPCA, SpherePCA, Brockett)); x twin: PriRFed over its "
          "non-private twin; exp/polar: PriRFed's default Exp local steps over polar ones "
          "(Stiefel, Grassmann); 1st/later: RFedSVRG's first round over a later one; max dx: "
          "floor vs package iterates (scaled)", file=file)
