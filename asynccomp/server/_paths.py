"""Where the compile server of this user and toolkit lives: a private folder, a socket,
a lock and a log, all named after the server's identity.

The folder is ``$ASYNCCOMP_SERVER_DIR``, else ``$XDG_RUNTIME_DIR/asynccomp``, else
``<tmp>/asynccomp-<uid>`` (``<tmp>``: ``$TMPDIR``, else ``/tmp``); of the last two, one
whose socket's path would be over a Unix socket's limit (a long ``$TMPDIR``) is passed
over for ``/tmp/asynccomp-<uid>``. It must belong to this user and be closed to everyone else
(mode 0700), as ssh insists for its own files: in a shared ``/tmp`` another user could
make the folder first and wait there with a socket of their own. Such a folder is not
used, and must not deny service either (no ``$XDG_RUNTIME_DIR`` under ``runuser``, in
containers, in cron jobs): when the ``<tmp>`` one is taken or open to others, the server
lives in a folder of this user's own instead, ``<user cache folder>/server-<host>``
(``~/.cache/asynccomp/server-<host>``: nobody else can make it first), with a
:class:`~asynccomp.ServerWarning` saying so. A folder named by ``$ASYNCCOMP_SERVER_DIR``
or ``--server-dir`` is the user's choice: one of another user's stays a
:class:`~asynccomp.ServerError`.

The identity (:func:`server_identity`) hashes the asynccomp version, the wire protocol
and the toolkit's fingerprint (:func:`~asynccomp.toolkit.toolkit_fingerprint`), so a
client only ever finds a server that compiles with the toolkit it would use itself.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from .._os import peer
from .._version import __version__
from .._warn import warn
from ..errors import ServerError, ServerWarning
from ..toolkit import toolkit_fingerprint
from ._protocol import PROTOCOL

__all__ = (
    "MAX_SOCKET_PATH",
    "SERVER_DIR_ENV",
    "ServerPaths",
    "check_socket_path",
    "own_folder",
    "peer_uid",
    "private_folder",
    "server_identity",
    "server_paths",
    "short_default_folder",
)

#: The longest path a Unix socket may have (Linux: 108 bytes with the final NUL).
MAX_SOCKET_PATH = 107

#: Overrides the folder the server's socket, lock and log live in.
SERVER_DIR_ENV = "ASYNCCOMP_SERVER_DIR"


def server_identity() -> str:
    """A short hash of (asynccomp version, protocol, toolkit fingerprint)."""
    text = f"asynccomp {__version__} protocol {PROTOCOL} toolkit {toolkit_fingerprint()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ServerPaths:
    """The files of one server: ``socket`` (mode 0600), ``lock`` (held by the running
    server: a second one cannot start), ``spawn`` (held by a client starting one, so
    that many clients start one server, not many) and ``log``."""

    folder: Path
    identity: str
    #: Where what outlives the server is kept, when not in ``folder``: a folder of the
    #: user's own (:func:`own_folder`) for a server in a temporary folder.
    keep: Path | None = None

    @property
    def socket(self) -> Path:
        return self.folder / f"server-{self.identity}.sock"

    @property
    def lock(self) -> Path:
        return self.folder / f"server-{self.identity}.lock"

    @property
    def spawn(self) -> Path:
        return self.folder / f"server-{self.identity}.spawn"

    @property
    def pch_hints(self) -> Path:
        """The precompiled headers this server's NVRTC workers made, remembered for the
        next server (:mod:`asynccomp.backends._nvrtc_pch_hints`): beside the socket in a
        folder the user chose, else in the user's own (the default folder is a
        temporary one: ``$XDG_RUNTIME_DIR``'s ends with the user's last login session,
        ``/tmp``'s at a reboot)."""
        return (self.keep or self.folder) / f"server-{self.identity}.pch-hints"

    @property
    def log(self) -> Path:
        return self.folder / f"server-{self.identity}.log"


#: The system's own temporary folder: the one place left for the server's folder when
#: ``$TMPDIR`` is too deep for a socket's path.
_SYSTEM_TMP = Path("/tmp")


def _fits(folder: Path) -> bool:
    """Whether a server's socket in ``folder`` has a path a Unix socket may have."""
    return len(os.fsencode(ServerPaths(folder, "0" * 16).socket)) <= MAX_SOCKET_PATH


