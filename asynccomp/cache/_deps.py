"""The files a compile read besides its source and the toolkit: its dependencies.

A cache key covers the source, the options and the toolkit (whose headers the include
fingerprint stands for), but not a header the source includes from a folder of the
user's (``-I``). Like ccache's direct mode, every cache entry keeps the files the
compile read outside the toolkit, each with its size, mtime, ctime, inode and SHA-256; a
lookup checks them, and a changed, vanished or newly appeared one makes the entry a miss.

Size and mtime alone do not say a file is unchanged: ``tar -x``, ``rsync -t`` and
``cp -p`` restore mtimes, and a rewrite of the same size with its mtime set back is
another file. Like ccache, a file is taken as unchanged without reading it only when its
ctime (which no user can set: every write, ``utime`` or rename moves it) and its inode are
also those recorded; otherwise its digest decides (a file only touched is still a hit).
Records written before the ctime and inode were kept (four fields) are always checked
by digest.

Where the list comes from:

- nvcc: its own report, ``-MMD -MF`` (read by the nvcc backend).
- NVRTC has no dependency option, so :func:`scan_includes` (:mod:`._includes`) reads the
  ``#include`` lines as NVRTC resolves them, and says when it cannot know.

Checks are bounded: a recorded path is only read when it is a regular file, and only up
to its recorded size (see :mod:`._files`). A dependency that became a FIFO, a device, a
folder, unreadable or larger is a miss, never a hang; a lookup costs one ``stat`` per
dependency when nothing changed.

A dependency whose mtime or ctime is not older than the compile's start is not trusted
(it may have changed while the compiler read it): such a result is not cached.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ._files import Stopped, digest_regular
from ._includes import READ_LIMIT, IncludeSearch, UnknownIncludes, include_dirs_of, scan_includes

__all__ = (
    "Dependency",
    "Stopped",
    "IncludeSearch",
    "UnknownIncludes",
    "dependencies_changed",
    "include_dirs_of",
    "scan_includes",
    "snapshot",
)


@dataclass(frozen=True)
class Dependency:
    """A file a compile read (``digest``), or found not to exist (``digest is None``).

    ``ctime_ns`` and ``inode``: ``None`` when not known (a record of an older version),
    and then the file's digest is always compared."""

    path: str
    size: int
    mtime_ns: int
    digest: str | None
    ctime_ns: int | None = None
    inode: int | None = None

    def to_json(self) -> list[object]:
        return [self.path, self.size, self.mtime_ns, self.digest, self.ctime_ns, self.inode]

    @classmethod
    def from_json(cls, value: object) -> Dependency:
        if not (isinstance(value, list) and len(value) in (4, 6)):
            raise ValueError(f"not a dependency: {value!r}")
        path, size, mtime, digest, ctime, inode = [*value, None, None][:6]
        if not (
            isinstance(path, str)
            and isinstance(size, int)
            and isinstance(mtime, int)
            and (digest is None or isinstance(digest, str))
            and (ctime is None or isinstance(ctime, int))
            and (inode is None or isinstance(inode, int))
            and "\0" not in path
            and size >= 0
        ):
            raise ValueError(f"not a dependency: {value!r}")
        return cls(path, size, mtime, digest, ctime, inode)

    def same_file(self, st: os.stat_result) -> bool:
        """Whether ``st`` is the file recorded, unchanged, without reading it: the same
        size, mtime, ctime and inode (an unknown ctime or inode: never)."""
        return (
            self.ctime_ns is not None
            and self.inode is not None
            and (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            == (self.size, self.mtime_ns, self.ctime_ns, self.inode)
        )


def snapshot(
    found: Iterable[str], absent: Iterable[str], *, not_before_ns: int
) -> list[Dependency] | None:
    """The dependencies as they are now; ``None`` (do not cache) when they cannot be
    recorded for sure: ``found`` is :class:`UnknownIncludes`, a file was modified at or
    after ``not_before_ns`` (the compile's start: it may have read it half-written), is
    not a regular file, cannot be read, is over 64 MiB, or an absent path appeared."""
    if isinstance(found, UnknownIncludes):
        return None
    deps: list[Dependency] = []
    found = list(dict.fromkeys(found))
    for path in found:
        try:
            st, digest = digest_regular(path, READ_LIMIT)
        except OSError:
            return None
        if max(st.st_mtime_ns, st.st_ctime_ns) >= not_before_ns:
            return None
        deps.append(Dependency(path, st.st_size, st.st_mtime_ns, digest, st.st_ctime_ns, st.st_ino))
    for path in dict.fromkeys(absent):
        if path in found:
            continue
        try:
            os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            deps.append(Dependency(path, 0, 0, None))
            continue
        except (OSError, ValueError):
            pass
        return None  # appeared since the scan, or cannot be looked at: what did it see?
    return deps


def _changed(dep: Dependency, stopped: Callable[[], bool] | None = None) -> bool:
    try:
        st = os.stat(dep.path)
    except (FileNotFoundError, NotADirectoryError):
        return dep.digest is not None  # was there, is gone
    except (OSError, ValueError):
        return True  # cannot be looked at: not to be trusted
    if dep.digest is None or not stat.S_ISREG(st.st_mode):
        return True  # was not there and is now, or is no longer a regular file
    if dep.same_file(st):
        return False
    if st.st_size != dep.size or dep.size > READ_LIMIT:
        return True
    try:
        _, digest = digest_regular(dep.path, dep.size, stopped)
    except OSError:
        return True  # not regular any more, unreadable, or changing
    return digest != dep.digest


def dependencies_changed(
    deps: Iterable[Dependency], stopped: Callable[[], bool] | None = None
) -> bool:
    """Whether any dependency differs from what was recorded: a cheap ``stat`` for the
    unchanged ones (same size, mtime, ctime and inode), the content's digest for the
    others (so a file only touched is still a hit). Anything odd (a FIFO, a device, a
    folder, a file that cannot be read or changes while read) counts as changed;
    nothing blocks or reads more than the recorded size plus one byte.

    ``stopped``: asked before each dependency and each MiB read; once it is true, raises
    :class:`~asynccomp.cache._files.Stopped` (neither changed nor unchanged: not known).
    """
    for dep in deps:
        if stopped is not None and stopped():
            raise Stopped(dep.path)
        if _changed(dep, stopped):
            return True
    return False
