"""Stacked random draws, item ``j`` from its own generator, filled on the package's threads.

A batch of clients and one client at a time (a Flower client) must draw the same noise:
:class:`ItemStreams` gives every item the numbers its own generator gives it alone, and fills a
large draw on the package's threads (NumPy's fills release the GIL), which only the kernels
floor knows (:func:`rfl_fast.get_threads`).

Where every generator is a plain ``numpy.random.Generator`` on ``PCG64`` (the package's client
streams), the rows are drawn by the compiled core (``rfl/normal.hpp``: NumPy's PCG64 and
ziggurat, bit for bit, without NumPy's mispredicted sign branch; about 3 ns a normal against
9.4), straight from each generator's own state, which it advances as NumPy would. It is used
only after a probe of 100 000 normals from a fresh generator equals NumPy's and leaves the
stream where NumPy leaves it; otherwise (no compiled core, another NumPy layout) NumPy draws.
NumPy's per-generator lock is not taken there: the streams are the caller's own, each drawn
from one thread at a time (as the threaded fills here do). The same compiled draws serve
:meth:`ItemStreams.projected_normal`, the tangent Gaussian of Stiefel and the sphere with each
item's normals scaled and projected while in cache (``rfl_projected_normal_rows``).

The generators themselves, one per client and round, are made together by
:func:`spawned_generators`: NumPy's SeedSequence hashing for all clients in one compiled call,
and PCG64 seeded from its words through the compiled core's ``SpawnedSeed`` (the same
streams).
"""

import ctypes
import os
from collections import deque
from itertools import repeat
from operator import attrgetter

import numpy as np

from .._validation import Streams
from ._dispatch import get_threads, load, resolve

__all__ = ["ItemStreams", "spawned_generators"]

_STANDARD_NORMAL = np.random.Generator.standard_normal
_BIT_GENERATOR, _CAPSULE = attrgetter("bit_generator"), attrgetter("capsule")

#: Normals a thread of :meth:`ItemStreams.standard_normal` fills at least (0.5 MB of output,
#: the C++ kernels' rule for splitting a batch): a smaller draw stays on the calling thread.
_DRAWS_PER_THREAD = 1 << 16

_POOL = None            # (pid, workers, ThreadPoolExecutor) of the threaded fills


_COMPILED = None        # the compiled fill once probed (False: not available)
_PROBE_NORMALS = 100_000


def _compiled_fill():
    """``rfl_normal_rows`` of the compiled core (``src/normal.cpp``) as a ctypes function of
    ``(capsules, out, n)``, or ``None``: no compiled core, no symbol, or a probe that differs
    from NumPy's draws (the result is kept for the process)."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = False
        fn = _export("rfl_normal_rows", ctypes.c_void_p, ctypes.c_int64)
        if fn is not None and _numpy_layout() and _probe(fn):
            _COMPILED = fn
    return _COMPILED or None


def _export(name, *argtypes):
    """The compiled core's C function ``name`` (``src/normal.cpp``) through ``ctypes.PyDLL``
    (called with the GIL, which it releases itself), taking a list of capsules then
    ``argtypes`` and returning an int; ``None`` without a compiled core or that symbol."""
    path = getattr(load("cpp"), "__file__", None)
    try:
        fn = getattr(ctypes.PyDLL(path), name) if path else None
    except (OSError, AttributeError):
        return None
    if fn is not None:
        fn.argtypes = (ctypes.py_object,) + argtypes
        fn.restype = ctypes.c_int
    return fn


_PROJECTED = None       # rfl_projected_normal_rows once found (False: not available)


def _compiled_projected():
    """``rfl_projected_normal_rows`` of the compiled core as a ctypes function of
    ``(capsules, x, out, sigma, n, p)``, where the compiled fill passed its probe (the same
    normals: ``rfl/normal.hpp``), else ``None``."""
    global _PROJECTED
    if _PROJECTED is None:
        _PROJECTED = False
        if _compiled_fill() is not None:
            _PROJECTED = _export("rfl_projected_normal_rows", ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64) or False
    return _PROJECTED or None


def _numpy_layout():
    """Whether NumPy's PCG64 state is laid out as ``rfl/normal.hpp`` reads it: a NumPy 1.17-2.x
    (whose ``pcg64_state`` starts with a pointer to ``{u128 state; u128 inc}``), and the
    words read there are the state and increment that ``bit_generator.state`` reports."""
    if not np.lib.NumpyVersion(np.__version__) < "3.0.0":
        return False
    bg = np.random.PCG64(20261127)
    st = bg.state["state"]
    inner = ctypes.cast(bg.ctypes.state_address, ctypes.POINTER(ctypes.c_void_p))[0]
    if not inner:
        return False
    words = ctypes.cast(inner, ctypes.POINTER(ctypes.c_uint64 * 4))[0]
    mask = (1 << 64) - 1
    return list(words) == [st["state"] & mask, st["state"] >> 64, st["inc"] & mask,
                           st["inc"] >> 64]


def _probe(fn):
    """Whether ``fn`` draws NumPy's normals from two fresh PCG64 streams (one listed twice)
    and leaves the streams where NumPy's draws leave them."""
    mine = [np.random.Generator(np.random.PCG64(s)) for s in (20261127, 37)]
    ref = [np.random.Generator(np.random.PCG64(s)) for s in (20261127, 37)]
    n = _PROBE_NORMALS // 4
    out = np.empty((4, n))
    if fn([mine[0].bit_generator.capsule, mine[1].bit_generator.capsule,
           mine[0].bit_generator.capsule, mine[1].bit_generator.capsule],
          out.ctypes.data, n) != 1:
        return False
    want = np.stack([ref[0].standard_normal(n), ref[1].standard_normal(n),
                     ref[0].standard_normal(n), ref[1].standard_normal(n)])
    return bool(np.array_equal(out, want)) and all(
        a.integers(1 << 62) == b.integers(1 << 62) for a, b in zip(mine, ref))


