"""Files: atomic, durable writes, and bounded readers of ``.npy`` / ``.npz`` data from elsewhere.

Writes: :func:`atomic_write` leaves a file complete or absent (or its previous version); with
``fsync`` it also survives a power loss (the file is flushed before the rename and its folder
after it).

Reads: an ``.npy`` header declares a shape and a dtype; :func:`read_npy` and :func:`read_npz`
check that declaration against the bytes the file (the zip member, the message) holds
*before* anything is allocated, refuse object dtypes (pickles) and read exactly the declared
bytes, so a file costs at most a fixed multiple of its size (for a deflated ``.npz`` member,
of deflate's largest expansion ratio, :data:`DEFLATE_MAX_RATIO`; a zip directory naming a
member twice, or members sharing their bytes, is refused before anything is inflated, so the
members together cost at most that multiple of the file). Every failure is a
``ValueError`` whose message is bounded and names what was wrong (callers add the file name).

``read_npy(path, mmap=True)`` runs the same checks and then maps the file read-only instead of
reading it: the array costs no memory of its own (the system pages the file in and out as it
is read), so data larger than the memory can be used in place, e.g. a stacked (n, m, d)
float64 array of client samples, which the problems take without a copy. A mapped file must
not be truncated while the array lives (the process would get ``SIGBUS`` touching the lost
pages, as with every mapped file): map files that nobody rewrites in place.
"""

import io
import mmap as _mmap
import os
import re
import tempfile
import time
import threading
import zipfile

import numpy as np

__all__ = ["atomic_write", "file_mode", "read_npy", "read_npz", "npy_from_bytes",
           "DEFLATE_MAX_RATIO", "NPY_MAX_HEADER"]

_umask_lock = threading.Lock()

#: Deflate's largest expansion (about 1032 : 1): a zip member cannot inflate to more than this
#: times its compressed size, so larger declared sizes are refused before reading.
DEFLATE_MAX_RATIO = 1032
#: Largest ``.npy`` header read (numpy's own limit for untrusted headers).
NPY_MAX_HEADER = 10000


def _umask():
    """The process's umask. Linux reports it in /proc/self/status; elsewhere it can only be
    read by setting it, so it is set and restored at once under a lock (another thread creating
    a file in between would briefly see the mask 0o077, stricter, never looser)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def file_mode():
    """The mode a plain ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


