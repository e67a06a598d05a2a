"""Cache keys: what decides a compile's bytes, hashed.

:func:`cache_key` hashes everything that decides a compile's output; the include
folders' fingerprint (:func:`include_identity`) stands for the headers a compile can
read from the toolkit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import platformdirs

__all__ = (
    "CACHE_DIR_ENV",
    "CACHE_FORMAT_VERSION",
    "cache_key",
    "clear_include_identity_cache",
    "default_cache_dir",
    "include_identity",
)

#: Bumped whenever the key recipe or the file format changes: it is hashed into every
#: key and names the on-disk subfolder, so old entries are never misread, only unused.
CACHE_FORMAT_VERSION: int = 3

#: The environment variable that overrides :func:`default_cache_dir`.
CACHE_DIR_ENV = "ASYNCCOMP_CACHE_DIR"


def cache_key(
    *,
    source: str,
    backend: str,
    output: str,
    arch: str,
    options: Sequence[str],
    compiler_identity: str,
    include_identity: str,
    program_name: str = "",
    relocated: bool = False,
) -> str:
    """The cache key of one compile: a sha256 hex digest (64 characters).

    The small fields are encoded as one JSON list, which is unambiguous (``("ab", "c")``
    and ``("a", "bc")`` differ, as do ``["-a", "-b"]`` and ``["-a -b"]``), followed by
    the source's UTF-8 bytes, whose length the JSON records. The source is hashed as it
    is rather than JSON-escaped: escaping a 100 KB kernel cost half a millisecond, most
    of a cache hit. Option order is kept: it can change what the compiler does.
    ``program_name`` is included because NVRTC writes it into diagnostics and debug info.
    ``relocated``: the options name the paths under ``$ASYNCCOMP_BASE_DIR`` relative to
    the working folder (such a key never equals one of absolute paths).
    """
    if isinstance(options, (str, bytes)):
        # A string is a Sequence[str] of characters: almost surely a caller's mistake.
        raise TypeError("options must be a sequence of strings, not a single string")
    # surrogatepass: any Python str encodes, and distinct strs give distinct bytes.
    text = source.encode("utf-8", "surrogatepass")
    fields = [
        "asynccomp-compile-cache",
        CACHE_FORMAT_VERSION,
        len(text),
        backend,
        output,
        arch,
        list(options),
        compiler_identity,
        include_identity,
        program_name,
    ]
    if relocated:  # appended: the keys of everything else stay as they were
        fields.append("relative to the working folder")
    # ensure_ascii escapes lone surrogates too, so any Python str encodes.
    header = json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    digest = hashlib.sha256(header)
    digest.update(b"\n")
    digest.update(text)
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``$ASYNCCOMP_CACHE_DIR`` when set (and not empty), else the user cache folder
    (``platformdirs.user_cache_dir("asynccomp")``, e.g. ``~/.cache/asynccomp``)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("asynccomp"))


# Files whose change means the headers changed: the version headers of CUDA and CCCL
# sit in subfolders that the top-level listing below does not see.
_VERSION_FILES: tuple[str, ...] = (
    "cuda/std/version",
    "cuda/version",
    "cuda/std/__cccl/version.h",
    "thrust/version.h",
    "cub/version.cuh",
    "crt/host_config.h",
    "crt/host_defines.h",
)


def include_identity(dirs: Sequence[Path]) -> str:
    """A cheap fingerprint (sha256 hex) of the include folders, for :func:`cache_key`.

    For each folder, in order: its resolved path, its own mtime and size, the mtime and
    size of every file directly inside it, and of a few version headers in subfolders
    (``cuda/std/version``, ``thrust/version.h``...). Installing or upgrading a toolkit
    or the CCCL/runtime wheels changes it; missing folders are allowed.

    It does not read file contents, so a header edited in place in a *subfolder* (other
    than those version files) goes unnoticed; hash such headers into
    ``compiler_identity`` yourself when you edit them. The result is cached per process
    (keyed by the tuple of paths) so repeated calls cost about a microsecond; call
    :func:`clear_include_identity_cache` after changing headers in a running process.
    """
    return _include_identity(tuple(dirs))


def clear_include_identity_cache() -> None:
    """Forget the fingerprints :func:`include_identity` computed in this process."""
    _include_identity.cache_clear()


def _stat_pair(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


@functools.lru_cache(maxsize=64)
def _include_identity(dirs: tuple[Path, ...]) -> str:
    parts: list[object] = []
    for d in dirs:
        resolved = os.path.realpath(d)
        listing: list[list[object]] = []
        try:
            with os.scandir(resolved) as it:
                for item in it:
                    try:
                        if item.is_file():
                            st = item.stat()
                            listing.append([item.name, st.st_mtime_ns, st.st_size])
                    except OSError:
                        continue  # vanished or unreadable: leave it out
        except OSError:
            pass  # missing or not a folder: its (missing) stat says so below
        listing.sort()
        base = Path(resolved)
        versions = [[v, _stat_pair(base / v)] for v in _VERSION_FILES]
        parts.append([resolved, _stat_pair(base), listing, versions])
    encoded = json.dumps(parts, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()