def _fill_compiled(fn, capsules, block):
    """``block`` (kb, n), C-contiguous: row ``j`` drawn from ``capsules[j]``'s generator."""
    if fn(capsules, block.ctypes.data, block.shape[1]) != 1:
        raise RuntimeError("rfl_normal_rows refused its arguments")


def _projected_compiled(fn, capsules, x, out, sigma):
    """Items ``out`` (kb, n, p) = ``P_x(sigma_j N_j)`` (``rfl_projected_normal_rows``)."""
    rc = fn(capsules, x.ctypes.data, out.ctypes.data, sigma.ctypes.data, x.shape[1],
            x.shape[2])
    if rc == -2:
        raise MemoryError(f"tangent_gaussian: no memory for the draws of {x.shape[1:]} points")
    if rc != 1:
        raise RuntimeError("rfl_projected_normal_rows refused its arguments")


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
    draw the same noise. It provides ``standard_normal`` and, for the tangent Gaussian of Stiefel
    and the sphere, :meth:`projected_normal`.

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
        # distinct streams (two Generators on one bit generator are one stream): filled on
        # several threads only then
        self._distinct = len({id(getattr(g, "bit_generator", g)) for g in self.generators}) \
            == len(self.generators)
        self._plain = {*map(type, self.generators)} <= {np.random.Generator}
        # (mapped in C: no Python line per item)
        bits = tuple(map(_BIT_GENERATOR, self.generators)) if self._plain else ()
        self._capsules = (list(map(_CAPSULE, bits))
                          if self._plain and {*map(type, bits)} <= {np.random.PCG64} else None)

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
        cut = self._cuts(out.size)
        fn = _compiled_fill() if self._capsules is not None else None
        if fn is not None:      # the compiled rows, on (k, n) blocks
            flat = out.reshape(k, -1)
            caps = self._capsules
            jobs = [(_fill_compiled, fn, caps[a:b], flat[a:b]) for a, b in zip(cut, cut[1:])]
        else:
            # rows as arrays (a row of a (k,) draw is one item of shape (1,), the same number
            # as the generator's scalar draw)
            rows = list(out.reshape(k, -1) if out.ndim == 1 else out)
            jobs = [(_fill_rows, self.generators[a:b], rows[a:b], self._plain)
                    for a, b in zip(cut, cut[1:])]
        _run(jobs)
        return out

    def projected_normal(self, x, sigma):
        """``P_x(sigma_j N_j)`` for every item ``j``, ``N_j`` the normals that
        ``standard_normal(x.shape)`` gives row ``j`` (the same numbers) and ``P_x(v) = v - x
        sym(x'v)`` the Stiefel tangent projection (at ``p = 1`` the sphere's ``v - <x,v> x``),
        in one compiled pass per item (its draw in cache) with the projection of the C++
        ``stiefel_proj`` kernel; ``None`` where the compiled fill does not serve these streams
        or the backend in force does not give ``stiefel_proj`` to C++ at this shape (then
        nothing is drawn).

        Parameters
        ----------
        x : ndarray, shape (k, n, p)
            C-contiguous float64 points, one per stream.
        sigma : ndarray, shape (k,)
            C-contiguous float64 scales.

        Returns
        -------
        ndarray, shape (k, n, p), or None
        """
        k = len(self.generators)
        fn = _compiled_projected() if self._capsules is not None else None
        if (fn is None or x.ndim != 3 or x.shape[0] != k or x.dtype != np.float64
                or not x.flags.c_contiguous or sigma.shape != (k,)
                or sigma.dtype != np.float64 or not sigma.flags.c_contiguous
                or resolve("stiefel_proj", None, x.shape)[0] != "cpp"):
            return None
        out = np.empty(x.shape)
        if out.size:
            caps, cut = self._capsules, self._cuts(out.size)
            _run([(_projected_compiled, fn, caps[a:b], x[a:b], out[a:b], sigma[a:b])
                  for a, b in zip(cut, cut[1:])])
        return out

    def _cuts(self, size):
        """Item bounds of the threaded parts of a draw of ``size`` numbers: up to
        :func:`rfl_fast.get_threads` parts of at least ``_DRAWS_PER_THREAD`` (one part where
        two items share a generator)."""
        k = len(self.generators)
        parts = max(min(get_threads(), k, size // _DRAWS_PER_THREAD) if self._distinct else 1,
                    1)
        return [k * p // parts for p in range(parts + 1)]


def _run(jobs):
    """Run ``jobs`` (``(fn, *args)`` each), the first on this thread, the others on the pool."""
    if len(jobs) == 1:
        jobs[0][0](*jobs[0][1:])
        return
    pool = _fill_pool(len(jobs) - 1)
    futures = [pool.submit(*job) for job in jobs[1:]]
    try:
        jobs[0][0](*jobs[0][1:])
    finally:
        for f in futures:
            f.result()


# ------------------------------------------------------------------ the clients' generators

_MASK32 = 0xFFFFFFFF

_SPAWNED = None     # _core.SpawnedSeed once checked (False: not available)


def spawned_generators(seed, key, ids):
    """``numpy.random.Generator(PCG64(SeedSequence(seed, spawn_key=key + (i,))))`` for every
    ``i`` of ``ids`` (ints >= 0), the same streams, made together: the SeedSequences' hashing
    for all of them in one compiled call (:func:`spawn_words`), and PCG64 seeded from those
    words through the compiled core's ``SpawnedSeed`` (no Python call per generator; a
    SeedSequence otherwise costs ~6 us, its PCG64 seeding ~5, more than a private step's
    draws). Without the compiled core, or where its first words differ from NumPy's, each
    generator is NumPy's own.

    Parameters
    ----------
    seed : int
        The root seed, ``>= 0``.
    key : tuple of int
        The spawn key's leading part.
    ids : list of int

    Returns
    -------
    list of numpy.random.Generator
    """
    cls = _spawned_seed()
    if cls is None:
        return [np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            seed, spawn_key=key + (i,)))) for i in ids]
    return list(map(np.random.Generator, map(np.random.PCG64, map(
        cls, repeat(seed), repeat(key), ids, spawn_words(seed, key, ids)))))


