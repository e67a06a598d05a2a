"""The compile server, for real: a server process on a real socket, real clients, real
compilers. Start on demand, sharing and coalescing across clients, permissions, idle
shutdown, stale sockets, a server killed mid-batch, cancellation, version mismatch and
random bytes on the wire."""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asynccomp import (
    CompileJob,
    CompileResult,
    Engine,
    InvalidJob,
    ServerError,
    ServerLost,
    SyncEngine,
)
from asynccomp import server as server_api
from asynccomp.server import private_folder, server_paths
from asynccomp.server._protocol import PROTOCOL
from asynccomp.server._wire import encode

from .kernels import ARCH, broken_kernel, scale_kernel, slow_kernel
from .processes import wait_until
from .servers import running_server, server_folder, server_pid, wait_gone


async def server_running(count: int) -> None:
    """Until the compile server (of ``$ASYNCCOMP_SERVER_DIR``) runs ``count`` compiles,
    as its status says (it runs in another process: asking is the way to know)."""

    def running() -> int:
        try:
            return int(server_api.status()["running"])
        except ServerError:  # not started yet
            return 0

    with anyio.fail_after(60):
        while await anyio.to_thread.run_sync(running) < count:  # noqa: ASYNC110 - another process
            await anyio.sleep(0.02)


def frames(fields: dict[str, object], blobs: list[bytes] | None = None) -> bytes:
    """One message's frames, as bytes to send."""
    return b"".join(encode(fields, blobs or []))


@pytest.fixture
def server_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        yield folder


async def test_an_engine_starts_the_server_on_demand_and_it_outlives_the_engine(
    server_dir: Path,
) -> None:
    paths = server_paths(server_dir)
    assert server_pid(paths) is None
    jobs = [CompileJob(scale_kernel(float(i)), name=f"k{i}") for i in range(3)]
    jobs.append(CompileJob(broken_kernel(), name="bad"))
    async with Engine(arch=ARCH, server="auto") as engine:
        results = await engine.compile_many(jobs)
        async with engine.as_completed(jobs[:2]) as completed:
            again = [r async for r in completed]
        stats = engine.statistics()
    pid = server_pid(paths)
    assert pid is not None and pid != os.getpid()  # a server process of its own
    assert [r.job for r in results] == jobs
    assert all(r.ok for r in results[:3]) and not results[3].ok
    assert results[0].binary is not None and results[0].binary.startswith(b"\x7fELF")
    assert results[0].resources["scale"].registers > 0
    assert "undefined_identifier_42" in str(results[3].error)
    assert results[3].error is not None and results[3].error.job is jobs[3]
    assert all(r.cached for r in again)
    assert (stats.submitted, stats.completed, stats.failed, stats.cache_hits) == (6, 6, 1, 2)
    # The server stays (warm) for the next process; its socket and folder are private.
    status = await anyio.to_thread.run_sync(server_api.status, paths.socket)
    assert status["pid"] == pid and status["compiled"] == 4 and status["clients"] == 0
    assert (paths.socket.stat().st_mode & 0o777) == 0o600
    assert (server_dir.stat().st_mode & 0o777) == 0o700  # noqa: ASYNC240
    assert await anyio.to_thread.run_sync(server_api.stop, paths.socket)
    assert wait_gone(pid)
    assert not paths.socket.exists()


async def test_results_are_the_same_as_in_process(server_dir: Path, tmp_path: Path) -> None:
    jobs = [
        CompileJob(scale_kernel(2.0), name="a"),
        CompileJob(scale_kernel(3.0), name="b", output="ptx"),
        CompileJob(scale_kernel(4.0), name="c", timeout=30, options=["-DX=1"]),
    ]
    async with Engine(arch=ARCH, cache=False, dump_dir=tmp_path / "local") as local:
        here = await local.compile_many(jobs)
    async with Engine(arch=ARCH, server="auto", dump_dir=tmp_path / "dumps") as remote:
        there = await remote.compile_many(jobs)
    for mine, theirs in zip(here, there, strict=True):
        assert theirs.binary == mine.binary and theirs.binary is not None
        assert theirs.command == mine.command  # the log differs only in ptxas' timings
        assert theirs.resources == mine.resources
        assert theirs.output == mine.output and theirs.arch == mine.arch
        assert theirs.dump_dir is not None and theirs.dump_dir.parent == tmp_path / "dumps"
        assert (theirs.dump_dir / "result.json").is_file()  # written for this client


