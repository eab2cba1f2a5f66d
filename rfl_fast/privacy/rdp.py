"""The RDP of the Gaussian mechanism on a batch drawn without replacement, and epsilon from an
RDP curve: the two computations PriRFed's accounting repeats, in vectorized NumPy.

They follow Google's ``dp-accounting`` (``dp_accounting.rdp.rdp_privacy_accountant``) formula
for formula, on its default orders: :func:`sampled_gaussian` is its
``_compute_rdp_sample_wor_gaussian`` (Wang, Balle and Kasiviswanathan, AISTATS 2019,
Theorem 27: the forward differences of ``exp(cgf)`` in sign and log magnitude, a Stirling-type
bound above order 256, fractional orders interpolated between their integer neighbours,
Corollary 10), and :func:`epsilon` its ``compute_epsilon`` (Canonne, Kamath and Steinke 2020,
Proposition 12). The package's tests check both against ``dp-accounting`` itself on a grid
of sampling rates, noise multipliers and orders.

Why a port: ``dp-accounting`` computes every order's forward differences again, order by
order in Python (about 0.2 s for one curve on the project's 2-core machine), and its import
takes 0.6-1.1 s. A Flower client starts a fresh process for every message and must recompute
its ledger's curve each time (a ledger file is untrusted when it comes back); here the forward
differences are computed once, for the largest order, as whole-array steps (each order's
differences are a prefix of the largest one's), in a few milliseconds, without importing
``dp-accounting`` or SciPy. ``dp-accounting`` stays the source of the other mechanisms
(Poisson sampling, the PLD accountant).
"""

import math

import numpy as np

__all__ = ["ORDERS", "gaussian", "sampled_gaussian", "epsilon"]

