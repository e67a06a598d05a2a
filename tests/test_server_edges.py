"""The compile server at its edges, for real: relative includes resolved on the client,
a client that trusts only its own user's server of its own toolkit, bad socket paths
and settings, a server stopped by a signal or at its idle deadline, and what a user is
told about where the jobs ran and what the server overrides."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from asynccomp import (
    AsyncCompWarning,
    CompileJob,
    Engine,
    InvalidJob,
    ServerError,
    ServerLost,
    SyncEngine,
)
from asynccomp import server as server_api
from asynccomp._version import __version__
from asynccomp.server import Server, server_paths
from asynccomp.server._paths import short_default_folder
from asynccomp.server._protocol import PROTOCOL, Hello, Welcome, parse, send_form
from asynccomp.server._wire import encode, read_message

from .kernels import ARCH, needs_nvcc, scale_kernel, slow_kernel
from .processes import wait_until
from .servers import (
    ROOT,
    folder_prefix,
    raw_receive,
    raw_send,
    running_server,
    server_folder,
    server_pid,
    start_serve,
    wait_for_socket,
    wait_gone,
)
from .test_cli import asynccomp


@pytest.fixture
def server_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        yield folder


# -- relative includes ------------------------------------------------------------------------

INCLUDING = (
    '#include "local.h"\n'
    '#include "sub.h"\n'
    'extern "C" __global__ void k(int* x) { x[threadIdx.x] = LOCAL * 100 + SUB; }\n'
)


def _headers(folder: Path, local: int, sub: int) -> None:
    (folder / "inc").mkdir(parents=True)
    (folder / "local.h").write_text(f"#define LOCAL {local}\n")
    (folder / "inc" / "sub.h").write_text(f"#define SUB {sub}\n")


@pytest.mark.parametrize("backend", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
def test_relative_includes_are_the_clients_files_wherever_it_compiles(
    backend: str, server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`#include "local.h"` and `-I inc` mean the caller's folder: in process, on a
    server started in a folder holding other headers of the same names, in an NVRTC
    worker whatever folder it started in."""
    client, elsewhere = tmp_path / "client", tmp_path / "elsewhere"
    _headers(client, 1, 2)
    _headers(elsewhere, 7, 8)
    job = CompileJob(
        INCLUDING,
        name="inc",
        backend="nvcc" if backend == "nvcc" else "nvrtc",
        output="ptx",
        options=["-I", "inc"],
    )

    def constant(ptx: bytes | None) -> bool:
        assert ptx is not None
        return b"102" in ptx and b"708" not in ptx  # 1 * 100 + 2, never 7 * 100 + 8

    monkeypatch.chdir(elsewhere)
    with running_server(server_dir) as (_, paths):  # the server starts in "elsewhere"
        monkeypatch.chdir(client)
        with SyncEngine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes") as here:
            local = here.compile(job)
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as there:
            remote = there.compile(job)
    assert local.ok and remote.ok, (local.error, remote.error)
    assert constant(local.binary) and constant(remote.binary)
    assert local.command == remote.command and f"-I{client}" in local.command


VALUE_KERNEL = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = VALUE; }\n'

#: Forms of the path options other than -I, each (backend, options, whether the source
#: includes <v.h>): pre-included headers (both compilers), system include folders (nvcc
#: only: NVRTC has none), nvcc's comma lists.
PATH_FORMS = [
    ("nvrtc", ["-include", "pre.h"], False),
    ("nvrtc", ["--pre-include=pre.h"], False),
    ("nvrtc", ["-include=pre.h"], False),
    ("nvrtc", ["--pre-include", "pre.h"], False),
    ("nvcc", ["-include", "pre.h"], False),
    ("nvcc", ["--pre-include=pre.h"], False),
    ("nvcc", ["-isystem", "sys"], True),
    ("nvcc", ["--system-include=sys"], True),
    ("nvcc", ["-I", "nowhere,sys"], True),
]


