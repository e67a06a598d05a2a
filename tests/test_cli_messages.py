"""What the command line says: each message once, in its own terms (flags, not Python
names), and what it says of the remote cache true (a refused login is not an
unreachable server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asynccomp.cache import REMOTE_CACHE_ENV

from .kernels import ARCH, scale_kernel
from .processes import run_cli
from .ray_cluster import needs_ray
from .redis_server import TEAM_KEY, RedisServer, free_port

PASSWORD = "the-right-one"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache"), **extra}


@pytest.fixture
def locked_redis(tmp_path: Path, team_key: str) -> Iterator[RedisServer]:
    """A real Redis that wants a password (``requirepass``)."""
    server = RedisServer(tmp_path, password=PASSWORD)
    try:
        yield server
    finally:
        server.stop()


def test_a_refused_login_is_not_an_unreachable_server(
    tmp_path: Path, locked_redis: RedisServer
) -> None:
    wrong = locked_redis.url.replace(PASSWORD, "a-wrong-one")
    env = _env(tmp_path, **{REMOTE_CACHE_ENV: wrong})
    stats = run_cli("cache", "stats", env=env)
    assert stats.returncode == 0, stats.stderr
    remote = next(line for line in stats.stdout.splitlines() if line.startswith("remote "))
    assert "reachable, but it refused the login (wrong user name or password)" in remote
    assert "not reachable" not in remote.lower() and "a-wrong-one" not in stats.stdout
    facts = json.loads(run_cli("cache", "stats", "--json", env=env).stdout)["remote"]
    assert facts["reachable"] is True and "refused the login" in facts["problem"]
    doctor = run_cli("doctor", env=env)
    assert doctor.returncode == 1, doctor.stdout
    assert (
        "PROBLEM: the remote cache is not used: reachable, but it refused the login"
        in doctor.stdout
    )
    # No password at all, to a server that wants one.
    env[REMOTE_CACHE_ENV] = wrong.replace(":a-wrong-one@", "")
    doctor = run_cli("doctor", env=env)
    assert doctor.returncode == 1 and "it wants a password" in doctor.stdout
    # The right one: usable (logged in, pinged, read).
    env[REMOTE_CACHE_ENV] = locked_redis.url
    assert "(reachable, usable)" in run_cli("cache", "stats", env=env).stdout
    doctor = run_cli("doctor", env=env)
    assert "(reachable, login and a read work)" in doctor.stdout
    assert "remote cache is not used" not in doctor.stdout


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # {closed}: a port free when the test runs (ids stay the same in every test process).
        ("redis://127.0.0.1:{closed}/0", "the remote cache is not used: not reachable"),
        ("redis://127.0.0.1:notaport/0", "the remote cache is not used: invalid remote_cache"),
    ],
)
def test_doctor_fails_on_a_remote_cache_it_cannot_use(tmp_path: Path, url: str, said: str) -> None:
    url = url.replace("{closed}", str(free_port()))
    env = _env(tmp_path, **{REMOTE_CACHE_ENV: url, "ASYNCCOMP_REMOTE_CACHE_KEY": TEAM_KEY})
    doctor = run_cli("doctor", env=env)
    assert doctor.returncode == 1
    assert f"PROBLEM: {said}" in doctor.stdout
    facts = json.loads(run_cli("doctor", "--json", env=env).stdout)
    assert any(said in problem for problem in facts["problems"])


def test_the_authentication_warning_is_said_once(tmp_path: Path, team_key: str) -> None:
    server = RedisServer(tmp_path)
    try:
        (tmp_path / "k.cu").write_text(scale_kernel(61.0))
        env = _env(tmp_path, **{REMOTE_CACHE_ENV: server.url})
        compile_args = ("compile", str(tmp_path / "k.cu"), "--arch", ARCH, "--no-server")
        assert run_cli(*compile_args, env=env).returncode == 0
        (key,) = server.stored_keys()
        server.set(key, b"forged" * 20)
        env["ASYNCCOMP_CACHE_DIR"] = str(tmp_path / "fresh")  # it asks the remote tier
        proc = run_cli(*compile_args, env=env)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "failed authentication" in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("asynccomp: warning: 1 entry from remote compile cache")


def test_the_server_log_names_asynccomp_once(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    (temporary / "asynccomp-nvcc-999999999-stale").mkdir(parents=True)  # a dead process's
    env = _env(tmp_path, TMPDIR=str(temporary))
    done = subprocess.run(
        [sys.executable, "-m", "asynccomp", "serve", "-j", "1", "--idle-timeout", "0.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "asynccomp: removed 1 work folders of processes that ended" in done.stderr
    assert "asynccomp: asynccomp:" not in done.stderr


@needs_ray
def test_a_warning_has_one_prefix(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text(scale_kernel(62.0))
    args = ("compile", str(tmp_path / "a.cu"), "--arch", ARCH, "--ray", "127.0.0.1:1")
    proc = run_cli(*args, "--ray-fallback", "--ray-timeout", "20", env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "asynccomp: warning: compiling with local workers: could not reach" in proc.stderr
    assert "asynccomp: warning: asynccomp:" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--arhc", ARCH],
            "unrecognized arguments: --arhc sm_90a (--arhc: did you mean --arch?)",
        ),
        (
            ["--arch", "sm_20"],
            "--arch sm_20: nvrtc (",
        ),
        (
            ["--arch", "compute_90a", "--output", "cubin"],
            "--output cubin needs a real GPU architecture (--arch sm_90a): compute_90a is a "
            "virtual one, which compiles to PTX (--output ptx)",
        ),
        (["--arch", ARCH, "--ray-actors", "2"], "--ray-actors goes with --ray ADDRESS"),
        (["--arch", ARCH, "--ray-actors", "0", "--ray", "auto"], "argument --ray-actors:"),
        (
            ["--arch", ARCH, "--ray", "auto", "-j", "4"],
            "-j 4 counts local workers, and --ray compiles on the cluster's actors: "
            "--ray-actors 4 sets how many",
        ),
    ],
)
def test_errors_in_the_command_lines_terms(tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "k.cu").write_text(scale_kernel(63.0))
    proc = run_cli("compile", str(tmp_path / "k.cu"), "--no-server", *args, env=_env(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"asynccomp: error: {said}"), proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "Engine(" not in proc.stderr and "RayExecutor" not in proc.stderr


def test_a_virtual_architecture_compiles_to_ptx(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(scale_kernel(64.0))
    out = tmp_path / "out"
    proc = run_cli(
        "compile",
        str(tmp_path / "k.cu"),
        "--arch",
        "compute_90a",
        "--out",
        str(out),
        "--no-server",
        env=_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    (binary,) = out.iterdir()
    assert binary.name == "k.ptx"
    assert ".target sm_90a" in binary.read_text()


def _help_of(text: str, flag: str) -> str:
    """One option's help in ``--help`` output, as one line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * 10) or line.strip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


