"""A compiler that is a program (nvcc, ptxas): one subprocess per running job.

Each job runs in its own fresh temporary folder (the compiler writes intermediates next
to its output), which is also the program's ``TMPDIR``, so nvcc's ``tmpxft_*`` files go
there too; stdout and stderr are captured together in one log. The program runs under a
small guard process (:mod:`._nvcc_guard`), the leader of a new process group, so that a
timeout or a cancellation kills it together with the children it spawned (nvcc's cicc,
ptxas, fatbinary), and so that they die with the engine's process too, however it ends.
The folder is removed in every case, and the folders of engines killed before they could
remove theirs are swept as an engine starts (:mod:`._workdirs`).

Only the compiler's verdict on the source is status ``failed`` (the one failure a cache
may keep). What says nothing about the source is ``internal``, with its cause: the
job's own files failing (a full disk, for the folder or for the intermediates), a
program that could not be started (``EACCES``, ``EAGAIN``, ``ENOMEM``), the program or
one of its tools killed by a signal.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import anyio
import anyio.abc
import anyio.to_thread

from ._base import BackendOutput, CompilerBackend, PreparedCompile
from ._nvcc_failures import folder_space, not_a_verdict
from ._nvcc_guard import NOT_STARTED
from ._workdirs import make_work_folder, sweep_work_folders

__all__ = ("ProgramBackend",)


def _kill_group(process: anyio.abc.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ProgramBackend(CompilerBackend):
    """A compiler run as a program, one subprocess per running job (the engine bounds
    how many run at once). ``PreparedCompile.options`` is its whole argv, with file
    names relative to the job's work folder: the source is ``prepared.filename``, the
    binary ``prepared.binary_name``, and a make-style dependency file ``<stem>.d``, if
    the program writes one, lists the files it read."""

    runs_program = True
    #: The program's name, in messages and in its work folders' names
    #: (``asynccomp-<tool>-<pid>-*``, :mod:`._workdirs`).
    tool: ClassVar[str]

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        # The work folders of engines killed before they could remove theirs; in the
        # background (a temporary folder may hold many entries), never in a job's way.
        task_group.start_soon(_sweep)

    def explain(self, prepared: PreparedCompile, log: str) -> str | None:
        """A failure's message in the user's terms, when the tool's own needs one (a
        refusal that is not the source's fault: it names what works instead)."""
        return None

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        # File work goes to threads: sources and fatbins run to megabytes, and the event
        # loop serves every other job meanwhile.
        try:
            workdir = await anyio.to_thread.run_sync(_make_workdir, self.tool, prepared)
        except OSError as exc:
            message = f"could not set up {self.tool}'s work folder: {exc}"
            return BackendOutput("internal", None, "", message, cause=exc)
        try:
            out = await self._run_in(workdir, prepared)
            if prepared.keep_dir is not None:
                out = await anyio.to_thread.run_sync(_move_intermediates, workdir, prepared, out)
            return out
        finally:
            with anyio.CancelScope(shield=True):  # the folder goes, cancelled or not
                await anyio.to_thread.run_sync(shutil.rmtree, workdir, True)

    async def _run_in(self, workdir: Path, prepared: PreparedCompile) -> BackendOutput:
        chunks: list[bytes] = []
        argv = list(prepared.options)
        # The guard tells on this pipe why nvcc could not be started (its errno).
        report, report_end = os.pipe()
        try:
            process = await anyio.open_process(
                [sys.executable, "-I", "-S", _GUARD, str(os.getpid()), str(report_end), *argv],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(report_end,),
                # nvcc's own temporaries (tmpxft_*) go to the job's folder, removed with it.
                env={**os.environ, "TMPDIR": str(workdir)},
            )
        except OSError as exc:
            os.close(report)
            return BackendOutput(
                "internal", None, "", f"could not start {self.tool}: {exc}", cause=exc
            )
        finally:
            os.close(report_end)
        try:
            with anyio.move_on_after(prepared.timeout) as deadline:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process, chunks)
                    await process.wait()
                    # Tools left by an nvcc that was killed hold the output pipe open
                    # (the log would wait for them): they go now.
                    _kill_group(process)
        finally:
            if process.returncode is None or deadline.cancelled_caught:
                _kill_group(process)
            with anyio.CancelScope(shield=True):
                await process.aclose()
            _kill_group(process)  # nothing of the group may outlive the job
            said = _read_report(report)
        log = b"".join(chunks).decode("utf-8", errors="replace")
        if deadline.cancelled_caught:
            return BackendOutput("timeout", None, log, f"{self.tool} was killed")
        code = process.returncode
        assert code is not None  # it was waited for (else the timeout or a cancel)
        if code == NOT_STARTED and said is not None:
            error = OSError(said, os.strerror(said), argv[0])
            return BackendOutput(
                "internal", None, log, f"could not start {self.tool}: {error}", cause=error
            )
        if code != 0:
            space = await anyio.to_thread.run_sync(folder_space, workdir)
            own = (prepared.binary_name, _stem(prepared) + ".d")
            transient = not_a_verdict(code, log, workdir, own, space)
            if transient is not None:
                message, cause = transient
                return BackendOutput("internal", None, log, message, cause=cause)
            why = self.explain(prepared, log) or f"{self.tool} exited with status {code}"
            return BackendOutput("failed", None, log, why)
        try:
            binary, deps = await anyio.to_thread.run_sync(_read_output, workdir, prepared)
        except OSError as exc:
            return BackendOutput(
                "internal", None, log, f"could not read {self.tool}'s output: {exc}", cause=exc
            )
        if not binary:
            return BackendOutput(
                "empty", None, log, f"{self.tool} exited with status 0 but wrote nothing"
            )
        return BackendOutput("ok", binary, log, dependencies=deps)


