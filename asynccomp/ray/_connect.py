"""Joining a Ray cluster, never for longer than the engine's ``startup_timeout``.

``ray.init`` retries a cluster it cannot reach for minutes (past 400 s, issue 20): an
address in ``$RAY_ADDRESS`` that nothing listens on, a ``ray_current_cluster`` file left
by a head that has died. So, before Ray is asked, what it *would* connect to is worked
out with its own rules (:func:`bootstrap_address`) and probed over TCP with the timeout
(:func:`probe`): a closed port fails at once. An address that accepts connections but
never answers as Ray does is caught by the engine's wait instead
(:func:`connect_within`, in the process's one Ray thread).

Ray's connection is one per process: the pools of every engine in this process share
it, and the last one to leave shuts it down if a pool opened it.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from .._wakers import waker
from ..errors import ClusterError

__all__ = (
    "Joining",
    "bootstrap_address",
    "connect",
    "connect_within",
    "disconnect",
    "import_ray",
    "probe",
    "ray_calls_pending",
)

_connection_lock = threading.Lock()
_connection_users = 0
_connection_ours = False


def import_ray() -> Any:
    """The ``ray`` module, or a ClusterError that says what to install."""
    try:
        import ray
    except ImportError as exc:
        raise ClusterError(
            f"compiling on a Ray cluster needs Ray ({exc}): pip install ray "
            "(in asynccomp's checkout: pip install '.[ray]')"
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


class Joining(Protocol):
    """What :func:`connect_within` joins a cluster for (an
    :class:`~asynccomp.ray._pool.ActorPool`)."""

    startup_timeout: float
    cluster: str

    def connect(self, joined: Callable[[], None]) -> None: ...

    def abandon(self) -> bool: ...

    def kill_all(self) -> None: ...


_ray_calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_ray_thread: threading.Thread | None = None
_ray_thread_lock = threading.Lock()
_ray_pending = 0  # calls queued or running in the Ray thread


def _in_ray_thread(call: Callable[[], None]) -> None:
    """Run ``call`` in this process's one Ray thread: a daemon thread that lives as long
    as the process. Not a thread per connect: a local Ray instance that ``ray.init``
    starts (``address=None``) shares its fate with the *thread* that started it (its
    processes get PR_SET_PDEATHSIG), so a thread that ended after connecting took the
    instance's GCS with it, and every later Ray call waited 60 s, then aborted."""
    global _ray_thread, _ray_pending
    with _ray_thread_lock:
        _ray_pending += 1
        if _ray_thread is None or not _ray_thread.is_alive():
            _ray_thread = threading.Thread(
                target=_serve_ray_calls, name="asynccomp-ray", daemon=True
            )
            _ray_thread.start()
    _ray_calls.put(call)


def _serve_ray_calls() -> None:
    global _ray_pending
    while True:
        call = _ray_calls.get()
        try:
            call()
        finally:
            with _ray_thread_lock:
                _ray_pending -= 1


def ray_calls_pending() -> int:
    """Connects queued or under way in the Ray thread (one abandoned by an engine that
    gave up on it included)."""
    with _ray_thread_lock:
        return _ray_pending


async def connect_within(pool: Joining) -> None:
    """Run ``pool.connect`` in a daemon thread of its own, waiting at most the pool's
    startup timeout for it to join the cluster (ClusterError past it), then for its
    actors (bounded by the same timeout in ``ActorPool._start``).

    ``ray.init`` cannot be interrupted, and may not return for many minutes: the thread
    is abandoned (``pool.abandon()``), and whenever it returns it leaves what it
    joined. A daemon thread, not one of anyio's, which the interpreter waits for as it
    exits: a command line that gave up on a cluster must still end."""
    joined, finished = anyio.Event(), anyio.Event()
    wake_joined, wake_finished = waker(joined), waker(finished)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            pool.connect(wake_joined)
        except BaseException as exc:  # handed to the engine, or dropped if abandoned
            failed.append(exc)
        finally:
            wake_joined()
            wake_finished()

    _in_ray_thread(run)
    try:
        with anyio.move_on_after(pool.startup_timeout):
            await joined.wait()
        if not joined.is_set() and pool.abandon():
            raise ClusterError(
                f"could not reach the Ray cluster at {pool.cluster}: Ray did not connect "
                f"within {pool.startup_timeout:g} s (startup_timeout)"
            )
        await finished.wait()
    except anyio.get_cancelled_exc_class():
        if not pool.abandon():  # it had just finished: the engine will not close it
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pool.kill_all)
        raise
    if failed:
        raise failed[0]
