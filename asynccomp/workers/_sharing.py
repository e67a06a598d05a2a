"""Templates shared by this user's processes (:attr:`PoolSettings.share_in`): where one
listens, and ending them.

A shared template's socket is named after everything that decides what it holds: the
user, the interpreter, the folder and environment it runs in, the initializers it ran
(pickled), and the code it ran them with (asynccomp's files, and what each import
folder has installed: distributions with their versions, and path files). A process that would
make a different template finds another name, and starts its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import socket
from collections.abc import Sequence
from pathlib import Path

from . import _frames
from ._settings import PoolSettings

__all__ = (
    "OWN_VARIABLES",
    "SHARED_TEMPLATES_ENV",
    "share_path",
    "shared_folder",
    "sharing_enabled",
    "stop_shared",
)

#: ``off`` (or ``0``, ``no``, ``false``): no template is shared, each pool starts its own.
SHARED_TEMPLATES_ENV = "ASYNCCOMP_SHARED_TEMPLATES"

#: asynccomp's own variables: read as they are used, never at import, so not part of a
#: template's name; each forked worker has its own pool's (:mod:`._child`).
OWN_VARIABLES = "ASYNCCOMP_"

# Variables a shell changes between two commands, which no import reads.
_NOISE = frozenset(("_", "PWD", "OLDPWD", "SHLVL", "PS1", "COLUMNS", "LINES", "TERM"))
_NOISE_PREFIXES = ("SSH_", "TMUX", "PYTEST_", "XDG_SESSION", OWN_VARIABLES)

_PACKAGE = Path(__file__).resolve().parent.parent


def sharing_enabled() -> bool:
    """Whether ``$ASYNCCOMP_SHARED_TEMPLATES`` lets pools share templates (it does unless
    it says ``off``)."""
    from ..config._modes import switched_on  # the words every "off" setting takes

    return switched_on(SHARED_TEMPLATES_ENV)


def shared_folder() -> Path | None:
    """Where asynccomp's tuner pools (TileLang's lowering, Triton's compiles,
    MetaSchedule's builder) share their templates: this user's compile-server folder
    (private, mode 0700: :func:`asynccomp.server.private_folder`); ``None`` where
    ``$ASYNCCOMP_SHARED_TEMPLATES`` is ``off`` or that folder cannot be used."""
    if not sharing_enabled():
        return None
    from ..errors import ServerError
    from ..server._paths import private_folder

    try:
        return private_folder()
    except ServerError:
        return None


def _installed(folder: str) -> str:
    """What is installed in an import folder: its distributions' metadata (named with
    their versions) and path files, which an install, upgrade or removal changes and
    a script's own outputs beside it do not."""
    try:
        names = sorted(
            p.name
            for p in Path(folder or ".").iterdir()
            if p.name.endswith((".dist-info", ".egg-info", ".pth"))
        )
    except OSError:
        names = []
    return f"{folder} {' '.join(names)}"


def _stat(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path} -"
    return f"{path} {st.st_mtime_ns} {st.st_size}"


def share_path(settings: PoolSettings, environ: dict[str, str], path: Sequence[str]) -> Path | None:
    """Where the template of ``settings`` (started with ``environ``, by a process whose
    import path is ``path``) is shared, or ``None`` where it is not (no
    :attr:`~PoolSettings.share_in`, sharing turned off, a socket path too long,
    initializers that do not pickle)."""
    if settings.share_in is None or not sharing_enabled():
        return None
    try:
        initializers = _frames.dumps(list(settings.initializers))
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    digest = hashlib.sha256()
    for part in (
        str(os.getuid()),
        settings.name,
        settings.python,
        settings.cwd or str(Path.cwd()),
        *sorted(
            f"{k}={v}"
            for k, v in environ.items()
            if k not in _NOISE and not k.startswith((*_NOISE_PREFIXES, *settings.task_variables))
        ),
        *(_stat(p) for p in sorted(_PACKAGE.rglob("*.py"))),
        *(_installed(p) for p in path),
    ):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(initializers)
    where = settings.share_in / f"tpl-{digest.hexdigest()[:16]}.sock"
    # A Unix socket's path has at most 107 bytes (Linux).
    return where if len(os.fsencode(where)) <= 107 else None


def stop_shared(folder: Path) -> int:
    """Tell every template shared in ``folder`` to end (their workers end with the
    processes that use them); how many were told."""
    told = 0
    for path in sorted(folder.glob("tpl-*.sock")):
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(5.0)  # a template that never answers holds nobody up
            try:
                sock.connect(str(path))
                sock.recv(1 << 16)  # its greeting
                sock.send(pickle.dumps(("stop",)))
            except OSError:
                continue
            with contextlib.suppress(OSError):
                sock.recv(1)  # it ended: its end of the socket closed
            told += 1
    return told
