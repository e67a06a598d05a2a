"""What asynccomp asks of the operating system, in one place.

- **Processes**: :func:`running` (one rule for every check of a pid: a zombie has ended,
  its work is over whoever reaps it: a detached server's parent is init, and an init
  that reaps lazily keeps a SIGKILLed server a zombie for seconds), :func:`stopped`
  (stopped by a signal), :func:`rss` (resident memory); each reads ``/proc/<pid>/stat``
  (or ``statm``) the one way.
- **Folders named after a process** (nvcc's work folders, NVRTC's worker folders and
  automatic precompiled headers): :func:`sweep_ended` removes those whose process has
  ended; :func:`empty_folder` is the folder compilers run in.
- **Sockets**: :func:`listening`, whether something accepts connections at a Unix
  socket's path.
- **Child interpreters** (NVRTC workers, warm workers, the detached compile server):
  :func:`python_path` and :func:`child_environ`, so a child imports the asynccomp its
  parent runs, from whatever folder it starts in.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import stat
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = (
    "child_environ",
    "empty_folder",
    "listening",
    "peer",
    "python_path",
    "rss",
    "running",
    "stopped",
    "sweep_ended",
)

# -- processes ---------------------------------------------------------------------------

_PROC = Path("/proc/self").is_dir()  # whether /proc answers for a process that exists


def _state(pid: int) -> bytes | None:
    """The state letter of ``/proc/<pid>/stat`` (``R``, ``S``, ``T``, ``Z``, ...), or
    ``None`` when there is no such file to read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            line = stat_file.read()
    except OSError:
        return None
    # The name, in parentheses, may hold anything: the state follows the last ")".
    fields = line.rpartition(b")")[2].split()
    return fields[0] if fields else None


def running(pid: int) -> bool:
    """Whether process ``pid`` (of any user) exists and has not ended (a zombie has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    state = _state(pid)
    if state is None:  # no /proc to ask (the kill said it exists), or it was reaped since
        return not _PROC
    return state not in (b"Z", b"X")


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (``T``; a debugger's ``t`` is not)."""
    return _state(pid) == b"T"


def rss(pid: int) -> int:
    """Process ``pid``'s resident memory in bytes (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# -- folders -----------------------------------------------------------------------------


def sweep_ended(root: str | Path, name: re.Pattern[str]) -> list[str]:
    """Blocking: remove the folders in ``root`` whose whole name matches ``name`` (its
    first group: the pid of the process that made them), that are this user's and real
    folders (never a link), and whose process is neither this one nor running (a pid a
    new process took since is left for later); the names removed (those gone after)."""
    uid, me = os.getuid(), os.getpid()
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        match = name.fullmatch(entry.name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid == me or running(pid):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue  # another user's, or not such a folder at all
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(entry.name)
    return removed


def empty_folder() -> str:
    """A folder that holds nothing and that nothing may be written to (made once per
    user, checked every time), for compilers to run in: NVRTC looks for a quoted
    ``#include`` in its process's working folder first, so an NVRTC worker process or
    a compile server working anywhere else could read a header of that folder's instead
    of the caller's (whose folder every job names as ``-I``, see
    :func:`asynccomp.backends._base.with_caller_folders`)."""
    path = Path(tempfile.gettempdir(), f"asynccomp-empty-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        path.mkdir(0o500)
    try:
        st = path.lstat()
        if (
            stat.S_ISDIR(st.st_mode)
            and st.st_uid == os.getuid()
            and not st.st_mode & 0o222
            and next(path.iterdir(), None) is None
        ):
            return str(path)
    except OSError:
        pass
    # Taken by someone else, or not empty: a fresh one (left behind, empty).
    fresh = Path(tempfile.mkdtemp(prefix="asynccomp-empty-"))
    fresh.chmod(0o500)
    return str(fresh)


# -- sockets -----------------------------------------------------------------------------


def listening(path: str | Path) -> bool:
    """Blocking: whether something accepts a connection at the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def peer(sock: socket.socket) -> tuple[int, int] | None:
    """The (pid, uid) of the process at the other end of a Unix socket (Linux
    ``SO_PEERCRED``), else ``None`` (the system cannot tell)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return int(pid), int(uid)


# -- child interpreters ------------------------------------------------------------------


def python_path(environ: Mapping[str, str] | None = None) -> str:
    """``$PYTHONPATH`` for a Python process started in another folder: asynccomp's own
    parent folder first (a source checkout imports too, and the child imports this
    asynccomp, not another one installed), then ``environ``'s entries (default: this
    process's), relative ones made absolute (they meant this process's working folder)."""
    package_parent = str(Path(__file__).resolve().parents[1])
    entries = [package_parent]
    given = (os.environ if environ is None else environ).get("PYTHONPATH", "")
    for entry in given.split(os.pathsep):
        if entry:
            entries.append(str(Path(entry).absolute()))
    return os.pathsep.join(dict.fromkeys(entries))


def child_environ(environ: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child interpreter: ``environ`` (default: this process's)
    with :func:`python_path`, and ``extra`` on top."""
    env = dict(os.environ if environ is None else environ)
    env["PYTHONPATH"] = python_path(env)
    env.update(extra)
    return env
