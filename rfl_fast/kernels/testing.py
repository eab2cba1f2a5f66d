"""Random valid inputs for every kernel of ``rfl_fast.kernels.KERNELS`` (float64, batch axis N).

Used by the tests (oracle comparisons) and the benchmarks; not part of the stable API.
"""

import numpy as np

from rfl_fast.kernels import reference as ref


def stiefel_point(rng, n_items, n, p):
    q, r = np.linalg.qr(rng.standard_normal((n_items, n, p)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]


def stiefel_tangent(rng, x, scale=0.5):
    return scale * ref.stiefel_proj(x, rng.standard_normal(x.shape))


def symmetric(rng, n_items, n, scale=1.0):
    a = rng.standard_normal((n_items, n, n)) * scale
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def spd(rng, n_items, n, cond=10.0):
    """SPD matrices with eigenvalues spread log-uniformly over [1/sqrt(cond), sqrt(cond)]."""
    q = stiefel_point(rng, n_items, n, n)
    w = np.exp(rng.uniform(-0.5, 0.5, (n_items, n)) * np.log(cond))
    w[:, 0], w[:, -1] = cond ** -0.5, cond ** 0.5
    a = (q * w[:, None, :]) @ np.swapaxes(q, -1, -2)
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def sphere_point(rng, n_items, d):
    x = rng.standard_normal((n_items, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def sphere_tangent(rng, x, scale=1.0):
    v = rng.standard_normal(x.shape)
    return scale * (v - np.sum(v * x, -1, keepdims=True) * x)


def lorentz_point(rng, n_items, d, scale=1.0):
    """Points of H^d in R^(d+1): (sqrt(1 + |s|^2), s)."""
    s = scale * rng.standard_normal((n_items, d))
    return np.concatenate([np.sqrt(1.0 + np.sum(s * s, -1, keepdims=True)), s], axis=-1)


def lorentz_tangent(rng, x, scale=1.0):
    v = scale * rng.standard_normal(x.shape)
    inner = np.sum(v * x, -1, keepdims=True) - 2 * v[:, :1] * x[:, :1]
    return v + inner * x


def kernel_inputs(name, rng, n_items, n, p=None, cond=10.0):
    """Arguments for kernel ``name``: matrices (n, p) / (n, n), or vectors of length n (its
    declared ``Kernel.inputs`` where it has one)."""
    from rfl_fast.kernels.registry import REGISTRY

    spec = REGISTRY.get(name)
    if spec is not None and spec.inputs is not None:
        return spec.inputs(rng, n_items, n, *(() if p is None else (p,)))
    p = n if p is None else p
    if name.startswith("stiefel_"):
        x = stiefel_point(rng, n_items, n, p)
        u = stiefel_tangent(rng, x)
        if name in ("stiefel_proj", "stiefel_retr_polar", "stiefel_retr_qr", "stiefel_exp"):
            return (x, u if name != "stiefel_proj" else rng.standard_normal(x.shape))
        retr = ref.stiefel_retr_polar if name.endswith("polar") else ref.stiefel_retr_qr
        return (x, retr(x, u))
    if name == "polar":
        return (rng.standard_normal((n_items, n, p)),)
    if name == "sym_expm":
        return (symmetric(rng, n_items, n),)
    if name in ("sym_logm", "sym_sqrtm", "sym_invsqrtm"):
        return (spd(rng, n_items, n, cond),)
    if name == "spd_exp":  # u = x^½ s x^½ with |s| ~ 1: a unit-size step in the metric
        x = spd(rng, n_items, n, cond)
        c = ref.sym_sqrtm(x)
        return (x, c @ symmetric(rng, n_items, n, scale=0.5) @ c)
    if name in ("spd_log", "spd_dist"):
        return (spd(rng, n_items, n, cond), spd(rng, n_items, n, cond))
    if name.startswith("sphere_"):
        x = sphere_point(rng, n_items, n)
        if name == "sphere_exp":
            return (x, sphere_tangent(rng, x))
        y = sphere_point(rng, n_items, n)
        return (x, y) if name != "sphere_transport" else (x, y, sphere_tangent(rng, x))
    if name.startswith("lorentz_"):
        x = lorentz_point(rng, n_items, n - 1)
        if name == "lorentz_exp":
            return (x, lorentz_tangent(rng, x))
        y = lorentz_point(rng, n_items, n - 1)
        return (x, y) if name != "lorentz_transport" else (x, y, lorentz_tangent(rng, x))
    raise KeyError(f"kernel_inputs: no input generator for kernel {name!r}: declare "
                   "Kernel(..., inputs=) where it is registered")
