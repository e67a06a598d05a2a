"""NVRTC precompiled headers in the worker processes: rendering, routing, files, bytes.

Small CCCL headers stand in for TileLang's (their PCH is about 250 MB and takes a
second to make); TileLang's own are in test_tilelang.py.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psutil
import pytest

from asynccomp import CompileJob, InvalidJob
from asynccomp._os import running
from asynccomp.backends import BackendOptions, NvrtcBackend
from asynccomp.backends._base import PreparedCompile
from asynccomp.backends._nvrtc_api import compile_prepared
from asynccomp.backends._nvrtc_files import sweep_worker_folders, worker_folders_root
from asynccomp.backends._nvrtc_shared_pch import FOLDER_ENV, compile_sharing
from asynccomp.backends._nvrtc_workers import NvrtcWorkers, header_prefix, pch_key
from asynccomp.toolkit import find_toolkit

pytestmark = pytest.mark.skipif(
    find_toolkit().nvrtc_version is None, reason="NVRTC is not installed"
)

HEADERS = {
    "p1": "#include <cuda/std/type_traits>\n#include <cuda/std/limits>\n",
    "p2": "#include <cuda/std/tuple>\n#include <cuda/std/array>\n",
}
BODY = 'extern "C" __global__ void k{n}(float* x) {{ x[threadIdx.x] = {n}.0f; }}\n'
MADE, USED = "creating precompiled header file", "using precompiled header file"


def source(prefix: str, n: int) -> str:
    return HEADERS[prefix] + BODY.format(n=n)


@pytest.fixture
async def backend() -> AsyncIterator[NvrtcBackend]:
    started = NvrtcBackend(find_toolkit(), mode="processes", workers=2)
    try:
        yield started
    finally:
        await started.aclose()


@pytest.fixture
async def private() -> AsyncIterator[NvrtcBackend]:
    """Workers that each keep their own PCH, as spawned workers do (they cannot share)."""
    started = NvrtcBackend(find_toolkit(), mode="processes", workers=2)
    started.pool = NvrtcWorkers(2, share_pch=False)
    try:
        yield started
    finally:
        await started.aclose()


async def compile_one(backend: NvrtcBackend, text: str, pch: bool = True) -> tuple[str, bytes]:
    job = CompileJob(text, arch="sm_90a", pch=pch)
    out = await backend.run(backend.prepare(job, BackendOptions("sm_90a")))
    assert out.status == "ok", out.log
    assert out.binary is not None
    return out.log, out.binary


def test_pch_is_rendered_first_and_only_for_nvrtc() -> None:
    nvrtc = NvrtcBackend(find_toolkit())
    job = CompileJob(source("p1", 0), arch="sm_90a", pch=True)
    prepared = nvrtc.prepare(job, BackendOptions("sm_90a", line_info=True))
    assert prepared.options[0] == "-pch" and prepared.options.count("-pch") == 1
    exact = CompileJob(source("p1", 0), options=["-arch=sm_90a"], exact_options=True, pch=True)
    assert nvrtc.prepare(exact, BackendOptions("sm_90a")).options[:2] == ("-pch", "-arch=sm_90a")
    with pytest.raises(InvalidJob, match="pch"):
        CompileJob(source("p1", 0), backend="nvcc", pch=True)
    with pytest.raises(InvalidJob, match="pch"):
        CompileJob(source("p1", 0), pch=1)  # type: ignore[arg-type]


def test_pch_key_follows_prefix_and_options() -> None:
    nvrtc = NvrtcBackend(find_toolkit())

    def key(text: str, pch: bool = True, *options: str) -> str | None:
        job = CompileJob(text, arch="sm_90a", pch=pch, options=options)
        return pch_key(nvrtc.prepare(job, BackendOptions("sm_90a")))

    assert key(source("p1", 1)) == key(source("p1", 2))  # another body, same headers
    assert key(source("p1", 1)) != key(source("p2", 1))
    assert key(source("p1", 1)) != key(source("p1", 1), True, "-DX=1")
    assert key(source("p1", 1), False) is None
    assert header_prefix("// c\n#define A \\\n  1\n#include <x>\nint a;\n") == (
        "// c\n#define A \\\n  1\n#include <x>\n"
    )


async def test_same_prefix_goes_to_the_worker_holding_its_pch(private: NvrtcBackend) -> None:
    backend = private
    pool = backend.pool
    assert pool is not None
    await pool.warm_up()
    # Round 1: both prefixes at once, so each worker makes one PCH.
    logs: dict[str, str] = {}

    async def one(prefix: str, n: int) -> None:
        logs[prefix], _ = await compile_one(backend, source(prefix, n))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "p1", 1)
        tg.start_soon(one, "p2", 2)
    assert MADE in logs["p1"] and MADE in logs["p2"]
    holders = {keys[0]: pid for pid, keys in pool.pch_holders().items() if keys}
    assert len(holders) == 2  # one PCH on each worker
    folders = pool.worker_folders()
    # Then one at a time: a pool taking the last idle worker would send one of the two
    # to the worker holding the other's PCH (which would make a second one there).
    for prefix in ("p1", "p2", "p2", "p1"):
        await one(prefix, 3)
        job = CompileJob(source(prefix, 0), arch="sm_90a", pch=True)
        pid = holders[pch_key(backend.prepare(job, BackendOptions("sm_90a"))) or ""]
        assert USED in logs[prefix]
        assert str(folders[pid]) in logs[prefix]  # the PCH file of that worker
    counts = {
        "created": 2,
        "reused": 4,
        "shared": 0,
        "not_made": 0,
        "skipped": 0,
        "retired": 0,
        "ahead": 0,
    }
    assert pool.pch_counts() == counts


async def test_pch_and_plain_compiles_are_byte_identical(backend: NvrtcBackend) -> None:
    made_log, made = await compile_one(backend, source("p1", 5))
    used_log, used = await compile_one(backend, source("p1", 5))
    _, plain = await compile_one(backend, source("p1", 5), pch=False)
    assert MADE in made_log and USED in used_log
    assert made == used == plain


async def test_forked_workers_share_one_pch_per_prefix(backend: NvrtcBackend) -> None:
    """The first worker to make a PCH publishes it in the backend's shared folder; every
    worker forked from the same template then uses that file (NVRTC refuses one made by
    another process), no worker keeps one of its own, and none is a holder."""
    pool = backend.pool
    assert pool is not None
    await pool.warm_up()
    made_log, _ = await compile_one(backend, source("p1", 20))
    assert MADE in made_log
    shared = pool.shared_folder
    assert shared is not None
    (published,) = shared.iterdir()
    users: dict[int, str] = {}

    async def one(n: int) -> None:
        log, _ = await compile_one(backend, source("p1", n))
        users[n] = log

    async with anyio.create_task_group() as tg:  # both workers busy at once
        for n in (21, 22):
            tg.start_soon(one, n)
    for log in users.values():
        assert USED in log and str(published) in log, log
    assert len(pool.worker_pids()) == 2
    for folder in pool.worker_folders().values():
        assert pch_files(folder) == []  # the maker's own name went once it was published
    assert pool.pch_holders() == dict.fromkeys(pool.worker_pids(), ())
    assert pool.pch_counts() == {
        "created": 1,
        "reused": 2,
        "shared": 3,
        "not_made": 0,
        "skipped": 0,
        "retired": 0,
        "ahead": 0,
    }
    # Another prefix gets a shared file of its own; the first stays.
    other_log, _ = await compile_one(backend, source("p2", 23))
    assert MADE in other_log
    assert len(list(shared.iterdir())) == 2
    await backend.aclose()
    assert not shared.exists()


async def test_one_worker_makes_a_pch_while_the_others_compile_without(
    backend: NvrtcBackend,
) -> None:
    """A batch's first wave: the jobs that need a PCH no one has made yet do not each make
    one (16 at once took 5.2 s a compile on 16 cores, against 3.4 s without a PCH): one
    makes and publishes it, the others compile without one, the same bytes; the next
    job uses it."""
    pool = backend.pool
    assert pool is not None
    await pool.warm_up()
    outs: dict[int, tuple[str, bytes]] = {}

    async def one(n: int) -> None:
        outs[n] = await compile_one(backend, source("p1", n))

    async with anyio.create_task_group() as tg:  # both workers busy at once
        for n in (30, 31):
            tg.start_soon(one, n)
    made = [n for n, (log, _) in outs.items() if MADE in log]
    assert len(made) == 1, [log for log, _ in outs.values()]
    (other,) = set(outs) - set(made)
    assert MADE not in outs[other][0] and USED not in outs[other][0]
    counts = pool.pch_counts()
    assert (counts["created"], counts["skipped"], counts["not_made"]) == (1, 1, 0)
    # The bytes do not depend on which way a job went.
    _, plain = await compile_one(backend, source("p1", other), pch=False)
    assert plain == outs[other][1]
    used_log, used = await compile_one(backend, source("p1", made[0]))
    assert USED in used_log and used == outs[made[0]][1]
    assert pool.pch_counts()["created"] == 1


async def test_a_pch_a_worker_keeps_as_its_own_is_made_by_every_worker_that_needs_it(
    private: NvrtcBackend,
) -> None:
    """Where workers cannot share (spawned workers), no job is told to make no PCH
    because another worker makes one it could not use: each worker makes its own."""
    pool = private.pool
    assert pool is not None
    await pool.warm_up()
    first_log, _ = await compile_one(private, source("p2", 40))
    assert MADE in first_log
    logs: list[str] = []

    async def one(n: int) -> None:
        logs.append((await compile_one(private, source("p2", n)))[0])

    async with anyio.create_task_group() as tg:
        for n in (41, 42):
            tg.start_soon(one, n)
    assert sorted(MADE in log for log in logs) == [False, True]  # the other worker's own
    assert all(MADE in log or USED in log for log in logs)
    assert pool.pch_counts()["skipped"] == 0


async def test_a_new_worker_uses_the_pch_its_dead_sibling_made(backend: NvrtcBackend) -> None:
    pool = backend.pool
    assert pool is not None
    made_log, made = await compile_one(backend, source("p2", 24))
    assert MADE in made_log
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGKILL)
    used_log, used = await compile_one(backend, source("p2", 24))
    assert USED in used_log, used_log  # a new fork of the same template
    assert pid not in pool.worker_pids()
    assert made == used


def pch_files(folder: Path) -> list[Path]:
    return list(folder.rglob("*.pch"))


async def test_a_killed_worker_leaves_no_pch(private: NvrtcBackend) -> None:
    backend = private
    pool = backend.pool
    assert pool is not None
    await compile_one(backend, source("p1", 6))
    ((pid, folder),) = pool.worker_folders().items()
    assert pch_files(folder), "the PCH is in the worker's own folder"
    os.kill(pid, signal.SIGKILL)
    # The next job finds it dead (idle, or failing to take the job), reaps it, which
    # removes its folder, and runs on a new worker.
    log, _ = await compile_one(backend, source("p1", 7))
    assert MADE in log  # a new worker, a new PCH
    assert not folder.exists()
    alive = pool.worker_folders()
    assert pid not in alive
    await backend.aclose()
    assert not any(f.exists() for f in alive.values())


async def test_workers_without_pch_write_nothing(backend: NvrtcBackend) -> None:
    pool = backend.pool
    assert pool is not None
    await compile_one(backend, source("p2", 8), pch=False)
    ((_, folder),) = pool.worker_folders().items()
    assert list(folder.iterdir()) == []
    await backend.aclose()
    assert not folder.exists()


async def test_stale_folders_of_dead_engines_are_swept(
    backend: NvrtcBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A root of this test's own: the other test processes make stale folders of their own
    # in the user's shared root meanwhile, which the last sweep below would find.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = worker_folders_root()
    assert root.parent == tmp_path
    probe = await anyio.run_process(["sh", "-c", "echo $$"])
    stale = root / f"{int(probe.stdout)}-0"  # a process that has ended
    (stale / "__nvrtc_auto_pch_1_0").mkdir(parents=True)
    (stale / "__nvrtc_auto_pch_1_0" / "kernel_0.pch").write_bytes(b"x" * 1024)
    # A running process (this one) whose folder no engine of it will make: the test runs
    # in parallel test processes, each its own.
    live = root / f"{os.getpid()}-999999"
    live.mkdir(exist_ok=True)
    try:
        await compile_one(backend, source("p1", 9), pch=False)  # the first start sweeps
        assert not stale.exists()
        assert live.exists()
        assert sweep_worker_folders(root) == []
    finally:
        live.rmdir()


async def test_an_engine_that_starts_no_worker_sweeps_as_it_closes() -> None:
    """A compile server restarted after a kill that serves only cache hits starts no
    worker: it removes the killed one's folders (PCH files of hundreds of MB) as it
    closes, not only as a first worker starts."""
    root = worker_folders_root()
    probe = await anyio.run_process(["sh", "-c", "echo $$"])
    stale = root / f"{int(probe.stdout)}-0"  # a process that has ended
    (stale / "__nvrtc_auto_pch_1_0").mkdir(parents=True)
    idle = NvrtcBackend(find_toolkit(), mode="processes", workers=1)
    async with anyio.create_task_group() as tg:
        await idle.start(tg)
        await idle.aclose()
    assert idle.pool is not None and idle.pool.worker_pids() == []  # none started
    assert not stale.exists()


def test_an_ended_engine_not_yet_reaped_has_its_folders_swept() -> None:
    """An engine that ended but is still a zombie (its parent, init in a container,
    reaps lazily: a SIGKILLed detached server stays one for a second or more) runs no
    more: its folders go, else the next engine, starting just then, would skip them for
    good."""
    root = worker_folders_root()
    ended = subprocess.Popen(["true"])  # not waited for: a zombie until reaped below
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(ended.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "true did not end"
            time.sleep(0.01)
        folder = root / f"{ended.pid}-0"
        (folder / "__nvrtc_auto_pch_1_0").mkdir(parents=True)
        assert sweep_worker_folders(root) == [folder.name]
        assert not folder.exists()
    finally:
        ended.wait()


# An engine that compiles one job with -pch, says where NVRTC put its PCH, and waits to
# be killed.
ENGINE_SCRIPT = """
import sys, anyio, psutil
from asynccomp import CompileJob, Engine

