"""A Ray cluster that cannot be reached ends the engine's start within its
``startup_timeout``, whatever form the address took (issue 20: ``ray.init`` hung past
400 s): an explicit address, ``$RAY_ADDRESS``, ``"auto"`` or ``None`` reading a
``ray_current_cluster`` file left by a head that died; a port nothing listens on, and
one that accepts connections but never answers as Ray does. ClusterError, or with the
fallback a ClusterWarning and local workers. Real sockets, real Ray, no cluster."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asynccomp import ClusterError, ClusterWarning, CompileJob, Engine
from asynccomp.ray import RayExecutor

from .kernels import ARCH, scale_kernel
from .ray_cluster import RAY_ROOT, needs_ray

pytestmark = [needs_ray, pytest.mark.ray]

TIMEOUT = 5.0
MARGIN = 5.0  # the engine's own start and close, on a loaded 2-core machine


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    return _port()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (Ray's probe passes)."""
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen(64)
        yield int(listener.getsockname()[1])


@pytest.fixture
def no_ray_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $RAY_ADDRESS, and Ray's temporary folder (where ``ray start`` leaves
    ``ray/ray_current_cluster``) one of the test's."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "raytmp"))
    (tmp_path / "raytmp" / "ray").mkdir(parents=True)
    return tmp_path / "raytmp"


def _stale_cluster_file(ray_tmp: Path, port: int) -> None:
    # What `ray start --head` wrote for a head that has died since.
    (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}")


def _no_gcs_running_here() -> None:
    # "auto" prefers a GCS process running on this machine to the file: another
    # session's cluster would be found instead of the stale one.
    from ray._private import services

    running: Any = services.find_gcs_addresses  # untyped
    if running():
        pytest.skip("a Ray cluster runs on this machine: 'auto' would join it")


def _forms(port: int, ray_tmp: Path, monkeypatch: pytest.MonkeyPatch, form: str) -> str | None:
    """Set up the address form ``form`` pointing at ``port``; the address to give."""
    if form == "explicit":
        return f"127.0.0.1:{port}"
    if form in ("RAY_ADDRESS+None", "RAY_ADDRESS+auto"):
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
        return None if form.endswith("None") else "auto"
    _stale_cluster_file(ray_tmp, port)
    if form == "stale file+auto":
        _no_gcs_running_here()
        return "auto"
    return None


FORMS = ["explicit", "RAY_ADDRESS+None", "RAY_ADDRESS+auto", "stale file+None", "stale file+auto"]


async def _start(address: str | None, fallback: bool, timeout: float = TIMEOUT) -> float:
    """Start an engine on ``address``; how long that took. Without the fallback it must
    raise ClusterError, with it warn and compile here."""
    executor = RayExecutor(address=address, startup_timeout=timeout, fallback=fallback)
    started = time.monotonic()
    if not fallback:
        with pytest.raises(ClusterError, match=r"could not (reach|find) the Ray cluster"):
            async with Engine(arch=ARCH, executor=executor):
                pass
        return time.monotonic() - started
    with pytest.warns(ClusterWarning, match="compiling with local workers"):
        async with Engine(arch=ARCH, executor=executor) as engine:
            took = time.monotonic() - started
            result = await engine.compile(CompileJob(scale_kernel()))
    assert result.ok and not engine.on_cluster
    return took