@pytest.mark.parametrize(
    ("backend", "options", "includes"),
    [
        pytest.param(*form, id=" ".join([form[0], *form[1]]), marks=needs_nvcc)
        if form[0] == "nvcc"
        else pytest.param(*form, id=" ".join([form[0], *form[1]]))
        for form in PATH_FORMS
    ],
)
def test_relative_pre_includes_and_system_folders_are_the_clients(
    backend: str,
    options: list[str],
    includes: bool,
    server_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relative -include / --pre-include header and -isystem folder mean the
    caller's folder, as -I does: in an NVRTC worker process, in nvcc's work folder and
    on a server started elsewhere (they were read from the compiler's own folder)."""
    client, elsewhere = tmp_path / "client", tmp_path / "elsewhere"
    for folder, value in ((client, 102), (elsewhere, 708)):
        (folder / "sys").mkdir(parents=True)
        (folder / "pre.h").write_text(f"#define VALUE {value}\n")
        (folder / "sys" / "v.h").write_text(f"#define VALUE {value}\n")
    source = ("#include <v.h>\n" if includes else "") + VALUE_KERNEL
    job = CompileJob(
        source,
        name="paths",
        backend="nvcc" if backend == "nvcc" else "nvrtc",
        output="ptx",
        options=options,
    )
    monkeypatch.chdir(elsewhere)
    with running_server(server_dir) as (_, paths):
        monkeypatch.chdir(client)
        with SyncEngine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as here:
            local = here.compile(job)
        with SyncEngine(arch=ARCH, server=str(paths.socket)) as there:
            remote = there.compile(job)
    for result in (local, remote):
        assert result.ok, result.error
        assert result.binary is not None and b"102" in result.binary
        assert b"708" not in result.binary
    assert local.command == remote.command and str(client) in " ".join(local.command)


@pytest.mark.parametrize(
    "options",
    [["--options-file", "opts.txt"], ["--options-file=opts.txt"], ["-optf", "/abs/opts.txt"]],
)
def test_an_options_file_is_refused_naming_the_option(options: list[str]) -> None:
    with pytest.raises(InvalidJob, match=r"invalid options .*optf|invalid options .*options-file"):
        CompileJob(scale_kernel(), backend="nvcc", options=options)
    with pytest.raises(InvalidJob, match=r"put its options in CompileJob\.options"):
        CompileJob(scale_kernel(), options=options)


# -- trust ------------------------------------------------------------------------------------


def test_a_server_of_another_user_is_refused() -> None:
    """A socket anyone can make: one served by uid nobody, answering hello with a
    welcome and a binary, is refused before any job is sent."""
    if os.getuid() != 0:
        pytest.skip("needs root to become another user")
    folder = Path(
        tempfile.mkdtemp(prefix=f"{folder_prefix()}open-", dir=ROOT)
    )  # nobody can reach it
    folder.chmod(0o777)
    path = folder / "fake.sock"
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fake server: nobody, listening, accepting, saying anything
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
                listener.bind(str(path))
                listener.listen()
                os.write(write_end, b"x")
                listener.settimeout(30)
                conn, _ = listener.accept()
                conn.recv(65536)
                conn.sendall(b"NOT-A-CUBIN" * 10)
                conn.close()
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"x"
        with pytest.raises(ServerError, match=r"runs as uid 65534, not as this user \(uid 0\)"):
            SyncEngine(arch=ARCH, server=str(path)).start()
    finally:
        os.close(read_end)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_server_of_another_toolkit_is_refused(server_dir: Path) -> None:
    """A server named by its socket must compile with this process's toolkit, as one
    found with server="auto" does: both identities are named."""
    env = {**os.environ, "CUDA_HOME": "/elsewhere/cuda"}  # another toolkit fingerprint
    with server_folder() as other, tempfile.TemporaryFile() as stderr:
        process = start_serve(other, stderr=stderr, env=env)
        try:
            socket_path = wait_for_socket(process, other, stderr)
            mine = server_paths(server_dir).identity
            theirs = socket_path.name.removeprefix("server-").removesuffix(".sock")
            assert theirs != mine
            with pytest.raises(ServerError, match=rf"identity {theirs}.*identity is {mine}"):
                SyncEngine(arch=ARCH, server=str(socket_path)).start()
        finally:
            process.kill()
            process.wait()


# -- bad paths and settings -------------------------------------------------------------------


def test_bad_server_paths_are_server_errors_that_say_what_to_fix(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_file = server_dir / "file"  # short: the socket's path below it is not too long
    a_file.write_text("")
    with pytest.raises(ServerError, match=r"cannot reach a compile server at .*file/x\.sock"):
        SyncEngine(arch=ARCH, server=str(a_file / "x.sock")).start()
    long_path = tmp_path / ("d" * 120) / "s.sock"
    with pytest.raises(ServerError, match="over the 107 a Unix socket's path may have"):
        SyncEngine(arch=ARCH, server=str(long_path)).start()
    monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(tmp_path / ("d" * 120)))
    with pytest.raises(ServerError, match=r"set ASYNCCOMP_SERVER_DIR .* to a shorter folder"):
        SyncEngine(arch=ARCH, server="auto").start()
    monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(a_file / "sub"))
    with pytest.raises(ServerError, match=r"folder .* cannot be made"):
        SyncEngine(arch=ARCH, server="auto").start()


def test_a_deep_tmpdir_leaves_the_default_server_folder_in_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A $TMPDIR (or runtime folder) too deep for a socket's path below it, as CI
    runners set, is passed over for /tmp/asynccomp-<uid>: the server starts there, and
    the error for an $ASYNCCOMP_SERVER_DIR too deep names a folder that works."""
    mine = f"asynccomp-{os.getuid()}"
    monkeypatch.delenv("ASYNCCOMP_SERVER_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", "/var/tmp")  # short: kept
    assert short_default_folder() == Path("/var/tmp", mine)
    deep = tmp_path / ("d" * 90)
    deep.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert short_default_folder() == Path("/tmp", mine)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))  # as deep: passed over too
    assert short_default_folder() == Path("/tmp", mine)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path.parent))  # may be deep itself
    expected = tmp_path.parent / "asynccomp"
    if len(os.fsencode(expected / f"server-{'0' * 16}.sock")) > 107:
        expected = Path("/tmp", mine)
    assert short_default_folder() == expected
    monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(deep))
    hint = rf"to a shorter folder, e\.g\. {re.escape(str(expected))}$"
    with pytest.raises(ServerError, match=hint):
        server_paths()


def test_a_server_that_does_not_start_is_shown_with_what_it_said(tmp_path: Path) -> None:
    """The tests' wait for a server fails at once when the server ends, with its stderr
    (here: the socket's path is too long), not after a minute with nothing to go on."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir(mode=0o700)
    with tempfile.TemporaryFile() as stderr:
        process = start_serve(deep, stderr=stderr)
        try:
            with pytest.raises(RuntimeError, match=r"(?s)exit status 1.*over the 107"):
                wait_for_socket(process, deep, stderr)
        finally:
            process.kill()
            process.wait()


@pytest.mark.parametrize(
    "value", ["/nonexistent/folder/server.sock", "yes please", "/dev/null", "x" * 300]
)
def test_the_tvm_facade_falls_back_in_process_with_one_warning(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asynccomp.tvm

    monkeypatch.setenv("ASYNCCOMP_SERVER", value)
    asynccomp.tvm.shutdown()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cubin = asynccomp.tvm.compile_cuda(scale_kernel(), arch=ARCH)
        cubin_again = asynccomp.tvm.compile_cuda(scale_kernel(3.0), arch=ARCH)
    assert bytes(cubin[:4]) == b"\x7fELF" and bytes(cubin_again[:4]) == b"\x7fELF"
    said = [w for w in caught if issubclass(w.category, AsyncCompWarning)]
    assert len(said) == 1, [str(w.message) for w in said]
    assert "compiling in this process" in str(said[0].message)
    assert asynccomp.tvm.engine().where == "in process"


# -- a server's life --------------------------------------------------------------------------


@needs_nvcc
def test_sigterm_stops_the_server_cleanly(server_dir: Path) -> None:
    """SIGTERM while nvcc compiles: the client's job is ServerLost, the socket goes,
    the lock is free, nvcc and the NVRTC workers are gone."""
    with running_server(server_dir) as (process, paths):
        server = psutil.Process(process.pid)
        lost: list[object] = []

        def client() -> None:
            with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:
                engine.compile(CompileJob(scale_kernel(1.0)))  # an NVRTC worker starts
                lost.append(engine.compile(CompileJob(slow_kernel(), backend="nvcc")).error)

        thread = threading.Thread(target=client)
        thread.start()
        # Wait for cicc, nvcc's long step: its guard and nvcc's own start-up come
        # earlier, and a signal then finds nothing compiling yet on a loaded machine.
        deadline = time.monotonic() + 60
        while not any(_name(p) == "cicc" for p in _children(server)):
            assert time.monotonic() < deadline and thread.is_alive(), "cicc never started"
            time.sleep(0.05)
        below = _children(server)
        assert any(_name(p) == "acw-nvrtc" for p in below)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        thread.join(30)
        assert [type(e) for e in lost] == [ServerLost]
        assert not paths.socket.exists()
        fd = os.open(paths.lock, os.O_RDWR)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free
        finally:
            os.close(fd)
        assert all(wait_gone(p.pid, 15) for p in below), [p.pid for p in below]


def _name(process: psutil.Process) -> str:
    try:
        return str(process.name())
    except psutil.Error:
        return ""


def _children(process: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in process.children(recursive=True):
        try:
            child.cmdline()
            found.append(child)
        except psutil.Error:
            pass
    return found


def test_a_client_at_the_idle_deadline_starts_a_new_server(server_dir: Path) -> None:
    """A server stopping at its idle deadline may accept a client, then close at hello
    and take its socket away: the client starts a new server instead of failing."""
    paths = server_paths(server_dir)
    accepted = threading.Event()

    def stopping_server() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(paths.socket))
            listener.listen()
            conn, _ = listener.accept()
            paths.socket.unlink()  # what a stopping server does first
            conn.close()
            accepted.set()

    thread = threading.Thread(target=stopping_server)
    thread.start()
    while not paths.socket.exists():
        time.sleep(0.01)
    with SyncEngine(arch=ARCH, server="auto") as engine:
        assert engine.compile(CompileJob(scale_kernel(4.0))).ok
        assert engine.where.startswith("on the compile server (pid")
    thread.join(10)
    assert accepted.is_set() and server_pid(paths) is not None


class _IdleWhenTold(Server):
    """A real server (its socket, sessions, scheduler and NVRTC workers) whose idle
    check runs only when the test calls ``retire_if_idle()``."""

    async def _idle_check_due(self) -> None:
        await anyio.sleep_forever()


async def test_a_client_connecting_at_the_idle_deadline_is_served_or_starts_a_new_one(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its idle deadline, a server with a client still saying hello is not idle:
    the client is welcomed and compiles there. Once it is idle, retiring is one step
    with the check: the socket is gone at once, and the next client starts a new
    server (a client welcomed by a server that then stopped lost its first job)."""
    monkeypatch.chdir(tmp_path)  # the server moves into its empty folder; undone after
    paths = server_paths(server_dir)
    server = _IdleWhenTold(paths, idle_timeout=1e-9)  # idle as soon as no client is there
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        hello = await anyio.connect_unix(paths.socket)
        await wait_until(lambda: server.status()["clients"] == 1)  # connected, no hello yet
        assert not server.retire_if_idle()
        frames = encode(*send_form(Hello(PROTOCOL, __version__, os.getpid())))
        for frame in frames:
            await hello.send(frame)
        welcome = await read_message(BufferedByteReceiveStream(hello))
        assert welcome is not None and isinstance(parse(welcome), Welcome)
        await hello.aclose()
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert (await engine.compile(CompileJob(scale_kernel(4.5)))).ok
            assert engine.where == f"on the compile server (pid {os.getpid()})"
            assert not server.retire_if_idle()  # a client is connected: not idle
        await wait_until(lambda: server.status()["clients"] == 0)
        assert server.retire_if_idle()
        assert not paths.socket.exists() and not server.accepting()
    # Served out: the next client finds no socket and starts a server of its own.
    async with Engine(arch=ARCH, server="auto") as engine:
        assert (await engine.compile(CompileJob(scale_kernel(4.25)))).ok
        assert engine.where.startswith("on the compile server (pid")
        assert engine.where != f"on the compile server (pid {os.getpid()})"


def test_a_spawn_lock_that_cannot_be_opened_is_a_server_error_saying_what_to_fix(
    server_dir: Path,
) -> None:
    paths = server_paths(server_dir)
    paths.spawn.mkdir()  # not a file: it cannot be the lock
    with pytest.raises(
        ServerError, match=r"cannot open .*\.spawn.*(remove what is there|ASYNCCOMP_SERVER_DIR)"
    ):
        SyncEngine(arch=ARCH, server="auto").start()


def test_serve_starts_no_worker_until_a_job_needs_one_and_warm_starts_them_all(
    server_dir: Path,
) -> None:
    with running_server(server_dir) as (_, paths):
        status = server_api.status(paths.socket)
        assert (status["workers"], status["warm"]) == (0, False)
    with running_server(server_dir, "--warm") as (_, paths):
        deadline = time.monotonic() + 120
        while not (status := server_api.status(paths.socket))["warm"]:
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        assert status["workers"] == status["settings"]["slots"]["nvrtc"] >= 1
        assert status["compiled"] == 0  # warming is no client's compile


async def test_a_setting_the_server_overrides_is_one_warning_naming_its_value(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = tmp_path / "server-cache"
    with running_server(server_dir, "--cache-dir", str(theirs)) as (_, paths):
        monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(tmp_path / "mine"))
        with pytest.warns(AsyncCompWarning, match=f"caches in {theirs}") as caught:
            async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
                assert (await engine.compile(CompileJob(scale_kernel()))).ok
        assert len(caught) == 1
        monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(theirs))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same folder: nothing to say
            async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
                assert (await engine.compile(CompileJob(scale_kernel(2.5)))).ok


async def test_a_remote_cache_the_server_overrides_is_one_warning_naming_its_value(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$ASYNCCOMP_REMOTE_CACHE names another remote tier than the running server's (or
    one where the server has none): one warning naming the server's; the same one:
    nothing. Nothing connects to either (the stores are made, not used)."""
    monkeypatch.setenv("ASYNCCOMP_REMOTE_CACHE_KEY", "the tests' team key, 0123456789abcdef")
    from asynccomp.cache import remote_cache_from_url

    theirs, mine = "redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"
    named = {url: remote_cache_from_url(url).name for url in (theirs, mine)}
    job = CompileJob(scale_kernel(5.75))
    with running_server(server_dir) as (process, paths):  # no remote tier
        monkeypatch.setenv("ASYNCCOMP_REMOTE_CACHE", mine)
        with pytest.warns(AsyncCompWarning) as caught:
            async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
                assert (await engine.compile(job)).ok
        said = [str(w.message) for w in caught]
        assert said == [
            f"$ASYNCCOMP_REMOTE_CACHE names {named[mine]} here, but the compile server (pid "
            f"{process.pid}) uses no remote cache: its setting is used"
        ]
    monkeypatch.setenv("ASYNCCOMP_REMOTE_CACHE", theirs)
    with running_server(server_dir) as (process, paths):  # started with `theirs`
        monkeypatch.setenv("ASYNCCOMP_REMOTE_CACHE", mine)
        with pytest.warns(AsyncCompWarning) as caught:
            async with Engine(arch=ARCH, server=str(paths.socket)):
                pass
        assert len(caught) == 1 and f"uses {named[theirs]}: its setting" in str(caught[0].message)
        monkeypatch.setenv("ASYNCCOMP_REMOTE_CACHE", theirs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same tier: nothing to say
            async with Engine(arch=ARCH, server=str(paths.socket)):
                pass


# -- what the command line says ---------------------------------------------------------------


def test_the_command_line_says_where_jobs_ran_and_counts_the_servers_hits(
    server_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = {"ASYNCCOMP_SERVER_DIR": str(server_dir)}
    kernel = tmp_path / "k.cu"
    kernel.write_text(scale_kernel())
    here = asynccomp("compile", str(kernel), "--arch", ARCH, cache=cache, env=env, cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    assert "in process" in here.stdout
    with running_server(server_dir, "--cache-dir", str(cache)) as (process, _):
        there = asynccomp(
            "compile", str(kernel), "--arch", ARCH, cache=cache, env=env, cwd=tmp_path
        )
        assert there.returncode == 0, there.stderr
        assert f"on the compile server (pid {process.pid})" in there.stdout
        # A usage error keeps its shape with a server running: exit 2, one line.
        bad = asynccomp(
            "compile", str(kernel), "--arch", "sm_999", cache=cache, env=env, cwd=tmp_path
        )
        assert bad.returncode == 2
        assert bad.stderr.count("\n") == 1 and "asynccomp: error: --arch sm_999: " in bad.stderr
        stats = json.loads(
            asynccomp("cache", "stats", "--json", cache=cache, env=env, cwd=tmp_path).stdout
        )
        assert stats["server"]["pid"] == process.pid
        # The server's hit is in the totals (saved as its client left, or not yet).
        assert stats["disk_hits"] + stats["memory_hits"] == 1
        doctor = asynccomp("doctor", "--json", cache=cache, env=env, cwd=tmp_path)
        facts = json.loads(doctor.stdout)["server"]
        assert facts["running"] and facts["settings"]["cache_dir"] == str(cache.resolve())
        assert "slots" in facts["settings"]


def test_compile_j_with_a_server_running_compiles_there_and_says_what_it_runs(
    server_dir: Path, tmp_path: Path
) -> None:
    """-j N with a compile server running: the jobs go to the server (its workers are
    warm), and one warning names how many it runs; -j equal to that says nothing, and
    --no-server -j N compiles in this process with N."""
    env = {"ASYNCCOMP_SERVER_DIR": str(server_dir)}
    kernel = tmp_path / "k.cu"
    kernel.write_text(scale_kernel(6.25))
    cache = tmp_path / "cache"
    with running_server(server_dir, "--cache-dir", str(cache)) as (process, paths):
        runs = server_api.status(paths.socket)["settings"]["slots"]["nvrtc"]
        for flags in (["-j", str(runs + 1)], ["--server", "-j", str(runs + 1)]):
            done = asynccomp("compile", str(kernel), "--arch", ARCH, *flags, cache=cache, env=env)
            assert done.returncode == 0, done.stderr
            assert f"on the compile server (pid {process.pid})" in done.stdout
            assert done.stderr.splitlines() == [
                f"asynccomp: warning: the compile server (pid {process.pid}) runs {runs} "
                f"NVRTC workers; -j {runs + 1} ignored (use --no-server to compile in this "
                f"process with -j {runs + 1})"
            ]
        same = asynccomp(
            "compile", str(kernel), "--arch", ARCH, "-j", str(runs), cache=cache, env=env
        )
        assert same.returncode == 0 and same.stderr == "", same.stderr
        here = asynccomp(
            "compile", str(kernel), "--arch", ARCH, "--no-server", "-j", "1", cache=cache, env=env
        )
        assert here.returncode == 0 and here.stderr == "", here.stderr
        assert "in process" in here.stdout


async def test_running_and_statistics_on_a_server_engine(server_dir: Path) -> None:
    """A server engine reports its own jobs running, as an engine in process does."""
    async with Engine(arch=ARCH, server="auto") as engine, anyio.create_task_group() as tg:
        tg.start_soon(engine.compile, CompileJob(slow_kernel(6000), name="slow"))
        await wait_until(lambda: engine.statistics().running == 1)
        assert [job.name for job, _ in engine.running()] == ["slow"]
        await wait_until(lambda: engine.statistics().workers >= 1)  # the server's, live
        tg.cancel_scope.cancel()


# -- no size a user can hit -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("count", "megabytes"), [(700, 0.8), (11, 50)])
def test_batches_over_any_frame_size_compile_on_the_server(
    count: int, megabytes: float, server_dir: Path
) -> None:
    """700 sources of 0.8 MB (560 MB in one compile_many) and 11 of 50 MB: through the
    server as in process (the old protocol refused any batch over 512 MB)."""
    line = "// " + "x" * 97 + "\n"
    padding = line * int(megabytes * 10000)
    jobs = [CompileJob(scale_kernel(float(i)) + padding, name=f"big{i}") for i in range(count)]
    with (
        running_server(server_dir) as (_, paths),
        SyncEngine(arch=ARCH, server=str(paths.socket)) as engine,
    ):
        results = engine.compile_many(jobs)
    assert [r.job for r in results] == jobs
    assert all(r.ok for r in results), next(r.error for r in results if not r.ok)
    assert len({r.binary for r in results}) == count  # each its own kernel


def test_a_malformed_request_after_hello_is_answered_and_the_connection_goes_on(
    server_dir: Path,
) -> None:
    """A request the server refuses (a job whose shape is wrong, a request id that is
    not open) gets an Error naming it; the same connection then compiles."""
    from asynccomp.server._protocol import Error, StatusReply

    send, receive = raw_send, raw_receive
    with (
        running_server(server_dir) as (_, paths),
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
    ):
        sock.settimeout(30)
        sock.connect(str(paths.socket))
        send(sock, {"type": "hello", "protocol": PROTOCOL, "version": "0.1.0", "pid": 1}, [])
        receive(sock)  # welcome
        compile_ = {"type": "compile", "id": 5, "want": True, "end": True}
        send(sock, {**compile_, "jobs": [{"index": "zero"}]}, [b"x"])
        refused = receive(sock)
        assert isinstance(refused, Error) and refused.id == 5 and not refused.fatal
        assert "index" in refused.message
        send(sock, {"type": "jobs", "id": 99, "jobs": [], "end": True}, [])
        refused = receive(sock)
        assert isinstance(refused, Error) and refused.id == 99 and not refused.fatal
        send(sock, {"type": "status", "id": 6}, [])
        answer = receive(sock)
        assert isinstance(answer, StatusReply) and answer.id == 6
