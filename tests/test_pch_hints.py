"""A compile server's NVRTC workers remember the precompiled headers they made, and the
next server on the same folder makes them again as it starts
(:mod:`asynccomp.backends._nvrtc_pch_hints`): the hints themselves, a backend started on
them, and a real server stopped and started again.

Real NVRTC; small CCCL headers stand in for TileLang's (their PCH takes a second)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileJob, Engine, InvalidJob, SyncEngine
from asynccomp import server as server_api
from asynccomp.backends import BackendOptions, NvrtcBackend, _nvrtc_workers
from asynccomp.backends._base import PreparedCompile
from asynccomp.backends._nvrtc_pch_hints import AHEAD_ENV, MAX_AGE, MAX_AHEAD, MAX_HINTS, PchHints
from asynccomp.backends._nvrtc_workers import NvrtcWorkers, pch_key
from asynccomp.server import server_paths
from asynccomp.server._paths import own_folder, private_folder
from asynccomp.toolkit import find_toolkit

from .kernels import ARCH
from .servers import running_server, server_folder

pytestmark = pytest.mark.skipif(
    find_toolkit().nvrtc_version is None, reason="NVRTC is not installed"
)

HEADERS = "#include <cuda/std/type_traits>\n#include <cuda/std/limits>\n"
BODY = 'extern "C" __global__ void k{n}(float* x) {{ x[threadIdx.x] = {n}.0f; }}\n'
MADE, USED = "creating precompiled header file", "using precompiled header file"


def job(n: int) -> CompileJob:
    return CompileJob(HEADERS + BODY.format(n=n), arch=ARCH, pch=True)


def prepared(n: int, *extra: str) -> PreparedCompile:
    rendered = NvrtcBackend(find_toolkit()).prepare(job(n), BackendOptions(ARCH))
    return dataclasses.replace(rendered, options=(*rendered.options, *extra))


def aged(path: Path, seconds_ago: float) -> None:
    then = time.time() - seconds_ago
    os.utime(path, (then, then))


def test_a_hint_makes_again_the_pch_its_compile_made(tmp_path: Path) -> None:
    folder = tmp_path / "hints"
    hints = PchHints(folder)
    made = prepared(1)
    hints.note(made, pch_key(made) or "")
    (ahead,) = hints.ahead()
    assert pch_key(ahead) == pch_key(made)  # the same options and header prefix
    assert ahead.source.startswith(HEADERS) and "k1" not in ahead.source  # not the kernel
    assert (ahead.backend, ahead.arch, ahead.output) == ("nvrtc", ARCH, "cubin")
    assert folder.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in folder.iterdir()] == [f"{pch_key(made)}.json"]  # nothing half-written


def test_the_newest_hints_are_made_ahead_and_old_or_bad_ones_go(tmp_path: Path) -> None:
    hints = PchHints(tmp_path)
    made = [prepared(1, f"-DVARIANT={i}") for i in range(MAX_HINTS + 2)]
    for i, one in enumerate(made):  # each a second newer than the one before
        hints.note(one, pch_key(one) or "")
        aged(tmp_path / f"{pch_key(one)}.json", len(made) - i)
    assert len(list(tmp_path.glob("*.json"))) == MAX_HINTS  # the two oldest went
    newest = [pch_key(one) for one in reversed(made)]
    assert [pch_key(one) for one in hints.ahead()] == newest[:MAX_AHEAD]
    # Noted again: the oldest kept is the newest now.
    oldest_kept = made[2]
    hints.note(oldest_kept, pch_key(oldest_kept) or "")
    assert pch_key(hints.ahead(1)[0]) == pch_key(oldest_kept)
    # Unreadable, not a hint, or unused for too long: removed as the hints are read.
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"prefix": 3, "options": []}')
    aged(tmp_path / f"{pch_key(made[3])}.json", MAX_AGE + 60)
    assert len(hints.ahead(MAX_HINTS)) == MAX_HINTS - 1
    names = {p.name for p in tmp_path.iterdir()}
    assert not {"garbage.json", "other.json", f"{pch_key(made[3])}.json"} & names


def test_hints_outlive_a_temporary_server_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside the socket in a server folder the user chose; for the default one
    (``$XDG_RUNTIME_DIR``'s ends with the last login session, ``/tmp``'s at a reboot)
    in the user's own folder, which stays private enough to be a server's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with server_folder() as folder:
        chosen = server_paths(folder / "chosen")
        assert chosen.pch_hints.parent == chosen.folder
        monkeypatch.delenv("ASYNCCOMP_SERVER_DIR", raising=False)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
        default = server_paths()
        assert default.folder == folder / "asynccomp"
        assert default.pch_hints.parent == own_folder()
        # As a server started by a client (--server-dir) finds it.
        assert server_paths(folder / "asynccomp").pch_hints == default.pch_hints
        assert own_folder().is_relative_to(tmp_path / "cache")
        made = prepared(8)
        PchHints(default.pch_hints).note(made, pch_key(made) or "")
        assert private_folder(own_folder()) == own_folder()  # 0700: a server may live there
        assert len(list(default.pch_hints.glob("*.json"))) == 1


async def test_a_backend_on_hints_makes_their_pch_and_its_first_job_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first job comes at once, while the PCH is being made ahead: it waits for that
    one rather than make its own (every worker would, in a first batch)."""
    monkeypatch.setenv(AHEAD_ENV, "on")
    folder = tmp_path / "hints"
    first = NvrtcBackend(find_toolkit(), mode="processes", workers=2, pch_hints=folder)
    try:
        made = await first.run(prepared(1))
    finally:
        await first.aclose()
    assert made.status == "ok" and MADE in made.log
    (hint,) = folder.glob("*.json")
    aged(hint, 86400)  # a day old: used, it is the newest again
    second = NvrtcBackend(find_toolkit(), mode="processes", workers=2, pch_hints=folder)
    pool = second.pool
    assert pool is not None
    try:
        async with anyio.create_task_group() as tg:
            await second.start(tg)  # the template, then the hint's PCH, in the background
            with anyio.fail_after(120):
                used = await second.run(prepared(2))
    finally:
        await second.aclose()
    assert used.status == "ok" and USED in used.log, used.log
    shared = pool.shared_folder
    assert shared is not None and str(shared) in used.log  # the one made ahead, shared
    counts = pool.pch_counts()
    assert (counts["ahead"], counts["created"], counts["reused"]) == (1, 1, 1)
    assert time.time() - hint.stat().st_mtime < 3600


