"""Who wrote a remote entry: an HMAC-SHA256 under a key the team shares.

A remote store is writable by anyone who can reach it, and its checks for damage (the
disk format's SHA-256, the key inside the entry) prove nothing about the writer: the
format is public. So every value asynccomp puts in a remote store is sealed with the
team's key, and a value whose seal does not verify is not an entry: it is a miss,
counted, and never kept in the local tiers. The disk tier stays unsealed: only its
owner can write it (see the manual's cache guide, docs/guides/cache.md).

A sealed value (the remote tier's format; its magic carries the version)::

    magic  8 bytes   b"ACAUTH2\\0"
    tag   32 bytes   HMAC-SHA256(team key, magic
                                 + len(cache key) (8 bytes, big-endian) + cache key
                                 + len(entry) (8 bytes, big-endian) + entry)
    entry            the disk tier's encoding (magic, version, SHA-256, header, binary)

The cache key is under the tag, so a sealed value moved to another key does not verify.
Each field the tag covers is length-prefixed, so no two (key, entry) pairs give the same
input (version 1 had ``magic + key + entry``: unambiguous only as long as every key was
64 characters), and a cache key must be one: 64 lowercase hex digits (a SHA-256), else
:meth:`RemoteAuth.unseal` refuses it and :meth:`RemoteAuth.seal` raises.
:data:`SEAL_VERSION` names the format in the remote store's keys too, so values of
another version are not even read (misses, not forgeries).

The key comes from ``$ASYNCCOMP_REMOTE_CACHE_KEY`` (the secret itself) or
``$ASYNCCOMP_REMOTE_CACHE_KEY_FILE`` (a regular file, not a link, of this user's, with no
permission bits for group or others: see :meth:`RemoteAuth.from_file`), not both, or
``RemoteAuth(secret)``. A key has at least 16 bytes, at least 8 of them different (so
``"k" * 32`` or ``"abababab..."`` are refused); make one with
``python -c 'import secrets; print(secrets.token_hex(32))'``. It is never shown: not in ``repr``,
errors, logs, ``asynccomp doctor`` or ``asynccomp cache stats``, which show its *id*,
an HMAC of a constant under the key (12 hex digits), so that machines can check they
share one key.

>>> auth = RemoteAuth("correct horse battery staple")
>>> sealed = auth.seal("ab" * 32, b"an encoded entry")
>>> auth.unseal("ab" * 32, sealed)
b'an encoded entry'
>>> auth.unseal("cd" * 32, sealed) is None  # moved to another key
True
>>> RemoteAuth("another team's key, same length").unseal("ab" * 32, sealed) is None
True
"""

from __future__ import annotations

import errno
import hmac
import os
import re
import stat
import struct
from collections.abc import Mapping
from pathlib import Path

from ..errors import InvalidJob

__all__ = (
    "MISSING_KEY",
    "REMOTE_CACHE_KEY_ENV",
    "REMOTE_CACHE_KEY_FILE_ENV",
    "SEAL_MAGIC",
    "SEAL_VERSION",
    "RemoteAuth",
    "is_cache_key",
)

#: The environment variable that holds the team's key itself.
REMOTE_CACHE_KEY_ENV = "ASYNCCOMP_REMOTE_CACHE_KEY"
#: The environment variable that names a file holding the team's key.
REMOTE_CACHE_KEY_FILE_ENV = "ASYNCCOMP_REMOTE_CACHE_KEY_FILE"

#: The sealed format's version (in its magic and in the store's key names).
SEAL_VERSION = 2
_MAGIC = b"ACAUTH%d\0" % SEAL_VERSION
#: How every sealed value starts (a store may look at this much before reading more).
SEAL_MAGIC = _MAGIC
_TAG = 32
_LENGTH = struct.Struct(">Q")
_CACHE_KEY = re.compile(r"[0-9a-f]{64}")
_HEADER = len(_MAGIC) + _TAG
_KEY_FILE_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
)
# A key shorter than this is a password, not a key; 32 random bytes are the advice.
_MIN_KEY_BYTES = 16
# Fewer different bytes than this is a placeholder ("k" * 32, "abab..."), not a random
# key: token_hex(32) (the advice) has fewer than 8 different digits about never, 16
# random bytes too; only a key of 16 hex digits falls short by chance (about 1 time in
# 90), and is refused: 16 hex digits are 8 bytes of randomness, too few anyway.
_MIN_DISTINCT_BYTES = 8
_MAX_KEY_FILE_BYTES = 4096
_HOW = (
    f"set {REMOTE_CACHE_KEY_ENV} to the team's key, or {REMOTE_CACHE_KEY_FILE_ENV} to a "
    "file holding it (yours, not a link, chmod 600), not both; make one with: "
    "python -c 'import secrets; print(secrets.token_hex(32))'"
)


