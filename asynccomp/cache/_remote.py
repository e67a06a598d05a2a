"""Remote stores: what the remote tier (:mod:`._remote_tier`) reads and writes.

A remote store holds entries in the disk tier's format (magic, format version, a SHA-256
over the whole entry, the key inside), sealed with an HMAC under the team's key
(:class:`~asynccomp.cache.RemoteAuth`, :mod:`._auth`): anyone who can reach the store can
write to it, so a value that does not verify is a miss, counted as forged, and never
kept locally. A remote store cannot be made without a key. A store shared by machines
with other toolkits can never answer with their binaries: the compiler's identity is
in the key.

A remote store must never fail or stall a compile: an implementation answers a lookup
it cannot make with misses, within its own short timeouts, and stops asking for a
while after a failure (:class:`RemoteCache` keeps that state and issues one
:class:`RemoteCacheWarning` per outage). Writes are made by the remote tier's writer
task, off every job's critical path.

Nor can a value someone else wrote cost much: a store reads a value only when its length
is at most ``max_entry_bytes`` (what it would have written) and it starts as a sealed
value does, and a name whose value was refused (too large, not sealed, not verified) is
remembered for ``bad_name_seconds``: lookups of it are misses without a request until
then, or until this store writes a genuine entry there itself.

:func:`~._stores.remote_cache_from_url` makes the store a URL names (``redis://``,
``rediss://``, ``unix://``: :class:`~asynccomp.cache.RedisCache`, :mod:`._redis`); other
stores implement :class:`RemoteCache`'s three methods in a module of their own.
Passwords in URLs are shown as ``***`` everywhere (:func:`redacted_url`).
"""

from __future__ import annotations

import abc
import logging
import math
import re
import threading
import time
from collections.abc import Sequence

from ..errors import CacheWarning, InvalidJob
from ._auth import MISSING_KEY, RemoteAuth
from ._entry import warn_or_log

__all__ = (
    "REMOTE_CACHE_ENV",
    "RemoteCache",
    "RemoteCacheWarning",
    "login_span",
    "redacted_url",
)

logger = logging.getLogger("asynccomp.cache")

#: The environment variable that names a remote store (``redis://host:6379/0``).
REMOTE_CACHE_ENV = "ASYNCCOMP_REMOTE_CACHE"


class RemoteCacheWarning(CacheWarning):
    """The remote cache could not be used (down, slow, refused); the engine goes on with
    its local tiers and asks the remote again after a while."""


