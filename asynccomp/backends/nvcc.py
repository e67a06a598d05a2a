"""nvcc as concurrent subprocesses.

Each job runs in its own fresh temporary folder (nvcc writes intermediates next to its
output), which is also nvcc's ``TMPDIR``, so its ``tmpxft_*`` files go there too; stdout
and stderr are captured together in one log. nvcc is started as the leader of a new
process group so that a timeout or a cancellation can kill it together with the
cicc/ptxas/fatbinary children it spawned; the folder is removed in every case. A failure
of the job's own files (a full disk) is that job's ``internal`` status, never an
exception that would cost the batch.

Where an nvcc option is rendered: :meth:`NvccBackend.prepare`, here (with
:func:`._base.add_shared_options` for the two NVRTC spells alike), and nowhere else.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread

from ..errors import ToolkitNotFound
from ..job import CompileJob, parse_arch
from ._base import (
    BackendOptions,
    BackendOutput,
    CompilerBackend,
    PreparedCompile,
    add_shared_options,
    safe_stem,
    with_caller_folders,
)

__all__ = ("NvccBackend", "nvcc_arch_flags")


def nvcc_arch_flags(arch: str, output: str) -> list[str]:
    """``-gencode``/``-arch`` flags for ``arch`` (``sm_90a`` or ``compute_90a``) and format."""
    family, number, suffix = parse_arch(arch)
    virtual, real = f"compute_{number}{suffix}", f"sm_{number}{suffix}"
    if output == "ptx":
        return [f"-arch={virtual}"]
    if output == "cubin":
        return [f"-arch={real}"]
    # fatbin: SASS for an sm_ arch (TVM's form); PTX only when a compute_ arch was asked for.
    code = virtual if family == "compute" else real
    return ["-gencode", f"arch={virtual},code={code}"]


def _kill_group(process: anyio.abc.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class NvccBackend(CompilerBackend):
    """nvcc, one subprocess per running job; the engine bounds how many run at once."""

    name = "nvcc"

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        nvcc = self.toolkit.nvcc
        if nvcc is None:
            raise ToolkitNotFound(
                "nvcc was not found; searched: "
                + "; ".join(self.toolkit.searched)
                + ". Set CUDA_PATH to a CUDA toolkit, put nvcc on PATH, or pip install "
                "nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm nvidia-cuda-runtime "
                "nvidia-cuda-cccl",
                searched=self.toolkit.searched,
                job=job,
            )
        output = job.output_format
        filename = f"{safe_stem(job.name)}.cu"
        argv = [str(nvcc)]
        if job.exact_options:
            argv += job.options
        else:
            argv += [f"--{output}", "-O3", *nvcc_arch_flags(options.arch, output)]
            if output != "ptx":
                argv.append("--ptxas-options=-v")  # the resource report, always
            argv += job.options
        argv = with_caller_folders(argv, job.source, options.cwd)
        add_shared_options(argv, options)
        if options.keep_intermediates:
            # Kept in the job's own temp folder and moved to keep_dir afterwards: a dump
            # folder that cannot be written must not fail the compile.
            argv.append("--keep")
        stem = filename[: -len(".cu")]
        if not job.exact_options:
            # The headers it read outside the system's folders, for the cache (the
            # output is the same with or without: tested).
            argv += ["-MMD", "-MF", f"{stem}.d"]
        argv += ["-o", f"{stem}.{output}", filename]
        return PreparedCompile(
            backend=self.name,
            output=output,
            arch=options.arch,
            source=job.source,
            filename=filename,
            options=tuple(argv),
            timeout=job.timeout,
        )

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        # File work goes to threads: sources and fatbins run to megabytes, and the event
        # loop serves every other job meanwhile.
        try:
            workdir = await anyio.to_thread.run_sync(_make_workdir, prepared)
        except OSError as exc:
            return BackendOutput(
                "internal", None, "", f"could not set up nvcc's work folder: {exc}"
            )
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
        try:
            process = await anyio.open_process(
                list(prepared.options),
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # nvcc's own temporaries (tmpxft_*) go to the job's folder, removed with it.
                env={**os.environ, "TMPDIR": str(workdir)},
            )
        except OSError as exc:
            return BackendOutput("failed", None, str(exc), f"could not start nvcc: {exc}")
        try:
            with anyio.move_on_after(prepared.timeout) as deadline:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process, chunks)
                    await process.wait()
        finally:
            if process.returncode is None or deadline.cancelled_caught:
                _kill_group(process)
            with anyio.CancelScope(shield=True):
                await process.aclose()
        # A crashed child may still hold the group; nothing of it may outlive the job.
        _kill_group(process)
        log = b"".join(chunks).decode("utf-8", errors="replace")
        if deadline.cancelled_caught:
            return BackendOutput("timeout", None, log, "nvcc was killed")
        if process.returncode != 0:
            return BackendOutput(
                "failed", None, log, f"nvcc exited with status {process.returncode}"
            )
        try:
            binary, deps = await anyio.to_thread.run_sync(_read_output, workdir, prepared)
        except OSError as exc:
            return BackendOutput("internal", None, log, f"could not read nvcc's output: {exc}")
        if not binary:
            return BackendOutput("empty", None, log, "nvcc exited with status 0 but wrote nothing")
        return BackendOutput("ok", binary, log, dependencies=deps)


def _make_workdir(prepared: PreparedCompile) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="asynccomp-nvcc-"))
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
    depfile = workdir / (prepared.filename[: -len(".cu")] + ".d")
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
        return replace(out, warnings=(*out.warnings, f"nvcc intermediates not kept: {exc}"))
    return out


async def _drain(process: anyio.abc.Process, chunks: list[bytes]) -> None:
    assert process.stdout is not None
    async for chunk in process.stdout:
        chunks.append(chunk)
