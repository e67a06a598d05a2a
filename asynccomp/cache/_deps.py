"""The files a compile read besides its source and the toolkit: its dependencies.

A cache key covers the source, the options and the toolkit (whose headers the include
fingerprint stands for), but not a header the source includes from a folder of the
user's (``-I``). Like ccache's direct mode, every cache entry keeps the files the
compile read outside the toolkit, each with its size, mtime and SHA-256; a lookup checks
them, and a changed, vanished or newly appeared one makes the entry a miss.

Where the list comes from:

- nvcc: its own report, ``-MMD -MF`` (read by the nvcc backend).
- NVRTC has no dependency option (NVRTC 13.5 accepts none of ``-M``, ``-MD``, ``-MF``,
  ``--generate-dependencies``...), so :func:`scan_includes` follows the ``#include``
  lines of the source and of every header it finds outside the toolkit, as NVRTC
  resolves them: a quoted include in the folder of the file that includes it (for the
  source itself, the compiling process's working folder, which is where NVRTC looks for
  a program with a relative name), then the ``-I`` folders in order. It errs on the
  safe side: includes under an ``#if`` that is false are followed too, and the folders
  that were searched before the one a header was found in are recorded as not holding
  it, so a header that appears there later is noticed.

A dependency whose mtime is not older than the compile's start is not trusted (it may
have changed while the compiler read it): such a result is not cached.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = (
    "Dependency",
    "dependencies_changed",
    "include_dirs_of",
    "scan_includes",
    "snapshot",
)

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
# Headers larger than this are not followed (a data blob behind an #include).
_SCAN_LIMIT = 16 * 2**20


@dataclass(frozen=True)
class Dependency:
    """A file a compile read (``digest``), or found not to exist (``digest is None``)."""

    path: str
    size: int
    mtime_ns: int
    digest: str | None

    def to_json(self) -> list[object]:
        return [self.path, self.size, self.mtime_ns, self.digest]

    @classmethod
    def from_json(cls, value: object) -> Dependency:
        if not (isinstance(value, list) and len(value) == 4):
            raise ValueError(f"not a dependency: {value!r}")
        path, size, mtime, digest = value
        if not (
            isinstance(path, str)
            and isinstance(size, int)
            and isinstance(mtime, int)
            and (digest is None or isinstance(digest, str))
        ):
            raise ValueError(f"not a dependency: {value!r}")
        return cls(path, size, mtime, digest)


def include_dirs_of(options: Sequence[str]) -> list[str]:
    """The ``-I`` folders of an option list, in order (``-Idir``, ``-I dir``,
    ``--include-path=dir``, ``--include-path dir``)."""
    dirs: list[str] = []
    pending = False
    for option in options:
        if pending:
            dirs.append(option)
            pending = False
        elif option in ("-I", "--include-path"):
            pending = True
        elif option.startswith("--include-path="):
            dirs.append(option[len("--include-path=") :])
        elif option.startswith("-I"):
            dirs.append(option[2:])
    return dirs


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def scan_includes(
    source: bytes,
    include_dirs: Sequence[str],
    toolkit_dirs: Sequence[str],
    cwd: str,
) -> tuple[list[str], list[str]]:
    """``(found, absent)``: the files outside the toolkit that ``source`` includes,
    directly or through them, and the paths searched before each was found."""
    toolkit = [os.path.realpath(d) for d in toolkit_dirs]
    found: dict[str, None] = {}
    absent: dict[str, None] = {}
    pending: list[tuple[bytes, str | None]] = [(source, None)]
    while pending:
        text, folder = pending.pop()
        for kind, name_bytes in _INCLUDE.findall(text):
            name = name_bytes.decode("utf-8", "surrogateescape").strip()
            candidates: list[str] = []
            if kind == b'"':
                candidates.append(folder if folder is not None else cwd)
            candidates += include_dirs
            for base in candidates:
                path = os.path.normpath(os.path.join(base, name))
                if not os.path.isfile(path):
                    if not _under(os.path.realpath(path), toolkit):
                        absent[path] = None  # searched first: its appearing changes things
                    continue
                if _under(os.path.realpath(path), toolkit):
                    break  # the toolkit's: covered by its fingerprint
                if path not in found:
                    found[path] = None
                    try:
                        if os.path.getsize(path) <= _SCAN_LIMIT:
                            with open(path, "rb") as header:
                                pending.append((header.read(), os.path.dirname(path)))
                    except OSError:
                        pass
                break
    return list(found), [p for p in absent if p not in found]


def _digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def snapshot(
    found: Iterable[str], absent: Iterable[str], *, not_before_ns: int
) -> list[Dependency] | None:
    """The dependencies as they are now; ``None`` when one was modified at or after
    ``not_before_ns`` (the compile's start: it may have read it half-written)."""
    deps: list[Dependency] = []
    for path in dict.fromkeys(found):
        try:
            st = os.stat(path)
            if st.st_mtime_ns >= not_before_ns:
                return None
            deps.append(Dependency(path, st.st_size, st.st_mtime_ns, _digest(path)))
        except OSError:
            return None  # vanished since: nothing sure to record
    for path in dict.fromkeys(absent):
        if not os.path.exists(path):
            deps.append(Dependency(path, 0, 0, None))
    return deps


def dependencies_changed(deps: Iterable[Dependency]) -> bool:
    """Whether any dependency differs from what was recorded: a cheap ``stat`` for the
    unchanged ones (same size and mtime), the content's digest for the others (so a file
    only touched is still a hit)."""
    for dep in deps:
        try:
            st = os.stat(dep.path)
        except OSError:
            if dep.digest is not None:
                return True  # was there, is gone
            continue
        if dep.digest is None:
            return True  # was not there, is now
        if st.st_size == dep.size and st.st_mtime_ns == dep.mtime_ns:
            continue
        try:
            if st.st_size != dep.size or _digest(dep.path) != dep.digest:
                return True
        except OSError:
            return True
    return False