class RemoteCache(abc.ABC):
    """A store of sealed entries by key. Subclasses implement :meth:`_get_many`,
    :meth:`_put` and :meth:`aclose`; failures there may raise anything: this class turns
    them into misses, one warning, and a pause of ``retry_after`` seconds.

    ``auth`` seals and verifies the entries (:meth:`RemoteAuth.seal`); ``None`` takes the
    key from the environment (:meth:`RemoteAuth.from_environment`).

    Raises:
        InvalidJob: there is no key (``$ASYNCCOMP_REMOTE_CACHE_KEY`` and
            ``$ASYNCCOMP_REMOTE_CACHE_KEY_FILE`` unset), the key is refused, or
            ``retry_after`` is not a finite number of seconds >= 0.
    """

    #: Entries larger than this are not stored, nor read.
    max_entry_bytes: int = 64 * 2**20
    #: How long a name whose value was refused is a miss without a request.
    bad_name_seconds: float = 600.0
    #: How many such names are remembered (the oldest are forgotten first).
    bad_names_kept: int = 4096

    def __init__(
        self, name: str, *, auth: RemoteAuth | None = None, retry_after: float = 30.0
    ) -> None:
        if not _is_seconds(retry_after, zero=True):
            raise InvalidJob("retry_after", retry_after, "must be a finite number of seconds >= 0")
        if auth is None:
            auth = RemoteAuth.from_environment()
        if auth is None:
            raise InvalidJob("remote_cache", name, MISSING_KEY)
        if not isinstance(auth, RemoteAuth):
            raise InvalidJob("auth", auth, "must be an asynccomp.cache.RemoteAuth")
        self.name = name
        #: The team's key: what the remote tier's writer seals with and lookups verify.
        self.auth = auth
        self.retry_after = retry_after
        self._down_until = 0.0
        self._warned = False
        #: Lookups and writes that failed, and writes skipped while down or too large.
        self.errors = 0
        self.skipped = 0
        # Names whose value was refused -> until when (time.monotonic()) they stay
        # misses; insertion order is age. Marked from the lookup threads that verify.
        self._bad: dict[str, float] = {}
        self._bad_lock = threading.Lock()

    @property
    def available(self) -> bool:
        """False while the store is paused after a failure."""
        return time.monotonic() >= self._down_until

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + self.retry_after
        if self._warned:
            logger.warning("asynccomp: remote cache %s: %s failed: %r", self.name, what, exc)
            return
        self._warned = True
        warn_or_log(
            f"remote compile cache {self.name} is not usable ({what}: {exc!r}); "
            f"compiling with the local cache alone, asking again every "
            f"{self.retry_after:g} s",
            RemoteCacheWarning,
        )

    def refuse(self, key: str) -> None:
        """Remember that ``key``'s value was refused (too large, not sealed, forged):
        lookups of it are misses without a request for ``bad_name_seconds``."""
        with self._bad_lock:
            self._bad.pop(key, None)
            self._bad[key] = time.monotonic() + self.bad_name_seconds
            while len(self._bad) > self.bad_names_kept:
                del self._bad[next(iter(self._bad))]

    def refused(self, key: str) -> bool:
        """Whether ``key``'s value was refused less than ``bad_name_seconds`` ago."""
        with self._bad_lock:
            until = self._bad.get(key)
            if until is None:
                return False
            if time.monotonic() < until:
                return True
            del self._bad[key]
            return False

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The stored (sealed, not yet verified: :meth:`RemoteAuth.unseal`) bytes of
        each key, ``None`` for a miss (a name refused lately is one without a request);
        never raises."""
        if not keys:
            return []
        if not self.available:
            return [None] * len(keys)
        asked = [key for key in keys if not self.refused(key)]
        if not asked:
            return [None] * len(keys)
        try:
            found = await self._get_many(asked)
        except Exception as exc:
            self._failed("a lookup", exc)
            return [None] * len(keys)
        if len(found) != len(asked):
            self._failed("a lookup", ValueError("answers do not match the keys"))
            return [None] * len(keys)
        answers = dict(zip(asked, found, strict=True))
        return [answers.get(key) for key in keys]

    async def put(self, key: str, data: bytes) -> bool:
        """Store ``data`` (a sealed entry: :meth:`RemoteAuth.seal`) under ``key``;
        whether it was stored (never raises)."""
        if len(data) > self.max_entry_bytes or not self.available:
            self.skipped += 1
            return False
        try:
            await self._put(key, data)
        except Exception as exc:
            self._failed("a write", exc)
            return False
        with self._bad_lock:
            self._bad.pop(key, None)  # a genuine entry is there now
        return True

    @abc.abstractmethod
    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The store's answer (may raise): each key's value, ``None`` for none. Values
        over ``max_entry_bytes`` are not read: they are ``None``, after :meth:`refuse`;
        a value known not to be sealed without reading it whole may be ``b""`` (which
        fails authentication)."""

    @abc.abstractmethod
    async def _put(self, key: str, data: bytes) -> None:
        """Store (may raise)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release the connection."""

    def describe(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, key_id={self.auth.key_id!r})"


def _is_seconds(value: object, *, zero: bool = False) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if zero else value > 0)
    )


# A URL's query values worth showing; any other may be a secret (?password=...).
_SHOWN_PARAMETERS = frozenset({"db", "ttl", "max_entry", "timeout"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def login_span(url: str) -> tuple[int, int] | None:
    """Where the login of ``url`` is: from after ``//`` (after ``scheme:``, or the start,
    when there is none) to its *last* ``@``, wherever that is. ``None``: no ``@`` there.

    The last ``@`` of the whole URL, not of the host part a parser finds: a password
    with an unescaped ``/``, ``?`` or ``#`` (``redis://:pa/ss@host``) ends that host
    part early, and everything up to the last ``@`` may still be the password."""
    slashes = url.find("//")
    if slashes >= 0:
        start = slashes + 2
    else:
        scheme = _SCHEME.match(url)
        start = scheme.end() if scheme else 0
    at = url.rfind("@")
    return (start, at) if at >= start else None


def redacted_url(url: object) -> str:
    """``url`` as it may be shown: a password is ``***`` (``redis://user:***@host``), a
    user name alone too (some clients take it for a password), and so are any query
    value but ``db``, ``ttl``, ``max_entry`` and ``timeout``, and a fragment. Everything
    up to the URL's last ``@`` counts as login (see :func:`login_span`), so a password
    with ``/``, ``?``, ``#`` or ``@`` in it is hidden whole; hides more rather than less
    on URLs that do not parse.

    >>> redacted_url("redis://:hunter2@cache:6379/0?ttl=60&password=x")
    'redis://:***@cache:6379/0?ttl=60&password=***'
    >>> redacted_url("redis://alice:hun/ter?2#@cache:6379/0")
    'redis://alice:***@cache:6379/0'
    """
    if not isinstance(url, str):
        return "<not a string>"
    span = login_span(url)
    if span is not None:
        start, at = span
        user, colon, _ = url[start:at].partition(":")
        url = f"{url[:start]}{user + ':' if colon else ''}***{url[at:]}"
    shown, hash_mark, _ = url.partition("#")
    base, mark, query = shown.partition("?")
    pairs = []
    for pair in query.split("&") if mark else ():
        name, equals, _ = pair.partition("=")
        pairs.append(pair if name in _SHOWN_PARAMETERS or not equals else f"{name}=***")
    return f"{base}{mark}{'&'.join(pairs)}{'#***' if hash_mark else ''}"
