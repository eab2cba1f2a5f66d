"""MNIST (IDX files) and CIFAR-10 (binary or python batches) from local files, and
:func:`map_npy`: an ``.npy`` file of float64 samples memory-mapped for the problems. Never
downloads.

Where the files are looked for, in order:

1. ``path`` argument: the folder holding the files, or a data root with a ``mnist/``
   (``cifar-10-batches-bin/``, ``cifar-10-batches-py/``) subfolder;
2. otherwise the environment variable ``RFL_FAST_DATA``: ``$RFL_FAST_DATA/mnist/``,
   ``$RFL_FAST_DATA/cifar-10-batches-bin/`` and ``$RFL_FAST_DATA/cifar-10-batches-py/`` (or
   the root itself).

CIFAR-10 comes in two distributions with the same images: the *binary* one (fixed-size
records, read with one size check: the preferred format, taken when both are present) and the
*python* one (pickles, parsed as data only by :mod:`rfl_fast.data._pickle`).

When files are missing a ``FileNotFoundError`` names each missing file, where to download it
and where to put it. Corrupt or truncated files raise ``ValueError`` naming the file.

Zhang et al. 2024, Li & Ma 2022 and Xiao et al. 2024 use MNIST (``d = 784``) and Huang et al. 2025 uses CIFAR-10 (``d = 3072``); none states a
normalization beyond the data themselves, so pixel values are scaled to ``[0, 1]`` by default
(``normalize="unit"``, i.e. ``/255``); ``"standardize"`` and ``"center"`` act per feature over
the loaded split and ``"none"`` keeps raw values (the only choice allowed with ``dtype=uint8``).
"""

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from .._files import read_npy
from .._validation import brief, check_choice
from . import _pickle
from .real import NORMALIZATIONS, normalize_features

__all__ = [
    "ENV_VAR",
    "MNIST_URLS",
    "CIFAR10_URL",
    "mnist_files",
    "cifar10_files",
    "read_idx",
    "read_cifar10_batch",
    "read_cifar10_bin",
    "load_mnist",
    "load_cifar10",
    "map_npy",
]

ENV_VAR = "RFL_FAST_DATA"
MNIST_SUBDIR = "mnist"
CIFAR10_SUBDIR = "cifar-10-batches-py"
CIFAR10_BIN_SUBDIR = "cifar-10-batches-bin"
MNIST_URLS = (
    "http://yann.lecun.com/exdb/mnist/",
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
)
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"

_MNIST = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_CIFAR = {
    "train": tuple(f"data_batch_{k}" for k in range(1, 6)),
    "test": ("test_batch",),
}
#: One record of the binary distribution: a label byte, then 1024 red, 1024 green and 1024 blue
#: pixel bytes (row-major 32 x 32).
CIFAR_RECORD = 1 + 3072
_SPLITS = ("train", "test", "all")

# Most dimensions an IDX file may declare (NumPy's oldest limit; MNIST's have 1 or 3).
_IDX_MAX_NDIM = 32
# IDX type codes (third magic byte) -> big-endian dtype
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _splits(split):
    check_choice(split, "split", _SPLITS)
    return ("train", "test") if split == "all" else (split,)


def mnist_files(split="all"):
    """Names of the MNIST IDX files of a split (each may also be gzipped, ``name + ".gz"``).

    Parameters
    ----------
    split : {"all", "train", "test"}

    Returns
    -------
    list of str
        File names of the MNIST IDX files, in reading order.
    """
    return [f for s in _splits(split) for f in _MNIST[s]]


def cifar10_files(split="all", binary=False):
    """Names of the CIFAR-10 batch files of a split.

    Parameters
    ----------
    split : {"all", "train", "test"}
    binary : bool
        The binary distribution's names (``data_batch_1.bin``, ...) rather than the python
        one's (``data_batch_1``, ...).

    Returns
    -------
    list of str
        File names of the CIFAR-10 batch files, in reading order.
    """
    return [f + ".bin" * bool(binary) for s in _splits(split) for f in _CIFAR[s]]


# --------------------------------------------------------------------------- locating files


def _candidates(path, subdir):
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"path: expected a str or os.PathLike folder, got {type(path).__name__}"
            )
        root = Path(path)
        return [root, root / subdir]
    env = os.environ.get(ENV_VAR)
    if env:
        root = Path(env)
        return [root / subdir, root]
    return []


def _find(folder, name, allow_gz):
    for cand in (name, name + ".gz") if allow_gz else (name,):
        p = folder / cand
        if p.is_file():
            return p
    return None


