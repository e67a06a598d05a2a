"""A Redis store for the remote tier, over anyio: a small RESP2 client of our own.

What Triton, Inductor, sccache and ccache users already run for a shared compile cache.
The client speaks only what the cache needs (``AUTH``, ``SELECT``, ``PING``, ``STRLEN``,
``GETRANGE``, ``SET ... EX``), on one connection, one request (or pipeline of them) at a
time; it works on any anyio backend and needs no dependency.

Anyone who can reach the Redis can write at the names asynccomp reads (no key is needed
to write, and key ids are not secret), so a lookup never reads a value whole before
judging it: one pipeline asks each value's length and first bytes (``STRLEN``,
``GETRANGE 0 7``); only values of at most ``max_entry_bytes`` that start as a sealed
value does are read, by a second one (``GETRANGE 0 max_entry_bytes-1``: bounded even if
the value grew in between). A value over the bound is a miss (not downloaded), one that
is not sealed (or not a string) a forgery (see :class:`~asynccomp.cache.RemoteAuth`),
and either name is not asked for again for a while (:meth:`RemoteCache.refuse`).

Every request has a deadline (``timeout``, connecting ``connect_timeout``); a failure
closes the connection, and :class:`RemoteCache` answers misses until it is time to try
again.

Entries live under ``<prefix><key id>:s<sealed format version>:<cache key>``: the key
id names the team's key (:class:`~asynccomp.cache.RemoteAuth`), so teams with different
keys, or a key and its replacement, share a Redis without reading each other's entries
as forged ones; machines of another asynccomp that seals otherwise neither.

Settings are checked when the store is made (a port of 0, a ``ttl`` of -5 or a
``timeout`` of NaN raise :class:`~asynccomp.InvalidJob` naming the setting), and the
password is never shown: ``repr`` and errors give the URL as ``redis://:***@host``, and
the store keeps it in a :class:`~asynccomp.cache._secret.Secret` (``***`` in ``vars()``,
never pickled).

>>> from asynccomp.cache import RemoteAuth
>>> cache = RedisCache.from_url(
...     "redis://:secret@cache.example:6380/2?ttl=3600", auth=RemoteAuth("0123456789abcdef" * 2)
... )
>>> (cache.host, cache.port, cache.db, cache.ttl)
('cache.example', 6380, 2, 3600)
>>> cache
RedisCache('redis://:***@cache.example:6380/2', key_id='0e01edbff910')
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from ..errors import InvalidJob
from ._auth import MISSING_KEY, SEAL_MAGIC, SEAL_VERSION, RemoteAuth
from ._remote import RemoteCache, _is_seconds, login_span, redacted_url
from ._secret import Secret

__all__ = ("RedisCache", "RedisError")

_CRLF = b"\r\n"
_MAX_LINE = 64 * 1024
# Redis keeps at most 512 MiB in one value.
_MAX_VALUE = 512 * 2**20


def _whole(value: object, low: int, high: int | None = None) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value >= low
        and (high is None or value <= high)
    )


# Each setting's check and what a bad value is told: the constructor and the URL's
# parameters use the same ones, so a URL and RedisCache(...) refuse the same values.
_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "port": (lambda v: _whole(v, 1, 65535), "must be a port number, 1 to 65535"),
    "db": (lambda v: _whole(v, 0), "must be a database number >= 0"),
    "ttl": (lambda v: _whole(v, 1), "must be a whole number of seconds >= 1"),
    "max_entry_bytes": (
        lambda v: _whole(v, 1, _MAX_VALUE),
        f"must be a number of bytes, 1 to {_MAX_VALUE} (Redis's largest value)",
    ),
    "timeout": (_is_seconds, "must be a finite number of seconds > 0"),
    "connect_timeout": (_is_seconds, "must be a finite number of seconds > 0"),
}
# The URL's names for the settings that differ.
_URL_NAMES = {"max_entry_bytes": "max_entry"}
_HOST_FORMS = "redis://[user:password@]host[:port][/db], an IPv6 host in brackets: [::1]"
_ESCAPE_LOGIN = (
    "an '@' after a '/', '?' or '#': in a password or user name these are "
    "percent-encoded (%2F, %3F, %23, and '@' as %40: urllib.parse.quote(password, "
    "safe='')), in a socket path '@' is %40"
)


def _refusal(error: str, with_password: bool) -> str:
    """What Redis refusing the connection's first commands (AUTH, SELECT, PING) means."""
    code = error.split(" ", 1)[0]
    if code == "WRONGPASS" or "invalid password" in error or "invalid username" in error:
        return f"reachable, but it refused the login (wrong user name or password): {error}"
    if code == "NOAUTH":
        return f"reachable, but it wants a password (redis://:PASSWORD@host): {error}"
    if "without any password configured" in error or (with_password and "AUTH" in error):
        return f"reachable, but it takes no password (drop it from the URL): {error}"
    return f"reachable, but it refused the connection: {error}"