#: dp-accounting's default RDP orders (``DEFAULT_RDP_ORDERS``), the orders every RDP curve of
#: the package is computed at (read-only).
ORDERS = np.array([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
                  + [128, 256, 512, 1024], dtype=np.float64)
ORDERS.setflags(write=False)

#: Orders up to this are bounded exactly by Theorem 27, above it by the Stirling-type bound
#: (dp-accounting's ``max_alpha``).
EXACT_MAX_ORDER = 256


def gaussian(z, orders=ORDERS):
    """RDP of the Gaussian mechanism with noise multiplier ``z > 0``: ``a / (2 z^2)``."""
    return np.asarray(orders, dtype=np.float64) / (2.0 * z * z)


def _log_comb_table(n):
    """``lg[k] = log(k!)`` for ``k <= n`` (``log C(a, i) = lg[a] - lg[i] - lg[a - i]``)."""
    return np.array([math.lgamma(k + 1.0) for k in range(n + 1)])


def _forward_diffs(z, n):
    """Log magnitudes of the forward differences of order ``0 .. n+1`` at 0 of the sequence
    ``(1, exp(cgf(0)), exp(cgf(1)), ...)``, ``cgf(x) = x (x + 1) / (2 z^2)``: dp-accounting's
    ``_get_forward_diffs(cgf, n)``, each of its passes over the sequence one array step (a pass
    reads only the previous pass's values).

    Raises
    ------
    ValueError
        Where dp-accounting's ``log1p(-exp(.))`` meets ``log(0)`` (two neighbouring terms equal
        to rounding: the noise is so large that the sampled formula leaves its domain).
    """
    vec = np.zeros(n + 3)
    x = np.arange(n + 2, dtype=np.float64)
    vec[1:] = x * (x + 1.0) / (2.0 * z * z)
    signs = np.ones(n + 3, dtype=bool)
    deltas = np.empty(n + 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(n + 2):
            m = n + 2 - i                      # entries 0 .. m-1 become differences
            a, b = vec[:m], vec[1:m + 1]
            sa, sb = signs[:m], signs[1:m + 1]
            same = sa == sb
            # same signs: log|e^b - e^a| (dp-accounting's _log_sub_sign(b, a)), its sign
            # flipped when both terms are negative
            hi, lo = np.maximum(a, b), np.minimum(a, b)
            e = np.exp(lo - hi)
            if np.any(same & (b > a) & (e == 1.0)):   # its math.log1p(-1.0) raises
                raise ValueError("math domain error: the sampled Gaussian's forward "
                                 "differences round to zero")
            sub = np.where(b == a, -np.inf, hi + np.log1p(-e))
            sub_sign = np.where(b == a, True, b > a)
            sub_sign = np.where(sb, sub_sign, ~sub_sign)
            # different signs: log(e^a + e^b) (dp-accounting's _log_add), the sign of b
            add = np.where(lo == -np.inf, hi, hi + np.log1p(e))
            vec[:m] = np.where(same, sub, add)
            signs[:m] = np.where(same, sub_sign, sb)
            deltas[i] = vec[0]
    return deltas


def _log_a_int(q, z, alphas, deltas, lg):
    """``log A_alpha`` of Theorem 27 for each integer order in ``alphas`` (>= 2):
    dp-accounting's ``_compute_rdp_sample_wor_gaussian_int``."""
    f2 = 2.0 / (2.0 * z * z)                            # the Gaussian's RDP at order 2
    log_f2m1 = f2 + math.log1p(-math.exp(-f2))           # ValueError as dp-accounting's
    log_q, log2, log4 = math.log(q), math.log(2.0), math.log(4.0)
    first = min(log4 + log_f2m1, f2 + log2)              # the i = 2 term's bound
    out = np.empty(len(alphas))
    for j, a in enumerate(alphas):
        i = np.arange(3, a + 1, dtype=np.int64)
        cgf = (i - 1) * i / (2.0 * z * z)                # cgf(i - 1)
        if a <= EXACT_MAX_ORDER:
            lo = deltas[2 * (i // 2) - 1]                # 2 floor(i/2) - 1
            hi = deltas[2 * ((i + 1) // 2) - 1]          # 2 ceil(i/2) - 1
            s = np.minimum(log4 + 0.5 * (lo + hi), log2 + cgf)
        else:
            s = log2 + cgf
        s = s + i * log_q + (lg[a] - lg[i] - lg[a - i])
        # log(1 + sum exp(terms)), the log-sum of dp-accounting's _log_add chain from log 1
        terms = np.concatenate(([2 * log_q + (lg[a] - lg[2] - lg[a - 2]) + first], s))
        top = terms.max()
        if top <= 0.0:
            out[j] = math.log1p(np.exp(terms).sum())
        else:
            out[j] = top + math.log1p(math.exp(-top) + np.exp(terms - top).sum() - 1.0)
    return out


def sampled_gaussian(q, z, orders=ORDERS):
    """RDP of the Gaussian mechanism (noise multiplier ``z``) on a batch of ``q n`` of ``n``
    samples drawn without replacement, replace-one relation, at ``orders`` (each >= 1).

    dp-accounting's ``_compute_rdp_sample_wor_gaussian(q, z, orders)`` (module docstring).

    Parameters
    ----------
    q : float
        The sampling proportion ``b / n`` in ``[0, 1]``.
    z : float
        The noise multiplier (> 0): noise standard deviation over the L2 sensitivity.
    orders : array_like of float
        RDP orders (>= 1); default :data:`ORDERS`.

    Returns
    -------
    ndarray of float
        The RDP at each order (``inf`` at an infinite order).

    Raises
    ------
    ValueError
        Where dp-accounting's formulas leave their domain (``z`` so large that
        ``1 - exp(-1/z^2)`` rounds to 0); callers take the unsampled bound there.
    """
    orders = np.asarray(orders, dtype=np.float64)
    if q == 0:
        return np.zeros_like(orders)
    if q == 1.0:
        return orders / (2.0 * z * z)
    finite = np.isfinite(orders)
    floor = np.floor(np.where(finite, orders, 1.0)).astype(np.int64)
    ceil = np.ceil(np.where(finite, orders, 1.0)).astype(np.int64)
    need = np.union1d(floor, ceil)
    need = need[need >= 2]
    exact = need[need <= EXACT_MAX_ORDER]
    deltas = _forward_diffs(z, int(exact.max())) if exact.size else None
    lg = _log_comb_table(int(need.max()) if need.size else 1)
    log_a = dict(zip(need.tolist(), _log_a_int(q, z, need.tolist(), deltas, lg)))
    log_a[1] = 0.0                                       # order 1: 0
    with np.errstate(invalid="ignore", divide="ignore"):
        t = orders - floor
        x = np.array([log_a[a] for a in floor.tolist()])
        y = np.array([log_a[a] for a in ceil.tolist()])
        integer = floor == ceil
        rdp = np.where(integer, x, (1 - t) * x + t * y) / (orders - 1)
    rdp[integer & (orders == 1)] = 0.0
    rdp[~finite] = np.inf
    return rdp


def epsilon(orders, rdp, delta):
    """The smallest epsilon of ``(epsilon, delta)``-DP the RDP curve ``rdp`` at ``orders``
    implies: dp-accounting's ``compute_epsilon(orders, rdp, delta)[0]`` (Canonne, Kamath and
    Steinke 2020, Proposition 12; the KL bound where ``delta^2 > 1 - exp(-rdp)``; orders up to
    1.01 give no bound).

    Parameters
    ----------
    orders, rdp : array_like of float, shape (n,)
        Orders (>= 1) and the RDP at each.
    delta : float
        In ``[0, 1)``.

    Returns
    -------
    float
        ``>= 0``; ``inf`` when no order gives a bound.
    """
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.asarray(rdp, dtype=np.float64)
    if orders.shape != rdp.shape:
        raise ValueError(f"rdp: expected the shape of orders {orders.shape}, got {rdp.shape}")
    if delta == 0:
        return 0.0 if np.all(rdp == 0) else math.inf
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        eps = np.where(orders > 1.01,
                       rdp + np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1),
                       np.inf)
        eps = np.where(delta ** 2 + np.expm1(-rdp) > 0, 0.0, eps)
        eps = np.where(rdp < 0, 0.0, eps)
    return max(0.0, float(eps[np.argmin(eps)]))
