"""The permissions of everything asynccomp writes: private to the user by default.

Cached entries hold compile logs (which quote source lines), dump folders hold whole
sources, ``rerun.sh`` and intermediates, ``--json`` reports name every job: with
Debian's defaults (umask 022, home 0755) any local user could read them. So every file
and folder asynccomp makes gets the mode a *umask* gives, as ccache's ``umask`` setting
does, whatever the process's own umask: files ``0o666 & ~umask``, folders
``0o777 & ~umask``. The default, :data:`DEFAULT_UMASK` (``077``), keeps them to the
user (folders 0700, files 0600); ``002`` or ``007`` shares them with the group (a team's
cache folder: on purpose), ``022`` makes them readable by all as before.

The setting: ``Engine(umask=0o007)``, else ``$ASYNCCOMP_UMASK`` (octal, ``007``), else
077; the command line's ``--umask`` sets ``$ASYNCCOMP_UMASK`` for its process and the
compile server it starts (a server writes its cache with its own setting). Folders that
exist already keep their mode: only what asynccomp makes gets it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .errors import SettingsError

__all__ = (
    "DEFAULT_UMASK",
    "UMASK_ENV",
    "file_mode",
    "folder_mode",
    "make_folders",
    "open_new",
    "parse_umask",
    "set_mode",
    "umask_of",
    "write_new",
)

#: The environment variable that sets the umask (octal: ``077``, ``007``, ``022``).
UMASK_ENV = "ASYNCCOMP_UMASK"
#: Private to the user: folders 0700, files 0600.
DEFAULT_UMASK = 0o077

_PROBLEM = "must be a umask: an octal number from 000 to 777, such as 077 (private) or 007"


def parse_umask(value: object, what: str = "umask") -> int:
    """A umask from an int (``0o077``) or an octal string (``"077"``, ``"0o077"``);
    :class:`~asynccomp.SettingsError` naming ``what`` for anything else."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower().removeprefix("0o")
        if text and all(c in "01234567" for c in text):
            number = int(text, 8)
    if number is None or not 0 <= number <= 0o777:
        raise SettingsError(what, value, _PROBLEM)
    return number


def umask_of(given: int | None = None) -> int:
    """``given``, else ``$ASYNCCOMP_UMASK``, else :data:`DEFAULT_UMASK`."""
    if given is not None:
        return given
    env = os.environ.get(UMASK_ENV, "").strip()
    return parse_umask(env, UMASK_ENV) if env else DEFAULT_UMASK


def file_mode(umask: int) -> int:
    return 0o666 & ~umask


def folder_mode(umask: int) -> int:
    return 0o777 & ~umask


def make_folders(path: Path, umask: int) -> None:
    """``mkdir -p path``: each folder made here gets :func:`folder_mode` (made 0700
    first, so it is never more open than asked); existing ones keep theirs. Raises
    ``OSError`` as ``mkdir`` does (a file in the way: ``FileExistsError``)."""
    missing: list[Path] = []
    folder = path
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            if folder.is_dir():
                continue  # another process made it: theirs to set
            raise
        folder.chmod(folder_mode(umask))


def open_new(path: Path | str, flags: int, umask: int) -> int:
    """``os.open`` with ``O_CREAT``: a file it makes gets :func:`file_mode` (made 0600
    first); one that exists keeps its mode."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if flags & os.O_EXCL:
            raise
        return os.open(path, flags)
    try:
        os.fchmod(fd, file_mode(umask))
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_new(path: Path, data: bytes, umask: int) -> None:
    """Write ``data`` to ``path`` as a new file (one there is replaced in place, as
    ``write_bytes`` does) with :func:`file_mode`."""
    fd = open_new(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, umask)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    set_mode(path, umask)  # one that was there: this one's mode now


def set_mode(path: Path, umask: int, *, folder: bool = False) -> None:
    """Give ``path`` (a file, or a ``folder``) the mode ``umask`` says, if it can be
    changed (a file of another user's stays as it is)."""
    with contextlib.suppress(OSError):
        if not path.is_symlink():  # a link's target is not ours to change
            path.chmod(folder_mode(umask) if folder else file_mode(umask))
