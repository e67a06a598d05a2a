"""The remote store a URL, or ``$ASYNCCOMP_REMOTE_CACHE``, names: the one place that
knows every kind of store (each a :class:`~asynccomp.cache.RemoteCache` in a module of
its own: :mod:`._redis`), so that no store's module imports another's."""

from __future__ import annotations

import os

from .._warn import warn
from ..errors import InvalidJob
from ._auth import RemoteAuth
from ._redis import RedisCache
from ._remote import REMOTE_CACHE_ENV, RemoteCache, RemoteCacheWarning, redacted_url

__all__ = ("remote_cache_from_environment", "remote_cache_from_url")


def remote_cache_from_url(url: str, *, auth: RemoteAuth | None = None) -> RemoteCache:
    """The remote store ``url`` names: ``redis://[user:password@]host[:port][/db]``,
    ``rediss://...`` (TLS), ``unix:///path/to/redis.sock[?db=N]``; options as query
    parameters: ``ttl`` (seconds, default 7 days), ``max_entry`` (bytes), ``timeout``
    (seconds per request, default 1). ``auth``: the team's key (default: from the
    environment, see :class:`RemoteAuth`).

    Raises:
        InvalidJob: the URL does not parse, names an unknown store, has a bad value
            (port 0, ``ttl`` <= 0, ``timeout`` 0, infinite or NaN...), or there is no
            key. The URL in the error has its password hidden.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidJob("remote_cache", url, "must be a URL such as redis://localhost:6379/0")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return RedisCache.from_url(url, auth=auth)
    raise InvalidJob(
        "remote_cache",
        redacted_url(url),
        "unknown store: expected redis://, rediss:// or unix:// (Redis)",
    )


def remote_cache_from_environment(*, strict: bool) -> RemoteCache | None:
    """The remote store ``$ASYNCCOMP_REMOTE_CACHE`` names, keyed from the environment;
    ``None`` when it is unset or empty.

    ``strict``: a bad setting (a bad URL, no key, a refused key file) raises
    :class:`InvalidJob`; otherwise it issues one :class:`RemoteCacheWarning` saying
    why and gives ``None``: compiles go on with the local tiers (what a library that
    compiles behind its users' backs, such as the TVM facade, wants).
    """
    url = os.environ.get(REMOTE_CACHE_ENV, "").strip()
    if not url:
        return None
    try:
        return remote_cache_from_url(url)
    except InvalidJob as exc:
        if strict:
            raise
        warn(
            f"${REMOTE_CACHE_ENV} is not used ({exc}); compiling with the local cache alone",
            RemoteCacheWarning,
        )
        return None