def _fsync_folder(folder):
    """Flush a folder's entries (the rename) to disk; a no-op where folders cannot be opened
    (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: A temporary file of another format (no writer's pid in its name, e.g. from an older
#: rfl_fast) is taken as abandoned when it is older than this (seconds).
STALE_AFTER = 3600.0
_TMP_NAME = re.compile(r"(\d+)-[a-z0-9_]+")


def _alive(pid):
    if os.name != "posix":          # os.kill(pid, 0) is no probe there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                 # exists, owned by someone else
        return True
    return True


def _remove_stale(folder, stem, ext):
    """Remove the temporary files of earlier writes of ``stem + ext`` whose writer is gone (a
    kill -9 between the temporary file and the rename leaves it behind): named with a pid
    that no longer runs (POSIX), else older than :data:`STALE_AFTER`. A live writer's file is
    never touched."""
    head, tail = f".{stem}.", f".tmp{ext}"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(head) and n.endswith(tail)
                 and len(n) > len(head) + len(tail)]
    except OSError:
        return
    for name in names:
        full = os.path.join(folder, name)
        m = _TMP_NAME.fullmatch(name[len(head):-len(tail)])
        try:
            if m is not None and int(m.group(1)) != os.getpid() and not _alive(
                    int(m.group(1))) or (m is None or os.name != "posix") and \
                    time.time() - os.lstat(full).st_mtime > STALE_AFTER:
                os.remove(full)
        except (OSError, ValueError, OverflowError):
            pass


def atomic_write(path, write, *, fsync=False):
    """Write ``path`` through ``write(tmp)`` and an atomic rename; returns ``path``.

    ``tmp`` is a fresh name in the same folder with the same extension, holding the writer's
    pid; it is removed when ``write`` fails (the error propagates, an existing ``path`` is
    untouched), and one left by a writer killed before the rename (kill -9, power loss) is
    removed by the next write of ``path`` (:func:`_remove_stale`). ``fsync``
    (checkpoints, privacy ledgers): the file is flushed to disk before the rename and the
    folder after it, so after a power loss the file is the new version, never an older one
    or an empty one. The file gets the mode of any new file (``0o666`` less the user's
    umask), not ``mkstemp``'s private ``0o600``.
    """
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    _remove_stale(folder, stem, ext)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.{os.getpid()}-", suffix=f".tmp{ext}",
                               dir=folder)
    os.close(fd)
    try:
        write(tmp)
        if fsync:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if fsync:
        _fsync_folder(folder)
    return path


# ---------------------------------------------------------------------------- .npy / .npz

def _npy_header(fh, size):
    """``(shape, order, dtype, count)`` of the ``.npy`` stream ``fh`` of ``size`` bytes,
    checked: a known version, a header of at most :data:`NPY_MAX_HEADER` bytes, no object
    dtype, and exactly ``count * itemsize`` bytes after the header."""
    from numpy.lib import format as npy

    version = npy.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = npy.read_array_header_1_0(fh, max_header_size=NPY_MAX_HEADER)
    elif version == (2, 0):
        shape, fortran, dtype = npy.read_array_header_2_0(fh, max_header_size=NPY_MAX_HEADER)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not read "
                         f"(1.0 and 2.0 are)")
    if dtype.hasobject:
        raise ValueError("an object dtype (a pickle) is refused")
    if dtype.itemsize == 0:
        # count * 0 bytes match any declared shape: nothing bounds it by the file
        raise ValueError(f"a dtype of zero bytes ({_dtype_text(dtype)}) is refused")
    if not all(isinstance(v, int) and v >= 0 for v in shape):
        raise ValueError("the declared shape has a negative entry")
    count = 1
    for v in shape:
        count *= v                              # Python ints: no overflow
    have = size - fh.tell()
    if count == 0 and any(v > size for v in shape):
        # an empty array whose other axes are huge: what is computed per axis is not
        raise ValueError(f"an empty array of shape {_shape_text(shape)}: an axis longer than "
                         f"the {size} bytes held")
    if count * dtype.itemsize != have:
        raise ValueError(f"the header declares shape {_shape_text(shape)} of {dtype.str} "
                         f"({count * dtype.itemsize} bytes), the data holds {have} bytes "
                         f"(truncated, trailing bytes or crafted)")
    return shape, "F" if fortran else "C", dtype, count


def _checked_header(fh, size):
    """:func:`_npy_header`, any failure a bounded ``ValueError``."""
    try:
        return _npy_header(fh, size)
    except ValueError as exc:
        raise ValueError(str(exc)[:300]) from None
    except Exception as exc:  # noqa: BLE001 - whatever foreign bytes make numpy raise
        raise ValueError(f"not a readable .npy header ({type(exc).__name__}: "
                         f"{str(exc)[:160]})") from None


def _dtype_text(dtype):
    text = dtype.str if dtype.names is None and dtype.subdtype is None else str(dtype)
    return text if len(text) <= 60 else f"{text[:50]}..."


def _shape_text(shape):
    text = str(tuple(shape))
    return text if len(text) <= 80 else f"{text[:60]}... ({len(shape)} axes)"


def _from_buffer(buf, offset, shape, order, dtype, count):
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape, order=order).copy(order="K")


def npy_from_bytes(data):
    """The array held by the ``.npy`` bytes ``data`` (a message's payload), checked as the
    module docstring says; a new writeable array.

    Raises
    ------
    ValueError
        Not ``.npy`` bytes, or a declaration the bytes do not hold.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"expected .npy bytes, got {type(data).__name__}")
    fh = io.BytesIO(data)
    shape, order, dtype, count = _checked_header(fh, len(data))
    return _from_buffer(data, fh.tell(), shape, order, dtype, count)


def _check_dtype(got, want):
    """Refuse a declared dtype other than ``want`` (``None``: any), byte order included."""
    if want is None:
        return
    want = np.dtype(want)
    if got != want:
        raise ValueError(f"dtype: expected {_dtype_text(want)} ({want.name}, this machine's byte "
                         f"order), the header declares {_dtype_text(got)}")


def _map(fh, size, offset, shape, order, dtype, count):
    """A read-only array over the bytes of the open file ``fh`` (``size`` bytes, checked by
    :func:`_npy_header`) from ``offset``, mapped rather than read."""
    if order == "F" and sum(v > 1 for v in shape) > 1:
        raise ValueError("mmap=True maps C-order data only (what the problems use without a "
                         "copy); the header declares Fortran order: read it with mmap=False, "
                         "or save np.ascontiguousarray(a)")
    if offset % max(1, dtype.alignment):
        raise ValueError(f"mmap=True: the data starts at byte {offset}, not a multiple of its "
                         f"{dtype.alignment}-byte alignment (numpy pads the header to 64 bytes; "
                         f"crafted): read it with mmap=False")
    if count == 0:
        arr = np.empty(shape, dtype=dtype)
        arr.flags.writeable = False
        return arr
    mm = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_READ)
    mapped = len(mm)
    if mapped != size:
        mm.close()
        raise ValueError(f"the file changed while it was mapped ({size} bytes checked, "
                         f"{mapped} mapped)")
    # the array holds the map (its base); a read-only map gives a read-only array
    return np.frombuffer(mm, dtype=dtype, count=count, offset=offset).reshape(shape)


