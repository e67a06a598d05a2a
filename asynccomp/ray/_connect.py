"""Joining a Ray cluster, never for longer than the engine's ``startup_timeout``.

``ray.init`` retries a cluster it cannot reach for minutes (past 400 s, issue 20): an
address in ``$RAY_ADDRESS`` that nothing listens on, a ``ray_current_cluster`` file left
by a head that has died. So, before Ray is asked, what it *would* connect to is worked
out with its own rules (:func:`bootstrap_address`) and probed over TCP with the timeout
(:func:`probe`): a closed port fails at once. An address that accepts connections but
never answers as Ray does is caught by the engine's wait instead
(:func:`asynccomp.ray._pool.connect_within`).

Ray's connection is one per process: the pools of every engine in this process share
it, and the last one to leave shuts it down if a pool opened it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ClusterError

__all__ = ("bootstrap_address", "connect", "disconnect", "import_ray", "probe")

_connection_lock = threading.Lock()
_connection_users = 0
_connection_ours = False


def import_ray() -> Any:
    """The ``ray`` module, or a ClusterError that says what to install."""
    try:
        import ray
    except ImportError as exc:
        raise ClusterError(
            f"compiling on a Ray cluster needs Ray ({exc}): pip install 'asynccomp[ray]'"
        ) from exc
    return ray


def bootstrap_address(address: str | None) -> tuple[str | None, str]:
    """What ``ray.init(address=address)`` connects to, and where that came from:
    ``(None, ...)`` when it starts a new local instance instead.

    Ray 2.60's rules (``ray._private.worker.init``): ``$RAY_ADDRESS`` stands in for
    ``None`` and ``"auto"``; an address with ``://`` goes to Ray Client; any other goes
    through ``ray._private.services.canonicalize_bootstrap_address``, which for ``None``
    and ``"auto"`` reads ``ray/ray_current_cluster`` in Ray's temporary folder
    (``$RAY_TMPDIR``, else ``$TMPDIR``, else ``/tmp``), written by ``ray start`` and left
    behind by a head that died, and for ``"auto"`` also looks for a GCS process running
    here. Raises ClusterError when ``"auto"`` finds nothing."""
    env = os.environ.get("RAY_ADDRESS")
    if env and address in (None, "auto"):
        address, given = env, f"{env!r} ($RAY_ADDRESS)"
    elif address in (None, "auto"):
        given = "the one Ray finds on this machine (ray start's ray_current_cluster)"
    else:
        given = repr(address)
    if address is not None and "://" in address:
        return address, given
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # another Ray: probe what was given, ray.init's wait is bounded
        return (None if address in (None, "auto") else address), given
    try:
        canonical: Any = canonicalize_bootstrap_address  # typed str, takes None too
        found: str | None = canonical(address)
    except Exception as exc:  # ConnectionError: "auto" found nothing; ValueError: bad
        raise ClusterError(f"could not find the Ray cluster at {given}: {exc}") from exc
    return found, given


def probe(address: str, timeout: float, given: str | None = None) -> None:
    """Blocking: fail fast when nothing listens at ``address`` (``HOST:PORT`` or
    ``ray://HOST:PORT``); ``given`` names it for people (default: the address)."""
    where = repr(address) if given is None else f"{given}, {address}"
    host, _, port = address.split("://")[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"bad Ray address {where}: expected HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ClusterError(f"could not reach the Ray cluster at {where}: {exc}") from exc


class _NotMainThread(logging.Filter):
    # ray.init sets a SIGTERM handler in the main thread only, and says so elsewhere: a
    # handler asynccomp would not want (the server has its own), so it connects in a
    # thread, and the warning is noise.
    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def connect(
    address: str | None, timeout: float, tell: Callable[[str], None] = lambda _: None
) -> None:
    """Blocking: join the cluster at ``address`` (or use this process's connection),
    probing it first with ``timeout``; ``tell`` hears where that is, for people, before
    Ray is asked. Pair with :func:`disconnect`."""
    global _connection_users, _connection_ours
    ray = import_ray()
    with _connection_lock:
        if ray.is_initialized():
            current = ray.get_runtime_context().gcs_address
            if address not in (None, "auto") and address.split("://")[-1] != current:
                raise ClusterError(
                    f"this process is already connected to the Ray cluster at {current}; "
                    f"it cannot also join {address!r} (Ray allows one per process)"
                )
        else:
            target, given = bootstrap_address(address)
            if target is not None:
                tell(f"{given}, {target}" if given != repr(target) else given)
                probe(target, timeout, given)
            quiet = _NotMainThread()
            logging.getLogger("ray._private.worker").addFilter(quiet)
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    configure_logging=False,
                )
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ...
                where = "a new local Ray instance" if target is None else given
                raise ClusterError(f"could not reach the Ray cluster at {where}: {exc}") from exc
            finally:
                logging.getLogger("ray._private.worker").removeFilter(quiet)
            _connection_ours = _connection_users == 0
        _connection_users += 1


def disconnect() -> None:
    """Blocking: leave the cluster (Ray shuts down with the last user, if ours)."""
    global _connection_users, _connection_ours
    with _connection_lock:
        _connection_users -= 1
        if _connection_users == 0 and _connection_ours:
            _connection_ours = False
            import_ray().shutdown()