def test_every_list_of_backends_in_the_help_is_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The help names every registered backend where it lists backends (nvjitlink was
    missing from hand-written ones), and a backend added to the registry shows up."""
    from asynccomp.backends import BACKENDS, backend_class, backend_names

    text = run_cli("compile", "--help", env=_env(tmp_path)).stdout
    ptx_readers = [n for n in backend_names() if backend_class(n).source_suffix == ".ptx"]
    assert len(ptx_readers) >= 2
    assert f".ptx with --backend {' or '.join(ptx_readers)}" in _help_of(text, "paths")
    for flag in ("--backend", "--output"):
        for name in backend_names():
            assert name in _help_of(text, flag).split("}", 1)[1], (flag, name)
    doctor = run_cli("doctor", "--help", env=_env(tmp_path)).stdout
    assert "{" + ",".join(backend_names()) + "}" in doctor

    from asynccomp.cli._compile import backend_help, output_help, paths_help

    monkeypatch.setitem(BACKENDS, "ptx2", BACKENDS["ptx"])
    assert "--backend ptx, nvjitlink or ptx2" in paths_help()
    assert "ptx2" in backend_help() and "ptx2" in output_help()


def _old_toolkit_root(folder: Path) -> Path:
    """Where a CUDA 12.8 toolkit would be, as the search sees it: ``bin/nvcc`` (which
    only tells its version) and headers older than NVRTC."""
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "cuda.h").write_text("#define CUDA_VERSION 12080\n")
    (folder / "include" / "cuda_runtime.h").write_text("#pragma once\n")
    (folder / "bin").mkdir()
    nvcc = folder / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    return folder


def test_doctor_says_when_the_header_wheels_are_installed_but_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A toolkit root with headers was found, so the installed header wheels are not
    used: the doctor says so (not "use the header wheels"), and how to use them;
    $ASYNCCOMP_CUDA_HEADERS=wheels then does."""
    import argparse

    from asynccomp.cli import _doctor
    from asynccomp.errors import SettingsError
    from asynccomp.toolkit import HEADERS_ENV, discover_toolkit, find_toolkit, wheel_include_dirs

    wheels = wheel_include_dirs()
    assert wheels, "the header wheels are asynccomp's dependencies"
    root = _old_toolkit_root(tmp_path / "cuda-12.8")
    env = {"CUDA_PATH": str(root), "PATH": ""}
    old = discover_toolkit(env, default_roots=())
    assert old.include_dirs[0] == root / "include" and old.cuda_root == root
    monkeypatch.setattr(_doctor, "find_toolkit", lambda: old)
    args = argparse.Namespace(backend=None, arch=None, json=False)
    facts, _ = _doctor.report(args)
    nvrtc = ".".join(map(str, find_toolkit().nvrtc_version or ()))
    (note,) = [n for n in facts["notes"] if n.startswith("NVRTC")]
    assert note.startswith(f"NVRTC {nvrtc} compiles against CUDA 12.8 headers ({root}/include)")
    wheel_headers = facts["nvrtc"]["header_wheels"]["headers"]
    assert f"The header wheels are installed (CUDA {wheel_headers} headers in {wheels[0]}" in note
    assert "use the header wheels" not in note
    assert (
        "asynccomp uses them only when it finds no toolkit root with headers, and it found "
        f"{root}: set {HEADERS_ENV}=wheels to compile against them"
    ) in note
    assert facts["nvrtc"]["header_wheels"]["used"] is False

    # What the note says to do works: the wheels' headers, the root found all the same.
    chosen = discover_toolkit({**env, HEADERS_ENV: "wheels"}, default_roots=())
    assert list(chosen.include_dirs) == wheels and chosen.cuda_root == root
    monkeypatch.setattr(_doctor, "find_toolkit", lambda: chosen)
    facts, _ = _doctor.report(args)
    assert facts["nvrtc"]["header_wheels"]["used"] is True
    assert not any("use them only when" in n for n in facts["notes"])
    with pytest.raises(SettingsError, match=f"invalid {HEADERS_ENV} 'bogus'"):
        discover_toolkit({**env, HEADERS_ENV: "bogus"}, default_roots=())
    bad = run_cli("doctor", env=_env(tmp_path, **{HEADERS_ENV: "bogus"}))
    assert bad.returncode == 2 and bad.stderr.startswith(f"asynccomp: error: invalid {HEADERS_ENV}")