def read_npy(path, *, mmap=False, dtype=None):
    """The array of the ``.npy`` file ``path``, checked before allocating (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
    mmap : bool
        Map the file read-only instead of reading it (after the same checks): the array is a
        read-only view of the file's bytes that costs no memory of its own, and the file stays
        mapped while the array (or a view of it) lives. Only C-order data is mapped (a
        Fortran-order header is refused), and only data at an offset aligned for its dtype.
    dtype : data-type, optional
        The dtype the header must declare, byte order included (e.g. ``np.float64``: native
        little-endian ``<f8`` on common machines); ``None`` accepts any but object dtypes.

    Returns
    -------
    ndarray
        A new writeable array, or with ``mmap`` a read-only one backed by the file.

    Raises
    ------
    OSError
        The file cannot be opened (or mapped).
    ValueError
        Not an ``.npy`` file, a header that the file does not hold, another ``dtype``, or
        (``mmap``) Fortran order or misaligned data.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        shape, order, dt, count = _checked_header(fh, size)
        _check_dtype(dt, dtype)
        if mmap:
            return _map(fh, size, fh.tell(), shape, order, dt, count)
        body = fh.read(count * dt.itemsize)
    if len(body) != count * dt.itemsize:
        raise ValueError("the file shrank while it was read")
    return _from_buffer(body, 0, shape, order, dt, count)


def _check_directory(infos, size):
    """Refuse a zip directory that names a member twice, or whose members together hold more
    compressed bytes than the file (entries sharing their data: each would be inflated again),
    before anything is inflated; then the members' declared sizes total at most
    :data:`DEFLATE_MAX_RATIO` times the file's size."""
    names, offsets, held = set(), set(), 0
    for info in infos:
        what = f"member {info.filename[:80]!r}"
        if info.filename in names or info.header_offset in offsets:
            raise ValueError(f"{what}: listed twice in the zip directory (crafted)")
        names.add(info.filename)
        offsets.add(info.header_offset)
        held += info.compress_size
    if held > size:
        raise ValueError(f"the zip directory's members hold {held} compressed bytes, more than "
                         f"the file's {size} (entries sharing their data; crafted)")


def read_npz(path, *, max_members=4096):
    """The arrays of the ``.npz`` file ``path`` (member name without ``.npy`` -> array), each
    member's declared size checked against the zip directory and deflate's largest expansion
    before anything is inflated (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
    max_members : int
        Most members read.

    Raises
    ------
    OSError
        The file cannot be opened.
    ValueError
        Not a zip of ``.npy`` members, or a member whose header it does not hold.
    """
    try:
        zf = zipfile.ZipFile(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, and whatever a crafted zip raises
        raise ValueError(f"not a zip archive ({type(exc).__name__}: {str(exc)[:120]})") \
            from None
    out = {}
    with zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise ValueError(f"{len(infos)} members, more than the {max_members} read")
        _check_directory(infos, os.path.getsize(path))
        for info in infos:
            name = info.filename
            what = f"member {name[:80]!r}"
            if not name.endswith(".npy"):
                raise ValueError(f"{what}: not an .npy member")
            if info.compress_type != zipfile.ZIP_STORED and \
                    info.file_size > DEFLATE_MAX_RATIO * max(info.compress_size, 1):
                raise ValueError(f"{what}: declares {info.file_size} bytes from "
                                 f"{info.compress_size} compressed, more than deflate expands")
            try:
                with zf.open(info) as fh:
                    shape, order, dtype, count = _checked_header(fh, info.file_size)
                    offset = fh.tell()
                data = zf.read(info)
            except ValueError as exc:
                raise ValueError(f"{what}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - zlib.error, EOFError, CRC, encrypted...
                raise ValueError(f"{what}: corrupt ({type(exc).__name__}: "
                                 f"{str(exc)[:120]})") from None
            if len(data) != info.file_size:
                raise ValueError(f"{what}: {len(data)} bytes, the directory says "
                                 f"{info.file_size}")
            out[name[:-4]] = _from_buffer(data, offset, shape, order, dtype, count)
    return out
