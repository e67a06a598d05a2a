"""MetaSchedule's builder shape: a fresh pool of worker processes per batch, each
registering asynccomp's callback through the pool's initializer and calling it once per
candidate. With the facade on the compile server (its default), every worker of every
batch shares one set of NVRTC workers: no process starts a pool of its own.

TVM's own ``PopenPoolExecutor`` is used when TVM is installed; the standard library's
process pool (spawned, with the same initializer) stands in for it otherwise."""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import asynccomp.server
import asynccomp.tvm
from asynccomp.server import server_paths

from .kernels import scale_kernel
from .servers import server_folder, server_pid


def _candidate(source: str) -> tuple[str, int, list[int]]:
    """What one builder worker does for one candidate: call the registered callback."""
    import os

    import tvm_ffi

    callback = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    binary = bytes(callback(source))
    workers = [
        p.pid
        for p in psutil.Process(os.getpid()).children(recursive=True)
        if p.name() == "acw-nvrtc"
    ]
    return hashlib.sha256(binary).hexdigest(), os.getpid(), workers


@pytest.fixture
def facade_on_a_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        monkeypatch.setenv("ASYNCCOMP_SERVER", "auto")
        monkeypatch.setenv("ASYNCCOMP_ARCH", "sm_90a")
        try:
            yield folder
        finally:
            asynccomp.tvm.shutdown()  # this process's facade engine was on that server


def _pools() -> Iterator[Callable[[], Any]]:
    try:
        from tvm.support.popen_pool import PopenPoolExecutor
    except ImportError:
        PopenPoolExecutor = None
    if PopenPoolExecutor is not None:  # pragma: no cover - with TVM installed
        yield lambda: PopenPoolExecutor(
            max_workers=2, timeout=30, initializer=asynccomp.tvm.register
        )
    yield lambda: concurrent.futures.ProcessPoolExecutor(
        max_workers=2,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=asynccomp.tvm.register,
    )


def test_builder_batches_share_the_one_server(facade_on_a_server: Path) -> None:
    sources = [scale_kernel(float(i), name=f"cand{i}") for i in range(8)]
    seen_pids: set[int] = set()
    digests: dict[str, str] = {}
    for number, make_pool in enumerate(list(_pools()) * 2):  # two batches: two fresh pools
        batch = sources[number % 2 :: 2]
        pool = make_pool()
        try:
            futures = [pool.submit(_candidate, source) for source in batch]
            outcomes = [f.result(timeout=120) for f in futures]
        finally:
            pool.shutdown()
        for source, (digest, pid, workers) in zip(batch, outcomes, strict=True):
            digests[source] = digest
            seen_pids.add(pid)
            assert workers == []  # no builder process started NVRTC workers of its own
    assert len(seen_pids) >= 2  # fresh worker processes did the building
    server = server_pid(server_paths(facade_on_a_server))
    assert server is not None  # ... through the one server they started
    status = asynccomp.server.status(server_paths(facade_on_a_server).socket)
    assert status["compiled"] == len(digests) == 8
    assert status["workers"] <= psutil.cpu_count()
    # The same binaries as this process compiles them with TVM's callback contract.
    for source, digest in digests.items():
        mine = asynccomp.tvm.compile_cuda(source, arch="sm_90a")
        assert hashlib.sha256(bytes(mine)).hexdigest() == digest
