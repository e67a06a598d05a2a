"""asynccomp.tvm.Builder, MetaSchedule's builder on warm workers, on real TVM 0.27 and real
ReplayTrace candidates of a matmul (tests/ms_candidates.py): LocalBuilder's results,
faults bounded per candidate, workers recycled, released and never left behind.
Skipped without TVM (CI runs it in a TVM venv of its own)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("tvm")
pytest.importorskip("cloudpickle")

import asynccomp.tvm

from .ms_candidates import cuda_source, gated_build, saved_candidates
from .processes import gone
from .servers import server_folder
from .warm_tasks import start_never_ready, wait_gone, within

pytestmark = pytest.mark.tvm

# Generous: a worker imports TVM and its tensor intrinsics (13-20 s of CPU on 2 loaded
# cores) before it is ready.
START = 300.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One compile server for the module: every worker of every builder compiles there,
    and exports its artifacts under the module's temporary folder (``$TMPDIR``)."""
    names = ("ASYNCCOMP_SERVER_DIR", "ASYNCCOMP_SERVER", "ASYNCCOMP_ARCH", "TMPDIR")
    saved = {k: os.environ.get(k) for k in names}
    with server_folder() as folder:
        os.environ["ASYNCCOMP_SERVER_DIR"] = str(folder)
        os.environ["ASYNCCOMP_SERVER"] = "auto"
        os.environ["ASYNCCOMP_ARCH"] = "sm_90a"
        os.environ["TMPDIR"] = str(tmp_path_factory.mktemp("artifacts"))
        try:
            yield folder
        finally:
            asynccomp.tvm.shutdown()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ASYNCCOMP_TEST_GATE", str(tmp_path))  # workers inherit it
    return tmp_path


def _claimed(gate: Path) -> int:
    deadline = time.monotonic() + START
    while not (gate / "claimed").exists() or not (gate / "claimed").read_text():
        assert time.monotonic() < deadline, "no candidate reached the gated build"
        time.sleep(0.05)
    return int((gate / "claimed").read_text())


def _ok(results: list[Any]) -> list[str]:
    assert [r.error_msg for r in results] == [None] * len(results)
    return [r.artifact_path for r in results]


def test_same_artifacts_as_local_builder_and_warm_across_batches(server: Path) -> None:
    from tvm.s_tir import meta_schedule as ms

    inputs = saved_candidates()[:4]
    builder = asynccomp.tvm.Builder(max_workers=2)
    assert builder.pool.wait_ready(START)  # forked from a template that imported TVM once
    pids = builder.pool.pids()
    assert builder.pool.statistics().forked == 2
    try:
        first = _ok(builder.build(inputs))
        second = _ok(builder.build(inputs))
        assert builder.pool.pids() == pids  # the same two processes served both batches
    finally:
        builder.close()
    assert gone(pids)
    # LocalBuilder's fresh workers import TVM inside each candidate's timeout (what the
    # warm builder fixes): its default 30 s is not always enough on a loaded machine.
    local = ms.builder.LocalBuilder(
        max_workers=2, timeout_sec=300, initializer=asynccomp.tvm.register
    )
    theirs = _ok(local.build(inputs))
    for ours, again, reference in zip(first, second, theirs, strict=True):
        assert cuda_source(ours) == cuda_source(again) == cuda_source(reference)
        # The artifact the runner loads: the same files, byte for byte.
        assert _members(ours) == _members(reference)


def _members(artifact: str) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(artifact) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_a_killed_worker_fails_only_its_candidate_and_is_replaced(server: Path, gate: Path) -> None:
    inputs = saved_candidates()[:3]
    builder = asynccomp.tvm.Builder(max_workers=2, f_build=gated_build)
    try:
        assert builder.pool.wait_ready(START)
        before = set(builder.pool.pids())
        import threading

        victim: list[int] = []

        def kill() -> None:
            victim.append(_claimed(gate))
            os.kill(victim[0], signal.SIGKILL)

        killer = threading.Thread(target=kill)
        killer.start()
        results = builder.build(inputs)
        killer.join()
        failed = [r for r in results if r.error_msg is not None]
        assert [r.error_msg for r in failed] == [
            "LocalBuilder: An exception occurred\nSubprocess terminated"
        ]
        assert sum(r.artifact_path is not None for r in results) == 2
        after = set(builder.pool.pids())
        assert victim[0] in before and victim[0] not in after and len(after) == 2
        assert builder.pool.statistics().crashed == 1
        _ok(builder.build(inputs))  # the replacement serves the next batch
    finally:
        pids = builder.pool.pids()
        builder.close()
    assert gone(pids)


