"""What a cache entry keeps of a compile, and what a hit gives back.

Only the compiler's own verdict on the input is kept: a binary, or (with
``cache_failures``) a rejected source; never a timeout, a crash, an empty output or a
failure of asynccomp's own (a compiler that could not start, a full disk), which may
not happen again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..backends import BackendOutput, PreparedCompile
from ._deps import Dependency
from ._entry import CacheEntry

__all__ = ("Cached", "cached_output", "entry_of")


class Cached(NamedTuple):
    """A hit: what the compiler gave, and the program file name its log uses (the
    engine renames the log's diagnostics for each job it answers)."""

    output: BackendOutput
    filename: str


def entry_of(
    prepared: PreparedCompile,
    output: BackendOutput,
    elapsed: float,
    deps: Sequence[Dependency],
    extra: dict[str, Any],
    *,
    cache_failures: bool,
) -> CacheEntry | None:
    """The entry that keeps ``output``; ``None`` when it is not to be cached."""
    metadata = {
        "filename": prepared.filename,
        "backend": prepared.backend,
        "output": prepared.output,
        "arch": prepared.arch,
        "elapsed": elapsed,
        "pid": os.getpid(),
        "deps": [d.to_json() for d in deps],
        **extra,
    }
    if output.status == "ok":
        assert output.binary is not None
        return CacheEntry(output.binary, output.log, metadata)
    if cache_failures and output.status == "failed":
        return CacheEntry(b"", output.log, {**metadata, "error": output.message}, ok=False)
    return None


def cached_output(entry: CacheEntry) -> Cached:
    """What ``entry`` says the compiler gave."""
    filename = str(entry.metadata.get("filename", ""))
    if entry.ok:
        return Cached(BackendOutput("ok", entry.binary, entry.log), filename)
    message = str(entry.metadata.get("error", "compile failed (cached)"))
    return Cached(BackendOutput("failed", None, entry.log, message), filename)