async def main() -> None:
    async with Engine(arch="sm_90a", nvrtc_workers=1, nvrtc_mode=sys.argv[1], cache=False) as e:
        result = await e.compile(CompileJob(sys.argv[2], arch="sm_90a", pch=True))
        made = [line for line in result.log.splitlines() if "creating precompiled" in line]
        workers = [p.pid for p in psutil.Process().children(recursive=True)
                   if p.name().startswith("acw-")]
        print(made[0].split('"')[3], *workers, flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_killed_engines_pch_is_removed_by_the_next(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL an engine whose NVRTC made a PCH (in its own threads, or in a worker): the
    files stay (NVRTC removes its own only at a normal exit; the workers' shared ones
    are the engine's to remove as it closes), and the next NVRTC backend's start
    removes them."""
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "ASYNCCOMP_SERVER": "off"}
    with subprocess.Popen(
        [sys.executable, "-c", ENGINE_SCRIPT, mode, source("p2", 11)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as engine:
        assert engine.stdout is not None
        said = engine.stdout.readline().split()  # the script's own limit: 600 s
        engine.kill()
    pch, workers = Path(said[0]), [int(pid) for pid in said[1:]]
    assert pch.is_relative_to(tmp), pch
    assert bool(workers) == (mode == "processes")
    if mode == "threads":  # NVRTC's own: $TMPDIR/__nvrtc_auto_pch_<pid>_0/
        assert pch.is_file()
        left = [pch.parent]
    else:  # a worker's folder, <root>/<engine pid>-<n>/, and the shared one beside it
        root, engine_pid = pch.parent.parent, pch.parent.name.split("-")[0]
        left = sorted(root.glob(f"{engine_pid}-*"))
        assert [p.name for p in root.glob(f"{engine_pid}-*/*.pch")], "no PCH was shared"
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in workers):  # they die with their engine
        assert time.monotonic() < deadline, "a worker outlived its engine"
        time.sleep(0.05)
    assert all(f.exists() for f in left), "removed already: nothing to test"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    async def next_engine() -> None:
        other = NvrtcBackend(find_toolkit(), mode=mode, workers=1)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            await other.start(tg)
            if other.pool is not None:  # a worker's start sweeps the worker folders
                await compile_one(other, source("p1", 12), pch=False)
            await other.aclose()

    anyio.run(next_engine)
    assert not any(f.exists() for f in left)
    assert not pch.exists()


def test_looking_for_the_worker_folders_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closing engine looks for this user's worker folders to sweep: where the shared
    one is a link (or not private), it gets nothing to sweep, and no folder is made."""
    import tempfile

    from asynccomp.backends._nvrtc_files import existing_worker_folders_root

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / f"asynccomp-nvrtc-{os.getuid()}").symlink_to(elsewhere)
    before = sorted(tmp_path.iterdir())
    assert existing_worker_folders_root() is None
    assert sorted(tmp_path.iterdir()) == before


# The sharing protocol itself, in this process: compile_sharing as a worker forked from a
# template (pid 4242) runs it, with the shared folder in tmp_path.


@pytest.fixture
def sharing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import tempfile

    from asynccomp.backends import _nvrtc_shared_pch

    monkeypatch.setattr(_nvrtc_shared_pch, "template_pid", lambda: 4242)
    monkeypatch.setattr(_nvrtc_shared_pch, "_refused", False)
    monkeypatch.setenv(FOLDER_ENV, "shared")  # beside the worker's own folder, "own"
    (tmp_path / "own").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "own"))
    return tmp_path / "shared"


