"""A Redis store for the remote tier, over anyio: a small RESP2 client of our own.

What Triton, Inductor, sccache and ccache users already run for a shared compile cache.
The client speaks only what the cache needs (``AUTH``, ``SELECT``, ``PING``, ``MGET``,
``SET ... EX``), on one connection, one request at a time; it works on any anyio
backend and needs no dependency. Every request has a deadline (``timeout``, connecting
``connect_timeout``); a failure closes the connection, and :class:`RemoteCache` answers
misses until it is time to try again.

>>> cache = RedisCache.from_url("redis://:secret@cache.example:6380/2?ttl=3600")
>>> (cache.host, cache.port, cache.db, cache.ttl)
('cache.example', 6380, 2, 3600)
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from ..errors import InvalidJob
from ._remote import RemoteCache

__all__ = ("RedisCache", "RedisError")

_CRLF = b"\r\n"
_MAX_LINE = 64 * 1024


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

    async def reply(self) -> Any:
        line = await self.receive.receive_until(_CRLF, _MAX_LINE)
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RedisError(rest.decode(errors="replace"))
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


class RedisCache(RemoteCache):
    """Entries in Redis under ``prefix + key``, each kept ``ttl`` seconds.

    ``host``/``port`` or ``unix_socket`` say where; ``password`` (and ``username``, for
    Redis 6 ACLs) and ``db`` how to log in; ``tls`` for ``rediss://``.
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
    ) -> None:
        where = unix_socket or f"{host}:{port}"
        super().__init__(f"redis {where}/{db}", retry_after=retry_after)
        self.host, self.port, self.unix_socket = host, port, unix_socket
        self.db, self.username, self.password, self.tls = db, username, password, tls
        self.ttl, self.max_entry_bytes = ttl, max_entry_bytes
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.prefix = prefix
        self._connection: _Connection | None = None
        self._lock: anyio.Lock | None = None

    @classmethod
    def from_url(cls, url: str) -> RedisCache:
        """A store from ``redis://``, ``rediss://`` or ``unix://`` (see
        :func:`~asynccomp.cache.remote_cache_from_url`)."""
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            options: dict[str, Any] = {
                "username": unquote(parts.username) if parts.username else None,
                "password": unquote(parts.password) if parts.password else None,
            }
            if parts.scheme == "unix":
                options["unix_socket"] = unquote(parts.path)
                options["db"] = int(query.pop("db", "0"))
            else:
                options["host"] = parts.hostname or "localhost"
                options["port"] = parts.port or 6379
                options["db"] = int(parts.path.strip("/") or query.pop("db", "0"))
                options["tls"] = parts.scheme == "rediss"
            if "ttl" in query:
                options["ttl"] = int(query.pop("ttl"))
            if "max_entry" in query:
                options["max_entry_bytes"] = int(query.pop("max_entry"))
            if "timeout" in query:
                options["timeout"] = float(query.pop("timeout"))
        except ValueError as exc:
            raise InvalidJob("remote_cache", url, f"a bad value: {exc}") from None
        if query:
            raise InvalidJob("remote_cache", url, f"unknown parameters: {', '.join(query)}")
        return cls(**options)

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
            if self.password is not None:
                login = [self.username, self.password] if self.username else [self.password]
                await connection.command("AUTH", *login)
            if self.db:
                await connection.command("SELECT", self.db)
        except BaseException:
            await stream.aclose()
            raise
        return connection

    async def _request(self, *args: bytes | str | int) -> Any:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            try:
                if self._connection is None:
                    with anyio.fail_after(self.connect_timeout):
                        self._connection = await self._connect()
                with anyio.fail_after(self.timeout):
                    return await self._connection.command(*args)
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
        found = await self._request("MGET", *(self.prefix + key for key in keys))
        if not isinstance(found, list):
            raise RedisError(f"MGET answered {type(found).__name__}")
        return [item if isinstance(item, bytes) else None for item in found]

    async def _put(self, key: str, data: bytes) -> None:
        await self._request("SET", self.prefix + key, data, "EX", self.ttl)

    async def ping(self) -> bool:
        """Whether the store answers now (for ``asynccomp cache stats``)."""
        try:
            return bool(await self._request("PING") == b"PONG")
        except Exception:
            return False

    async def aclose(self) -> None:
        await self._drop()