def test_the_timeout_counts_the_build_only(server: Path, gate: Path) -> None:
    """One worker: the first candidate hangs past the timeout and is killed; the other two
    waited in the queue for longer than the timeout (and for the replacement worker's
    start, TVM's imports included), and still succeed."""
    timeout = 8.0
    inputs = saved_candidates()[:3]
    builder = asynccomp.tvm.Builder(max_workers=1, timeout_sec=timeout, f_build=gated_build)
    try:
        assert builder.pool.wait_ready(START)
        started = time.monotonic()
        results = builder.build(inputs)
        assert time.monotonic() - started >= timeout
        claimed = int((gate / "claimed").read_text())
        assert results[0].artifact_path is None
        assert results[0].error_msg == f"LocalBuilder: Timeout, killed after {timeout} seconds"
        _ok(results[1:])
        assert gone([claimed])
        assert builder.pool.statistics().timed_out == 1
    finally:
        pids = builder.pool.pids()
        builder.close()
    assert gone(pids)


def test_workers_are_recycled_after_max_uses(server: Path) -> None:
    inputs = saved_candidates()[:3]
    builder = asynccomp.tvm.Builder(max_workers=1, max_uses=2)
    try:
        assert builder.pool.wait_ready(START)
        first = builder.pool.pids()
        _ok(builder.build(inputs))  # 2 builds, recycled, the third on its replacement
        stats = builder.pool.statistics()
        assert stats.recycled == 1 and stats.started == 2
        assert gone(first)
    finally:
        pids = builder.pool.pids()
        builder.close()
    assert gone(pids)


def test_idle_workers_are_released_and_come_back(server: Path) -> None:
    inputs = saved_candidates()[:1]
    builder = asynccomp.tvm.Builder(max_workers=1, idle_release=1.0)
    try:
        assert builder.pool.wait_ready(START)
        first = builder.pool.pids()
        _ok(builder.build(inputs))
        deadline = time.monotonic() + 60
        while builder.pool.pids():
            assert time.monotonic() < deadline, "idle workers were not released"
            time.sleep(0.1)
        assert gone(first)
        _ok(builder.build(inputs))
        # Once after the batch; maybe once more before it (a builder unused for its
        # idle_release ends its workers too).
        assert builder.pool.statistics().released >= 1
    finally:
        pids = builder.pool.pids()
        builder.close()
    assert gone(pids)


def test_a_failing_initializer_is_a_typed_error() -> None:
    def broken() -> None:
        raise RuntimeError("no such toolkit here")

    builder = asynccomp.tvm.Builder(max_workers=1, initializer=broken, register=False)
    pids = builder.pool.pids()
    # Raised in build(), it reaches the caller through TVM's FFI, which keeps its message
    # and its RuntimeError base (WorkerStartFailed is one) but not its class.
    with pytest.raises(RuntimeError, match="no such toolkit here"):
        builder.build(saved_candidates()[:1])
    assert gone(pids)


def test_an_initializer_that_hangs_is_bounded(tmp_path: Path) -> None:
    """Workers whose initializers never return (here: TVM's imports, then one that hangs)
    are killed at ``start_timeout``; the third in a row makes build() raise
    WorkerStartFailed's message instead of waiting forever, and nothing is left."""
    timeout = 10.0
    hangs = functools.partial(start_never_ready, str(tmp_path))
    builder = asynccomp.tvm.Builder(
        max_workers=1, initializer=hangs, register=False, start_timeout=timeout
    )
    try:
        with pytest.raises(RuntimeError, match="start_timeout"):
            within(20 * timeout, lambda: builder.build(saved_candidates()[:1]), "build")
        assert builder.pool.pids() == []
        assert builder.pool.statistics().start_failed == 3
        left = [
            p.pid
            for p in psutil.Process().children(recursive=True)
            if p.name() in ("acz-tvm-builder", "acw-tvm-builder")
        ]
        wait_gone(left)
    finally:
        (tmp_path / "open").touch()
        builder.close()


def test_without_registering_tvm_is_still_imported_before_the_timeout(server: Path) -> None:
    """R19: ``Builder(register=False)`` dropped the warm-up: each worker imported TVM and
    its tensor intrinsics inside its first candidate's timeout (13-20 s of CPU), so with
    ``timeout_sec=5`` every batch timed out, and every replacement started cold again.
    TVM is imported where the workers come from, registered or not."""
    builder = asynccomp.tvm.Builder(max_workers=1, register=False, timeout_sec=5.0)
    try:
        assert builder.pool.wait_ready(START)
        _ok(builder.build(saved_candidates()[:2]))
    finally:
        builder.close()