async def test_two_clients_share_one_server_and_one_compile(server_dir: Path) -> None:
    shared = CompileJob(slow_kernel(3000), name="shared")
    async with (
        Engine(arch=ARCH, server="auto") as first,
        Engine(arch=ARCH, server="auto") as second,
        anyio.create_task_group() as tg,
    ):
        results = {}

        async def run(name: str, engine: Engine) -> None:
            results[name] = await engine.compile(shared)

        tg.start_soon(run, "first", first)
        await server_running(1)  # the first client's compile, which the second one joins
        tg.start_soon(run, "second", second)
    assert results["first"].ok and results["second"].ok
    assert results["first"].binary == results["second"].binary
    status = await anyio.to_thread.run_sync(server_api.status)
    assert status["compiled"] == 1  # compiled once for both clients
    assert status["deduplicated"] + status["hits"] == 1


async def test_a_client_that_cancels_drops_its_jobs_and_nobody_elses(server_dir: Path) -> None:
    slow = CompileJob(slow_kernel(6000), name="slow")
    async with (
        Engine(arch=ARCH, server="auto") as leaving,
        Engine(arch=ARCH, server="auto") as staying,
        anyio.create_task_group() as tg,
    ):
        kept = []

        async def stay() -> None:
            kept.append(await staying.compile(slow))

        with anyio.move_on_after(1.0):
            tg.start_soon(stay)
            await leaving.compile(slow)  # leads the compile the other one follows
    assert kept[0].ok, kept[0].error  # the follower took the compile over
    status = await anyio.to_thread.run_sync(server_api.status)
    assert status["running"] == 0 and status["queued"] == 0


def test_a_killed_client_has_its_queued_jobs_dropped(server_dir: Path) -> None:
    script = (
        "import anyio\n"
        "from asynccomp import CompileJob, Engine\n"
        "from tests.kernels import slow_kernel\n"
        "async def main():\n"
        "    async with Engine(arch='sm_90a', server='auto') as e:\n"
        "        await e.compile_many([CompileJob(slow_kernel(20000 + i)) for i in range(6)])\n"
        "anyio.run(main)\n"
    )
    client = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
    deadline = time.monotonic() + 60
    while True:
        try:
            if server_api.status()["running"] > 0:
                break
        except ServerError:
            pass
        assert time.monotonic() < deadline, "the client's jobs never started"
        time.sleep(0.1)
    client.kill()
    client.wait()
    # Its jobs stop first; the connection goes once their tasks have unwound.
    deadline = time.monotonic() + 15
    while (status := server_api.status())["running"] or status["queued"] or status["clients"]:
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


async def test_a_server_killed_mid_batch_ends_each_job_typed_and_the_next_call_gets_a_new_one(
    server_dir: Path,
) -> None:
    paths = server_paths(server_dir)
    # Two workers: both start at once, the quick one is delivered first.
    quick = CompileJob(scale_kernel(8.0), name="quick")
    slow = [CompileJob(slow_kernel(25000), name="slow0")]
    async with Engine(arch=ARCH, server="auto") as engine:
        results: list[CompileResult] = []

        workers: list[int] = []

        async def kill_it() -> None:
            await wait_until(lambda: len(results) == 1)
            pid = server_pid(paths)
            assert pid is not None
            workers.extend(p.pid for p in psutil.Process(pid).children())
            os.kill(pid, signal.SIGKILL)

        async with (
            anyio.create_task_group() as tg,
            engine.as_completed([quick, *slow]) as completed,
        ):
            tg.start_soon(kill_it)
            async for result in completed:
                results.append(result)
        assert results[0].ok and results[0].job is quick  # delivered before: kept
        assert [type(r.error) for r in results[1:]] == [ServerLost]
        assert results[1].job is slow[0] and "went away" not in str(results[0].error)
        assert "before this job finished" in str(results[1].error)
        # Its NVRTC workers die with it, the one compiling too.
        assert workers and all(wait_gone(w, 5) for w in workers)
        # The next call finds no server and starts a new one.
        after = await engine.compile(CompileJob(scale_kernel(9.0)))
        assert after.ok, after.error
    assert server_pid(paths) is not None


