"""A backend of one's own is its module and its registry line, at every door: a toy backend
written into a temporary module, registered through ``$ASYNCCOMP_BACKENDS``, runs through
``Engine``, ``SyncEngine``, the compile server and the command line, each time with its own
worker count, and describes its own compiler (in reports, cache keys, the server's
welcome)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, SyncEngine
from asynccomp.backends import backend_names, compiler_info

from .servers import running_server, server_folder

TOY = textwrap.dedent(
    '''
    """A compiler that reverses its source: asynccomp's backend interface, nothing else."""

    from pathlib import Path

    import anyio

    from asynccomp.backends import (
        BackendOutput, BackendSettings, CompilerBackend, PreparedCompile,
    )


    class EchoBackend(CompilerBackend):
        name = "echo"
        outputs = ("cubin",)
        source_language = "echo text"
        source_suffix = ".echo"
        runs = "the toy's own coroutines"

        def __init__(self, toolkit, workers=1):
            super().__init__(toolkit)
            self.workers = workers

        @classmethod
        def create(cls, toolkit, settings: BackendSettings):
            return cls(toolkit, settings.workers)

        @classmethod
        def version(cls, toolkit):
            return "1.2"

        @classmethod
        def path(cls, toolkit):
            return __file__

        @classmethod
        def archs(cls, toolkit):
            return ()

        @classmethod
        def identity(cls, toolkit):
            return "echo 1.2", ()

        def prepare(self, job, options):
            stem = job.name.replace("/", "_")
            return PreparedCompile(
                backend=self.name, output="cubin", arch=options.arch, source=job.source,
                filename=f"{stem}.echo", options=("--reverse",),
                timeout=job.timeout,
            )

        async def run(self, prepared: PreparedCompile) -> BackendOutput:
            await anyio.sleep(0)
            # The running backend's count (a server's, not its client's).
            binary = prepared.source[::-1].encode() + f" --workers={self.workers}".encode()
            return BackendOutput("ok", binary, f"echoed {prepared.filename}")
    '''
)


@pytest.fixture
def echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy backend's module in a temporary folder, registered for this process and
    the processes it starts (the server, the command line)."""
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy_echo.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(folder))
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("ASYNCCOMP_BACKENDS", "echo=toy_echo:EchoBackend")
    yield folder
    sys.modules.pop("toy_echo", None)


def _echoed(text: str, workers: int) -> bytes:
    return text[::-1].encode() + f" --workers={workers}".encode()


async def test_engine_runs_it_with_its_own_worker_count(echo: Path) -> None:
    assert "echo" in backend_names()
    job = CompileJob("hello", name="h", backend="echo", arch="sm_90a")
    async with Engine(arch="sm_90a", workers={"echo": 3}, cache=False) as engine:
        result = await engine.compile(job)
        slots = dict(engine.slots)
        versions = engine.compiler_versions
    assert result.ok and result.binary == _echoed("hello", 3)
    assert slots["echo"] == 3
    assert versions["echo"] == "1.2"
    info = compiler_info("echo", engine.toolkit)
    assert (info.identity, info.runs) == ("echo 1.2", "the toy's own coroutines")


def test_sync_engine_runs_it_and_caches_it_under_its_identity(echo: Path, tmp_path: Path) -> None:
    job = CompileJob("cached", name="c", backend="echo", arch="sm_90a")
    with SyncEngine(arch="sm_90a", workers=2, cache_dir=tmp_path / "cache") as engine:
        first = engine.compile(job)
        again = engine.compile(job)
    assert first.ok and first.binary == _echoed("cached", 2)
    assert again.cached and again.binary == first.binary


def test_the_server_runs_it_with_its_serve_j_count_and_describes_it(echo: Path) -> None:
    with (
        server_folder() as folder,
        running_server(folder, "-j", "echo=4") as (_, paths),
        SyncEngine(arch="sm_90a", server=str(paths.socket)) as engine,
    ):
        result = engine.compile(CompileJob("served", backend="echo", arch="sm_90a"))
        slots = dict(engine.slots)
        welcome = engine.toolkit.described("echo")
    assert result.ok and result.binary == _echoed("served", 4)
    assert slots["echo"] == 4
    # What the server's backend said of its compiler came in the welcome.
    assert welcome is not None and welcome.version == "1.2" and welcome.runs.startswith("the toy")


def test_the_command_line_compiles_its_files_with_j_for_it(echo: Path, tmp_path: Path) -> None:
    source = tmp_path / "one.echo"
    source.write_text("from a file")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asynccomp",
            "compile",
            str(source),
            "--backend",
            "echo",
            "--arch",
            "sm_90a",
            "-j",
            "echo=5",
            "--no-server",
            "--no-cache",
            "--json",
            str(report),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [record] = json.loads(report.read_text())
    assert record["status"] == "ok", record
    written = list((tmp_path / "out").iterdir())
    assert [w.read_bytes() for w in written] == [_echoed("from a file", 5)]


def test_j_takes_every_backend_ptx_included(tmp_path: Path) -> None:
    """``-j`` once refused ``--backend ptx``: it counts every backend's compiles now."""
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asynccomp",
            "compile",
            str(ptx),
            "--backend",
            "ptx",
            "--arch",
            "sm_90a",
            "-j",
            "2",
            "--no-server",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_an_unknown_backend_in_workers_is_a_settings_error() -> None:
    from asynccomp import SettingsError

    with pytest.raises(SettingsError, match="'clang' is not a backend"):
        Engine(workers={"clang": 2})
    with pytest.raises(SettingsError, match="nvrtc is set by nvrtc_workers too"):
        Engine(nvrtc_workers=2, workers={"nvrtc": 3})
