"""The entry file format, the disk tier's and (sealed) the remote tier's: one
checked blob per entry.

Every read is checked (magic bytes, format version, lengths, a sha256 over the whole
entry, the key inside): a damaged or foreign blob is :class:`Corrupt`, never a wrong
binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct

from ._entry import CacheEntry
from ._keys import CACHE_FORMAT_VERSION

__all__ = ("Corrupt", "decode", "decode_entry", "encode", "encode_entry", "read_at_most")

# File layout (all integers little-endian):
#   magic    8 bytes   b"ACCACHE\0"
#   version  u32       CACHE_FORMAT_VERSION
#   json_len u32       length of the JSON header
#   digest   32 bytes  sha256 over bytes [0:16] and everything after the fixed header
#   JSON header        {"key", "ok", "log", "metadata", "binary_len"}
#   binary             binary_len bytes
# The digest sits in the fixed header rather than in the JSON so that it covers the JSON
# too: a flipped byte in the log or the metadata is caught, not only one in the binary.
# sha256 rather than blake2b because OpenSSL's (SHA-NI) is about twice as fast here.
_MAGIC = b"ACCACHE\0"
_FIXED = struct.Struct("<8sII32s")
_FIXED_SIZE = _FIXED.size  # 48


class Corrupt(Exception):
    """An entry file failed verification ."""


def encode(key: str, entry: CacheEntry) -> list[bytes]:
    """The file's bytes, in pieces (so the binary is not copied once more)."""
    try:
        header = json.dumps(
            {
                "key": key,
                "ok": bool(entry.ok),
                "log": entry.log,
                "metadata": dict(entry.metadata),
                "binary_len": len(entry.binary),
            },
            ensure_ascii=True,
            separators=(",", ":"),
        ).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cache entry metadata is not JSON-serialisable: {exc}") from exc
    prefix = _MAGIC + struct.pack("<II", CACHE_FORMAT_VERSION, len(header))
    digest = hashlib.sha256(prefix)
    digest.update(header)
    digest.update(entry.binary)
    return [prefix, digest.digest(), header, entry.binary]


def decode(key: str, data: bytes) -> CacheEntry:
    if len(data) < _FIXED_SIZE:
        raise Corrupt(f"{len(data)} bytes, shorter than the header")
    magic, version, json_len, digest = _FIXED.unpack_from(data)
    if magic != _MAGIC:
        raise Corrupt("not a cache entry (bad magic bytes)")
    if version != CACHE_FORMAT_VERSION:
        raise Corrupt(f"format version {version}, expected {CACHE_FORMAT_VERSION}")
    body = memoryview(data)[_FIXED_SIZE:]
    if json_len > len(body):
        raise Corrupt("truncated (header runs past the end)")
    check = hashlib.sha256(memoryview(data)[:16])
    check.update(body)
    if check.digest() != digest:
        raise Corrupt("checksum mismatch")
    try:
        header = json.loads(bytes(body[:json_len]))
    except ValueError as exc:
        raise Corrupt(f"bad JSON header: {exc}") from None
    if not isinstance(header, dict):
        raise Corrupt("bad JSON header: not an object")
    log, metadata, ok = header.get("log"), header.get("metadata"), header.get("ok")
    binary_len = header.get("binary_len")
    if header.get("key") != key:
        raise Corrupt("the entry belongs to another key")
    if not (isinstance(log, str) and isinstance(metadata, dict) and isinstance(ok, bool)):
        raise Corrupt("bad JSON header: missing or mistyped fields")
    if binary_len != len(body) - json_len:
        raise Corrupt("binary length mismatch")
    return CacheEntry(binary=data[_FIXED_SIZE + json_len :], log=log, metadata=metadata, ok=ok)


def read_at_most(fd: int, size: int) -> bytes:
    """The file's first ``size`` bytes (what it held when it was opened)."""
    chunks = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def encode_entry(key: str, entry: CacheEntry) -> bytes:
    """``entry`` in the disk format (also what the remote tier stores)."""
    return b"".join(encode(key, entry))


def decode_entry(key: str, data: bytes) -> CacheEntry | None:
    """The entry in ``data`` if it is whole, unaltered and ``key``'s, else ``None``."""
    try:
        return decode(key, data)
    except Corrupt:
        return None
