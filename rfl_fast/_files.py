"""Atomic file writes: a file is either complete or absent (or its previous version)."""

import os
import tempfile
import threading

__all__ = ["atomic_write", "file_mode"]

_umask_lock = threading.Lock()


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


def atomic_write(path, write, *, fsync=False):
    """Write ``path`` through ``write(tmp)`` and an atomic rename; returns ``path``.

    ``tmp`` is a fresh name in the same folder with the same extension; it is removed when
    ``write`` fails (the error propagates, an existing ``path`` is untouched). ``fsync``:
    flush the file to disk before the rename (checkpoints). The file gets the mode of any new
    file (``0o666`` less the user's umask), not ``mkstemp``'s private ``0o600``.
    """
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    stem, ext = os.path.splitext(base)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".tmp{ext}", dir=folder)
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
    return path