@pytest.mark.parametrize("fallback", [False, True], ids=["error", "fallback"])
@pytest.mark.parametrize("form", FORMS)
async def test_a_closed_port_fails_at_once_in_every_form(
    form: str, fallback: bool, closed_port: int, no_ray_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = _forms(closed_port, no_ray_here, monkeypatch, form)
    took = await _start(address, fallback)
    assert took < MARGIN, took  # the probe is refused: no wait at all


# An engine whose ray.init hangs leaves that thread behind (it cannot be interrupted):
# run in a process of its own, so that this one's Ray stays clean, and to see that the
# process still ends at once.
CHILD = f"""
import anyio, json, sys, time, warnings
from asynccomp import ClusterError, ClusterWarning, CompileJob, Engine
from asynccomp.ray import RayExecutor

address, fallback, timeout = sys.argv[1] or None, sys.argv[2] == "1", float(sys.argv[3])

async def main() -> None:
    executor = RayExecutor(address=address, fallback=fallback, startup_timeout=timeout)
    started = time.monotonic()
    said = {{}}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with Engine(arch="{ARCH}", executor=executor) as engine:
                said["took"] = time.monotonic() - started
                said["ok"] = (await engine.compile(CompileJob({scale_kernel()!r}))).ok
        said["warned"] = [str(w.message) for w in caught if w.category is ClusterWarning]
    except ClusterError as exc:
        said.update(took=time.monotonic() - started, error=str(exc))
    print(json.dumps(said))

anyio.run(main)
"""


@pytest.mark.parametrize("fallback", [False, True], ids=["error", "fallback"])
@pytest.mark.parametrize("form", ["explicit", "RAY_ADDRESS+auto", "stale file+None"])
def test_a_port_that_never_answers_fails_within_the_startup_timeout(
    form: str, fallback: bool, silent_port: int, no_ray_here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = _forms(silent_port, no_ray_here, monkeypatch, form)
    argv = [sys.executable, "-c", CHILD, address or "", "1" if fallback else "0", "3"]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    ended = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert 3.0 <= said["took"] < 3.0 + MARGIN, said
    if fallback:
        assert said["ok"] and any("compiling with local workers" in w for w in said["warned"])
    else:
        assert "Ray did not connect within 3 s (startup_timeout)" in said["error"], said
    # ray.init still hangs in its thread: the process ends anyway (a daemon thread).
    assert ended < said["took"] + MARGIN + 3.0, ended


def _cli(
    *args: str, env: dict[str, str], cwd: Path
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "asynccomp", "compile", "a.cu", "--arch", ARCH, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**env, "ASYNCCOMP_SERVER": "off"},
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


@pytest.mark.parametrize("port_kind", ["closed", "silent"])
@pytest.mark.parametrize("form", ["RAY_ADDRESS", "stale file"])
def test_the_command_line_ends_within_the_timeout(
    form: str,
    port_kind: str,
    closed_port: int,
    silent_port: int,
    no_ray_here: Path,
    tmp_path: Path,
) -> None:
    port = closed_port if port_kind == "closed" else silent_port
    env = dict(os.environ)
    if form == "RAY_ADDRESS":
        env["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    else:
        _no_gcs_running_here()
        _stale_cluster_file(no_ray_here, port)
    (tmp_path / "a.cu").write_text(scale_kernel())
    flags = ("--ray", "auto", "--ray-timeout", "3")
    refused, took = _cli(*flags, env=env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "could not reach the Ray cluster" in refused.stderr
    assert took < 3.0 + MARGIN + 3.0, took  # plus the interpreter's start and Ray's import
    fell_back, took = _cli(*flags, "--ray-fallback", env=env, cwd=tmp_path)
    assert fell_back.returncode == 0, fell_back.stderr
    assert "compiling with local workers" in fell_back.stderr
    assert took < 3.0 + MARGIN + 3.0, took


# A cluster that answers late: a proxy to a real head that keeps silent for DELAY s,
# found through a ray_current_cluster file, with a startup_timeout shorter than that.
LATE = """
import anyio, json, os, pathlib, socket, sys, threading, time
import ray
from asynccomp import ClusterError, Engine
from asynccomp.ray import RayExecutor

host, port = sys.argv[1].rsplit(":", 1)
delay, timeout = float(sys.argv[2]), float(sys.argv[3])
listener = socket.socket()
listener.bind(("0.0.0.0", 0))
listener.listen(64)
started = time.monotonic()

def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for end in (a, b):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def forward(conn):
    time.sleep(max(0.0, started + delay - time.monotonic()))
    up = socket.create_connection((host, int(port)))
    threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
    pipe(up, conn)

def serve():
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=forward, args=(conn,), daemon=True).start()

threading.Thread(target=serve, daemon=True).start()
folder = pathlib.Path(os.environ["RAY_TMPDIR"], "ray")
folder.mkdir(parents=True, exist_ok=True)
(folder / "ray_current_cluster").write_text(f"127.0.0.1:{listener.getsockname()[1]}")
said = {}

async def main():
    try:
        async with Engine(executor=RayExecutor(startup_timeout=timeout)):
            said["joined"] = True
    except ClusterError as exc:
        said.update(error=str(exc), took=time.monotonic() - started)

anyio.run(main)
from asynccomp.ray._connect import ray_calls_pending
def connecting():
    return ray_calls_pending() > 0
while connecting() and time.monotonic() < started + 60:
    time.sleep(0.05)
said.update(connecting=connecting(), initialized=ray.is_initialized())
print(json.dumps(said))
"""

DRIVERS = """
import json, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
print(json.dumps([int(job.get("DriverPid") or 0) for job in ray._private.state.jobs()]))
"""


def test_a_connection_that_comes_late_leaves_nothing_behind(tmp_path: Path) -> None:
    from .ray_cluster import LocalHead

    if not (Path.home() / ".ray" / "auth_token").exists():
        pytest.skip("Ray's token authentication is off: the late driver cannot be seen")
    # Short: Ray's sockets live under it.
    folder = Path(tempfile.mkdtemp(prefix="rh-", dir=RAY_ROOT))
    try:
        head = LocalHead(folder)
        try:
            env = {**head.env, "RAY_TMPDIR": str(tmp_path)}  # the proxy's file, not the head's
            child = subprocess.Popen(
                [sys.executable, "-c", LATE, head.address, "6", "2"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
            said = json.loads(out)
            drivers = subprocess.run(
                [sys.executable, "-c", DRIVERS, head.address],
                env={**head.env, "RAY_AUTH_MODE": "token"},
                capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
            below = [p.name() for p in head.processes() if p.is_running()]
        finally:
            head.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # The engine gave up at its timeout; Ray connected 4 s later, in the thread left
    # behind, which then left: no connection, no thread, no actor on the head.
    assert 2.0 <= said["took"] < 2.0 + MARGIN, said
    assert "Ray did not connect within 2 s" in said["error"]
    assert said["connecting"] is False and said["initialized"] is False, said
    assert child.pid in json.loads(drivers.stdout), drivers.stdout  # it did join, late
    assert not any(name.startswith("ray::CompileActor") for name in below), below