def _locate(path, subdir, names, allow_gz, what, how):
    """Return the paths of ``names`` in the first candidate folder holding all of them."""
    cands = _candidates(path, subdir)
    best, best_missing = None, list(names)
    for folder in cands:
        found = {n: _find(folder, n, allow_gz) for n in names}
        missing = [n for n, p in found.items() if p is None]
        if not missing:
            return [found[n] for n in names]
        if len(missing) < len(best_missing) or best is None:
            best, best_missing = folder, missing
    suffix = "[.gz]" if allow_gz else ""
    missing_txt = ", ".join(n + suffix for n in best_missing)
    if cands:
        where = "searched " + ", ".join(str(c) for c in cands)
    else:
        where = f"no path was given and the environment variable {ENV_VAR} is not set"
    target = f"${ENV_VAR}/{subdir}/" if path is None else f"{Path(path) / subdir}/"
    raise FileNotFoundError(
        f"{what}: missing file(s) {missing_txt} ({where}). rfl_fast never downloads data. "
        f"{how} Put the files in {target} (or in any folder passed as path=...; "
        f"set {ENV_VAR}=<data root> to use <data root>/{subdir}/ by default)."
    )


# --------------------------------------------------------------------------- IDX


#: Deflate's largest expansion (about 1032 : 1): a gzip member cannot hold more bytes than this
#: ratio times its compressed size, so larger declared contents are refused before reading.
GZIP_MAX_RATIO = 1032


def _open_idx(path):
    """``(file object, size bound)``: plain files give their size, gzip files the most their
    compressed size can expand to."""
    with open(path, "rb") as f:
        head = f.read(2)
    size = path.stat().st_size
    if head == b"\x1f\x8b":
        return gzip.open(path, "rb"), GZIP_MAX_RATIO * size
    return open(path, "rb"), size


def _read_exact(f, k, path):
    try:
        out = f.read(k)
    except (EOFError, OSError, zlib.error) as exc:
        raise ValueError(f"{path}: corrupt or truncated gzip file ({exc})") from None
    return out


def read_idx(path):
    """Read an IDX file (optionally gzipped), validating its magic number and size.

    Trust: the file is untrusted. The header's declared size is checked against the file's
    size (for gzip, against the most its compressed size can expand to) before anything is
    allocated, and exactly that many bytes are read (one more, to detect trailing data).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    a : ndarray, shape given by the file's dimensions
        Native-endian copy, dtype from the type code (uint8, int8, int16, int32, float32,
        float64).

    Raises
    ------
    ValueError
        Bad magic number (the first two bytes must be 0, the third a known type code, the
        fourth the number of dimensions >= 1), or a file whose length does not match its
        header (truncated or with trailing bytes), or a corrupt gzip stream.
    """
    path = Path(path)
    f, bound = _open_idx(path)
    with f:
        raw = _read_exact(f, 4, path)
        if len(raw) < 4:
            raise ValueError(
                f"{path}: not an IDX file (only {len(raw)} bytes, need a 4-byte magic number)"
            )
        magic = int.from_bytes(raw[:4], "big")
        if raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES or raw[3] == 0:
            raise ValueError(
                f"{path}: bad IDX magic number 0x{magic:08X}; expected 0x0000TTNN with type "
                "code TT in {08, 09, 0B, 0C, 0D, 0E} and NN >= 1 dimensions (MNIST: "
                "0x00000803 images, 0x00000801 labels)"
            )
        dtype = np.dtype(_IDX_TYPES[raw[2]])
        ndim = raw[3]
        if ndim > _IDX_MAX_NDIM:
            raise ValueError(f"{path}: IDX header declares {ndim} dimensions, more than the "
                             f"{_IDX_MAX_NDIM} an array may have (MNIST files have 1 or 3)")
        header = 4 + 4 * ndim
        dims_raw = _read_exact(f, 4 * ndim, path)
        if len(dims_raw) < 4 * ndim:
            raise ValueError(f"{path}: truncated IDX header ({4 + len(dims_raw)} bytes, need "
                             f"{header})")
        dims = struct.unpack(">" + "I" * ndim, dims_raw)
        count = 1
        for v in dims:
            count *= int(v)                     # Python ints: no overflow
        expected = header + count * dtype.itemsize
        if expected > bound:
            raise ValueError(
                f"{path}: IDX header declares shape {tuple(dims)} of {dtype.name} "
                f"({expected} bytes), more than the file can hold ({bound} bytes); truncated "
                f"or crafted"
            )
        body = _read_exact(f, count * dtype.itemsize + 1, path)
    got = header + len(body)
    if got != expected:
        kind = "truncated" if got < expected else "has trailing bytes"
        raise ValueError(
            f"{path}: IDX file {kind}: header says shape {tuple(dims)} of {dtype.name} "
            f"({expected} bytes in total), file has {'more' if got > expected else got} bytes"
        )
    arr = np.frombuffer(body, dtype=dtype, count=count).reshape(dims)
    return arr.astype(dtype.newbyteorder("="))


