"""Hot kernels and the batched call convention shared by every backend.

Kernel contract (all backends): every array argument is C-contiguous float64 with one leading
batch axis ``N`` followed by the core shape listed in ``KERNELS``; the result has the same
leading axis. Kernels never validate: ``call`` (and the public API above it) does. An item for
which a kernel has no answer (e.g. the log of a matrix that is not positive definite) comes back
as NaN; the public function turns that into an error naming the argument.
"""

import math

import numpy as np

from .. import _dispatch
from .._validation import FLOAT64, broadcast_batch, check_dtype

__all__ = ["KERNELS", "call"]

# name -> (core ndims of each argument, core ndims of the result)
KERNELS = {
    # Stiefel St(n, p), points (n, p)
    "stiefel_proj": ((2, 2), 2),           # (x, u) -> u - x sym(x'u)
    "stiefel_retr_polar": ((2, 2), 2),     # (x, u) -> polar(x + u)
    "stiefel_inv_retr_polar": ((2, 2), 2), # (x, y) -> y S - x, (x'y)S + S(y'x) = 2I, S symmetric
    "stiefel_retr_qr": ((2, 2), 2),        # (x, u) -> qf(x + u), positive diagonal of R
    "stiefel_inv_retr_qr": ((2, 2), 2),    # (x, y) -> y R - x, (x'y)R + R'(y'x) = 2I, R upper tri.
    "polar": ((2,), 2),                    # (a,) -> a (a'a)^(-1/2), the nearest Stiefel point
    # symmetric matrix functions (n, n), one symmetric eigendecomposition each
    "sym_expm": ((2,), 2),
    "sym_logm": ((2,), 2),
    "sym_sqrtm": ((2,), 2),
    "sym_invsqrtm": ((2,), 2),
    # SPD S++(n), affine-invariant metric
    "spd_exp": ((2, 2), 2),                # (x, u) -> x^½ expm(x^-½ u x^-½) x^½
    "spd_log": ((2, 2), 2),                # (x, y) -> x^½ logm(x^-½ y x^-½) x^½
    "spd_dist": ((2, 2), 0),               # (x, y) -> |logm(x^-½ y x^-½)|_F
    # sphere S^(d-1), points (d,)
    "sphere_exp": ((1, 1), 1),
    "sphere_log": ((1, 1), 1),
    "sphere_dist": ((1, 1), 0),
    "sphere_transport": ((1, 1, 1), 1),    # (x, y, v) parallel transport along the geodesic
    # hyperboloid (Lorentz) H^d, points (d+1,)
    "lorentz_exp": ((1, 1), 1),
    "lorentz_log": ((1, 1), 1),
    "lorentz_dist": ((1, 1), 0),
    "lorentz_transport": ((1, 1, 1), 1),
}


def call(name, *arrays, backend=None):
    """Run kernel ``name`` on arrays with any broadcastable leading axes.

    Flattens the batch axes to one, makes the inputs C-contiguous float64, calls the kernel of
    the chosen backend and restores the batch axes. The result is float32 only when every input
    is float32 (computed in float64, rounded at the end). Inputs: float64, float32 or integer
    arrays; any other dtype (complex, float16, longdouble, ...) raises ``TypeError``.
    """
    core_ndims, _ = KERNELS[name]
    _, fn = _dispatch.resolve(name, backend)
    if len(arrays) == 2 and core_ndims[0] == core_ndims[1]:  # fast path: one item, each ready
        a, b = arrays
        if (a.ndim == core_ndims[0] and b.ndim == a.ndim and a.dtype is FLOAT64
                and b.dtype is FLOAT64 and a.flags.c_contiguous and b.flags.c_contiguous):
            out = fn(a[None], b[None])
            return out.reshape(out.shape[1:])
    # fast path (the common case: equal batch axes) skips np.broadcast_shapes (~2-4 us)
    batch = None
    for a, k in zip(arrays, core_ndims):
        b = a.shape[: a.ndim - k]
        if batch is None:
            batch = b
        elif b != batch:
            batch = broadcast_batch(arrays, ("argument",) * len(arrays), core_ndims)
            break
    count = math.prod(batch)
    flat = []
    all32 = True
    for a, k in zip(arrays, core_ndims):
        dt = a.dtype
        all32 = all32 and dt == np.float32
        core = a.shape[a.ndim - k:]
        if a.shape[: a.ndim - k] != batch:
            a = np.broadcast_to(a, batch + core)
        a = a.reshape((count,) + core)
        if dt.char not in "fd" and dt.kind not in "iu":  # would be changed silently
            check_dtype(dt, f"{name}: argument {len(flat)}")
        if dt != np.float64 or not a.flags.c_contiguous:
            a = np.ascontiguousarray(a, dtype=np.float64)
        flat.append(a)
    out = fn(*flat)
    out = out.reshape(batch + out.shape[1:])
    if all32:
        out = out.astype(np.float32)
    return out
