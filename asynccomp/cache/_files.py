"""Reading files that anything may stand in for: only regular files, only so much.

The paths a cache entry records (its dependencies) and the headers a source names are
read at lookup and at record time. Any of them may since have become a FIFO (opening it
waits for a writer forever), a link to ``/dev/zero`` or ``/dev/urandom`` (reading never
ends), a folder or a file growing while it is read. So a file is only read after a
``stat`` says it is regular (no device is ever opened), opened without blocking, checked
again through the descriptor (the file read is the file checked: no stat-then-open
race), and read up to the size it had when opened, plus one byte to notice growth.
Everything else raises an :class:`OSError`, which the callers take as "not to be
trusted": a miss, or a result not cached.

A digest can be asked to stop (``stopped``, checked before every block of 1 MiB): it
then raises :class:`Stopped`, which is not an ``OSError``: the file was not found
changed, the caller gave up on it (a lookup past its deadline, or cancelled).
"""

# String paths on purpose, as in _deps.py: the paths come from include lines and entries.
# ruff: noqa: PTH116

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable

__all__ = ("FileChanged", "NotRegularFile", "Stopped", "digest_regular", "read_regular")

# O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer (it is
# then refused by the fstat check); O_NOCTTY: a terminal never becomes ours.
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_BLOCK = 1 << 20


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a folder or a socket (or links to one)."""


class FileChanged(OSError):
    """The file grew, shrank or was modified while it was read, or is over the limit."""


class Stopped(Exception):
    """The caller asked the work to stop (not an ``OSError``: nothing was found wrong)."""


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    if "\0" in path:
        raise OSError(errno.EINVAL, "a NUL byte in a path", path)
    # Links are followed on purpose: include folders and headers are often links to
    # regular files. A first stat keeps devices from being opened at all.
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotRegularFile(errno.EINVAL, "not a regular file", path)
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):  # swapped after the stat above
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "not a regular file", path)
    return fd, st


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _check_unchanged(fd: int, st: os.stat_result, read: int, path: str) -> None:
    after = os.fstat(fd)
    # ctime too: a rewrite of the same size whose mtime was set back moves it.
    if read != st.st_size or _stamp(after) != _stamp(st):
        raise FileChanged(errno.EAGAIN, "changed while it was read", path)


def read_regular(path: str, limit: int) -> tuple[os.stat_result, bytes]:
    """The regular file's status (as opened) and bytes, when it holds at most ``limit``.

    Raises:
        OSError: it cannot be read, :class:`NotRegularFile`, or :class:`FileChanged`
            (over ``limit``, or changed while read).
    """
    fd, st = _open_regular(path)
    try:
        if st.st_size > limit:
            raise FileChanged(errno.EFBIG, f"larger than {limit} bytes", path)
        chunks: list[bytes] = []
        left = st.st_size + 1  # one more than it should hold: growth shows
        while left > 0:
            chunk = os.read(fd, min(left, _BLOCK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        _check_unchanged(fd, st, len(data), path)
        return st, data
    finally:
        os.close(fd)


def digest_regular(
    path: str, limit: int, stopped: Callable[[], bool] | None = None
) -> tuple[os.stat_result, str]:
    """The regular file's status (as opened) and SHA-256 (hex), read in blocks, when it
    holds at most ``limit`` bytes; raises as :func:`read_regular` does, and
    :class:`Stopped` once ``stopped()`` is true (asked before each block)."""
    fd, st = _open_regular(path)
    try:
        if st.st_size > limit:
            raise FileChanged(errno.EFBIG, f"larger than {limit} bytes", path)
        digest = hashlib.sha256()
        read = 0
        left = st.st_size + 1
        while left > 0:
            if stopped is not None and stopped():
                raise Stopped(path)
            chunk = os.read(fd, min(left, _BLOCK))
            if not chunk:
                break
            digest.update(chunk)
            read += len(chunk)
            left -= len(chunk)
        _check_unchanged(fd, st, read, path)
        return st, digest.hexdigest()
    finally:
        os.close(fd)
