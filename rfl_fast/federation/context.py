"""Random streams and the per-round contexts handed to an algorithm's client and server steps.

All randomness of a run derives from one seed through ``numpy.random.SeedSequence`` spawn keys,
so that any party can rebuild its own stream from the seed alone (a Flower client needs only
``(seed, round, client id)``):

=================================  ==========================================================
spawn key                          used for
=================================  ==========================================================
``(0,)``                           participation (which clients take part in each round)
``(1,)``                           the server's own draws (e.g. RFedSVRG's global option 2)
``(2,)``                           the default initial point ``x0``
``(3, t, i)``                      client ``i`` in round ``t`` (mini-batches, option-2 draws,
                                   privacy noise)
=================================  ==========================================================

``SeedSequence(seed, spawn_key=key)`` is exactly the child that ``SeedSequence(seed).spawn``
(repeated along ``key``) returns. Because a client's stream depends only on ``(seed, t, i)``,
its draws do not depend on which other clients take part or on the order of the batch.
"""

import numbers
from dataclasses import dataclass, field
from itertools import filterfalse, repeat

import numpy as np

from ..kernels.streams import ItemStreams, spawned_generators

__all__ = ["STREAM_PARTICIPATION", "STREAM_SERVER", "STREAM_INIT", "STREAM_CLIENTS",
           "resolve_seed", "stream", "client_rng", "ClientRandom", "ClientContext",
           "ServerContext"]

STREAM_PARTICIPATION = 0
STREAM_SERVER = 1
STREAM_INIT = 2
STREAM_CLIENTS = 3

# the clients' draws, mapped over their generators in C (every generator here is a plain
# numpy.random.Generator: made by ``generators`` or ``restore``)
_CHOICE, _INTEGERS, _RANDOM = (np.random.Generator.choice, np.random.Generator.integers,
                               np.random.Generator.random)


def resolve_seed(seed):
    """The integer entropy of a run: ``seed`` itself, or fresh OS entropy for ``None``.

    Returned so that a run started with ``seed=None`` can be repeated exactly.
    """
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected None or an int >= 0, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed: expected an int >= 0, got {seed}")
    return int(seed)


