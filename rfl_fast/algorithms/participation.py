"""Participation models: which clients take part in a round.

Each model draws from the engine's participation stream (see :mod:`.context`) and returns
the sorted ids of the participants. ``recipients`` says how many clients receive the round's
first broadcast, which the engine counts as downloaded: the participants for ``Full`` and
``Uniform`` (the server picks them), all ``n`` clients for ``Bernoulli`` (the server does not
know in advance who will answer).
"""

from dataclasses import dataclass

import numpy as np

from .._validation import COUNT, Checked, Reals
from ..errors import InvalidParameterError

__all__ = ["Participation", "Full", "Uniform", "Bernoulli", "as_participation"]


class Participation(Checked):
    """Base class. Subclasses implement ``sample(rng, n)`` and may override ``validate``."""

    def validate(self, n):
        """Raise ``ValueError`` if the model cannot be used with ``n`` clients.

        Parameters
        ----------
        n : int
            Number of clients of the problem.
        """

    def sample(self, rng, n):
        """Sorted participant ids of one round.

        Parameters
        ----------
        rng : numpy.random.Generator
            The engine's participation stream.
        n : int
            Number of clients.

        Returns
        -------
        ndarray of int64, shape (k,)
            ``0 <= k <= n`` distinct ids, ascending.
        """
        raise NotImplementedError

    def recipients(self, n, k):
        """Number of clients that receive the round's first broadcast.

        Parameters
        ----------
        n : int
            Number of clients.
        k : int
            Number of participants drawn by :meth:`sample`.

        Returns
        -------
        int
            ``k`` when the server picks the participants, ``n`` when it cannot know them.
        """
        return k


@dataclass(frozen=True)
class Full(Participation):
    """Every client takes part in every round."""

    def sample(self, rng, n):
        return np.arange(n, dtype=np.int64)


@dataclass(frozen=True)
class Uniform(Participation):
    """``k`` of the ``n`` clients, uniformly without replacement (Li & Ma 2022, Alg. 1 line 2).

    Parameters
    ----------
    k : int
        Participants per round, ``1 <= k <= n``.
    """

    k: int

    CHECKS = {"k": COUNT}

    def validate(self, n):
        if self.k > n:
            raise InvalidParameterError("k", f"{self.k} clients per round requested but the "
                                        f"problem has only n={n} clients (need 1 <= k <= n)",
                                        "Uniform")

    def sample(self, rng, n):
        return np.sort(rng.choice(n, self.k, replace=False)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class Bernoulli(Participation):
    """Client ``i`` answers independently with probability ``p_i`` (unknown to the server).

    Parameters
    ----------
    p : float or array_like, shape (n,)
        Answer probabilities in ``[0, 1]``. Rounds where nobody answers happen; the engine
        then keeps the server state unchanged.
    """

    p: object

    CHECKS = {"p": Reals(0, 1)}

    def __repr__(self):
        return f"Bernoulli(p={self.p.tolist() if self.p.ndim else float(self.p)})"

    def validate(self, n):
        if self.p.ndim == 1 and self.p.size != n:
            raise InvalidParameterError("p", f"{self.p.size} entries but the problem has "
                                        f"n={n} clients", "Bernoulli")

    def probabilities(self, n):
        """``p_i`` for every client.

        Parameters
        ----------
        n : int
            Number of clients.

        Returns
        -------
        ndarray, shape (n,)
        """
        return np.broadcast_to(self.p, (n,))

    def sample(self, rng, n):
        return np.flatnonzero(rng.random(n) < self.probabilities(n)).astype(np.int64)

    def recipients(self, n, k):
        return n


def as_participation(p):
    """``p`` if it is a participation model; ``None`` means ``Full()``."""
    if p is None:
        return Full()
    if not isinstance(p, Participation):
        raise TypeError(f"participation: expected Full(), Uniform(k) or Bernoulli(p), "
                        f"got {type(p).__name__}")
    return p