class RedisError(Exception):
    """Redis answered with an error, or with something that is not RESP."""


def _encode_command(args: Sequence[bytes | str | int]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n" % len(data))
        parts.append(data)
        parts.append(_CRLF)
    return b"".join(parts)


class _Connection:
    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.receive = BufferedByteReceiveStream(stream)

    async def reply(self, *, errors: bool = False) -> Any:
        """The next reply; an error reply raises :class:`RedisError`, or is returned as
        one with ``errors`` (a pipeline's other replies still follow it)."""
        line = await self.receive.receive_until(_CRLF, _MAX_LINE)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            error = RedisError(rest.decode(errors="replace"))
            if errors:
                return error
            raise error
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = await self.receive.receive_exactly(size + 2)
            return data[:-2]
        if kind == b"*":
            count = int(rest)
            if count < 0:
                return None
            return [await self.reply() for _ in range(count)]
        raise RedisError(f"not a RESP reply: {line[:40]!r}")

    async def command(self, *args: bytes | str | int) -> Any:
        await self.stream.send(_encode_command(args))
        return await self.reply()

    async def pipeline(self, commands: Sequence[Sequence[bytes | str | int]]) -> list[Any]:
        """Send ``commands`` at once; their replies, an error one as a RedisError."""
        await self.stream.send(b"".join(_encode_command(c) for c in commands))
        return [await self.reply(errors=True) for _ in commands]


class RedisCache(RemoteCache):
    """Entries in Redis under ``prefix + key id + ":s2:" + key``, each kept ``ttl`` seconds.

    ``host``/``port`` or ``unix_socket`` say where; ``password`` (and ``username``, for
    Redis 6 ACLs) and ``db`` how to log in; ``tls`` for ``rediss://``; ``auth`` the
    team's key (default: from the environment, see :class:`RemoteCache`).

    Raises:
        InvalidJob: a setting has a bad value (naming it), or there is no key.
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 6379,
        *,
        unix_socket: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        tls: bool = False,
        ttl: int = 7 * 24 * 3600,
        max_entry_bytes: int = 64 * 2**20,
        timeout: float = 1.0,
        connect_timeout: float = 0.5,
        retry_after: float = 30.0,
        prefix: str = "asynccomp:",
        auth: RemoteAuth | None = None,
    ) -> None:
        settings = {
            "port": port,
            "db": db,
            "ttl": ttl,
            "max_entry_bytes": max_entry_bytes,
            "timeout": timeout,
            "connect_timeout": connect_timeout,
        }
        for field, value in settings.items():
            check, problem = _CHECKS[field]
            if not check(value):
                raise InvalidJob(field, value, problem)
        if unix_socket is None and not (isinstance(host, str) and host):
            raise InvalidJob("host", host, "must be a host name or address")
        if unix_socket is not None and not (isinstance(unix_socket, str) and unix_socket):
            raise InvalidJob("unix_socket", unix_socket, "must be the path of a socket")
        if username is not None and password is None:
            # AUTH takes a user name only with a password; without one nothing is sent.
            raise InvalidJob("username", username, "needs a password (Redis AUTH)")
        where = unix_socket or f"{host}:{port}"
        super().__init__(f"redis {where}/{db}", auth=auth, retry_after=retry_after)
        self.host, self.port, self.unix_socket = host, port, unix_socket
        self.db, self.username, self.tls = db, username, tls
        # Never an attribute in clear: vars(), a debugger or a logged __dict__ show those.
        self._password = None if password is None else Secret(password)
        self.ttl, self.max_entry_bytes = ttl, max_entry_bytes
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.prefix = prefix
        #: Where this team's entries live: the prefix, the key's id and the sealed
        #: format's version (values of another version are never read: plain misses).
        self.namespace = f"{prefix}{self.auth.key_id}:s{SEAL_VERSION}:"
        self._connection: _Connection | None = None
        self._lock: anyio.Lock | None = None

    @property
    def password(self) -> Secret | None:
        """The password (shown as ``***``; ``.reveal()`` gives it), or ``None``."""
        return self._password

    def url(self) -> str:
        """Where the store is, as a URL with the password hidden."""
        login = ""
        if self.password is not None:
            login = f"{self.username or ''}:***@"
        if self.unix_socket is not None:
            return f"unix://{login}{self.unix_socket}" + (f"?db={self.db}" if self.db else "")
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{login}{host}:{self.port}/{self.db}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url()!r}, key_id={self.auth.key_id!r})"

    @classmethod
    def from_url(cls, url: str, *, auth: RemoteAuth | None = None) -> RedisCache:
        """A store from ``redis://``, ``rediss://`` or ``unix://`` (see
        :func:`~asynccomp.cache.remote_cache_from_url`)."""
        shown = redacted_url(url)

        def refuse(problem: str) -> InvalidJob:
            return InvalidJob("remote_cache", shown, problem)

        # A parser's own messages are never passed on: they quote the parts they could
        # not take ("Port could not be cast to integer value as 'hunter2'"), and with an
        # unescaped "/", "?" or "#" in a password those parts are the password.
        span = login_span(url)
        if span is not None and any(c in url[span[0] : span[1]] for c in "/?#"):
            raise refuse(_ESCAPE_LOGIN)
        try:
            parts = urlsplit(url)
        except ValueError:  # unpaired brackets, characters no host may have
            raise refuse(f"not a URL that can be used: it does not parse ({_HOST_FORMS})") from None
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        options: dict[str, Any] = {
            "username": unquote(parts.username) if parts.username else None,
            "password": unquote(parts.password) if parts.password is not None else None,
        }
        raw: dict[str, str] = {}
        if parts.scheme == "unix":
            if parts.hostname:
                raise refuse("a unix:// URL names a path: unix:///path/to/redis.sock")
            options["unix_socket"] = unquote(parts.path)
            raw["db"] = query.pop("db", "0")
        else:
            try:
                port = parts.port
            except ValueError:  # not a number, or out of range
                raise refuse(
                    f"not a URL that can be used: the port is not a number from 1 to 65535 "
                    f"({_HOST_FORMS})"
                ) from None
            options["host"] = parts.hostname or "localhost"
            options["port"] = 6379 if port is None else port
            raw["db"] = parts.path.strip("/") or query.pop("db", "0")
            options["tls"] = parts.scheme == "rediss"
        for name, setting in (("ttl", "ttl"), ("max_entry", "max_entry_bytes")):
            if name in query:
                raw[setting] = query.pop(name)
        for setting, text in raw.items():
            try:
                options[setting] = int(text)
            except ValueError:
                name = _URL_NAMES.get(setting, setting)
                raise refuse(f"{name}={text!r}: {_CHECKS[setting][1]}") from None
        if "timeout" in query:
            text = query.pop("timeout")
            try:
                options["timeout"] = float(text)
            except ValueError:
                raise refuse(f"timeout={text!r}: {_CHECKS['timeout'][1]}") from None
        if query:
            raise refuse(f"unknown parameters: {', '.join(query)}")
        for setting in ("port", "db", "ttl", "max_entry_bytes", "timeout"):
            check, problem = _CHECKS[setting]
            if setting in options and not check(options[setting]):
                name = _URL_NAMES.get(setting, setting)
                raise refuse(f"{name} {options[setting]!r}: {problem}")
        if options["username"] is not None and options["password"] is None:
            raise refuse("a user name without a password: redis://user:password@host")
        if "unix_socket" in options and not options["unix_socket"]:
            raise refuse("no socket path: unix:///path/to/redis.sock")
        if auth is None:
            auth = RemoteAuth.from_environment()
        if auth is None:
            raise refuse(MISSING_KEY)
        return cls(**options, auth=auth)

    async def _connect(self) -> _Connection:
        if self.unix_socket is not None:
            stream: anyio.abc.ByteStream = await anyio.connect_unix(self.unix_socket)
        elif self.tls:
            stream = await anyio.connect_tcp(
                self.host, self.port, tls=True, ssl_context=ssl.create_default_context()
            )
        else:
            stream = await anyio.connect_tcp(self.host, self.port)
        connection = _Connection(stream)
        try:
            if self._password is not None:
                password = self._password.reveal()
                login = [self.username, password] if self.username else [password]
                await connection.command("AUTH", *login)
            if self.db:
                await connection.command("SELECT", self.db)
        except BaseException:
            await stream.aclose()
            raise
        return connection

    async def _request(self, *args: bytes | str | int) -> Any:
        [answer] = await self._pipeline([args])
        if isinstance(answer, RedisError):
            raise answer
        return answer

    async def _pipeline(self, commands: Sequence[Sequence[bytes | str | int]]) -> list[Any]:
        """The replies to ``commands``, sent at once (an error reply as a RedisError),
        within one ``timeout``."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            try:
                if self._connection is None:
                    with anyio.fail_after(self.connect_timeout):
                        self._connection = await self._connect()
                with anyio.fail_after(self.timeout):
                    return await self._connection.pipeline(commands)
            except BaseException:
                # A connection in an unknown state (a reply half read) is not reused.
                await self._drop()
                raise

    async def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()

    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        names = [self.namespace + key for key in keys]
        magic = len(SEAL_MAGIC)
        # First what each value is: its length and first bytes, never the value itself.
        probes = await self._pipeline(
            [c for name in names for c in (("STRLEN", name), ("GETRANGE", name, 0, magic - 1))]
        )
        found: list[bytes | None] = [None] * len(keys)
        wanted: list[int] = []
        for i, key in enumerate(keys):
            length, start = probes[2 * i], probes[2 * i + 1]
            if isinstance(length, RedisError) or isinstance(start, RedisError):
                found[i] = b""  # not a string (WRONGTYPE): nothing asynccomp wrote
            elif not isinstance(length, int) or not isinstance(start, bytes):
                raise RedisError(f"STRLEN/GETRANGE answered {length!r:.40}, {start!r:.40}")
            elif length == 0:
                pass  # no value: a plain miss
            elif length > self.max_entry_bytes:
                self.refuse(key)  # never read: a miss, and not asked for again for a while
            elif start != SEAL_MAGIC:
                found[i] = b""  # not a sealed value: judged without reading it
            else:
                wanted.append(i)
        if wanted:
            # Bounded even if the value grew since: a cut value fails authentication.
            values = await self._pipeline(
                [("GETRANGE", names[i], 0, self.max_entry_bytes - 1) for i in wanted]
            )
            for i, value in zip(wanted, values, strict=True):
                found[i] = value if isinstance(value, bytes) and value else None
        return found

    async def _put(self, key: str, data: bytes) -> None:
        await self._request("SET", self.namespace + key, data, "EX", self.ttl)

    async def ping(self) -> bool:
        """Whether the store answers now (for ``asynccomp cache stats``)."""
        try:
            return bool(await self._request("PING") == b"PONG")
        except Exception:
            return False

    async def probe(self) -> str | None:
        """Why this store cannot be used now, in its user's words, or ``None`` when it
        can: it is reached, takes the login, answers ``PING`` and a read (of a key no
        entry has). For ``asynccomp doctor`` and ``asynccomp cache stats``: a wrong
        password is not an unreachable server."""
        logged_in = False
        try:
            await self._request("PING")
            logged_in = True
            # A read that brings nothing back whatever is stored there (anyone who can
            # reach the Redis may write at any name): the length of a name no entry has.
            await self._request("STRLEN", self.namespace + "probe")
        except RedisError as exc:
            if not logged_in:
                return _refusal(str(exc), self._password is not None)
            return f"reachable and logged in, but it refused a read: {exc}"
        except (OSError, TimeoutError) as exc:
            why = exc or type(exc).__name__
            return f"reachable, but a read failed: {why}" if logged_in else f"not reachable: {why}"
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            return "reachable, but it closed the connection (is it a Redis server?)"
        except (anyio.DelimiterNotFound, ValueError):
            return "reachable, but it does not speak Redis's protocol"
        finally:
            await self._drop()
        return None

    async def aclose(self) -> None:
        await self._drop()
