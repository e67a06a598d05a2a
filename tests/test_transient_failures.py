"""Only the compiler's verdict on the source is a compile error a cache may keep. nvcc
that could not be started, a tool of nvcc's (or nvcc) killed by a signal, a disk that
filled up under nvcc: each is the job's InternalError with its cause, and never cached,
even with ``cache_failures=True`` (issue 19). Real nvcc, real signals, a real full
tmpfs."""

from __future__ import annotations

import errno
import shutil
import signal
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import anyio
import psutil
import pytest

from asynccomp import CompileError, CompileJob, CompileResult, Engine, InternalError, find_toolkit
from asynccomp.backends._nvcc_failures import FolderSpace, not_a_verdict

from .filesystems import few_inodes, full_disk
from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel, slow_kernel
from .processes import wait_until


def _below_us(name: str, naming: str = "") -> list[psutil.Process]:
    """Processes called ``name`` below this one (with ``naming`` in their command line)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.name() == name and naming in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            pass
    return found


@needs_nvcc
async def test_nvcc_that_cannot_be_started_is_internal_and_not_cached(tmp_path: Path) -> None:
    toolkit = find_toolkit()
    assert toolkit.nvcc is not None
    copy = tmp_path / "bin" / "nvcc"
    copy.parent.mkdir()
    shutil.copyfile(toolkit.nvcc.resolve(), copy)  # no execute bit: EACCES, even for root
    broken = replace(toolkit, nvcc=copy)
    job = CompileJob(scale_kernel(), backend="nvcc")
    settings = {"arch": ARCH, "toolkit": broken, "cache_failures": True}
    async with Engine(**settings, cache_dir=tmp_path / "cache") as engine:  # type: ignore[arg-type]
        first = await engine.compile(job)
        again = await engine.compile(job)
        assert engine.statistics().compiled == 2
    for result in (first, again):
        assert isinstance(result.error, InternalError), result.error
        assert not result.cached
        cause = result.error.__cause__
        assert isinstance(cause, OSError) and cause.errno == errno.EACCES, cause
        assert str(copy) in str(result.error)
    # A fresh engine on the same disk cache: nothing was kept there either.
    async with Engine(**settings, cache_dir=tmp_path / "cache") as fresh:  # type: ignore[arg-type]
        third = await fresh.compile(job)
    assert isinstance(third.error, InternalError) and not third.cached


@needs_nvcc
async def test_a_compile_error_is_still_cached(tmp_path: Path) -> None:
    # The other side: the compiler's own verdict is what cache_failures keeps.
    job = CompileJob(broken_kernel(), backend="nvcc")
    async with Engine(arch=ARCH, cache_failures=True, cache_dir=tmp_path) as engine:
        first = await engine.compile(job)
        again = await engine.compile(job)
    assert type(first.error) is CompileError and not first.cached
    assert type(again.error) is CompileError and again.cached


@needs_nvcc
@pytest.mark.parametrize("victim", ["cicc", "nvcc", "cc1plus"])
async def test_a_tool_killed_by_a_signal_is_internal_and_not_cached(
    victim: str, tmp_path: Path
) -> None:
    # cc1plus: gcc's compiler proper, run by the gcc that nvcc runs; the one preprocessing
    # the job's source (others, a fraction of a second each, probe the host compiler).
    running, naming = ("cc1plus", "victim") if victim == "cc1plus" else ("cicc", "")
    job = CompileJob(slow_kernel(), backend="nvcc", name="victim")
    async with Engine(arch=ARCH, cache_failures=True, cache_dir=tmp_path) as engine:

        async def kill_it() -> None:
            await wait_until(lambda: bool(_below_us(running, naming)))
            for process in _below_us(victim, naming):
                process.send_signal(signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_it)
            result = await engine.compile(job)
        # Not cached: compiled again (cicc runs again), not answered from the cache.
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_it_compiles() -> None:
                    await wait_until(lambda: bool(_below_us(running, naming)))
                    scope.cancel()

                tg.start_soon(cancel_once_it_compiles)
                again = await engine.compile(job)
                pytest.fail(f"answered without compiling: {again}")
        stats = engine.statistics()
    assert stats.cache_hits == 0
    assert isinstance(result.error, InternalError), result.error
    assert "killed by SIGKILL" in str(result.error)
    cause = result.error.__cause__
    assert isinstance(cause, subprocess.CalledProcessError), cause
    assert cause.returncode == -signal.SIGKILL
    if victim == "cicc":  # run through sh -c: nvcc exits with the shell's 128 + 9
        assert "nvcc exited with status 137" in str(result.error)
    elif victim == "cc1plus":  # gcc says so (and exits with 1: no signal in nvcc's status)
        assert cause.cmd == "cc1plus" and "terminated program cc1plus" in str(result.error)
    else:
        assert cause.cmd == "nvcc"


async def _twice_uncached(job: CompileJob, cache: Path) -> list[CompileResult]:
    async with Engine(arch=ARCH, cache_failures=True, cache_dir=cache) as engine:
        results = [await engine.compile(job), await engine.compile(job)]
        stats = engine.statistics()
    assert stats.compiled == 2 and stats.cache_hits == 0
    for result in results:
        assert isinstance(result.error, InternalError), result.error
        assert not result.cached
    return results


@needs_nvcc
async def test_a_disk_that_fills_up_under_nvcc_is_internal_and_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = CompileJob(scale_kernel(), backend="nvcc", name="crowded")
    with full_disk(tmp_path, leave=4096) as full:
        # Room for the job's folder and source, none for nvcc's intermediates. nvcc
        # says only "Failed to preprocess host compiler properties" (gcc's ENOSPC is
        # lost): the space left tells.
        (full / "room").unlink()
        monkeypatch.setattr(tempfile, "tempdir", str(full))
        results = await _twice_uncached(job, tmp_path / "cache")
    for result in results:
        cause = result.error.__cause__ if result.error else None
        assert isinstance(cause, OSError) and cause.errno == errno.ENOSPC, cause
        assert "work folder failed (0 bytes" in str(result.error)


@needs_nvcc
async def test_a_file_system_out_of_inodes_under_nvcc_is_internal_and_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 MiB free, but after the job's folder and source only a few files.
    job = CompileJob(scale_kernel(), backend="nvcc", name="crowded")
    with few_inodes(tmp_path, 8) as crowded:
        monkeypatch.setattr(tempfile, "tempdir", str(crowded))
        results = await _twice_uncached(job, tmp_path / "cache")
    for result in results:
        cause = result.error.__cause__ if result.error else None
        assert isinstance(cause, OSError) and cause.errno == errno.ENOSPC, cause


WORKDIR = Path("/tmp/asynccomp-nvcc-123-abcdefgh")
OWN = ("kernel.fatbin", "kernel.d")
LOTS = FolderSpace(10**10, 10**6)


@pytest.mark.parametrize(
    "log",
    [  # what nvcc 13.0 said on a full tmpfs, or one out of inodes (measured)
        f"nvcc fatal   : Could not open output file '{WORKDIR}/tmpxft_000073e7_00000000-1'",
        "nvcc fatal   : Could not open output file kernel.d",
        "nvcc fatal   : Failed to preprocess host compiler properties.",
        f"cc1plus: fatal error: opening output file {WORKDIR}/tmpxft_0_00000000-7_kernel"
        ".cpp1.ii: No space left on device\ncompilation terminated.",
        f'Catastrophic error: cannot open generated C file "{WORKDIR}/tmpxft_0-6_kernel.c"',
        f'kernel.cu(4): catastrophic error: cannot open module id file "{WORKDIR}/'
        'tmpxft_00007455_00000000-4_kernel.module_id"',
        f"ptxas fatal   : Output file '{WORKDIR}/tmpxft_0-8_kernel.cubin' could not be opened",
    ],
)
def test_the_work_folder_failing_is_never_a_verdict(log: str) -> None:
    found = not_a_verdict(1, log, WORKDIR, OWN, LOTS)
    assert found is not None and isinstance(found[1], OSError)
    # And whatever the log, a work folder left without space or inodes says why.
    empty = not_a_verdict(1, "nvcc fatal   : something", WORKDIR, OWN, FolderSpace(0, 10**6))
    no_inodes = not_a_verdict(1, "", WORKDIR, OWN, FolderSpace(10**10, 0))
    for said in (empty, no_inodes):
        assert said is not None and isinstance(said[1], OSError)
        assert said[1].errno == errno.ENOSPC


@pytest.mark.parametrize(
    "log",
    [  # the compiler's verdict on the source, whatever words it holds
        'kernel.cu(2): error: identifier "undefined_identifier_42" is undefined',
        'kernel.cu(1): catastrophic error: cannot open source file "missing.h"',
        "kernel.cu(1): error: #error directive: No space left on device",
        f"ptxas {WORKDIR}/tmpxft_00001234_00000000-6_kernel.ptx, line 12; error   : "
        "Unknown symbol 'nope'",  # inline PTX of the source's
        "ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes)",
        "nvcc fatal   : Unknown option '--no-such-option'",
    ],
)
def test_the_compilers_verdict_stays_a_verdict(log: str) -> None:
    assert not_a_verdict(1, log, WORKDIR, OWN, LOTS) is None
    assert not_a_verdict(2, log, WORKDIR, OWN, None) is None