async def test_with_ahead_off_hints_are_kept_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AHEAD_ENV, "off")
    folder = tmp_path / "hints"
    made = prepared(3)
    PchHints(folder).note(made, pch_key(made) or "")
    backend = NvrtcBackend(find_toolkit(), mode="processes", workers=1, pch_hints=folder)
    pool = backend.pool
    assert pool is not None
    try:
        async with anyio.create_task_group() as tg:
            await backend.start(tg)
            out = await backend.run(prepared(4))
    finally:
        await backend.aclose()
    assert MADE in out.log  # its own: no PCH was made ahead
    assert pool.pch_counts()["ahead"] == 0
    assert len(list(folder.glob("*.json"))) == 1


async def test_a_hint_that_no_longer_compiles_is_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AHEAD_ENV, "on")
    folder = tmp_path / "hints"
    missing = "#include <asynccomp_header_since_removed.h>\n"
    gone = dataclasses.replace(prepared(7), source=missing + BODY.format(n=7))
    PchHints(folder).note(gone, pch_key(gone) or "")
    backend = NvrtcBackend(find_toolkit(), mode="processes", workers=1, pch_hints=folder)
    try:
        async with anyio.create_task_group() as tg:
            await backend.start(tg)
            with anyio.fail_after(120):  # waits for the one made ahead, then fails as it did
                out = await backend.run(gone)
    finally:
        await backend.aclose()
    assert out.status == "failed" and "asynccomp_header_since_removed.h" in out.log
    assert list(folder.glob("*.json")) == []


def test_a_server_started_again_makes_the_pch_the_last_one_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole story on real servers: the first makes a PCH for its first job and
    leaves a hint beside its socket; stopped (as an idle server stops), the next one on
    that folder makes the PCH as it starts, and its first job uses it (coming before the
    PCH is made, it waits for it)."""
    monkeypatch.setenv(AHEAD_ENV, "on")
    with server_folder() as folder:
        with running_server(folder) as (_, paths), SyncEngine(server=str(paths.socket)) as engine:
            first = engine.compile(job(5))
            assert first.ok and MADE in first.log, first.log
            assert server_api.status(paths.socket)["pch"]["nvrtc"]["created"] == 1
        assert len(list(paths.pch_hints.glob("*.json"))) == 1
        with running_server(folder) as (_, paths), SyncEngine(server=str(paths.socket)) as engine:
            again = engine.compile(job(6))
            assert again.ok and USED in again.log, again.log
            counts = server_api.status(paths.socket)["pch"]["nvrtc"]
    assert (counts["ahead"], counts["created"], counts["reused"]) == (1, 1, 1)


# -- Engine.make_pch: a PCH made ahead for a job the client names ---------------------------


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs wait for a PCH being made ahead however loaded the machine (a job that
    waited 30 s makes its own)."""
    monkeypatch.setattr(_nvrtc_workers, "AHEAD_WAIT", 600.0)