_ORPHAN = """
import faulthandler, signal, sys
# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where this test was started with
# SIGINT ignored (a background job of a script: Python then leaves it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
stacks = open(sys.argv[2], "w")  # where it is, every thread, when the test asks
faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
import asynccomp.tvm
from tests.ms_candidates import hang
b = asynccomp.tvm.Builder(max_workers=2, register=False)
b.pool.wait_ready()
print(*b.pool.pids(), flush=True)
b.pool.map(hang, [(sys.argv[1],)])
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT])
def test_workers_die_with_the_tuning_process(tmp_path: Path, signum: int) -> None:
    """The process that made the builder killed (SIGKILL: no cleanup of its own runs, the
    workers notice through their pidfd and end their groups) or interrupted (Ctrl-C: the
    builder kills its workers) while a worker is busy (an idle one would see its pipe
    close): nothing is left."""
    marker, stacks = tmp_path / "busy", tmp_path / "stacks"
    with subprocess.Popen(
        [sys.executable, "-c", _ORPHAN, str(marker), str(stacks)], stdout=subprocess.PIPE
    ) as owner:
        try:
            assert owner.stdout is not None
            pids = [int(pid) for pid in owner.stdout.readline().split()]
            assert len(pids) == 2 and not gone(pids)
            deadline = time.monotonic() + START
            while not marker.exists() or not marker.read_text():
                assert time.monotonic() < deadline, "the task never started"
                time.sleep(0.05)
            assert int(marker.read_text()) in pids
            owner.send_signal(signum)
            try:  # (it once took over 60 s in CI, on a loaded machine: where was it?)
                assert owner.wait(120) != 0
            except subprocess.TimeoutExpired:
                owner.send_signal(signal.SIGUSR1)
                deadline = time.monotonic() + 30
                while not stacks.read_text() and time.monotonic() < deadline:
                    time.sleep(0.05)
                pytest.fail(f"still running 120 s after signal {signum}:\n{stacks.read_text()}")
        finally:
            owner.kill()
    wait_gone(pids)  # workers outlive their builder's process by no more than 60 s


_INTRINSICS = """
import hashlib, json, sys
from tvm.s_tir import TensorIntrin
from asynccomp.tvm._frames import quick_frames

seen = []
register = TensorIntrin.register

def noted(name, desc, impl, override=False):
    seen.append((name, desc.script(), impl.script(), override))
    return register(name, desc, impl, override)

TensorIntrin.register = staticmethod(noted)
if sys.argv[1] == "quick":
    with quick_frames():
        import tvm.s_tir.tensor_intrin
else:
    import tvm.s_tir.tensor_intrin
print(len(seen), hashlib.sha256(json.dumps(seen).encode()).hexdigest())
"""


def test_the_template_registers_tvms_own_tensor_intrinsics() -> None:
    """The template imports TVM's tensor intrinsics with quick frames (19 s -> 1-2 s on 2
    cores): every intrinsic registered, in the same order, with the same description and
    implementation (TVMScript of each) as a plain import registers."""
    answers = [
        subprocess.run(
            [sys.executable, "-c", _INTRINSICS, how],
            capture_output=True,
            text=True,
            timeout=START,
            check=True,
        ).stdout.split()
        for how in ("quick", "plain")
    ]
    assert int(answers[0][0]) > 100  # the CUDA ones alone are 91
    assert answers[0] == answers[1]


def test_making_a_builder_imports_the_tensor_intrinsics_here() -> None:
    """What MetaSchedule's TuneContext imports for a CUDA target (17-20 s on 2 cores),
    imported by ``Builder()`` with quick frames; ``inspect.stack`` is given back."""
    probe = (
        "import inspect, sys\n"
        "import asynccomp.tvm\n"
        "assert 'tvm.s_tir.tensor_intrin' not in sys.modules\n"
        "builder = asynccomp.tvm.Builder(max_workers=1, register=False)\n"
        "print('tvm.s_tir.tensor_intrin' in sys.modules, inspect.stack.__module__)\n"
        "builder.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=START, check=True
    )
    assert done.stdout.split() == ["True", "inspect"]


def test_register_in_a_localbuilder_worker_imports_the_tensor_intrinsics() -> None:
    """``LocalBuilder(initializer=asynccomp.tvm.register)``: each of TVM's popen workers
    imports the tensor intrinsics in the initializer (1-2 s), not in its first candidate's
    timeout (13-20 s on 2 cores); a process that is no such worker does not."""
    from tvm.support.popen_pool import PopenWorker

    worker = PopenWorker(initializer=asynccomp.tvm.register)
    try:
        worker.send(lambda: "tvm.s_tir.tensor_intrin" in __import__("sys").modules)
        assert worker.recv() is True
    finally:
        worker.kill()
    probe = (
        "import sys, asynccomp.tvm\n"
        "asynccomp.tvm.register()\n"
        "print('tvm.s_tir.tensor_intrin' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=START, check=True
    )
    assert done.stdout.split() == ["False"]
