"""Timing helpers shared by ``rfl-fast bench`` and the shape sweep: blocks of back-to-back
calls with the routes alternating, medians; and the agreement test of a result with the
reference's."""

import statistics
import time

import numpy as np

__all__ = ["BLOCK_CALLS", "WARMUP_S", "ONCE_WARM_MAX_S", "ONCE_BUDGET_S", "AGREE_ATOL",
           "block_medians", "median_time", "agree", "scaled_error"]


#: Timed back-to-back calls per block (``block_medians``), after WARMUP_S seconds of untimed
#: calls. Without the warm-up a route pays for the one before it or for idleness: OpenBLAS
#: workers keep spinning ~0.1 s after a threaded call (so do Numba's OpenMP workers) and take
#: the core of a compiled kernel's second thread, and on this 2-core VM any pause leaves the
#: CPUs slow for tens of milliseconds (the fused clipped sum: ~2.2 ms back to back, ~4 ms in
#: short bursts after 0.15 s idle). A training loop calls one route back to back, which is what
#: the blocks measure.
BLOCK_CALLS = 3
WARMUP_S = 0.1

#: Slow keys (``once`` of ``block_medians``): each timed call follows one untimed call of its own
#: while a call takes under ONCE_WARM_MAX_S (a 0.3 s call timed right after another route's block
#: measured up to 1.5x long: that route's pools still spin), and the timed calls stop once they
#: add up to ONCE_BUDGET_S (a 10 s reference is timed once, not three times).
ONCE_WARM_MAX_S = 1.0
ONCE_BUDGET_S = 10.0


def block_medians(calls, repeats, once=(), warmup_s=WARMUP_S, timed=None):
    """``{key: median seconds per call}`` of ``calls`` (``{key: (fn, args)}``) timed as a loop
    that calls one route back to back: each repeat runs every entry as a block of ``warmup_s``
    seconds of untimed calls (at least one) and :data:`BLOCK_CALLS` timed ones, the entries
    alternating block by block, so drifting load or clock speed hits every entry alike. Keys in
    ``once`` (slow routes): a block is one untimed call (before the first timed call, later only
    while the last timed one took under :data:`ONCE_WARM_MAX_S`) and one timed call, in at most
    ``max(3, repeats // 2)`` repeats and none after the timed calls add up to
    :data:`ONCE_BUDGET_S`. ``timed``: ``{key: [seconds]}`` of calls the caller already timed
    the same way (each right after an untimed call of its own), counted with the key's."""
    times = {key: list((timed or {}).get(key, ())) for key in calls}
    for _ in range(repeats):
        for key, (fn, args) in calls.items():
            slow, took = key in once, times[key]
            if slow:
                if len(took) >= max(3, repeats // 2) or sum(took) >= ONCE_BUDGET_S:
                    continue
                if not took or took[-1] < ONCE_WARM_MAX_S:
                    fn(*args)
            else:
                t_end = time.perf_counter() + warmup_s
                while True:
                    fn(*args)
                    if time.perf_counter() >= t_end:
                        break
            for _ in range(1 if slow else BLOCK_CALLS):
                t0 = time.perf_counter()
                fn(*args)
                took.append(time.perf_counter() - t0)
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
