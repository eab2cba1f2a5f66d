"""Atomic file writes: a file is either complete or absent (or its previous version)."""

import os
import tempfile

__all__ = ["atomic_write"]


def atomic_write(path, write, *, fsync=False):
    """Write ``path`` through ``write(tmp)`` and an atomic rename; returns ``path``.

    ``tmp`` is a fresh name in the same folder with the same extension; it is removed when
    ``write`` fails (the error propagates, an existing ``path`` is untouched). ``fsync``:
    flush the file to disk before the rename (checkpoints).
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
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