def _finish(x, normalize, dtype, name):
    check_choice(normalize, "normalize", NORMALIZATIONS)
    dtype = np.dtype(dtype)
    if dtype.kind not in "fu":
        raise TypeError(f"dtype: expected a floating-point dtype or uint8, got {dtype}")
    if dtype.kind == "u":
        if dtype != np.uint8 or normalize != "none":
            raise ValueError(
                f"dtype: uint8 keeps the raw {name} pixels and needs normalize='none', "
                f"got dtype={dtype}, normalize={normalize!r}"
            )
        return np.ascontiguousarray(x)
    if normalize == "unit":
        out = x.astype(dtype)
        out /= dtype.type(255.0)
        return out
    if normalize == "none":
        return x.astype(dtype)
    shape = x.shape
    flat = normalize_features(x.reshape(shape[0], -1), normalize)
    return np.ascontiguousarray(flat.reshape(shape).astype(dtype, copy=False))


def load_mnist(path=None, *, split="train", normalize="unit", dtype=np.float64, flatten=True):
    """Load MNIST from local IDX files (plain or ``.gz``).

    Parameters
    ----------
    path : str or os.PathLike, optional
        Folder with the files, or a data root with a ``mnist/`` subfolder. Default:
        ``$RFL_FAST_DATA/mnist/``.
    split : {"train", "test", "all"}
        60000 training images, 10000 test images, or both (train first).
    normalize : {"unit", "standardize", "center", "none"}
        ``"unit"``: pixel / 255 in ``[0, 1]``; the others as in
        :func:`rfl_fast.data.normalize_features` (per pixel, over the loaded split).
    dtype : numpy dtype
        float64 (default), float32, or uint8 (raw pixels, needs ``normalize="none"``).
    flatten : bool
        Return images as rows of length 784 (default) or as (28, 28) arrays.

    Returns
    -------
    X : ndarray, shape (m, 784) or (m, 28, 28)
    y : ndarray of int64, shape (m,)
        Digits 0..9.

    Raises
    ------
    FileNotFoundError
        Files missing; the message names them, the download pages and the target folder.
    ValueError
        Corrupt, truncated or inconsistent files.
    """
    names = mnist_files(split)
    how = (
        f"Download {', '.join(n + '.gz' for n in names)} from {MNIST_URLS[0]} "
        f"(mirror: {MNIST_URLS[1]}); they may stay gzipped."
    )
    paths = _locate(path, MNIST_SUBDIR, names, True, "MNIST", how)
    xs, ys = [], []
    for img_path, lab_path in zip(paths[::2], paths[1::2]):
        img = read_idx(img_path)
        lab = read_idx(lab_path)
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[1:] != (28, 28):
            raise ValueError(
                f"{img_path}: expected MNIST images (magic 0x00000803, shape (m, 28, 28) uint8), "
                f"got shape {img.shape} {img.dtype}"
            )
        if lab.dtype != np.uint8 or lab.ndim != 1:
            raise ValueError(
                f"{lab_path}: expected MNIST labels (magic 0x00000801, shape (m,) uint8), "
                f"got shape {lab.shape} {lab.dtype}"
            )
        if lab.shape[0] != img.shape[0]:
            raise ValueError(
                f"{lab_path}: {lab.shape[0]} labels for {img.shape[0]} images in {img_path}"
            )
        if lab.size and lab.max() > 9:
            raise ValueError(f"{lab_path}: labels must be digits 0..9, found {int(lab.max())}")
        xs.append(img)
        ys.append(lab)
    x = np.concatenate(xs) if len(xs) > 1 else xs[0]
    y = np.concatenate(ys).astype(np.int64)
    if flatten:
        x = x.reshape(x.shape[0], -1)
    return _finish(x, normalize, dtype, "MNIST"), y


# --------------------------------------------------------------------------- CIFAR-10

#: Largest CIFAR-10 batch file read (the real ones are ~31 MB).
CIFAR_MAX_BYTES = 1 << 30