@pytest.mark.usefixtures("patient")
async def test_make_pch_makes_it_ahead_and_a_job_sent_meanwhile_waits_for_it() -> None:
    """A client that knows its kernels' headers before it has a kernel (TileLang's
    facade at register()) has the PCH made ahead: a job that comes while it is made
    waits for it and uses it, and makes none of its own."""
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as engine:
        made: list[bool] = []

        async def ahead() -> None:
            made.append(await engine.make_pch(job(20)))

        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ahead)
                await wait_until_made_ahead(engine)
                first = await engine.compile(job(21))
            again = await engine.make_pch(job(22))  # shared already: nothing compiled
        assert made == [True] and again is True
        assert first.ok and USED in first.log and MADE not in first.log, first.log
        counts = nvrtc_pool(engine).pch_counts()
    assert (counts["ahead"], counts["created"], counts["reused"]) == (1, 1, 1)


@pytest.mark.usefixtures("patient")
async def test_a_pch_asked_for_is_made_though_its_caller_is_cancelled() -> None:
    """The PCH is the engine's once asked for (on a server, a client that leaves asked
    for it): cancelling the call does not stop it, and a job waiting for it gets it."""
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as engine:
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                tg.start_soon(engine.make_pch, job(30))
                await wait_until_made_ahead(engine)
                tg.cancel_scope.cancel()
            waited = await engine.compile(job(31))
        assert waited.ok and USED in waited.log and MADE not in waited.log, waited.log
        counts = nvrtc_pool(engine).pch_counts()
    assert (counts["ahead"], counts["created"]) == (1, 1)


async def test_make_pch_makes_nothing_where_no_pch_is_shared() -> None:
    """Without pch=True, for nvcc, or with NVRTC in threads, nothing is made (False);
    a job that cannot run raises what its compile would."""
    async with Engine(arch=ARCH, nvrtc_mode="threads", cache=False) as threads:
        assert await threads.make_pch(job(23)) is False
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        plain = CompileJob(HEADERS + BODY.format(n=24), arch=ARCH)
        assert await engine.make_pch(plain) is False
        if find_toolkit().nvcc is not None:
            nvcc = CompileJob(HEADERS + BODY.format(n=25), arch=ARCH, backend="nvcc")
            assert await engine.make_pch(nvcc) is False
        assert nvrtc_pool(engine).pch_counts()["created"] == 0
        with pytest.raises(InvalidJob, match="sm_1"):
            await engine.make_pch(CompileJob(HEADERS, arch="sm_1", pch=True))
        with pytest.raises(InvalidJob, match="expected a CompileJob"):
            await engine.make_pch("not a job")  # type: ignore[arg-type]


def test_make_pch_on_a_compile_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through a real server (SyncEngine, the TileLang facade's engine): the
    request carries the job, the answer whether the server's workers share the PCH."""
    monkeypatch.setenv(AHEAD_ENV, "off")  # a server that starts from nothing
    with server_folder() as folder:
        with running_server(folder) as (_, paths), SyncEngine(server=str(paths.socket)) as engine:
            assert engine.make_pch(job(26)) is True
            used = engine.compile(job(27))
            assert used.ok and USED in used.log, used.log
            counts = server_api.status(paths.socket)["pch"]["nvrtc"]
            with pytest.raises(InvalidJob):
                engine.make_pch(CompileJob(HEADERS, arch="sm_1", pch=True))
        assert len(list(paths.pch_hints.glob("*.json"))) == 1  # used: a hint for the next
    assert (counts["ahead"], counts["created"], counts["reused"]) == (1, 1, 1)


def nvrtc_pool(engine: Engine) -> NvrtcWorkers:
    parts = engine._life.parts
    assert parts is not None
    backend = parts.runner.started.scheduler.backends["nvrtc"]  # type: ignore[attr-defined]
    assert isinstance(backend, NvrtcBackend) and backend.pool is not None
    return backend.pool


async def wait_until_made_ahead(engine: Engine) -> None:
    """Until the engine's workers are making a PCH ahead (the jobs sent after wait):
    the task asking for it waits on its worker by then."""
    await anyio.wait_all_tasks_blocked()
    assert nvrtc_pool(engine)._ahead
