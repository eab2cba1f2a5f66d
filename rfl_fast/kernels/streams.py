"""Stacked random draws, item ``j`` from its own generator, filled on the package's threads.

A batch of clients and one client at a time (a Flower client) must draw the same noise:
:class:`ItemStreams` gives every item the numbers its own generator gives it alone, and fills a
large draw on the package's threads (NumPy's fills release the GIL), which only the kernels
floor knows (:func:`rfl_fast.get_threads`).
"""

import os
from collections import deque
from itertools import repeat

import numpy as np

from .._validation import Streams
from ._dispatch import get_threads

__all__ = ["ItemStreams"]

_STANDARD_NORMAL = np.random.Generator.standard_normal

#: Normals a thread of :meth:`ItemStreams.standard_normal` fills at least (0.5 MB of output,
#: the C++ kernels' rule for splitting a batch): a smaller draw stays on the calling thread.
_DRAWS_PER_THREAD = 1 << 16

_POOL = None            # (pid, workers, ThreadPoolExecutor) of the threaded fills


def _fill_rows(generators, rows, plain):
    """``generators[j].standard_normal(out=rows[j])`` for every ``j``, in order; iterated in C
    (``map`` over NumPy's C method: no Python-level loop and no Python call per row) where
    every generator is a plain ``numpy.random.Generator`` (``plain``)."""
    if plain:
        deque(map(_STANDARD_NORMAL, generators, repeat(None), repeat(np.float64), rows),
              maxlen=0)
    else:       # a subclass may override standard_normal: call it as it is
        for g, row in zip(generators, rows):
            g.standard_normal(out=row)


def _fill_pool(workers):
    """The process's thread pool of at least ``workers`` threads, made again after a fork (a
    child inherits the pool's object but not its threads) or when more threads are asked."""
    global _POOL
    from concurrent.futures import ThreadPoolExecutor
    pid = os.getpid()
    if _POOL is None or _POOL[0] != pid or _POOL[1] < workers:
        if _POOL is not None and _POOL[0] == pid:
            _POOL[2].shutdown(wait=False)
        _POOL = (pid, workers, ThreadPoolExecutor(workers, thread_name_prefix="rfl_fast-draws"))
    return _POOL[2]


class ItemStreams(Streams):
    """The random source of a stack of items, item ``j`` drawn from its own generator.

    Handed as ``rng=`` to a batched draw (``Manifold.tangent_gaussian`` of a stack ``(k,
    *shape)``), it gives item ``j`` exactly the numbers that a draw for item ``j`` alone from
    ``generators[j]`` gives, so a batch of clients and one client at a time (a Flower client)
    draw the same noise. Only ``standard_normal`` is provided.

    A large draw is filled on up to :func:`rfl_fast.get_threads` threads (NumPy's fills release
    the GIL; each thread takes a contiguous run of items, at least 65 536 normals each): every
    item is still filled by its own generator alone, so the numbers do not depend on the
    thread count. Items sharing one generator (a repeated client) are filled in order on one
    thread.

    Parameters
    ----------
    generators : sequence of numpy.random.Generator
        One per item, advanced by each draw.
    """

    def __init__(self, generators):
        self.generators = tuple(generators)
        self._distinct = len({*map(id, self.generators)}) == len(self.generators)
        self._plain = {*map(type, self.generators)} <= {np.random.Generator}

    def standard_normal(self, shape):
        """Standard normal draws of shape ``shape`` = ``(k, *item)``, row ``j`` from generator
        ``j``."""
        shape = tuple(shape)
        k = len(self.generators)
        if not shape or shape[0] != k:
            raise ValueError(f"shape: expected ({k}, ...) (one row per "
                             f"stream), got {shape}")
        out = np.empty(shape)
        if out.size == 0:
            return out
        # rows as arrays (a row of a (k,) draw is one item of shape (1,), the same number as
        # the generator's scalar draw)
        rows = list(out.reshape(k, -1) if out.ndim == 1 else out)
        parts = min(get_threads(), k, out.size // _DRAWS_PER_THREAD) if self._distinct else 1
        if parts <= 1:
            _fill_rows(self.generators, rows, self._plain)
            return out
        cut = [k * p // parts for p in range(parts + 1)]
        pool = _fill_pool(parts - 1)
        futures = [pool.submit(_fill_rows, self.generators[a:b], rows[a:b], self._plain)
                   for a, b in zip(cut[1:-1], cut[2:])]
        try:
            _fill_rows(self.generators[:cut[1]], rows[:cut[1]], self._plain)
        finally:
            for f in futures:
                f.result()
        return out
