"""Telling nvcc's verdict on a source from a failure that says nothing about it.

A cache may keep a failed compile (``Engine(cache_failures=True)``) only when it is the
compiler's verdict on the input: the same source and options fail again, anywhere. A
failed nvcc run is *not* that when nvcc or a tool of its was killed by a signal (the
out-of-memory killer, a user), or when the job's work folder failed under it (a full
disk, no inodes left). Those are the job's ``internal`` status, with a cause, and are
never cached (issue 19).

How they show, measured with nvcc 13.0 on real tmpfs mounts (``tests/filesystems.py``)
and real signals: nvcc runs cicc through ``sh -c``, so a killed cicc makes nvcc exit
with the shell's ``128 + N`` and a log of ``Killed``; other tools give ``nvcc error :
'ptxas' died due to signal 9``; the host compiler's own programs, killed under gcc,
``gcc: fatal error: Killed signal terminated program cc1plus`` and status 1 (found by
the fault soak, ``benchmarks/server/soak.py``). A full work folder shows, depending on
which file did not fit, as ``No space left on device`` (gcc), ``nvcc fatal : Could not open output
file ...tmpxft_...``, ``Failed to preprocess host compiler properties`` (no file named),
``Catastrophic error: cannot open generated C file``, ``kernel.cu(4): catastrophic
error: cannot open module id file "...tmpxft_..."`` (attributed to the source!), or
``ptxas fatal : Output file '...tmpxft_...cubin' could not be opened``: a tool failing
to open, create or write a file *in the work folder*, or the folder's file system out
of space or inodes, is the folder's failure.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ("FolderSpace", "LOW_SPACE", "folder_space", "not_a_verdict")

#: Fewer bytes than this free where nvcc worked, and its failure is taken for the
#: disk's: one preprocessed source alone is megabytes.
LOW_SPACE = 16 * 1024 * 1024
#: Fewer inodes than this free: nvcc makes a dozen temporary files per job.
LOW_INODES = 64


@dataclass(frozen=True)
class FolderSpace:
    """What is left on the work folder's file system."""

    bytes_free: int
    inodes_free: int | None  # None: the file system does not count inodes

    @property
    def exhausted(self) -> bool:
        few_inodes = self.inodes_free is not None and self.inodes_free < LOW_INODES
        return self.bytes_free < LOW_SPACE or few_inodes


def folder_space(folder: Path) -> FolderSpace | None:
    """Blocking: what is left for this user on ``folder``'s file system (``None``:
    it cannot be asked)."""
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    counted = info.f_files > 0  # btrfs and others report no inode limit as 0
    return FolderSpace(info.f_bavail * info.f_frsize, info.f_favail if counted else None)


# nvcc's words for a tool that a signal killed, when nvcc ran it itself.
_TOOL_KILLED = re.compile(r"^nvcc error\s*: '([^']+)' died due to signal (\d+)", re.M)
_TOOL_DUMPED = re.compile(r"^nvcc error\s*: '([^']+)' core dumped", re.M)
# The host compiler's driver for a program of its that a signal killed (nvcc reports
# only the driver's status 1): gcc says ``gcc: fatal error: Killed signal terminated
# program cc1plus`` (strsignal's words; ``internal compiler error:`` for a crash).
_HOST_TOOL_KILLED = re.compile(
    r"^\S+: (?:fatal error|internal compiler error): (.+?) signal terminated program (\S+)",
    re.M,
)
# A tool failing on a file (the file must be the work folder's to count, see below).
_FILE_FAILED = re.compile(
    r"(?i)\b(?:cannot|can't|could not|couldn't|unable to|failed to)\s+(?:open|create|write)"
    r"|\bcould not be (?:opened|created|written)\b"
)
# nvcc failing on its own files without naming one.
_HOST_PROPERTIES = re.compile(
    r"^nvcc (?:fatal|error)\s*: Failed to \w+ (?:for \w+ )?host compiler properties", re.M
)
_ERRNO_WORDS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}
# A diagnostic on the program (``file(12): error: ...``) or a line of it quoted
# (indented): ``#error No space left on device`` is the user's verdict.
_ABOUT_THE_SOURCE = re.compile(r"^(?:\s|\S+\(\d+\): )")


