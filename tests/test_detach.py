"""Starting the command line never runs a copy of it (issue 20's chain of 177 processes
came from a daemon started by ``os.fork()`` without exec, and an unguarded
``__main__``): ``serve --detach`` execs a fresh interpreter, and importing
``asynccomp.__main__`` as multiprocessing's spawn does runs nothing. Without Ray (the
Ray-side checks are in test_no_cli_copies.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from asynccomp.server import server_paths

from .servers import server_folder, server_pid
from .test_cli import asynccomp


def test_a_detached_server_is_a_fresh_interpreter_in_a_session_of_its_own(
    tmp_path: Path,
) -> None:
    with server_folder() as folder:
        env = {"ASYNCCOMP_SERVER_DIR": str(folder)}
        done = asynccomp("serve", "--detach", "--idle-timeout", "60", cache=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        pid = server_pid(server_paths(folder))
        assert pid is not None and pid != os.getpid()
        server = psutil.Process(pid)
        # A fork of the command would still hold the command's argv ("serve --detach")
        # and its parent's state; the server execs its own command line.
        line = server.cmdline()
        assert "--detach" not in line and "--ready-fd" in line, line
        assert Path(server.exe()).resolve() == Path(sys.executable).resolve()
        assert os.getsid(pid) == pid
        assert server.ppid() != os.getpid()  # not a child of the test (the CLI ended)
        # Nothing else with the command's command line runs.
        copies = []
        for process in psutil.process_iter(["cmdline"]):
            try:
                detached = "--detach" in (process.info["cmdline"] or [])
                if detached and str(folder) in process.environ().get("ASYNCCOMP_SERVER_DIR", ""):
                    copies.append(process.pid)
            except psutil.Error:
                continue
        assert copies == []


def test_importing_the_main_module_as_spawn_does_runs_nothing() -> None:
    """multiprocessing's spawn and forkserver import a program's ``__main__`` under the
    name ``__mp_main__``; asynccomp's must not run the command then."""
    code = (
        "import runpy; runpy.run_module('asynccomp.__main__', run_name='__mp_main__'); "
        "print('imported')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imported\n"
    assert "usage" not in done.stderr.lower()
