"""S7: another user who makes ``<tmp>/asynccomp-<uid>`` first (no ``$XDG_RUNTIME_DIR``:
``runuser``, containers, cron) does not deny this user's compile server: the engine,
the sync engine and the command line all use a folder of this user's own instead, with
one :class:`~asynccomp.ServerWarning`. A folder the user names stays refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, ServerError, ServerWarning, SyncEngine
from asynccomp.server._paths import own_folder, private_folder

from .kernels import ARCH, scale_kernel
from .servers import server_folder, stop_servers_in


def _another_users(folder: Path) -> None:
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)


def _open_to_all(folder: Path) -> None:
    folder.mkdir()
    folder.chmod(0o777)


def _a_file(folder: Path) -> None:
    folder.write_text("not a folder")
    os.chown(folder, 65534, 65534)


TAKEN: dict[str, Callable[[Path], None]] = {
    "another user's": _another_users,
    "open to all": _open_to_all,
    "a file": _a_file,
}
SAID = {
    "another user's": "belongs to uid 65534",
    "open to all": "open to other users",
    "a file": "not a folder",
}


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder as the system's, no ``$XDG_RUNTIME_DIR`` nor
    ``$ASYNCCOMP_SERVER_DIR``, and this user's cache folder beside it (short paths: a
    socket's is limited); the servers started in it are stopped afterwards."""
    if os.getuid() == 65534:  # pragma: no cover
        pytest.skip("running as nobody, the other user here")
    # The user's own folder, where a server goes when the shared one is taken, is the
    # deepest socket here: <root>/c/asynccomp/server-<host>/server-<16 hex>.sock.
    room = len(f"/acs-{'9' * 10}-{'x' * 8}/c/asynccomp/{own_folder().name}/server-{'0' * 16}.sock")
    with server_folder(room) as root:
        tmp = root / "t"
        tmp.mkdir()
        monkeypatch.delenv("ASYNCCOMP_SERVER_DIR", raising=False)
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)
        monkeypatch.setenv("XDG_CACHE_HOME", str(root / "c"))
        try:
            yield tmp
        finally:
            mine = own_folder()
            if mine.is_dir():
                stop_servers_in(mine)


def _check_own_folder(root: Path) -> Path:
    mine = own_folder()
    assert mine.is_relative_to(root)
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700 and mine.stat().st_uid == os.getuid()
    return mine


@pytest.mark.parametrize("how", list(TAKEN))
async def test_a_taken_server_folder_in_tmp_does_not_deny_the_engine(
    shared_tmp: Path, how: str
) -> None:
    if os.getuid() != 0 and how != "open to all":
        pytest.skip("needs root to make a folder of another user's")
    TAKEN[how](shared_tmp / f"asynccomp-{os.getuid()}")
    with pytest.warns(ServerWarning, match=SAID[how]):
        async with Engine(arch=ARCH, server="auto") as engine:
            result = await engine.compile(CompileJob(scale_kernel(), name="k"))
    assert result.ok, result.error
    mine = _check_own_folder(shared_tmp.parent)
    assert any(mine.glob("*.sock"))  # the server lives there
    # The sync engine finds the same folder, and the server running there.
    with pytest.warns(ServerWarning), SyncEngine(arch=ARCH, server="auto") as sync:
        assert sync.compile(CompileJob(scale_kernel(3.0), name="k")).ok


def test_a_taken_server_folder_in_tmp_does_not_deny_the_command_line(
    shared_tmp: Path, tmp_path: Path
) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to make a folder of another user's")
    _another_users(shared_tmp / f"asynccomp-{os.getuid()}")
    (tmp_path / "k.cu").write_text(scale_kernel())
    done = subprocess.run(
        [sys.executable, "-m", "asynccomp", "compile", "--server", "--arch", ARCH, "k.cu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "belongs to uid 65534" in done.stderr  # said once, as a warning
    _check_own_folder(shared_tmp.parent)


def test_a_folder_the_user_names_is_still_refused(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$ASYNCCOMP_SERVER_DIR`` (or ``--server-dir``) is the user's choice: another
    user's folder there is an error, not a silent move."""
    named = shared_tmp / "named"
    _open_to_all(named)
    monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(named))
    with pytest.raises(ServerError, match="open to other users"):
        private_folder()
    assert not own_folder().exists()
