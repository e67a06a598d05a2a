"""Templates shared by a user's processes (``PoolSettings.share_in``): a later process
forks its workers from the template an earlier one started (the imports paid once per
machine), a template of other settings is another one, a shared template ends when
idle or told to, a killed one's socket is taken over, and ``ASYNCCOMP_SHARED_TEMPLATES=off``
shares nothing. Each pool runs in a process of its own, as tuning processes do; the
tests' session turns sharing off (tests/conftest.py), so each test turns it on for its
own processes, in a folder of its own, and stops what it started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asynccomp.workers import (
    SHARED_TEMPLATES_ENV,
    PoolSettings,
    WorkerPool,
    shared_folder,
    stop_shared,
)
from asynccomp.workers._sharing import share_path

from . import warm_tasks
from .processes import REPO, gone, run_cli
from .servers import server_folder
from .warm_tasks import wait_gone

# One pool in one process: its initializer's tag and process, its worker's, whether it
# joined a shared template; its worker writes to standard error.
POOL = """
import functools, json, sys
from pathlib import Path
from asynccomp.workers import PoolSettings, WorkerPool
from tests import warm_tasks
folder, tag, idle = sys.argv[1], sys.argv[2], float(sys.argv[3])
pool = WorkerPool(PoolSettings("shared-test", 1, [functools.partial(warm_tasks.remember, tag)],
                               share_in=Path(folder), share_idle=idle))
try:
    said = pool.submit(warm_tasks.remembered).result()
    assert said.outcome == "done", said
    assert pool.submit(warm_tasks.shout, f"worker of {tag}").result().outcome == "done"
    env = {k: pool.submit(warm_tasks.environ_of, k).result().value
           for k in ("ASYNCCOMP_CACHE_DIR", "ASYNCCOMP_ONLY", "PROBE")}
    print(json.dumps({"tag": said.value[0], "template": said.value[1], "worker": said.value[2],
                      "joined": pool.statistics().joined, "env": env}))
finally:
    pool.close()
