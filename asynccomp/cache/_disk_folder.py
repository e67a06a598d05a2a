"""The disk tier's folder: its files found, checked and removed.

Entries are ``<directory>/<key[:2]>/<key>.entry``; ``.<key>.<pid>.<random>.tmp`` files
are writes under way (or left by a writer that died). A scan tolerates files and shard
folders vanishing under it (other processes write, evict and clear the same folder).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ._format import Corrupt, decode, read_at_most

__all__ = (
    "KEY_RE",
    "SUFFIX",
    "TMP_SUFFIX",
    "FileInfo",
    "check_entries",
    "check_key",
    "remove",
    "scan",
    "unlink",
)

SUFFIX = ".entry"
TMP_SUFFIX = ".tmp"
KEY_RE = re.compile(r"[0-9a-f]{64}")


class FileInfo(NamedTuple):
    mtime_ns: int
    size: int
    path: str


def scan(directory: Path) -> Iterator[tuple[bool, FileInfo]]:
    """``(is_entry, info)`` for every entry file and temp file under ``directory``; tolerates files
    and shard folders vanishing under it."""
    with os.scandir(directory) as shards:
        for shard in shards:
            try:
                if not shard.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(shard.path) as files:
                    items = list(files)
            except OSError:
                continue
            for item in items:
                name = item.name
                is_entry = name.endswith(SUFFIX) and not name.startswith(".")
                if not is_entry and not name.endswith(TMP_SUFFIX):
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield is_entry, FileInfo(st.st_mtime_ns, st.st_size, item.path)


def check_entries(directory: Path) -> tuple[int, list[tuple[Path, str]]]:
    """Read and check every entry under ``directory``; remove the bad ones. Returns (good entries,
    [(path, what was wrong)] for those removed)."""
    good, bad = 0, []
    try:
        infos = [info for is_entry, info in scan(directory) if is_entry]
    except OSError:
        return 0, []
    for info in infos:
        path = Path(info.path)
        key = path.name[: -len(SUFFIX)]
        problem = None
        if KEY_RE.fullmatch(key) is None:
            problem = "not named after a key"
        else:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        problem = "not a regular file"
                    else:
                        decode(key, read_at_most(fd, st.st_size))
                finally:
                    os.close(fd)
            except Corrupt as exc:
                problem = str(exc)
            except OSError as exc:
                problem = f"unreadable: {exc}"
        if problem is None:
            good += 1
            continue
        bad.append((path, problem))
        with contextlib.suppress(OSError):
            remove(path)
    return good, bad


def unlink(info: FileInfo) -> int:
    try:
        Path(info.path).unlink()
    except OSError:
        return 0
    return info.size


def check_key(key: str) -> str:
    # Keys become file names: accept only what cache_key makes, which also rules out
    # path tricks such as "../".
    if not isinstance(key, str) or KEY_RE.fullmatch(key) is None:
        raise ValueError(f"not a cache key (64 lowercase hex digits): {key!r}")
    return key


def remove(path: Path) -> None:
    """Remove what is at ``path``: a folder with its contents, or a file or link itself."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
