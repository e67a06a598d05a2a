"""Cache keys: what decides a compile's bytes, hashed.

:func:`cache_key` hashes everything that decides a compile's output; the include
folders' fingerprint (:func:`include_identity`) stands for the headers a compile can
read from the toolkit.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from .._include_identity import clear_include_identity_cache, include_identity

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