def stream(seed, *key):
    """The generator of spawn key ``key`` under the root ``seed`` (an int >= 0)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def client_rng(seed, t, i):
    """Client ``i``'s generator for round ``t`` (spawn key ``(3, t, i)``).

    Parameters
    ----------
    seed : int
        Root seed of the run (>= 0).
    t : int
        Round index.
    i : int
        Client index.

    Returns
    -------
    numpy.random.Generator
        A fresh generator (PCG64) of that stream.
    """
    return stream(seed, STREAM_CLIENTS, int(t), int(i))


class ClientRandom:
    """The generators of the participating clients of one round, created lazily.

    Every method draws client by client (row ``j`` from client ``idx[j]``'s own stream) and
    stacks the rows, so a batched run and a run of one client at a time (a Flower client) draw
    the same numbers.

    Parameters
    ----------
    seed : int
        Root seed of the run.
    t : int
        Round index.
    idx : ndarray of int, shape (k,)
        Participating clients.
    pool : dict of int to numpy.random.Generator, optional
        Where the generators live, by client id (default: a new dict). Contexts of one round
        sharing a pool continue each client's stream, whichever batch it is in.
    """

    def __init__(self, seed, t, idx, pool=None):
        self.seed, self.t = int(seed), int(t)
        self.idx = np.asarray(idx, dtype=np.int64)
        self._ids = self.idx.tolist()
        self._pool = {} if pool is None else pool

    def generators(self, positions=None):
        """The generators of the participants at ``positions`` (default: all, in order),
        created where missing in one pass (no Python call per client).

        Parameters
        ----------
        positions : array_like of int, optional
            Positions in ``idx``.

        Returns
        -------
        list of numpy.random.Generator
        """
        ids = self._ids if positions is None else [self._ids[j] for j in
                                                    np.asarray(positions).tolist()]
        pool = self._pool
        new = list(dict.fromkeys(filterfalse(pool.__contains__, ids)))
        if new:     # client_rng's generators, made together (no Python call per client)
            pool.update(zip(new, spawned_generators(self.seed, (STREAM_CLIENTS, self.t), new)))
        return [pool[i] for i in ids]

    def generator(self, j):
        """Generator of the ``j``-th participant (client ``idx[j]``).

        Parameters
        ----------
        j : int
            Position in ``idx``, ``0 <= j < k``.

        Returns
        -------
        numpy.random.Generator
        """
        return self.generators((j,))[0]

    def state(self):
        """Positions of the participants' streams, to continue them later with
        :meth:`restore` (e.g. in another process).

        Returns
        -------
        list of (dict or None), length k
            The bit generator state of each participant's stream (a copy), ``None`` for a
            stream not drawn from yet.
        """
        gens = (self._pool.get(i) for i in self._ids)
        return [None if g is None else g.bit_generator.state for g in gens]

    def restore(self, state):
        """Continue the participants' streams from ``state``.

        Parameters
        ----------
        state : list of (dict or None), length k
            As :meth:`state` returned it; ``None`` entries restart that stream at its
            beginning.

        Returns
        -------
        ClientRandom
            ``self``.
        """
        state = list(state)
        if len(state) != self.idx.size:
            raise ValueError(f"state: {len(state)} stream states for {self.idx.size} "
                             f"participants")
        for i, st in zip(self._ids, state):
            self._pool.pop(i, None)
            if st is not None:
                g = self._pool[i] = np.random.Generator(np.random.PCG64())
                g.bit_generator.state = st
        return self

    def streams(self, positions=None):
        """The participants' streams as one random source for a batched draw: row ``j`` of a
        draw of shape ``(len(positions), ...)`` comes from participant ``positions[j]``'s
        stream, exactly as a draw for that client alone would.

        Parameters
        ----------
        positions : array_like of int, optional
            Positions in ``idx`` (default: all participants, in order).

        Returns
        -------
        rfl_fast.kernels.streams.ItemStreams
            Accepted as ``rng=`` by the manifolds' random draws (``tangent_gaussian``).
        """
        return ItemStreams(self.generators(positions))

    def batches(self, sizes, b):
        """Sample indices without replacement: row ``j`` has ``b`` of ``range(sizes[j])``.

        Parameters
        ----------
        sizes : array_like of int, shape (k,)
            The participants' numbers of samples.
        b : int
            Batch size, ``b <= min(sizes)``.

        Returns
        -------
        ndarray of int64, shape (k, b)
        """
        k, b = self.idx.size, int(b)
        sizes = np.asarray(sizes, dtype=np.int64).tolist()
        # g.choice(m, b, replace=False) per client, iterated in C (no Python loop)
        rows = list(map(_CHOICE, self.generators(), sizes, repeat(b), repeat(False)))
        return np.array(rows, dtype=np.int64).reshape(k, b)

    def integers(self, low, high):
        """One integer in ``[low, high)`` per client.

        Parameters
        ----------
        low, high : int
            The half-open range.

        Returns
        -------
        ndarray of int64, shape (k,)
        """
        return np.fromiter(map(_INTEGERS, self.generators(), repeat(low), repeat(high)),
                           dtype=np.int64, count=self.idx.size)

    def random(self):
        """One uniform in ``[0, 1)`` per client: shape (k,)."""
        return np.fromiter(map(_RANDOM, self.generators()), dtype=np.float64,
                           count=self.idx.size)

    def standard_normal(self, shape):
        """Standard normal draws, one block per client.

        Parameters
        ----------
        shape : int or tuple of int
            Shape of one client's block.

        Returns
        -------
        ndarray, shape ``(k, *shape)``
        """
        shape = tuple(np.atleast_1d(shape)) if not isinstance(shape, tuple) else shape
        return ItemStreams(self.generators()).standard_normal((self.idx.size,) + shape)


@dataclass(frozen=True)
class ClientContext:
    """What the clients of one round know besides the server's message.

    Parameters
    ----------
    round : int
        Round index ``t`` (0-based).
    idx : ndarray of int, shape (k,)
        The participating clients, in batch order.
    rng : ClientRandom
        Per-client random streams of this round.
    """

    round: int
    idx: np.ndarray
    rng: ClientRandom = field(repr=False)

    @classmethod
    def create(cls, seed, t, idx, pool=None):
        """The context of round ``t`` for participants ``idx`` under the root ``seed``.

        Parameters
        ----------
        seed : int
            Root seed of the run (>= 0).
        t : int
            Round index (0-based).
        idx : array_like of int, shape (k,)
            The participating clients, in batch order.
        pool : dict, optional
            The round's generators by client id (see :class:`ClientRandom`).

        Returns
        -------
        ClientContext
            With a lazily created :class:`ClientRandom` for ``idx``.
        """
        idx = np.asarray(idx, dtype=np.int64)
        return cls(int(t), idx, ClientRandom(seed, t, idx, pool))


@dataclass(frozen=True)
class ServerContext:
    """What the server knows in round ``t``.

    Parameters
    ----------
    round : int
        Round index ``t`` (0-based); the update produces ``x_{t+1}``.
    rounds : int
        Total number of rounds of the run.
    rng : numpy.random.Generator
        The server's stream (spawn key ``(1,)``), advanced across rounds.
    """

    round: int
    rounds: int
    rng: np.random.Generator = field(repr=False)