def _hidden(secret: bytes) -> str:
    return f"<a key of {len(secret)} bytes, not shown>"


def _weakness(secret: bytes) -> str | None:
    """Why ``secret`` is no key (never showing it), or ``None`` if it may be one."""
    if len(secret) < _MIN_KEY_BYTES:
        return f"too short: a key has at least {_MIN_KEY_BYTES} bytes; {_HOW}"
    distinct = len(set(secret))
    if distinct < _MIN_DISTINCT_BYTES:
        return (
            f"too weak: {distinct} different bytes, where a key has at least "
            f"{_MIN_DISTINCT_BYTES} (a placeholder, not a random key); {_HOW}"
        )
    return None


def is_cache_key(key: object) -> bool:
    """Whether ``key`` is a cache key: 64 lowercase hex digits (a SHA-256)."""
    return isinstance(key, str) and _CACHE_KEY.fullmatch(key) is not None


class RemoteAuth:
    """The team's key, and what it proves of a remote entry: :meth:`seal` and
    :meth:`unseal`. ``secret``: at least 16 bytes, at least 8 of them different (a
    ``str`` is taken as UTF-8); ``source`` says where it came from (shown instead of it).

    Raises:
        InvalidJob: the secret is shorter than 16 bytes or has fewer than 8 different
            bytes (the error does not show it).
    """

    def __init__(self, secret: str | bytes, *, source: str = "given") -> None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        weakness = _weakness(raw)
        if weakness is not None:
            raise InvalidJob("remote cache key", _hidden(raw), weakness)
        # Only the keyed state is kept (OpenSSL's HMAC object, copied per use), not the
        # secret as an attribute that a debugger or vars() would print.
        self._mac = hmac.new(raw, digestmod="sha256")
        self.source = source
        #: Names the key without revealing it (the same on every machine holding it).
        self.key_id = hmac.new(raw, b"asynccomp remote cache key id", "sha256").hexdigest()[:12]

    def __repr__(self) -> str:
        return f"RemoteAuth(key_id={self.key_id!r}, source={self.source!r})"

    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("a RemoteAuth holds a secret and is not pickled")

    def _tag(self, key: str, entry: bytes | memoryview) -> bytes:
        # Every field length-prefixed: the input names its fields whatever their sizes.
        raw = key.encode("ascii")
        mac = self._mac.copy()
        mac.update(_MAGIC)
        mac.update(_LENGTH.pack(len(raw)))
        mac.update(raw)
        mac.update(_LENGTH.pack(len(entry)))
        mac.update(entry)
        return mac.digest()

    def seal(self, key: str, entry: bytes) -> bytes:
        """``entry`` (an encoded entry) as the remote store keeps it under ``key``.

        Raises:
            InvalidJob: ``key`` is not a cache key (64 lowercase hex digits).
        """
        if not is_cache_key(key):
            raise InvalidJob("cache key", key, "must be 64 lowercase hex digits (a SHA-256)")
        return b"".join((_MAGIC, self._tag(key, entry), entry))

    def unseal(self, key: str, sealed: bytes) -> bytes | None:
        """The entry in ``sealed`` if someone holding this key sealed it for ``key``,
        else ``None`` (forged, damaged, another key's, another format's, not a sealed
        value, or ``key`` is not a cache key)."""
        if len(sealed) < _HEADER or not sealed.startswith(_MAGIC) or not is_cache_key(key):
            return None
        entry = memoryview(sealed)[_HEADER:]
        if not hmac.compare_digest(self._tag(key, entry), sealed[len(_MAGIC) : _HEADER]):
            return None
        return bytes(entry)

    @classmethod
    def from_file(cls, path: str) -> RemoteAuth:
        """The key in the file ``path`` (surrounding blanks and newlines ignored).

        The file must be a regular file itself, not a symbolic link (the folders on its
        path may be links), belong to this user and have no permission bits for group
        or others (``mode & 0o077 == 0``: 0600, 0400, 0700, 0500 all pass). It is
        looked at with ``lstat`` first (a FIFO or a device is never opened), opened
        with ``O_NOFOLLOW | O_NONBLOCK`` (a link or a FIFO swapped in since cannot be
        followed or block), and checked again through the descriptor, which must be the
        file ``lstat`` saw: the bytes read are those of the file checked.

        Raises:
            InvalidJob: the file is missing, a link, not a regular file, not this
                user's, has group or other permission bits, is longer than 4 KiB, or
                holds too short or too weak a key.
        """
        field = REMOTE_CACHE_KEY_FILE_ENV

        def refuse(problem: str) -> InvalidJob:
            return InvalidJob(field, path, f"{problem}; {_HOW}")

        def cannot(exc: OSError) -> InvalidJob:
            return refuse(f"cannot be opened: {os.strerror(exc.errno or errno.EIO)}")

        try:
            seen = os.lstat(path)
        except OSError as exc:
            raise cannot(exc) from None
        if stat.S_ISLNK(seen.st_mode):
            # A link is how another file is swapped in under the name; its target may be
            # any file of this user's that someone else knows the bytes of.
            raise refuse(
                "is a symbolic link: name the file itself (realpath gives it), or give "
                f"the key in {REMOTE_CACHE_KEY_ENV}"
            )
        if not stat.S_ISREG(seen.st_mode):
            raise refuse("is not a regular file")
        try:
            fd = os.open(path, _KEY_FILE_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a link since the lstat
                raise refuse("is a symbolic link: name the file itself") from None
            raise cannot(exc) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
                seen.st_dev,
                seen.st_ino,
            ):
                raise refuse("is not a regular file (or was replaced while it was opened)")
            if st.st_uid != os.getuid():
                raise refuse(f"belongs to user id {st.st_uid}, not to this user ({os.getuid()})")
            if st.st_mode & 0o077:
                raise refuse(
                    f"has mode {stat.S_IMODE(st.st_mode):04o}: group or others may read or "
                    "change it; chmod go= it (chmod 600)"
                )
            data = os.read(fd, _MAX_KEY_FILE_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > _MAX_KEY_FILE_BYTES:
            raise refuse(f"is longer than {_MAX_KEY_FILE_BYTES} bytes: not a key file")
        weakness = _weakness(data.strip())
        if weakness is not None:
            raise InvalidJob(field, path, f"holds {_hidden(data.strip())}: {weakness}")
        return cls(data.strip(), source=f"${field} ({path})")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RemoteAuth | None:
        """The key ``$ASYNCCOMP_REMOTE_CACHE_KEY`` or ``$ASYNCCOMP_REMOTE_CACHE_KEY_FILE``
        gives; ``None`` when neither is set (or both are empty).

        Raises:
            InvalidJob: both are set (an error, never one chosen over the other), the
                key is too short or too weak, or the file is refused (see
                :meth:`from_file`).
        """
        env = os.environ if environ is None else environ
        secret = env.get(REMOTE_CACHE_KEY_ENV, "").strip()
        path = env.get(REMOTE_CACHE_KEY_FILE_ENV, "").strip()
        if secret and path:
            raise InvalidJob(
                REMOTE_CACHE_KEY_FILE_ENV,
                path,
                f"{REMOTE_CACHE_KEY_ENV} is set too: set one of them, not both",
            )
        if secret:
            weakness = _weakness(secret.encode())
            if weakness is not None:
                raise InvalidJob(REMOTE_CACHE_KEY_ENV, _hidden(secret.encode()), weakness)
            return cls(secret, source=f"${REMOTE_CACHE_KEY_ENV}")
        if path:
            return cls.from_file(str(Path(path).expanduser()))
        return None


#: What an error says when a remote tier has no key.
MISSING_KEY = (
    "a remote cache needs the team's key, to prove who wrote each entry (anyone who can "
    f"reach the store can write to it): {_HOW}"
)
