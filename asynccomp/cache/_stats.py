"""The cache's statistics: lookups answered by each tier, and what the cache did, counted
by the tiered cache (:mod:`._tiered`) and added up over every process that used a cache
folder (``asynccomp cache stats``), as ccache's stats files are."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

from .._perms import open_new, umask_of, write_new

__all__ = ("STATS_FILE", "CacheStats", "stats_lock")

STATS_FILE = "stats.json"


@dataclass
class CacheStats:
    """Lookups answered by each tier, and what the cache did (an engine's, or summed
    over every engine that used a cache folder: ``asynccomp cache stats``)."""

    memory_hits: int = 0
    disk_hits: int = 0
    remote_hits: int = 0
    misses: int = 0
    stale: int = 0  # entries whose dependencies changed (counted as misses too)
    stores: int = 0
    remote_stores: int = 0
    remote_errors: int = 0
    forged: int = 0  # remote entries that failed authentication (counted as misses too)
    tier_errors: int = 0  # calls into a tier that raised (a miss, or a write not kept)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _save_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # What :meth:`save` has added to the folder's totals already.
    _saved: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}

    def unsaved(self) -> dict[str, int]:
        """The counts not added to the folder's totals yet."""
        with self._lock:
            return {
                f.name: getattr(self, f.name) - self._saved.get(f.name, 0)
                for f in fields(self)
                if f.name[0] != "_"
            }

    @staticmethod
    def load(root: Path) -> dict[str, int]:
        """The totals saved in a cache folder (zeros when there are none)."""
        try:
            saved = json.loads((root / STATS_FILE).read_text())
        except (OSError, ValueError):
            saved = {}
        totals = CacheStats().as_dict()
        for name in totals:
            value = saved.get(name) if isinstance(saved, dict) else None
            if isinstance(value, int):
                totals[name] = value
        return totals

    def save(self, root: Path, umask: int | None = None) -> None:
        """Add the counts not saved yet to the cache folder's totals (as ccache's stats
        files: under a lock, replaced atomically, so every process using the folder, a
        compile server and in-process engines alike, adds to the same totals). Called
        again, it adds only what was counted since. ``umask``: the files' modes
        (:mod:`asynccomp._perms`)."""
        # What is unsaved is read under the locks: two saves at once (sessions ending
        # together on a server) would otherwise both add the same counts.
        with self._save_lock, contextlib.suppress(OSError), stats_lock(root, umask):
            counts = self.unsaved()
            if not any(counts.values()):
                return
            totals = self.load(root)
            for name, value in counts.items():
                totals[name] += value
            _write_totals(root, totals, umask)
            with self._lock:
                for name, value in counts.items():
                    self._saved[name] = self._saved.get(name, 0) + value

    @staticmethod
    def zero(root: Path, umask: int | None = None) -> None:
        """Reset the cache folder's totals (``asynccomp cache --zero-stats``)."""
        with stats_lock(root, umask):
            _write_totals(root, CacheStats().as_dict(), umask)


@contextlib.contextmanager
def stats_lock(root: Path, umask: int | None = None) -> Iterator[None]:
    """The stats file's lock, held (processes share the folder)."""
    fd = open_new(root / f"{STATS_FILE}.lock", os.O_RDWR | os.O_CLOEXEC, umask_of(umask))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_totals(root: Path, totals: dict[str, int], umask: int | None = None) -> None:
    """Replace the stats file at once: a reader sees the old totals or the new ones."""
    tmp = root / f".{STATS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    write_new(tmp, (json.dumps(totals, indent=2) + "\n").encode(), umask_of(umask))
    tmp.replace(root / STATS_FILE)
