"""Client data as one contiguous array plus offsets (private helpers of the problems).

Every problem keeps its samples as ``flat`` of shape ``(M, *sample_shape)``, C-contiguous
float64, with client ``i`` owning rows ``flat[offsets[i]:offsets[i+1]]``. These helpers turn
the accepted inputs into that layout and build the index arrays of the batched (segment)
computations.

A stacked float64 C-contiguous array (n, m, ...) -- also a read-only one memory-mapped from
an ``.npy`` file by ``rfl_fast.data.map_npy`` -- becomes ``flat`` without a copy, and its
checks read it in chunks of :data:`CHECK_CHUNK_BYTES`: packing costs the data's own memory
(none for a mapped file) plus O(offsets), whatever the number of clients.
"""

import numpy as np

__all__ = ["pack_clients", "segments", "batch_rows", "select_rows", "check_sample_index",
           "all_finite"]

#: Samples' bytes a check (:func:`all_finite`) reads at a time: its temporaries are bounded by
#: this, not by the data (1 MiB: faster than one pass over the whole array, in cache).
CHECK_CHUNK_BYTES = 1 << 20


def all_finite(a):
    """``np.isfinite(a).all()`` in chunks of :data:`CHECK_CHUNK_BYTES` (no full-size boolean
    temporary), stopping at the first chunk holding a NaN or inf.

    Parameters
    ----------
    a : ndarray
        Any real array (float or integer).

    Returns
    -------
    bool
    """
    if a.dtype.kind not in "fc":
        return True
    if a.ndim == 0:
        return bool(np.isfinite(a))
    rows = a.reshape(-1) if a.flags.c_contiguous else a     # else chunks of the first axis
    row_bytes = max(1, rows.itemsize * int(np.prod(rows.shape[1:], dtype=np.int64)))
    step = max(1, CHECK_CHUNK_BYTES // row_bytes)
    buf = np.empty((min(step, rows.shape[0]),) + rows.shape[1:], dtype=bool)
    for lo in range(0, rows.shape[0], step):
        part = rows[lo:lo + step]
        if not np.isfinite(part, out=buf[:part.shape[0]]).all():
            return False
    return True


def _client_data_parts(data):
    """``(flat, offsets)`` of a ``rfl_fast.data.ClientData``-like object, else ``None``.

    Duck-typed so that this module does not import ``rfl_fast.data``: any object with an
    ``offsets`` array and one data array (``data``, ``X``, ``x``, ``samples`` or ``values``).
    """
    offsets = getattr(data, "offsets", None)
    if offsets is None or isinstance(data, np.ndarray):
        return None
    for attr in ("data", "X", "x", "samples", "values"):
        arr = getattr(data, attr, None)
        if arr is not None:
            return np.asarray(arr), np.asarray(offsets)
    return None


def pack_clients(data, sample_ndim, name="data", *, sample_shape=None):
    """Pack client data into ``(flat, offsets)``.

    Parameters
    ----------
    data : list of array_like ``(m_i, *s)``, ndarray ``(n, m, *s)``, or ClientData
        Per-client samples; ``s`` has ``sample_ndim`` axes. A ``ClientData`` (one contiguous
        array plus ``offsets`` of shape (n+1,)) is used without copying when it is already
        float64 and C-contiguous; so is a stacked float64 C-contiguous array, read-only ones
        too (a memory-mapped ``.npy`` file: ``rfl_fast.data.map_npy``), checked in bounded
        chunks.
    sample_ndim : int
        Number of axes of one sample (1 for vectors, 2 for matrices).
    name : str
        Argument name used in error messages.
    sample_shape : tuple of int, optional
        Required shape of one sample (``None`` entries match anything).

    Returns
    -------
    flat : ndarray, shape ``(M, *s)``, float64, C-contiguous
        A view of ``data`` where no conversion was needed (read-only if ``data`` is).
    offsets : ndarray of int64, shape (n+1,)

    Raises
    ------
    ValueError
        Naming ``name``: no clients, a client with no samples, inconsistent or wrong sample
        shapes, non-finite values.
    TypeError
        Non-numeric data.
    """
    parts = _client_data_parts(data)
    if parts is not None:
        flat, offsets = parts
        offsets = offsets.astype(np.int64, copy=False)
        if offsets.ndim != 1 or offsets.size < 2 or offsets[0] != 0 or \
                offsets[-1] != flat.shape[0] or (np.diff(offsets) < 0).any():
            raise ValueError(f"{name}: offsets must rise from 0 to the number of samples "
                             f"({flat.shape[0]}); got {offsets.tolist()[:10]}")
    elif isinstance(data, np.ndarray) and data.dtype != object:
        if data.ndim != sample_ndim + 2:
            raise ValueError(f"{name}: a stacked array must have shape (n_clients, m, "
                             f"{', '.join('?' * sample_ndim)}) ({sample_ndim + 2} axes); "
                             f"got shape {data.shape}; pass a list for clients of different sizes")
        n, m = data.shape[:2]
        flat = data.reshape((n * m,) + data.shape[2:])
        offsets = np.arange(n + 1, dtype=np.int64) * m
    else:
        try:
            clients = list(data)
        except TypeError:
            raise TypeError(f"{name}: expected a list of per-client arrays, a stacked array or "
                            f"a ClientData; got {type(data).__name__}") from None
        if not clients:
            raise ValueError(f"{name}: no clients (empty list)")
        arrs = []
        for i, c in enumerate(clients):
            a = np.asarray(c)
            if a.ndim != sample_ndim + 1:
                raise ValueError(f"{name}: client {i} must be an array of shape (m_i, "
                                 f"{', '.join('?' * sample_ndim)}); got shape {a.shape}")
            arrs.append(a)
        shapes = {a.shape[1:] for a in arrs}
        if len(shapes) > 1:
            raise ValueError(f"{name}: clients disagree on the sample shape: "
                             f"{sorted(shapes)}")
        sizes = np.array([a.shape[0] for a in arrs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        flat = np.concatenate(arrs, axis=0) if len(arrs) > 1 else arrs[0]
    if flat.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected real numeric data, got dtype {flat.dtype}")
    sizes = np.diff(offsets)
    if sizes.size == 0:
        raise ValueError(f"{name}: no clients")
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        raise ValueError(f"{name}: client(s) {empty[:10].tolist()} have no data; every client "
                         f"needs at least one sample")
    if sample_shape is not None:
        got = flat.shape[1:]
        if len(got) != len(sample_shape) or any(
                s is not None and s != g for s, g in zip(sample_shape, got)):
            want = ", ".join("?" if s is None else str(s) for s in sample_shape)
            raise ValueError(f"{name}: expected samples of shape ({want}), got {got}")
    flat = np.ascontiguousarray(flat, dtype=np.float64)
    if not all_finite(flat):
        raise ValueError(f"{name}: contains NaN or inf")
    return flat, offsets


#: A pass over the samples holds its temporaries for at most ``1 / PASS_CHUNKS`` of them at
#: once (and at least ``PASS_CHUNK_MIN`` bytes of samples): peak memory stays the data plus
#: ``O(data / PASS_CHUNKS)``, in at most ``PASS_CHUNKS`` Python-level steps however many clients.
PASS_CHUNKS = 16
PASS_CHUNK_MIN = 1 << 18


def spans(count, nbytes_each):
    """``[(lo, hi), ...]`` covering ``range(count)`` in the chunks of :data:`PASS_CHUNKS`.

    Parameters
    ----------
    count : int
        Items (clients, or samples) to cover.
    nbytes_each : int
        Bytes of samples one item holds.
    """
    step = max(1, -(-count // PASS_CHUNKS), PASS_CHUNK_MIN // max(1, int(nbytes_each)))
    return [(lo, min(count, lo + step)) for lo in range(0, count, step)]


def segments(offsets, idx):
    """Rows of the clients ``idx`` in the flat array, as one gathered batch.

    Parameters
    ----------
    offsets : ndarray of int64, shape (n+1,)
    idx : ndarray of int64, shape (k,)

    Returns
    -------
    rows : ndarray of int64, shape (T,)
        Flat-array rows of the clients, client after client (``T = sum m_idx``).
    seg : ndarray of int64, shape (T,)
        Position (0..k-1) in ``idx`` of the client of each row.
    starts : ndarray of int64, shape (k,)
        First position of each client in ``rows`` (for ``np.add.reduceat``).
    """
    lens = offsets[idx + 1] - offsets[idx]
    starts = np.zeros(idx.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    seg = np.repeat(np.arange(idx.size), lens)
    rows = offsets[idx][seg] + (np.arange(seg.size) - starts[seg])
    return rows, seg, starts


def check_sample_index(batch, sizes, name="batch"):
    """Check sample indices ``batch`` (k, b) against client sizes (k,); return int64 array."""
    b = np.asarray(batch)
    if b.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer sample indices, got dtype {b.dtype}")
    if b.ndim != 2 or b.shape[0] != sizes.size or b.shape[1] < 1:
        raise ValueError(f"{name}: expected shape (k, b) = ({sizes.size}, b>=1), "
                         f"got {b.shape}")
    b = b.astype(np.int64, copy=False)
    if (b < 0).any() or (b >= sizes[:, None]).any():
        bad = int(np.argwhere((b < 0) | (b >= sizes[:, None]))[0, 0])
        raise ValueError(f"{name}: row {bad} holds indices outside [0, {int(sizes[bad])}) "
                         f"(that client's number of samples)")
    return b


def batch_rows(offsets, idx, batch):
    """Flat-array rows (k, b) of the local sample indices ``batch`` (k, b) of clients ``idx``."""
    return offsets[idx][:, None] + batch


def select_rows(offsets, idx, batch=None):
    """The flat-array rows of clients ``idx`` -- all their samples, or the checked sample
    indices ``batch`` (k, b) -- as one gathered batch for segment sums.

    Returns
    -------
    rows, seg, starts : ndarray of int64
        As :func:`segments` (with a batch: ``k * b`` rows, client after client).
    counts : ndarray, shape (k,)
        Samples per client (``m_i``, or ``b``): the divisors of the means.
    """
    if batch is None:
        rows, seg, starts = segments(offsets, idx)
        return rows, seg, starts, offsets[idx + 1] - offsets[idx]
    k, b = batch.shape
    rows = batch_rows(offsets, idx, batch).ravel()
    return rows, np.repeat(np.arange(k), b), np.arange(k) * b, np.full(k, b)