def _spawned_seed():
    """``_core.SpawnedSeed``, registered as a spawnable seed sequence, where the compiled core
    has it and a probe gives NumPy's words and draws, else ``None`` (kept for the process)."""
    global _SPAWNED
    if _SPAWNED is None:
        _SPAWNED = False
        core = load("cpp")
        cls = getattr(core, "SpawnedSeed", None) if hasattr(core, "spawn_words") else None
        try:
            if cls is not None:
                np.random.bit_generator.ISpawnableSeedSequence.register(cls)
                ref = np.random.SeedSequence(20261128, spawn_key=(3, 1, 2**32 + 5))
                words = spawn_words(20261128, (3, 1), [2**32 + 5])[0]
                mine = np.random.PCG64(cls(20261128, (3, 1), 2**32 + 5, words))
                if np.array_equal(words, ref.generate_state(4, np.uint64)) and \
                        mine.random_raw() == np.random.PCG64(ref).random_raw():
                    _SPAWNED = cls
        except Exception:       # noqa: BLE001 - any surprise: NumPy's own generators
            _SPAWNED = False
    return _SPAWNED or None


def _int_words(n):
    """The 32-bit words of the int ``n >= 0``, least significant first (``[0]`` for 0), as
    ``SeedSequence`` reads an int's entropy."""
    if n < 0:
        raise ValueError(f"seed and spawn key: expected ints >= 0, got {n}")
    words = [n & _MASK32]
    n >>= 32
    while n:
        words.append(n & _MASK32)
        n >>= 32
    return words


def spawn_words(seed, key, ids):
    """``SeedSequence(seed, spawn_key=key + (i,)).generate_state(4, uint64)`` for every ``i``
    of ``ids`` (ints >= 0): ``(len(ids), 4)`` uint64, the words PCG64 seeds itself from, hashed
    by the compiled core (``_core.spawn_words``: SeedSequence's mixing in one loop over the
    ids, where a SeedSequence object costs ~6 us each; equal to NumPy's, tested across seeds,
    rounds and ids, 64-bit ones included). Needs the compiled core."""
    ids = np.asarray(ids).reshape(-1)
    if ids.size and not (np.issubdtype(ids.dtype, np.integer) and ids.min() >= 0):
        raise ValueError(f"ids: expected client ids (ints >= 0), got {ids.dtype} values "
                         f"down to {ids.min()}" if ids.dtype.kind in "iuf" else
                         f"ids: expected client ids (ints >= 0), got {ids.dtype} values")
    run = _int_words(seed)      # a spawned child's root entropy is padded to the pool size
    prefix = run + [0] * (4 - len(run)) + [w for v in key for w in _int_words(v)]
    core = load("cpp")
    if not hasattr(core, "spawn_words"):
        raise RuntimeError("spawn_words: needs rfl_fast's compiled core, which is not built "
                           "(spawned_generators uses NumPy's SeedSequences without it)")
    return core.spawn_words(prefix, ids.astype(np.uint64))