_GUARD = str(Path(__file__).with_name("_nvcc_guard.py"))


async def _sweep() -> None:
    # Abandoned at close: the engine does not wait for a sweep.
    await anyio.to_thread.run_sync(sweep_work_folders, abandon_on_cancel=True)


def _stem(prepared: PreparedCompile) -> str:
    return prepared.filename.rsplit(".", 1)[0]


def _read_report(fd: int) -> int | None:
    """The errno the guard wrote (it could not start nvcc), or ``None``; closes ``fd``.
    Never blocks: the guard has ended, and nothing else holds the pipe's other end."""
    try:
        os.set_blocking(fd, False)
        text = os.read(fd, 32)
    except OSError:  # BlockingIOError included: nothing was written
        return None
    finally:
        os.close(fd)
    return int(text) if text.isdigit() else None


def _make_workdir(tool: str, prepared: PreparedCompile) -> Path:
    workdir = make_work_folder(tool)
    try:
        (workdir / prepared.filename).write_bytes(
            prepared.source.encode("utf-8", "surrogateescape")
        )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return workdir


def _read_output(workdir: Path, prepared: PreparedCompile) -> tuple[bytes, tuple[str, ...] | None]:
    """The binary (empty if none was written), and the files nvcc said it read (outside
    its work folder; ``None`` when it wrote no dependency file)."""
    try:
        binary = (workdir / prepared.binary_name).read_bytes()
    except FileNotFoundError:
        binary = b""
    depfile = workdir / (_stem(prepared) + ".d")
    try:
        listed = _parse_depfile(depfile.read_text(errors="surrogateescape"))
    except FileNotFoundError:
        return binary, None
    inside = str(workdir.resolve())
    deps = []
    for name in listed:
        path = os.path.normpath(workdir / name)
        if not os.path.realpath(path).startswith(inside + os.sep):
            deps.append(path)
    return binary, tuple(deps)


def _parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make-style dependency file (nvcc ``-MMD -MF``)."""
    body = text.replace("\\\n", " ")
    paths: list[str] = []
    for line in body.splitlines():
        if ":" not in line:
            continue
        _, _, rest = line.partition(": ")
        if not rest:
            _, _, rest = line.partition(":")
        # Spaces inside a path are escaped with a backslash.
        for word in re.split(r"(?<!\\) +", rest.strip()):
            if word:
                paths.append(word.replace("\\ ", " "))
    return paths


def _move_intermediates(
    workdir: Path, prepared: PreparedCompile, out: BackendOutput
) -> BackendOutput:
    assert prepared.keep_dir is not None
    skip = {prepared.filename, prepared.binary_name}
    try:
        for item in workdir.iterdir():
            if item.name not in skip:
                shutil.move(str(item), Path(prepared.keep_dir) / item.name)
    except OSError as exc:
        return replace(out, warnings=(*out.warnings, f"intermediates not kept: {exc}"))
    return out


async def _drain(process: anyio.abc.Process, chunks: list[bytes]) -> None:
    assert process.stdout is not None
    async for chunk in process.stdout:
        chunks.append(chunk)
