"""Client data as one contiguous array plus offsets, and the partitioners that build it.

A :class:`ClientData` keeps every sample of every client in one C-contiguous array
``data`` (shape ``(m_total, ...)``) with client ``i`` owning rows
``offsets[i]:offsets[i+1]``, so kernels can loop over clients without Python lists.
Every client holds at least one sample.

Partitioners (all seeded; each sample lands in exactly one client, ``indices`` records
where it came from):

* :func:`split_equal`: random permutation, sizes differ by at most one (Li & Ma 2022/Xiao et al. 2024: "partition
  them into n agents, each of which contains equal number of data").
* :func:`split_dirichlet`: label skew, per-class client proportions ``~ Dirichlet(alpha)``
  (Hsu et al. 2019); small ``alpha`` gives clients dominated by few classes.
* :func:`split_quantity`: quantity skew, client sizes ``1 + round((m - n) q)``,
  ``q ~ Dirichlet(alpha)``.
* :func:`split_sizes`: given sizes.
"""

from dataclasses import dataclass, field

import numpy as np

from .._validation import as_rng, check_float, check_int
from ._checks import as_data_array, as_labels

__all__ = ["ClientData", "split_sizes", "split_equal", "split_dirichlet", "split_quantity"]


def _readonly(a):
    a = np.ascontiguousarray(a)
    if a.flags.writeable and a.base is None:
        a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class ClientData:
    """Per-client samples stored contiguously.

    Parameters
    ----------
    data : array_like, shape (m_total, ...)
        All samples, client after client. Made C-contiguous (copied only if needed).
    offsets : array_like of int, shape (n_clients + 1,)
        ``offsets[0] = 0``, strictly increasing (every client has >= 1 sample),
        ``offsets[-1] = m_total``.
    labels : array_like of int, shape (m_total,), optional
        Class labels aligned with ``data``.
    indices : array_like of int, shape (m_total,), optional
        Row of the source data set each sample came from (set by the partitioners).

    Attributes
    ----------
    sizes : ndarray of int64, shape (n_clients,)
    n_clients : int
    n_samples : int
        ``m_total``.
    sample_shape : tuple
        ``data.shape[1:]``.
    """

    data: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray | None = None
    indices: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        data = as_data_array(self.data, "data", min_ndim=1)
        data = np.ascontiguousarray(data)
        off = np.asarray(self.offsets)
        if off.dtype.kind not in "iu":
            raise TypeError(f"offsets: expected an integer array, got dtype {off.dtype}")
        if off.ndim != 1 or off.shape[0] < 2:
            raise ValueError(
                f"offsets: expected shape (n_clients + 1,) with n_clients >= 1, got {off.shape}"
            )
        off = off.astype(np.int64)
        if off[0] != 0 or off[-1] != data.shape[0]:
            raise ValueError(
                f"offsets: expected offsets[0] = 0 and offsets[-1] = len(data) = {data.shape[0]}, "
                f"got {off[0]} and {off[-1]}"
            )
        sizes = np.diff(off)
        if (sizes < 1).any():
            empty = np.flatnonzero(sizes < 1)
            raise ValueError(
                f"offsets: every client needs at least one sample; client(s) {empty[:10].tolist()} "
                "are empty (offsets must be strictly increasing)"
            )
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "offsets", _readonly(off.copy()))
        for name in ("labels", "indices"):
            val = getattr(self, name)
            if val is not None:
                arr = as_labels(val, name, length=data.shape[0])
                object.__setattr__(self, name, _readonly(arr.copy()))

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_list(cls, arrays, labels=None):
        """Build from per-client arrays.

        Parameters
        ----------
        arrays : sequence of array_like, each shape (m_i, ...), or ndarray (n, m, ...)
            Per-client samples; trailing shapes must agree, every ``m_i >= 1``.
        labels : sequence of array_like of int, each shape (m_i,), optional

        Returns
        -------
        ClientData
        """
        if isinstance(arrays, np.ndarray):
            if arrays.ndim < 2:
                raise ValueError(f"arrays: expected shape (n_clients, m, ...), got {arrays.shape}")
            n, m = arrays.shape[:2]
            offsets = np.arange(n + 1, dtype=np.int64) * m
            data = arrays.reshape((n * m,) + arrays.shape[2:])
            lab = None if labels is None else np.concatenate([np.asarray(v) for v in labels])
            return cls(data, offsets, lab)
        if isinstance(arrays, (str, bytes)) or not hasattr(arrays, "__len__"):
            raise TypeError(
                "arrays: expected a sequence of per-client arrays, "
                f"got {type(arrays).__name__}"
            )
        if len(arrays) == 0:
            raise ValueError("arrays: expected at least one client")
        parts = [as_data_array(a, f"arrays[{i}]", min_ndim=1) for i, a in enumerate(arrays)]
        tail = parts[0].shape[1:]
        for i, a in enumerate(parts):
            if a.shape[1:] != tail:
                raise ValueError(
                    f"arrays[{i}]: sample shape {a.shape[1:]} differs from arrays[0]'s {tail}"
                )
            if a.shape[0] < 1:
                raise ValueError(f"arrays[{i}]: every client needs at least one sample, got none")
        sizes = np.array([a.shape[0] for a in parts], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        data = np.concatenate(parts, axis=0)
        lab = None
        if labels is not None:
            if len(labels) != len(parts):
                raise ValueError(
                    f"labels: expected {len(parts)} per-client arrays, got {len(labels)}"
                )
            lab = []
            for i, (v, s) in enumerate(zip(labels, sizes)):
                lab.append(as_labels(v, f"labels[{i}]", length=int(s)))
            lab = np.concatenate(lab)
        return cls(data, offsets, lab)

    # ------------------------------------------------------------------ access

    @property
    def sizes(self):
        """Samples per client, shape ``(n_clients,)``, int64."""
        return np.diff(self.offsets)

    @property
    def n_clients(self):
        """Number of clients."""
        return self.offsets.shape[0] - 1

    @property
    def n_samples(self):
        """Total number of samples ``m_total``."""
        return self.data.shape[0]

    @property
    def sample_shape(self):
        """Shape of one sample, ``data.shape[1:]``."""
        return self.data.shape[1:]

    def _check_index(self, i):
        n = self.n_clients
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"i: expected an int client index, got {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"i: client index {i} out of range for {n} clients")
        return int(i) % n

    def client(self, i):
        """Samples of client ``i``.

        Parameters
        ----------
        i : int
            The client (0 <= i < n_clients).

        Returns
        -------
        ndarray, shape (m_i, ...)
            A view of ``data``.
        """
        i = self._check_index(i)
        return self.data[self.offsets[i]:self.offsets[i + 1]]

    def client_labels(self, i):
        """Labels of client ``i``.

        Parameters
        ----------
        i : int
            The client (0 <= i < n_clients).

        Returns
        -------
        ndarray of int, shape (m_i,), or None
            A view of ``labels``; ``None`` without labels.
        """
        i = self._check_index(i)
        if self.labels is None:
            return None
        return self.labels[self.offsets[i]:self.offsets[i + 1]]

    def weights(self, kind="uniform"):
        """Client weights ``w_i``, summing to one.

        Parameters
        ----------
        kind : {"uniform", "size"}
            ``"uniform"``: ``1/n``; ``"size"``: ``m_i / m_total``.

        Returns
        -------
        ndarray, shape (n_clients,)
            The weights.
        """
        if kind == "uniform":
            return np.full(self.n_clients, 1.0 / self.n_clients)
        if kind == "size":
            return self.sizes / float(self.n_samples)
        raise ValueError(f"kind: expected 'uniform' or 'size', got {kind!r}")

    def take(self, values):
        """Partition another per-sample array the same way (needs ``indices``).

        Parameters
        ----------
        values : array_like, shape (m_source, ...)
            Aligned with the data set this partition was drawn from (e.g. the hyperbolic
            targets of a tree whose features were partitioned).

        Returns
        -------
        ClientData
            ``values[indices]`` with the same ``offsets``, ``labels`` and ``indices``.
        """
        if self.indices is None:
            raise ValueError(
                "indices: this ClientData does not record source rows (build it with a "
                "split_* function to use take)"
            )
        v = as_data_array(values, "values", min_ndim=1)
        if v.shape[0] <= int(self.indices.max()):
            raise ValueError(
                f"values: expected at least {int(self.indices.max()) + 1} rows (the source "
                f"data set), got {v.shape[0]}"
            )
        return ClientData(np.take(v, self.indices, axis=0), self.offsets, self.labels,
                          indices=self.indices)

    def to_list(self):
        """Per-client views as a list."""
        return [self.client(i) for i in range(self.n_clients)]

    def __len__(self):
        return self.n_clients

    def __iter__(self):
        for i in range(self.n_clients):
            yield self.client(i)

    def __getitem__(self, i):
        return self.client(i)

    def __repr__(self):
        s = self.sizes
        return (
            f"ClientData(n_clients={self.n_clients}, n_samples={self.n_samples}, "
            f"sample_shape={self.sample_shape}, dtype={self.data.dtype}, "
            f"sizes {s.min()}..{s.max()}, "
            f"labels={'yes' if self.labels is not None else 'no'})"
        )


# --------------------------------------------------------------------------- partitioners


def _prepare(X, labels, n_clients, need_labels=False):
    x = as_data_array(X, "X", min_ndim=1)
    m = x.shape[0]
    n_clients = check_int(n_clients, "n_clients", min_value=1)
    if n_clients > m:
        raise ValueError(
            f"n_clients: expected at most the number of samples ({m}) so that every client "
            f"gets at least one, got {n_clients}"
        )
    if labels is None:
        if need_labels:
            raise ValueError("labels: required for a label-skew partition")
        return x, None, n_clients
    return x, as_labels(labels, "labels", length=m), n_clients


def _round_counts(total, p):
    """Split the integer ``total`` proportionally to ``p`` (largest-remainder rounding)."""
    raw = total * p / p.sum()
    counts = np.floor(raw).astype(np.int64)
    short = total - counts.sum()
    if short > 0:
        counts[np.argsort(counts - raw, kind="stable")[:short]] += 1
    return counts


def _gather(x, y, order, sizes):
    order = np.asarray(order, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return ClientData(
        np.take(x, order, axis=0), offsets, None if y is None else y[order], indices=order
    )


def split_sizes(X, sizes, *, labels=None, shuffle=True, rng=None):
    """Split ``X`` into clients of the given sizes.

    Parameters
    ----------
    X : array_like, shape (m, ...)
    sizes : sequence of int, shape (n_clients,)
        Every size ``>= 1``, summing to ``m``.
    labels : array_like of int, shape (m,), optional
    shuffle : bool
        Randomly permute the samples first (default); otherwise keep their order.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ClientData
    """
    x, y, _ = _prepare(X, labels, 1)
    s = np.asarray(sizes)
    if s.dtype.kind not in "iu" or s.ndim != 1 or s.shape[0] < 1:
        raise TypeError(f"sizes: expected a 1-d sequence of ints, got {s!r}")
    if (s < 1).any():
        raise ValueError(
            f"sizes: every client needs at least one sample, got sizes {s.tolist()[:20]}"
        )
    if s.sum() != x.shape[0]:
        raise ValueError(
            f"sizes: expected sizes summing to the number of samples {x.shape[0]}, "
            f"got {int(s.sum())}"
        )
    order = as_rng(rng).permutation(x.shape[0]) if shuffle else np.arange(x.shape[0])
    return _gather(x, y, order, s.astype(np.int64))


def split_equal(X, n_clients, *, labels=None, shuffle=True, rng=None):
    """Random split into ``n_clients`` clients of (nearly) equal size.

    Sizes are ``m // n`` or ``m // n + 1`` (the first ``m % n`` clients get the extra sample).

    Parameters
    ----------
    X : array_like, shape (m, ...)
    n_clients : int
        ``1 <= n_clients <= m``.
    labels : array_like of int, shape (m,), optional
    shuffle : bool
        Randomly permute first (default); ``False`` gives contiguous blocks in input order.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ClientData
    """
    x, y, n = _prepare(X, labels, n_clients)
    m = x.shape[0]
    sizes = np.full(n, m // n, dtype=np.int64)
    sizes[: m % n] += 1
    order = as_rng(rng).permutation(m) if shuffle else np.arange(m)
    return _gather(x, y, order, sizes)


def split_dirichlet(X, labels, n_clients, alpha=0.5, *, rng=None):
    """Label-skew split: for each class, client shares ``~ Dirichlet(alpha * 1_n)``.

    The samples of class ``c`` (in random order) are dealt out in proportions
    ``p_c ~ Dir(alpha)`` (counts ``m_c * p_c`` rounded by largest remainder). A client left
    empty then receives one random sample from the currently largest client, so every client
    has at least one sample (this moves only a handful of samples and always terminates,
    unlike redrawing until no client is empty).

    Parameters
    ----------
    X : array_like, shape (m, ...)
    labels : array_like of int, shape (m,)
    n_clients : int
        ``1 <= n_clients <= m``.
    alpha : float
        Concentration ``> 0``; small (e.g. 0.1) = strong skew, large (e.g. 100) ~ iid.
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ClientData
        With ``labels``; within a client samples are ordered by class.
    """
    x, y, n = _prepare(X, labels, n_clients, need_labels=True)
    alpha = check_float(alpha, "alpha", low=0.0, low_open=True)
    gen = as_rng(rng)
    owner = np.empty(x.shape[0], dtype=np.int64)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        idx = idx[gen.permutation(idx.shape[0])]
        p = gen.dirichlet(np.full(n, alpha))
        if not np.isfinite(p).all():  # tiny alpha can underflow to NaN: put the class on one client
            p = np.zeros(n)
            p[gen.integers(n)] = 1.0
        counts = _round_counts(idx.shape[0], p)
        owner[idx] = np.repeat(np.arange(n), counts)
    sizes = np.bincount(owner, minlength=n)
    for i in np.flatnonzero(sizes == 0):
        donor = int(np.argmax(sizes))
        cand = np.flatnonzero(owner == donor)
        owner[cand[gen.integers(cand.shape[0])]] = i
        sizes[donor] -= 1
        sizes[i] += 1
    order = np.lexsort((y, owner))  # by client, then by class
    return _gather(x, y, order, sizes)


def split_quantity(X, n_clients, alpha=1.0, *, labels=None, rng=None):
    """Quantity-skew split: sizes ``1 + round((m - n) q)``, ``q ~ Dirichlet(alpha * 1_n)``.

    Rounding is by largest remainder, so sizes follow ``q`` as closely as integers allow.

    Samples are randomly permuted first, so label distributions stay iid; only the amounts
    differ.

    Parameters
    ----------
    X : array_like, shape (m, ...)
    n_clients : int
        ``1 <= n_clients <= m``.
    alpha : float
        Concentration ``> 0``; small = very unequal sizes, large = nearly equal.
    labels : array_like of int, shape (m,), optional
    rng : None, int or numpy.random.Generator

    Returns
    -------
    ClientData
    """
    x, y, n = _prepare(X, labels, n_clients)
    alpha = check_float(alpha, "alpha", low=0.0, low_open=True)
    gen = as_rng(rng)
    q = gen.dirichlet(np.full(n, alpha))
    if not np.isfinite(q).all():
        q = np.zeros(n)
        q[gen.integers(n)] = 1.0
    sizes = 1 + _round_counts(x.shape[0] - n, q)
    order = gen.permutation(x.shape[0])
    return _gather(x, y, order, sizes.astype(np.int64))
