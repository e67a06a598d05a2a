"""Writing ``asynccomp compile --json FILE`` so that no run loses another's records.

The file is written whole, atomically (a temporary file in its folder, renamed over
it): a reader never sees half a report, and a run stopped while writing leaves the old
one. A file that was there before the run started is replaced, as a re-run expects;
one that another run wrote while this one compiled keeps that run's records, this run's
added after them (a note on stderr says so). Runs finishing together take turns (a
lock on the folder). The file gets the mode the umask setting says (private to the
user by default: :mod:`asynccomp._perms`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._perms import umask_of, write_new

__all__ = ("FileState", "file_state", "write_records")

#: What identifies one version of a file: inode, size, modification time (ns).
FileState = tuple[int, int, int] | None


def file_state(path: Path) -> FileState:
    """The file's identity now (``None`` when there is none)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_records(path: Path, rows: list[dict[str, Any]], seen: FileState) -> str | None:
    """Write ``rows`` to ``path`` atomically; ``seen``: the file as it was when this run
    started. Returns a note for the user when another run's records were kept."""
    folder = path.parent
    note = None
    with _folder_lock(folder):
        kept: list[Any] = []
        now = file_state(path)
        if now is not None and now != seen:  # another run wrote it since this one began
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError):
                found = None
            if isinstance(found, list):
                kept = found
                note = (
                    f"{path} was written by another run while this one compiled: its "
                    f"{len(kept)} records are kept, this run's {len(rows)} added after them"
                )
            else:
                note = f"{path} was changed while this run compiled (not a report): replaced"
        temporary = folder / f".{path.name}.{os.getpid()}.tmp"
        try:
            text = json.dumps([*kept, *rows], indent=2) + "\n"
            write_new(temporary, text.encode(), umask_of(None))
            temporary.replace(path)
        finally:
            temporary.unlink(missing_ok=True)
    return note