# -- a warning names the caller's line, not asynccomp's (issue 39) ----------------------


def _sites(caught: Any) -> list[tuple[str, str]]:
    return [(Path(w.filename).name, w.category.__name__) for w in caught]


def test_a_warning_of_a_call_names_the_callers_line() -> None:
    from asynccomp import Engine
    from asynccomp.errors import ResourceLimitWarning

    with pytest.warns(ResourceLimitWarning, match="lowered") as caught:
        Engine(arch=ARCH, nvrtc_workers=100_000)
    assert {w.filename for w in caught} == {__file__}, _sites(caught)


async def test_a_warning_from_an_engines_thread_names_the_line_that_started_it(
    tmp_path: Path, team_key: str
) -> None:
    """The unusable folder is found in a worker thread, the unreachable remote cache in
    the engine's tasks: their warnings name the ``async with`` (no asynccomp line)."""
    from asynccomp import CompileJob, Engine
    from asynccomp.cache import CacheDirWarning, RemoteCacheWarning

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    url = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    with pytest.warns(CacheDirWarning, match="not usable") as caught:
        async with Engine(arch=ARCH, cache_dir=blocker / "cache", server=None) as engine:
            assert (await engine.compile(CompileJob(scale_kernel(81.0)))).ok
    assert {w.filename for w in caught} == {__file__}, _sites(caught)
    with pytest.warns(RemoteCacheWarning, match="not usable") as caught:
        async with Engine(arch=ARCH, cache_dir=tmp_path / "c", remote_cache=url) as engine:
            assert (await engine.compile(CompileJob(scale_kernel(82.0)))).ok
    assert {w.filename for w in caught} == {__file__}, _sites(caught)


def test_a_warning_from_a_sync_engines_loop_names_the_line_that_started_it(
    tmp_path: Path,
) -> None:
    from asynccomp import SyncEngine
    from asynccomp.cache import CacheDirWarning

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    engine = SyncEngine(arch=ARCH, cache_dir=blocker / "cache", server=None)
    with pytest.warns(CacheDirWarning, match="not usable") as caught:
        engine.start()
    engine.close()
    assert {w.filename for w in caught} == {__file__}, _sites(caught)
    # Code with no source file to show (python -c) is named as Python names it.
    code = (
        "from asynccomp import SyncEngine\n"
        f"with SyncEngine(arch={ARCH!r}, cache_dir={str(blocker / 'cache')!r}, server=None):\n"
        "    pass\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("<string>:2: CacheDirWarning: compile cache folder")


def test_a_cache_warning_names_the_callers_line(tmp_path: Path) -> None:
    from asynccomp.cache import CacheCorruptionWarning, DiskCache

    from .test_cache_store import key_of, make_entry

    cache = DiskCache(tmp_path)
    cache.put(key_of(5), make_entry())
    cache.path_of(key_of(5)).write_bytes(b"garbage")
    with pytest.warns(CacheCorruptionWarning, match="corrupt") as caught:
        assert cache.get(key_of(5)) is None
    assert {w.filename for w in caught} == {__file__}, _sites(caught)
