"""Timing helpers shared by ``rfl-fast bench`` and the shape sweep: blocks of back-to-back
calls with the routes alternating, medians; and the agreement test of a result with the
reference's."""

import statistics
import time

import numpy as np

__all__ = ["BLOCK_CALLS", "WARMUP_S", "AGREE_ATOL", "block_medians", "median_time", "agree",
           "scaled_error"]


#: Timed back-to-back calls per block (``block_medians``), after WARMUP_S seconds of untimed
#: calls. Without the warm-up a route pays for the one before it or for idleness: OpenBLAS
#: workers keep spinning ~0.1 s after a threaded call (so do Numba's OpenMP workers) and take
#: the core of a compiled kernel's second thread, and on this 2-core VM any pause leaves the
#: CPUs slow for tens of milliseconds (the fused clipped sum: ~2.2 ms back to back, ~4 ms in
#: short bursts after 0.15 s idle). A training loop calls one route back to back, which is what
#: the blocks measure.
BLOCK_CALLS = 3
WARMUP_S = 0.1


def block_medians(calls, repeats, once=(), warmup_s=WARMUP_S):
    """``{key: median seconds per call}`` of ``calls`` (``{key: (fn, args)}``) timed as a loop
    that calls one route back to back: each repeat runs every entry as a block of ``warmup_s``
    seconds of untimed calls (at least one) and :data:`BLOCK_CALLS` timed ones, the entries
    alternating block by block, so drifting load or clock speed hits every entry alike. Keys in
    ``once`` (slow baselines): no warm-up, one timed call per block, in at most
    ``max(3, repeats // 2)`` repeats."""
    times = {key: [] for key in calls}
    for _ in range(repeats):
        for key, (fn, args) in calls.items():
            slow = key in once
            if slow and len(times[key]) >= max(3, repeats // 2):
                continue
            if not slow:
                t_end = time.perf_counter() + warmup_s
                while True:
                    fn(*args)
                    if time.perf_counter() >= t_end:
                        break
            for _ in range(1 if slow else BLOCK_CALLS):
                t0 = time.perf_counter()
                fn(*args)
                times[key].append(time.perf_counter() - t0)
    return {key: statistics.median(v) for key, v in times.items()}


def median_time(fn, args, repeats):
    fn(*args)  # warm-up (and JIT compile / cache load)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: Agreement with the reference: |backend - reference| <= AGREE_ATOL * max(1, max|reference|)
#: elementwise, NaN where the reference is NaN.
AGREE_ATOL = 1e-9


def _scale(want):
    return max(1.0, float(np.nanmax(np.abs(want))))


def agree(got, want):
    """Whether ``got`` equals ``want`` to ``AGREE_ATOL`` of its largest entry (NaN where NaN)."""
    return bool(np.allclose(got, want, rtol=0, atol=AGREE_ATOL * _scale(want), equal_nan=True))


def scaled_error(got, want):
    """max |got - want| / max(1, max|want|) over the entries where both are finite."""
    both = np.isfinite(got) & np.isfinite(want)
    if not both.any():
        return 0.0
    return float(np.max(np.abs(got[both] - want[both]))) / _scale(want)
