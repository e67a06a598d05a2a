"""``Engine(server=...)`` and ``$ASYNCCOMP_SERVER`` (which the TVM and TileLang facades
read) mean the same for every spelling: ``off`` compiles in this process, ``auto`` on
this user's compile server, anything else is a server's socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, InvalidJob
from asynccomp.tvm._runtime import SERVER_ENV, server_from_environment

from .kernels import ARCH, scale_kernel
from .servers import server_folder

SPELLINGS = ["off", "OFF", " no ", "0", "false", "auto", "on", "1", "True", "yes", "run/x.sock"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_argument_and_the_variable_mean_the_same(
    spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SERVER_ENV, spelling)
    assert Engine(server=spelling).server == server_from_environment()


def test_each_spelling_means_what_the_readme_says() -> None:
    assert Engine(server="off").server is None
    assert Engine(server="Auto").server == "auto"
    assert Engine(server="run/x.sock").server == str(Path("run/x.sock").absolute())
    with pytest.raises(InvalidJob, match="server"):
        Engine(server="")


def entries(folder: Path) -> list[Path]:
    return list(folder.iterdir())


async def test_server_off_compiles_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server folder of this test's own: the session's holds other tests' lock files.
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        async with Engine(arch=ARCH, server="off", nvrtc_workers=1, cache=False) as engine:
            result = await engine.compile(CompileJob(scale_kernel()))
            assert engine.server is None and engine.nvrtc_workers == 1
        assert result.ok
        assert entries(folder) == []  # no server was started or asked