def prepared_of(text: str) -> PreparedCompile:
    nvrtc = NvrtcBackend(find_toolkit())
    return nvrtc.prepare(CompileJob(text, arch="sm_90a", pch=True), BackendOptions("sm_90a"))


# Makes a PCH of argv[1]'s source in a process of its own, at argv[2].
MAKE_ELSEWHERE = """
import sys
from asynccomp import CompileJob
from asynccomp.backends import BackendOptions, NvrtcBackend
from asynccomp.backends._nvrtc_api import compile_prepared
from asynccomp.toolkit import find_toolkit
job = CompileJob(sys.argv[1], arch="sm_90a", pch=True)
prepared = NvrtcBackend(find_toolkit()).prepare(job, BackendOptions("sm_90a"))
options = (f"--create-pch={sys.argv[2]}", *prepared.options[1:])
out = compile_prepared(prepared.__class__(**{**prepared.__dict__, "options": options}))
assert "creating precompiled header" in out.log, out.log
"""


def test_a_pch_made_elsewhere_is_refused_and_the_worker_shares_no_more(sharing: Path) -> None:
    """A shared file NVRTC refuses (made by another process: its heap is elsewhere)
    fails no compile: the compile goes without it, and the worker goes back to NVRTC's
    automatic PCH of its own."""
    text = source("p2", 30)
    prepared = prepared_of(text)
    key = pch_key(prepared)
    sharing.mkdir()
    foreign = sharing / f"4242-{key}.pch"
    subprocess.run(
        [sys.executable, "-c", MAKE_ELSEWHERE, text, str(foreign)], check=True, timeout=300
    )
    out = compile_sharing(prepared, key)
    assert out.status == "ok" and "incompatible precompiled header" in out.log, out.log
    plain = compile_prepared(dataclasses.replace(prepared, options=prepared.options[1:]))
    assert out.binary == plain.binary
    again = compile_sharing(prepared_of(source("p2", 31)), key)
    assert again.status == "ok" and "__nvrtc_auto_pch_" in again.log, again.log


