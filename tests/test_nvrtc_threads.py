"""NVRTC in threads of the engine's process (``nvrtc_mode="threads"``, and ``"auto"``
with one worker, which the TVM facade falls back to without a server): a compile stuck
where NVRTC never calls back, here the ``open()`` of a FIFO the source includes, gives
its slot back, later jobs compile (in a worker process, which a timeout can kill), and
the engine closes. Real NVRTC, a real FIFO; every stuck thread is released (a writer
opens and closes the FIFO) before the test ends."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileJob, CompileTimeout, Engine
from asynccomp.backends._nvrtc_threads import ABANDON_GRACE, THREAD_NAME
from asynccomp.backends._nvrtc_workers import KILL_GRACE
from asynccomp.config import NvrtcModeSetting

from .kernels import ARCH, scale_kernel
from .processes import nvrtc_workers, wait_until


def compile_threads() -> int:
    """NVRTC compile threads of this process alive now."""
    return sum(t.name == THREAD_NAME for t in threading.enumerate())


def release(fifo: Path) -> None:
    """Let a reader blocked in ``open(fifo)`` go on: a writer comes and goes (it reads
    end of file). Nothing happens when no reader is there."""
    with contextlib.suppress(OSError):  # ENXIO: no reader
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@contextlib.contextmanager
def fifo_released_by(fifo: Path, deadline: float) -> Iterator[None]:
    """Release ``fifo`` at ``deadline`` seconds at the latest (a test that fails must
    not hang behind a thread it blocked), and at the end; wait for nothing here."""
    timer = threading.Timer(deadline, release, (fifo,))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        release(fifo)


def include_of(fifo: Path) -> str:
    return f'#include "{fifo}"\n' + scale_kernel(name="stuck")


async def all_released(fifo: Path) -> None:
    """Release the FIFO until no compile thread is left (NVRTC may open it again)."""

    def released() -> bool:
        release(fifo)
        return compile_threads() == 0

    await wait_until(released, within=120)


@pytest.mark.parametrize("mode", ["threads", "auto"])
async def test_a_compile_stuck_in_open_gives_its_slot_back(
    tmp_path: Path, mode: NvrtcModeSetting, caplog: pytest.LogCaptureFixture
) -> None:
    fifo = tmp_path / "stuck.h"
    os.mkfifo(fifo)
    stuck_timeout, after_timeout = 3.0, 10.0
    stuck = CompileJob(include_of(fifo), name="stuck", timeout=stuck_timeout)
    after = CompileJob(scale_kernel(3.0), name="after", timeout=after_timeout)
    # The stuck job's deadline and the grace before its thread is abandoned; then the
    # next job's timeout, after its worker process has started (at most its start_timeout).
    within = stuck_timeout + KILL_GRACE + ABANDON_GRACE + 60 + after_timeout
    caplog.set_level(logging.WARNING, logger="asynccomp")
    try:
        with fifo_released_by(fifo, within), anyio.fail_after(within):
            engine = Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode=mode, cache=False)
            async with engine:
                first = await engine.compile(stuck)
                assert isinstance(first.error, CompileTimeout)
                assert compile_threads() == 1  # blocked in open(), where NVRTC never calls back
                second = await engine.compile(after)
                assert second.ok, second.error
                # Compiled in a worker process: the abandoned thread still holds its open().
                assert engine.statistics().workers == 1 and len(nvrtc_workers()) == 1
                assert compile_threads() == 1
            # Closed with the thread still blocked: it is left to finish on its own.
            assert compile_threads() == 1 and nvrtc_workers() == []
    finally:
        await all_released(fifo)
    assert "left to finish on its own" in caplog.text


async def test_closing_does_not_wait_for_a_stuck_compile(tmp_path: Path) -> None:
    fifo = tmp_path / "stuck.h"
    os.mkfifo(fifo)
    # A job without a timeout, cancelled as the engine is left by an error: the closing
    # engine tells its thread to stop and waits ABANDON_GRACE for it, no longer.
    within = ABANDON_GRACE + 60
    try:
        with fifo_released_by(fifo, within), anyio.fail_after(within):
            with pytest.raises(RuntimeError, match="leaving"):
                async with Engine(arch=ARCH, nvrtc_mode="threads", cache=False) as engine:
                    engine.prefetch([CompileJob(include_of(fifo), name="stuck")])
                    await wait_until(lambda: compile_threads() == 1)
                    raise RuntimeError("leaving")
            assert compile_threads() == 1
    finally:
        await all_released(fifo)