@pytest.mark.parametrize("call", ["compile_many", "as_completed"])
async def test_a_server_killed_while_a_batch_is_sent_ends_every_job(
    call: str, server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server dies after the first of a batch's four chunks went out: sending the
    second fails, and the jobs of the chunks never sent end ServerLost too (once, a
    compile_many of 200 raised a bare AssertionError and as_completed gave 128)."""
    from asynccomp.server import _connect
    from asynccomp.server._protocol import Compile, Jobs

    jobs = [CompileJob(scale_kernel(float(i)) + f"// {call}\n", name=f"j{i}") for i in range(200)]
    with running_server(server_dir) as (process, paths):
        original = _connect.Connection.send
        chunks: list[int] = []

        async def send(self: _connect.Connection, message: object, blobs: Any = ()) -> None:
            if isinstance(message, (Compile, Jobs)):
                chunks.append(len(message.jobs))
                if len(chunks) == 2:
                    # Blocking, on purpose: the client's reader cannot see the server go
                    # before this send does.
                    process.kill()
                    process.wait()
            await original(self, message, blobs)

        monkeypatch.setattr(_connect.Connection, "send", send)
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            with anyio.fail_after(120):
                if call == "compile_many":
                    results = await engine.compile_many(jobs)
                else:
                    async with engine.as_completed(jobs) as completed:
                        results = [r async for r in completed]
            stats = engine.statistics()
    assert chunks[:2] == [64, 64]
    assert sorted(r.job.name for r in results) == sorted(j.name for j in jobs)
    lost = [r for r in results if isinstance(r.error, ServerLost)]
    assert all(r.ok for r in results if r.error is None) and len(lost) >= 200 - 64
    assert (stats.completed, stats.running, stats.queued) == (200, 0, 0)


async def test_a_prefetch_through_the_server_gets_statuses_not_outputs(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prefetched results go to the server's cache; nobody reads them here, so what
    comes back per job is its status, never its log and binary."""
    from asynccomp.server import _client
    from asynccomp.server._protocol import Results, parse

    seen: list[str] = []

    def counted(message: Any) -> Any:
        answer = parse(message)
        if isinstance(answer, Results):  # "Done" per status alone, "Output" with blobs
            kind = "Output" if message.blobs else "Done"
            seen.extend([kind] * len(answer.outcomes))
        return answer

    monkeypatch.setattr(_client, "parse", counted)
    jobs = [CompileJob(scale_kernel(float(i) + 0.25), name=f"p{i}") for i in range(3)]
    with running_server(server_dir) as (_, paths):
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            engine.prefetch(jobs)
            await wait_until(lambda: engine.statistics().completed == 3)
            prefetched = list(seen)
            again = await engine.compile(jobs[0])
    assert prefetched.count("Done") == 3 and "Output" not in prefetched, prefetched
    assert again.ok and again.cached and seen.count("Output") == 1


async def test_a_call_cancelled_between_the_frames_of_a_message_costs_no_other_call(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call cancelled while its 10 MB job is on its way (three frames): the message
    still goes out whole, so the connection stays whole and another call on it ends
    well (half a message, then the next one, was a protocol error that cost the
    server's every call on the connection: ServerLost)."""
    from asynccomp.server import _connect
    from asynccomp.server._wire import encode as encode_

    cancelling: list[anyio.CancelScope] = []

    class CancelsAfterTheFirst(list[bytes]):
        def __iter__(self) -> Iterator[bytes]:
            for i, frame in enumerate(list.__iter__(self)):
                if i == 1 and cancelling:
                    cancelling.pop().cancel()  # between the first frame and the second
                yield frame

    def encode(fields: Any, blobs: Any = ()) -> list[bytes]:
        frames = encode_(fields, blobs)
        return CancelsAfterTheFirst(frames) if len(frames) > 1 else frames

    monkeypatch.setattr(_connect, "encode", encode)
    padding = ("// " + "x" * 97 + "\n") * 100_000  # 10 MB: three frames
    big = CompileJob(scale_kernel(9.5) + padding, name="big")
    other = CompileJob(slow_kernel(2500), name="other")
    with running_server(server_dir) as (_, paths):
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            results: list[CompileResult] = []
            async with anyio.create_task_group() as tg:

                async def run_other() -> None:
                    results.append(await engine.compile(other))

                tg.start_soon(run_other)
                await wait_until(lambda: engine.statistics().running == 1)
                with anyio.CancelScope() as scope:
                    cancelling.append(scope)
                    await engine.compile(big)
                assert scope.cancelled_caught and not cancelling
            assert results[0].ok, results[0].error
            assert (await engine.compile(CompileJob(scale_kernel(9.75)))).ok


def test_idle_shutdown(server_dir: Path) -> None:
    # That a connected client keeps it from idling is checked in process, at the moment
    # the test chooses (test_server_edges.py): no waiting out a deadline here.
    with running_server(server_dir, "--idle-timeout", "2") as (process, paths):
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:
            assert engine.compile(CompileJob(scale_kernel())).ok
        process.wait(timeout=30)  # no client: it stops by itself
    assert process.returncode == 0
    assert not paths.socket.exists()


def test_a_stale_socket_is_cleaned_up_and_a_second_server_is_refused(server_dir: Path) -> None:
    paths = server_paths(server_dir)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(paths.socket))  # what a killed server leaves behind
    assert paths.socket.exists()
    with running_server(server_dir) as (_, paths):
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:
            assert engine.compile(CompileJob(scale_kernel())).ok
        rival = subprocess.run(
            [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(server_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert rival.returncode == 1
        assert "already running" in rival.stderr


def test_the_private_folder_must_be_private(tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    with pytest.raises(ServerError, match="open to other users"):
        private_folder(open_folder)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    if os.getuid() == 65534:  # pragma: no cover
        pytest.skip("running as nobody")
    with pytest.raises(ServerError, match="belongs to uid 65534"):
        private_folder(theirs)


def test_another_user_is_refused_by_the_server(server_dir: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to become another user")
    with running_server(server_dir) as (_, paths):
        # Open the folder and socket so that the file permissions let the other user in:
        # the server's own check of the peer's uid (SO_PEERCRED) must refuse it.
        server_dir.chmod(0o755)
        paths.socket.chmod(0o666)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: become nobody, knock
            try:
                os.setgid(65534)
                os.setuid(65534)
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(30)
                    sock.connect(str(paths.socket))
                    sock.sendall(frames({"type": "hello", "protocol": PROTOCOL, "version": "x"}))
                    answer = b""
                    while chunk := sock.recv(65536):  # until the server closes
                        answer += chunk
                os.write(write, answer)
            except BaseException as exc:
                os.write(write, repr(exc).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            answer = pipe.read()
        os.waitpid(pid, 0)
        server_dir.chmod(0o700)
        assert b"refused" in answer and b"uid 65534" in answer
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:  # still serving us
            assert engine.compile(CompileJob(scale_kernel())).ok


async def test_a_version_mismatch_names_both_versions(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_server(server_dir) as (_, paths):
        from asynccomp.server import _connect

        monkeypatch.setattr(_connect, "__version__", "9.9.9")
        with pytest.raises(
            ServerError, match=r"server is asynccomp 0\.1\.0.*client is asynccomp 9\.9\.9"
        ):
            async with Engine(arch=ARCH, server=str(paths.socket)):
                pass


def test_random_bytes_cannot_take_the_server_down(server_dir: Path) -> None:
    rng = random.Random(1234)
    with running_server(server_dir) as (process, paths):
        for attempt in range(300):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(str(paths.socket))
                kind = attempt % 4
                if kind == 0:  # noise
                    payload = rng.randbytes(rng.randint(1, 2000))
                elif kind == 1:  # a frame of noise
                    body = rng.randbytes(rng.randint(0, 500))
                    payload = struct.pack(">I", len(body)) + body
                elif kind == 2:  # a huge length
                    payload = struct.pack(">I", rng.randint(2**29 + 1, 2**32 - 1))
                else:  # a hello, then a frame of JSON with the wrong shapes
                    hello = frames(
                        {"type": "hello", "protocol": PROTOCOL, "version": "0.1.0", "pid": 1}
                    )
                    junk: dict[str, object] = rng.choice(
                        [
                            {"type": "compile", "id": "x"},
                            {"type": "compile", "id": 1, "want": True},
                            {"type": "compile", "id": 1, "want": True, "jobs": [], "end": 1},
                            {"type": "jobs", "id": 1, "jobs": [{"index": 3}], "end": True},
                            {"type": "jobs", "id": 1, "jobs": [1, 2], "end": False},
                            {"type": "jobs", "id": 7, "jobs": [], "end": True},
                            {"type": "cancel"},
                            {"type": "nonsense"},
                            {"type": "welcome"},
                        ]
                    )
                    payload = hello + frames(junk, [b"x"] * rng.randint(0, 2))
                try:
                    sock.sendall(payload)
                    sock.shutdown(socket.SHUT_WR)
                    while sock.recv(65536):
                        pass
                except OSError:
                    pass
        assert process.poll() is None  # still up
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:
            assert engine.compile(CompileJob(scale_kernel(5.0))).ok


def test_settings_that_belong_to_the_server_are_refused() -> None:
    with pytest.raises(InvalidJob, match="nvrtc_workers, cache_dir belong to the server"):
        Engine(arch=ARCH, server="auto", nvrtc_workers=2, cache_dir="/tmp/x")
    with pytest.raises(InvalidJob, match="server"):
        Engine(server=42)  # type: ignore[arg-type]


def test_no_server_at_an_explicit_socket_is_a_clear_error(server_dir: Path) -> None:
    engine = SyncEngine(arch=ARCH, server=str(server_dir / "nothing.sock"))
    with pytest.raises(ServerError, match="no compile server is running at"):
        engine.start()


def test_many_processes_starting_the_server_at_once_start_one(server_dir: Path) -> None:
    paths = server_paths(server_dir)
    script = (
        "from asynccomp import CompileJob, SyncEngine\n"
        "with SyncEngine(arch='sm_90a', server='auto') as e:\n"
        "    assert e.compile(CompileJob('extern \"C\" __global__ void k() {}')).ok\n"
    )
    clients = [
        subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).parent.parent)
        for _ in range(4)
    ]
    assert [c.wait(timeout=120) for c in clients] == [0, 0, 0, 0]
    servers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"]
        and "serve" in p.info["cmdline"]
        and str(server_dir) in p.info["cmdline"]
    ]
    assert len(servers) == 1, [p.info["cmdline"] for p in servers]
    assert servers[0].pid == server_pid(paths)