def test_a_job_naming_its_own_pch_folder_shares_nothing(sharing: Path) -> None:
    pch_dir = sharing.parent / "mine"
    pch_dir.mkdir()
    prepared = prepared_of(source("p1", 37))
    mine = dataclasses.replace(prepared, options=(*prepared.options, f"-pch-dir={pch_dir}"))
    out = compile_sharing(mine, pch_key(mine))
    assert out.status == "ok" and str(pch_dir) in out.log, out.log
    assert not sharing.exists()


def test_a_made_pch_is_published_and_ended_templates_files_go(sharing: Path) -> None:
    sharing.mkdir()
    ended = sharing / f"{dead_pid()}-{'1' * 20}.pch"  # an ended template's
    ended.write_bytes(b"of no use to anyone")
    prepared = prepared_of(source("p1", 33))
    key = pch_key(prepared)
    made = compile_sharing(prepared, key)
    assert made.status == "ok" and MADE in made.log, made.log
    assert sorted(sharing.iterdir()) == [sharing / f"4242-{key}.pch"]
    assert list((sharing.parent / "own").iterdir()) == []  # the shared name keeps it
    used = compile_sharing(prepared_of(source("p1", 34)), key)
    assert USED in used.log and str(sharing / f"4242-{key}.pch") in used.log, used.log


def test_past_the_bound_nothing_more_is_published(
    sharing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynccomp.backends import _nvrtc_shared_pch

    monkeypatch.setattr(_nvrtc_shared_pch, "MAX_SHARED", 1)
    sharing.mkdir()
    mine = sharing / f"4242-{'0' * 20}.pch"
    mine.write_bytes(b"another prefix's")
    prepared = prepared_of(source("p2", 35))
    out = compile_sharing(prepared, pch_key(prepared))
    # NVRTC's automatic PCH, as without sharing (made now, or by an earlier test of this
    # process).
    assert out.status == "ok" and "__nvrtc_auto_pch_" in out.log, out.log
    assert sorted(sharing.iterdir()) == [mine]
    assert list((sharing.parent / "own").glob("asynccomp-*.pch")) == []


def test_outside_a_forked_worker_nothing_is_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    monkeypatch.setenv(FOLDER_ENV, "shared")
    (tmp_path / "own").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "own"))
    prepared = prepared_of(source("p1", 36))
    out = compile_sharing(prepared, pch_key(prepared))  # template_pid() is None here
    assert out.status == "ok" and "__nvrtc_auto_pch_" in out.log, out.log
    assert sorted(tmp_path.iterdir()) == [tmp_path / "own"]


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