def read_cifar10_batch(path):
    """Read one CIFAR-10 python batch (``data_batch_k`` / ``test_batch``).

    Trust: the file is untrusted. It is never unpickled: :mod:`rfl_fast.data._pickle` parses
    its opcodes as data only (nothing it names is imported, instantiated or called), the
    ``data`` entry must be the record of a C-order uint8 array (or a list of byte rows) whose
    declared shape matches the bytes the file holds, and the labels a list of ints 0..9. The
    file size is checked (at most ``CIFAR_MAX_BYTES``) before it is read, so no allocation
    exceeds what the file holds.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    data : ndarray of uint8, shape (m, 3072)
        Rows are 1024 red, then 1024 green, then 1024 blue values (row-major 32 x 32).
    labels : ndarray of int64, shape (m,)
        Classes 0..9.

    Raises
    ------
    ValueError
        Anything else in the file, named with the file.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > CIFAR_MAX_BYTES:
        raise ValueError(f"{path}: {size} bytes is not a CIFAR-10 batch (at most "
                         f"{CIFAR_MAX_BYTES}; the real ones are ~31 MB)")
    try:
        obj = _pickle.parse(path.read_bytes())
    except _pickle.PickleRefused as exc:
        raise ValueError(f"{path}: corrupt or truncated CIFAR-10 batch, or not data only "
                         f"({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(
            f"{path}: expected a pickled dict with 'data' and 'labels', got {type(obj).__name__}"
        )
    keys = {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}
    if "data" not in keys or "labels" not in keys:
        found = brief(sorted(map(brief, keys)))
        raise ValueError(f"{path}: expected keys 'data' and 'labels', found {found}")
    try:
        data = _pickle.uint8_matrix(keys["data"], "data")
    except _pickle.PickleRefused as exc:
        raise ValueError(f"{path}: expected 'data' as a uint8 array of shape (m, 3072): "
                         f"{exc}") from None
    if data.shape[1] != 3072:
        raise ValueError(f"{path}: expected 'data' as a uint8 array of shape (m, 3072), got "
                         f"{data.shape}")
    labels = keys["labels"]
    if not (isinstance(labels, list) and len(labels) == data.shape[0]
            and all(type(v) is int for v in labels)):
        raise ValueError(f"{path}: expected 'labels' as a list of {data.shape[0]} ints")
    labels = np.array(labels, dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise ValueError(f"{path}: labels must be classes 0..9")
    return data, labels


def read_cifar10_bin(path):
    """Read one batch of the CIFAR-10 binary distribution (``data_batch_k.bin`` /
    ``test_batch.bin``): records of :data:`CIFAR_RECORD` bytes, a label byte and 3072 pixels.

    Trust: the file is untrusted. Its size must be a positive multiple of the record size
    (and at most ``CIFAR_MAX_BYTES``), checked before it is read; the labels must be 0..9.
    Nothing else is interpreted, so the file costs its own size (and one copy).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    data, labels : ndarray
        As :func:`read_cifar10_batch`: uint8 (m, 3072) and int64 (m,).

    Raises
    ------
    ValueError
        A size that is not whole records, or a label outside 0..9, named with the file.
    """
    path = Path(path)
    size = path.stat().st_size
    if size == 0 or size % CIFAR_RECORD or size > CIFAR_MAX_BYTES:
        raise ValueError(f"{path}: {size} bytes is not a CIFAR-10 binary batch (a positive "
                         f"multiple of {CIFAR_RECORD}-byte records, at most {CIFAR_MAX_BYTES} "
                         f"bytes; the real ones hold 10000 records)")
    with open(path, "rb") as fh:
        raw = fh.read(size + 1)
    if len(raw) != size:
        raise ValueError(f"{path}: the file changed size while it was read")
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, CIFAR_RECORD)
    labels = rec[:, 0].astype(np.int64)
    if labels.max() > 9:
        bad = int(np.flatnonzero(labels > 9)[0])
        raise ValueError(f"{path}: record {bad} has label {int(labels[bad])}; CIFAR-10 labels "
                         f"are classes 0..9 (not a CIFAR-10 binary batch?)")
    return rec[:, 1:].copy(), labels


def _cifar10_paths(path, split):
    """``(paths, reader)``: the binary batches where present (preferred), else the python
    ones; ``FileNotFoundError`` naming both when neither is complete."""
    try:
        return _locate(path, CIFAR10_BIN_SUBDIR, cifar10_files(split, binary=True), False,
                       "CIFAR-10", ""), read_cifar10_bin
    except FileNotFoundError:
        pass
    how = (
        f"Download cifar-10-binary.tar.gz ('CIFAR-10 binary version', preferred: fixed-size "
        f"records) from {CIFAR10_URL} and extract it (tar xzf cifar-10-binary.tar.gz), which "
        f"creates {CIFAR10_BIN_SUBDIR}/ with {', '.join(cifar10_files(split, binary=True))}; "
        f"the python version (cifar-10-python.tar.gz, {CIFAR10_SUBDIR}/) is read too."
    )
    return _locate(path, CIFAR10_SUBDIR, cifar10_files(split), False, "CIFAR-10", how), \
        read_cifar10_batch


def load_cifar10(path=None, *, split="train", normalize="unit", dtype=np.float64, flatten=True):
    """Load CIFAR-10 from local files: the binary batches (preferred) or the python ones.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Folder ``cifar-10-batches-bin`` (or ``cifar-10-batches-py``) itself, or a data root
        holding it. Default: ``$RFL_FAST_DATA/cifar-10-batches-bin/``, then
        ``$RFL_FAST_DATA/cifar-10-batches-py/``. Where both distributions are complete the
        binary one is read (:func:`read_cifar10_bin`: fixed-size records, nothing parsed).
    split : {"train", "test", "all"}
        ``data_batch_1..5[.bin]`` (50000 images), ``test_batch[.bin]`` (10000), or both
        (train first).
    normalize : {"unit", "standardize", "center", "none"}
        As in :func:`load_mnist`.
    dtype : numpy dtype
        float64 (default), float32, or uint8 (raw, needs ``normalize="none"``).
    flatten : bool
        Rows of length 3072 (default, channel-major as stored) or arrays (3, 32, 32).

    Returns
    -------
    X : ndarray, shape (m, 3072) or (m, 3, 32, 32)
    y : ndarray of int64, shape (m,)

    Raises
    ------
    FileNotFoundError
        Batches missing; the message names them, the download page and the target folder.
    ValueError
        Corrupt, truncated or malformed batches.
    """
    paths, read = _cifar10_paths(path, split)
    parts = [read(p) for p in paths]
    x = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
    y = np.concatenate([p[1] for p in parts])
    if not flatten:
        x = x.reshape(x.shape[0], 3, 32, 32)
    return _finish(x, normalize, dtype, "CIFAR-10"), y


def map_npy(path, *, ndim=None):
    """Memory-map an ``.npy`` file of float64 samples, read-only, for the problems to use in
    place: client data larger than the memory, or many runs sharing one copy in the system's
    page cache.

    The file is untrusted: its header is checked against the file's size before anything is
    mapped (no pickles, no shape the file does not hold; :func:`rfl_fast._files.read_npy`
    with ``mmap=True``). A stacked array of client samples (n, m, d) -- or (n, m, p, p) for
    matrix samples -- is taken by the problems without a copy (``KPCA(map_npy(path), r)``), and
    their checks read it in chunks, so building a problem costs O(n) besides the mapped file.
    Clients of different sizes: map the rows (M, d) and pass
    ``ClientData(map_npy(path, ndim=2), offsets)``, also used in place.
    Write the file with ``np.save(path, np.ascontiguousarray(z, dtype=np.float64))``. The file
    must not be truncated while the array lives (a mapped page that is gone kills the process
    with ``SIGBUS``).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.npy`` file: float64 in this machine's byte order, C order.
    ndim : int, optional
        The number of axes the array must have (3 for stacked vector samples (n, m, d)).

    Returns
    -------
    ndarray
        Read-only, backed by the file (it stays mapped while the array or a view lives).

    Raises
    ------
    OSError
        The file cannot be opened or mapped (``FileNotFoundError`` when it is missing).
    ValueError
        Naming the file: not an ``.npy`` file, a header the file does not hold, an object
        dtype, a dtype other than float64 in this machine's byte order, Fortran order, or
        another number of axes than ``ndim``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from rfl_fast.data import map_npy
    >>> from rfl_fast.problems import KPCA
    >>> path = os.path.join(tempfile.mkdtemp(), "clients.npy")
    >>> np.save(path, np.random.default_rng(0).standard_normal((50, 20, 10)))
    >>> z = map_npy(path, ndim=3)
    >>> z.shape, z.flags.writeable
    ((50, 20, 10), False)
    >>> KPCA(z, 2).n_clients
    50
    """
    try:
        arr = read_npy(path, mmap=True, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{brief(os.fspath(path))}: {exc}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{brief(os.fspath(path))}: expected an array of {ndim} axes (ndim), "
                         f"the file holds shape {arr.shape}")
    return arr
