"""The GPU check of issue 41: rfl_fast's primitives on PyTorch tensors on a device, first checked
against the NumPy reference, then timed against hand-written torch routes for the same operation
and against rfl_fast's own CPU time on NumPy arrays.

    python benchmarks/gpu.py [--device cuda] [--smoke] [--repeats 5] [--json PATH]

For each case (the issue's shapes: the polar retraction St(784, 5) x 20,000 and St(784, 32) x 500,
its inverse, the QR retraction, the Stiefel projection, SPD(9) exp/log x 10,000, the sphere's
exp x 100,000):

1. **correctness**: the answer rfl_fast gives for tensors on ``--device`` (through the array
   seam, ``rfl_fast.kernels.arrays``) has the caller's type and device and agrees with the NumPy
   reference (``rfl_fast.kernels.reference``) on the same numbers, within ``tol``;
2. **timings** (medians of ``--repeats``, the device synchronized around each call): rfl_fast on
   device tensors, each hand-written torch candidate (the polar factor by eigh of the p x p Gram
   matrix, by SVD and by Newton-Schulz iterations; QR by ``torch.linalg.qr``; the SPD maps by
   ``torch.linalg.eigh``; the polar inverse by one Lyapunov solve per item), and rfl_fast on NumPy arrays on the CPU (all its threads). Printed:
   each time, rfl_fast's over the best candidate's, and the CPU time over rfl_fast's device time.

Today the seam copies device tensors to the host and the result back (docs/arrays.md): there are
no GPU routes yet, so on a GPU this script measures that round trip; it is the yardstick the GPU
routes must meet (issue 41: within 1.5x the best hand-written route, at least 10x the 16-core
CPU time). ``--smoke`` runs every case at toy sizes on the CPU (the test suite does so).
"""

import argparse
import json
import statistics
import time

import numpy as np


def _cases(smoke):
    big = not smoke
    return [  # (name, what, shape args)
        ("polar retr St(784,5)", "stiefel_retr_polar", (20_000 if big else 3, 784 if big else 12, 5)),
        ("polar retr St(784,32)", "stiefel_retr_polar", (500 if big else 2, 784 if big else 40, 32 if big else 6)),
        ("polar inv_retr St(784,5)", "stiefel_inv_retr_polar", (20_000 if big else 3, 784 if big else 12, 5)),
        ("qr retr St(784,5)", "stiefel_retr_qr", (20_000 if big else 3, 784 if big else 12, 5)),
        ("proj St(784,5)", "stiefel_proj", (20_000 if big else 3, 784 if big else 12, 5)),
        ("exp SPD(9)", "spd_exp", (10_000 if big else 4, 9)),
        ("log SPD(9)", "spd_log", (10_000 if big else 4, 9)),
        ("exp Sphere(784)", "sphere_exp", (100_000 if big else 5, 784 if big else 7)),
    ]


def _inputs(kernel, dims):
    from rfl_fast.kernels.testing import kernel_inputs
    n_items, *rest = dims
    return tuple(np.ascontiguousarray(a) for a in
                 kernel_inputs(kernel, np.random.default_rng(0), n_items, *rest))


def _public(kernel):
    """rfl_fast's public call for ``kernel`` (through the manifolds, so through the seam)."""
    import rfl_fast as rf
    if kernel.startswith("stiefel"):
        def call(x, u):
            M = rf.Stiefel(*x.shape[-2:])
            if kernel == "stiefel_proj":
                return M.proj(x, u)
            if kernel == "stiefel_inv_retr_polar":
                return M.inv_retr(x, u, "polar")
            return M.retr(x, u, kernel.rsplit("_", 1)[1])
        return call
    if kernel == "spd_exp":
        return lambda x, u: rf.SPD(x.shape[-1]).exp(x, u)
    if kernel == "spd_log":
        return lambda x, y: rf.SPD(x.shape[-1]).log(x, y)
    if kernel == "sphere_exp":
        return lambda x, u: rf.Sphere(x.shape[-1]).exp(x, u)
    raise KeyError(kernel)