def not_a_verdict(
    returncode: int,
    log: str,
    workdir: Path,
    own_files: tuple[str, ...],
    space: FolderSpace | None,
) -> tuple[str, BaseException] | None:
    """Why a failed nvcc run (``returncode != 0``) says nothing about the source, and
    the cause to give its error; ``None`` when it is the compiler's verdict.

    ``own_files``: the names nvcc writes in ``workdir`` for the job (binary, dependency
    file), which a log may name relative to it; ``space``: what the folder's file system
    had left after the run."""
    if returncode < 0:
        return (
            f"nvcc was killed by {_signal_name(-returncode)}",
            subprocess.CalledProcessError(returncode, "nvcc"),
        )
    killed = _TOOL_KILLED.search(log)
    if killed is not None:
        tool, number = killed.group(1), int(killed.group(2))
        return (
            f"nvcc's {tool} was killed by {_signal_name(number)}",
            subprocess.CalledProcessError(-number, tool),
        )
    host = _host_tool_killed(log)
    if host is not None:
        return host
    dumped = _TOOL_DUMPED.search(log)
    if dumped is not None:
        tool = dumped.group(1)
        return f"nvcc's {tool} crashed", subprocess.SubprocessError(f"'{tool}' core dumped")
    if 128 < returncode <= 128 + 64:  # a shell's status for a child killed by a signal
        number = returncode - 128
        return (
            f"a tool nvcc ran was killed by {_signal_name(number)} (nvcc exited with "
            f"status {returncode})",
            subprocess.CalledProcessError(-number, "a tool run by nvcc"),
        )
    failure = _folder_failure(log, workdir, own_files)
    if failure is not None or (space is not None and space.exhausted):
        line = failure or log.strip().rpartition("\n")[2]
        said = _errno_in(line)
        if said is None and space is not None and space.exhausted:
            said = errno.ENOSPC
        cause = OSError(said, os.strerror(said)) if said is not None else OSError(line)
        where = "" if space is None else f" ({_describe(space)} left there)"
        return f"nvcc's work folder failed{where}: {line.strip()}", cause
    return None


def _host_tool_killed(log: str) -> tuple[str, BaseException] | None:
    """A program of the host compiler's killed by a signal, as its driver says."""
    found = _HOST_TOOL_KILLED.search(log)
    if found is None:
        return None
    words, tool = found.group(1), found.group(2)
    number = _SIGNAL_WORDS.get(words)
    said = _signal_name(number) if number is not None else f"a signal ({words})"
    return (
        f"nvcc's host compiler {tool} was killed by {said}",
        subprocess.CalledProcessError(-number if number is not None else 1, tool),
    )


def _folder_failure(log: str, workdir: Path, own_files: tuple[str, ...]) -> str | None:
    """The first line of ``log`` that says a file of the work folder failed."""
    names = (str(workdir), "tmpxft_", *own_files)
    host = _HOST_PROPERTIES.search(log)
    for line in log.splitlines():
        if _errno_in(line) is not None and not _ABOUT_THE_SOURCE.match(line):
            return line
        if _FILE_FAILED.search(line) and any(name in line for name in names):
            return line
    return None if host is None else log[host.start() :].partition("\n")[0]


def _errno_in(line: str) -> int | None:
    for words, number in _ERRNO_WORDS.items():
        if words in line:
            return number
    return None


def _describe(space: FolderSpace) -> str:
    inodes = "" if space.inodes_free is None else f", {space.inodes_free} inodes"
    return f"{space.bytes_free} bytes{inodes}"


# strsignal's words (``Killed``, ``Terminated``, ``Segmentation fault``) to signals.
_SIGNAL_WORDS = {signal.strsignal(s): int(s) for s in signal.Signals if signal.strsignal(s)}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