def short_default_folder() -> Path:
    """The server folder when ``$ASYNCCOMP_SERVER_DIR`` is not set: the runtime folder's
    ``asynccomp``, else ``<tmp>/asynccomp-<uid>``, each only where a socket's path
    fits (a deep ``$TMPDIR``, as CI runners and build sandboxes set, would not), else
    ``/tmp/asynccomp-<uid>``: the clients and the server of a user find it alike."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir() and _fits(Path(runtime) / "asynccomp"):
        return Path(runtime) / "asynccomp"
    mine = f"asynccomp-{os.getuid()}"
    temporary = Path(tempfile.gettempdir()) / mine
    if _fits(temporary) or not _SYSTEM_TMP.is_dir():
        return temporary
    return _SYSTEM_TMP / mine


def _default_folder() -> tuple[Path, bool]:
    """The server folder the environment names, and whether it is one in a shared
    temporary folder (which another user may have made first)."""
    override = os.environ.get(SERVER_DIR_ENV)
    if override:
        return Path(override).expanduser().absolute(), False
    folder = short_default_folder()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return folder, not (runtime and folder == Path(runtime) / "asynccomp")


def own_folder() -> Path:
    """Where the server lives when the one in the shared temporary folder is taken:
    a folder in this user's cache folder (which nobody else can make first), one per
    machine (a home shared over the network holds sockets of several)."""
    host = socket.gethostname() or "host"
    safe_host = "".join(c if c.isalnum() or c in "-_." else "_" for c in host)[:40]
    return Path(platformdirs.user_cache_dir("asynccomp")) / f"server-{safe_host}"


class _NotPrivate(ServerError):
    """The folder exists but is not this user's alone (another user's, open, a link)."""


def _checked(folder: Path) -> Path:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.lstat()
    except FileExistsError as exc:  # a file (or a dangling link) of that name
        raise _NotPrivate(f"{folder} is not a folder; refusing to use it") from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ServerError(f"the compile server's folder {folder} cannot be made: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise _NotPrivate(f"{folder} is not a folder (a link?); refusing to use it")
    if st.st_uid != os.getuid():
        raise _NotPrivate(
            f"{folder} belongs to uid {st.st_uid}, not to this user ({os.getuid()}); "
            f"refusing to use it (set {SERVER_DIR_ENV} to a folder of your own)"
        )
    if st.st_mode & 0o077:
        raise _NotPrivate(
            f"{folder} is open to other users (mode {stat.S_IMODE(st.st_mode):04o}); "
            "refusing to use it (chmod 700 it)"
        )
    return folder


def private_folder(folder: Path | None = None) -> Path:
    """The server folder, created (0700) if missing, checked if not: it must be a real
    folder owned by this user that nobody else may enter. Raises :class:`ServerError`
    for a folder given (here or by ``$ASYNCCOMP_SERVER_DIR``) that is not; the default
    one in the shared temporary folder, taken, gives way to :func:`own_folder`, with a
    :class:`~asynccomp.ServerWarning`."""
    shared = False
    if folder is None:
        folder, shared = _default_folder()
    try:
        return _checked(folder)
    except _NotPrivate as exc:
        if not shared:
            raise ServerError(str(exc)) from None
        mine = own_folder()
        warn(f"the compile server's folder {exc}; using {mine} instead", ServerWarning)
        try:
            return _checked(mine)
        except _NotPrivate as taken:
            raise ServerError(str(taken)) from None


def check_socket_path(path: Path, hint: str = "") -> None:
    """Raise :class:`ServerError` if ``path`` cannot be a Unix socket's path (too long:
    the kernel would refuse it with an obscure error). ``hint`` says how to fix it."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise ServerError(
            f"the compile server's socket path {path} is {size} bytes, over the "
            f"{MAX_SOCKET_PATH} a Unix socket's path may have{hint}"
        )


def server_paths(folder: Path | None = None) -> ServerPaths:
    """The files of this user's server for this toolkit (the folder made and checked)."""
    checked = private_folder(folder)
    # The default folder is a temporary one, also where a client that starts the server
    # names it (--server-dir): what outlives the server goes to the user's own.
    temporary = not os.environ.get(SERVER_DIR_ENV) and (
        checked.resolve() == short_default_folder().resolve()
    )
    paths = ServerPaths(checked, server_identity(), own_folder() if temporary else None)
    check_socket_path(
        paths.socket,
        f": set {SERVER_DIR_ENV} (or --server-dir) to a shorter folder, e.g. "
        f"{short_default_folder()}",
    )
    return paths


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``),
    else ``None``. Both ends ask: the server refuses other users, and a client refuses a
    server of another user (a socket path can be anyone's)."""
    said = peer(sock)
    return None if said is None else said[1]