def _candidates(torch, kernel):
    """Hand-written torch routes for ``kernel`` (name -> function of the device tensors)."""
    t = lambda a: a.transpose(-1, -2)

    def polar_eigh(x, u):
        a = x + u
        w, v = torch.linalg.eigh(t(a) @ a)
        return a @ (v * w.rsqrt().unsqueeze(-2)) @ t(v)

    def polar_svd(x, u):
        q, _, vh = torch.linalg.svd(x + u, full_matrices=False)
        return q @ vh

    def polar_newton_schulz(x, u, steps=12):
        a = x + u
        y = a / torch.linalg.matrix_norm(a, ord=2, keepdim=True)
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        for _ in range(steps):
            y = y @ (1.5 * eye - 0.5 * (t(y) @ y))
        return y

    def inv_polar(x, y):
        # U = Y S - X with (X'Y) S + S (Y'X) = 2I, as one p^2 x p^2 solve per item
        m = t(x) @ y
        p = m.shape[-1]
        eye = torch.eye(p, dtype=m.dtype, device=m.device)
        k = (torch.einsum("...ik,jl->...ijkl", m, eye)
             + torch.einsum("ik,...jl->...ijkl", eye, m)).reshape(*m.shape[:-2], p * p, p * p)
        rhs = (2.0 * eye).reshape(p * p).expand(*m.shape[:-2], p * p)
        s = torch.linalg.solve(k, rhs.unsqueeze(-1)).reshape(m.shape)
        return y @ s - x

    def qr(x, u):
        q, r = torch.linalg.qr(x + u)
        return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)

    def proj(x, u):
        s = t(x) @ u
        return u - x @ (0.5 * (s + t(s)))

    def eig_map(a, f):
        w, v = torch.linalg.eigh(a)
        return (v * f(w).unsqueeze(-2)) @ t(v)

    def spd_exp(x, u):
        h, hi = eig_map(x, torch.sqrt), eig_map(x, torch.rsqrt)
        return h @ eig_map(hi @ u @ hi, torch.exp) @ h

    def spd_log(x, y):
        h, hi = eig_map(x, torch.sqrt), eig_map(x, torch.rsqrt)
        return h @ eig_map(hi @ y @ hi, torch.log) @ h

    def sphere_exp(x, u):
        n = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
        return torch.cos(n) * x + torch.sinc(n / torch.pi) * u

    return {"stiefel_retr_polar": {"eigh of the Gram": polar_eigh, "svd": polar_svd,
                                   "Newton-Schulz (12)": polar_newton_schulz},
            "stiefel_inv_retr_polar": {"one Lyapunov solve": inv_polar},
            "stiefel_retr_qr": {"torch.linalg.qr": qr},
            "stiefel_proj": {"two products": proj},
            "spd_exp": {"eigh (x^1/2 expm(...) x^1/2)": spd_exp},
            "spd_log": {"eigh (x^1/2 logm(...) x^1/2)": spd_log},
            "sphere_exp": {"cos/sinc": sphere_exp}}[kernel]


def _time(fn, args, repeats, sync):
    fn(*args)
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(device="cuda", smoke=False, repeats=5, log=print):
    """Every case of :func:`_cases` on ``device``; returns the rows (see the module docstring)."""
    import torch

    from rfl_fast.kernels import resolve

    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    rows = []
    for label, kernel, dims in _cases(smoke):
        args = _inputs(kernel, dims)
        want = resolve(kernel, "numpy")[1](*args)
        targs = tuple(torch.from_numpy(a).to(dev) for a in args)
        ours = _public(kernel)
        got = ours(*targs)
        assert isinstance(got, torch.Tensor) and got.device == targs[0].device, (label, type(got))
        err = float(np.max(np.abs(got.cpu().numpy() - want)))
        tol = 1e-8 * max(1.0, float(np.max(np.abs(want))))
        row = {"case": label, "kernel": kernel, "shape": dims, "device": str(dev),
               "max_err": err, "ok": err <= tol,
               "ours_device_s": _time(ours, targs, repeats, sync),
               "ours_cpu_s": _time(ours, args, repeats, lambda: None), "candidates": {}}
        for name, fn in _candidates(torch, kernel).items():
            c_err = float(np.max(np.abs(fn(*targs).cpu().numpy() - want)))
            row["candidates"][name] = {"s": _time(fn, targs, repeats, sync), "max_err": c_err}
        best = min(row["candidates"].values(), key=lambda c: c["s"])
        row["over_best_torch"] = row["ours_device_s"] / best["s"]
        row["cpu_over_device"] = row["ours_cpu_s"] / row["ours_device_s"]
        rows.append(row)
        cands = ", ".join(f"{n} {c['s'] * 1e3:.2f} ms (err {c['max_err']:.1e})"
                          for n, c in row["candidates"].items())
        log(f"{label:26s} {dims}: rfl_fast on {dev} {row['ours_device_s'] * 1e3:.2f} ms "
            f"(err {err:.1e}, {'ok' if row['ok'] else 'WRONG'}), over the best torch route "
            f"{row['over_best_torch']:.2f}x; rfl_fast on NumPy/CPU {row['ours_cpu_s'] * 1e3:.2f} ms "
            f"({row['cpu_over_device']:.2f}x its device time); torch: {cands}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    ap.add_argument("--smoke", action="store_true", help="toy sizes (the tests run this)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    import torch

    import rfl_fast
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"torch {torch.__version__}, rfl_fast {rfl_fast.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(0)})" if device.startswith("cuda") else "")
          + f", CPU threads {rfl_fast.get_threads()}")
    rows = run(device, a.smoke, a.repeats)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