"""


@pytest.fixture
def folder() -> Iterator[Path]:
    """A private folder short enough for a socket's path whatever ``$TMPDIR`` is (the
    compile-server tests' own); every template still shared there is stopped after the
    test."""
    with server_folder() as path:
        try:
            yield path
        finally:
            stop_shared(path)


def run_pool(
    folder: Path, tag: str, idle: float = 300.0, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != SHARED_TEMPLATES_ENV} | (environ or {})
    proc = subprocess.run(
        [sys.executable, "-c", POOL, str(folder), tag, str(idle)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    said: dict[str, Any] = json.loads(proc.stdout)
    said["stderr"] = proc.stderr
    return said


def logs(folder: Path) -> str:
    return "".join(p.read_text() for p in folder.glob("tpl-*.log"))


def test_a_later_process_forks_from_the_template_an_earlier_one_started(folder: Path) -> None:
    first = run_pool(folder, "a")
    assert first["joined"] == 0 and first["tag"] == "a"
    assert first["template"] != first["worker"]  # the initializer ran in the template
    # It outlived the process that started it, and holds none of its pipes (run_pool
    # reads them to their end: it would wait for the template).
    assert not gone([first["template"]])
    second = run_pool(folder, "a")
    assert second["joined"] == 1  # no template started: the first process's
    assert second["template"] == first["template"] and second["worker"] != first["worker"]
    # Each worker writes to the standard error of the process it serves, not the
    # template's (whose first process is gone).
    assert "worker of a" in second["stderr"] and "worker of a" not in logs(folder)
    assert stop_shared(folder) == 1
    wait_gone([first["template"]])
    assert not list(folder.glob("tpl-*.sock"))


def test_other_settings_get_a_template_of_their_own(folder: Path) -> None:
    a, b = run_pool(folder, "a"), run_pool(folder, "b")
    assert a["joined"] == b["joined"] == 0 and a["template"] != b["template"]
    assert (a["tag"], b["tag"]) == ("a", "b")
    assert len(list(folder.glob("tpl-*.sock"))) == 2
    assert stop_shared(folder) == 2
    wait_gone([a["template"], b["template"]])


def test_a_shared_template_ends_once_idle(folder: Path) -> None:
    first = run_pool(folder, "a", idle=0.5)
    wait_gone([first["template"]])  # half a second after its only pool's process ended
    assert not list(folder.glob("tpl-*.sock"))
    assert run_pool(folder, "a", idle=0.5)["joined"] == 0  # a new one, as the first was


def test_a_killed_templates_socket_is_taken_over(folder: Path) -> None:
    first = run_pool(folder, "a")
    os.kill(first["template"], signal.SIGKILL)
    wait_gone([first["template"]])
    assert list(folder.glob("tpl-*.sock"))  # left behind: nobody listens there
    second = run_pool(folder, "a")
    assert second["joined"] == 0 and second["template"] != first["template"]
    third = run_pool(folder, "a")
    assert third["joined"] == 1 and third["template"] == second["template"]


def test_nothing_is_shared_when_the_environment_says_off(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_pool(folder, "a", environ={SHARED_TEMPLATES_ENV: "off"})
    assert first["joined"] == 0
    wait_gone([first["template"]])  # it ended with its process's pool
    assert not list(folder.iterdir())
    monkeypatch.setenv(SHARED_TEMPLATES_ENV, "off")
    assert shared_folder() is None


def test_the_tuners_share_in_the_compile_servers_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARED_TEMPLATES_ENV, raising=False)
    monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(tmp_path / "server"))
    assert shared_folder() == tmp_path / "server"
    assert (tmp_path / "server").stat().st_mode & 0o777 == 0o700


def test_serve_stop_ends_the_templates_shared_in_the_servers_folder(folder: Path) -> None:
    first = run_pool(folder, "a")
    proc = run_cli("serve", "--stop", env={**os.environ, "ASYNCCOMP_SERVER_DIR": str(folder)})
    assert proc.returncode == 0, proc.stderr  # no server there, but a template was told
    assert "1 warm template of the tuners told to stop" in proc.stdout
    assert "no compile server is running" in proc.stderr
    wait_gone([first["template"]])


def test_an_install_in_an_import_folder_makes_another_template(
    folder: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    environ = {"PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    first = run_pool(folder, "a", environ=environ)
    (site / "results.json").write_text("{}")  # a script's output beside it: the same
    assert run_pool(folder, "a", environ=environ)["template"] == first["template"]
    (site / "foo-1.0.dist-info").mkdir()  # an install: what the template imported may differ
    later = run_pool(folder, "a", environ=environ)
    assert later["joined"] == 0 and later["template"] != first["template"]


def test_each_worker_runs_in_its_own_processs_environment(folder: Path) -> None:
    first = run_pool(folder, "a", environ={"ASYNCCOMP_CACHE_DIR": "/one", "ASYNCCOMP_ONLY": "1"})
    second = run_pool(folder, "a", environ={"ASYNCCOMP_CACHE_DIR": "/two"})
    # asynccomp's own variables are read as they are used: one template serves both, and
    # each worker has its own process's (none of the process that started the template)
    assert second["joined"] == 1 and second["template"] == first["template"]
    assert first["env"] == {"ASYNCCOMP_CACHE_DIR": "/one", "ASYNCCOMP_ONLY": "1", "PROBE": None}
    assert second["env"] == {"ASYNCCOMP_CACHE_DIR": "/two", "ASYNCCOMP_ONLY": None, "PROBE": None}
    # Any other variable may be read at import: another template
    third = run_pool(folder, "a", environ={"PROBE": "x"})
    assert third["joined"] == 0 and third["env"]["PROBE"] == "x"


def test_a_templates_name_is_its_process_as_the_pool_was_made(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: a template starts on its pool's thread while the caller goes on (an early
    ``register()``: TileLang's import adds import folders and variables meanwhile). Its
    name is of the process as the pool was made, so the next process, which makes its
    pool at the same point, joins it; it did not on the GPU machine."""
    monkeypatch.delenv(SHARED_TEMPLATES_ENV, raising=False)
    settings = PoolSettings("made-test", 1, eager=False, share_in=folder)
    first = WorkerPool(settings)  # nothing starts before its first task
    try:
        with monkeypatch.context() as meanwhile:
            meanwhile.syspath_prepend(str(folder))
            meanwhile.setenv("PROBE", "set after the pool was made")
            assert first.submit(warm_tasks.pid).result().outcome == "done"
        second = WorkerPool(settings)
        try:
            assert second.submit(warm_tasks.pid).result().outcome == "done"
            assert second.statistics().joined == 1
        finally:
            second.close()
    finally:
        first.close()


def test_a_templates_name_leaves_out_what_tasks_set_themselves(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARED_TEMPLATES_ENV, raising=False)
    plain = PoolSettings("t", 1, share_in=folder)
    triton_like = PoolSettings("t", 1, share_in=folder, task_variables=("TRITON_",))
    one, two = {"TRITON_CACHE_DIR": "/one"}, {"TRITON_CACHE_DIR": "/two"}
    path = sys.path
    assert share_path(plain, one, path) != share_path(plain, two, path)  # read at import?
    assert share_path(triton_like, one, path) == share_path(triton_like, two, path)  # per task
    assert share_path(plain, {"ASYNCCOMP_CACHE_DIR": "/a"}, path) == share_path(plain, {}, path)
    assert share_path(PoolSettings("t", 1), {}, path) is None  # no folder: not shared
    # Another import path (one more folder, as TileLang's import adds): another template
    assert share_path(plain, {}, [*path, str(folder)]) != share_path(plain, {}, path)
