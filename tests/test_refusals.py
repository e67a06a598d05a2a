"""One set of rules refuses a setting a mode does not use, in every mode: an Engine and
a SyncEngine (in process, on a compile server, on Ray), the compile server itself, and
the command line's `compile` and `serve`, which make those. Each case of the table is
refused with the same message everywhere it applies (nothing starts: the checks are
made as the engine or server is made)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from asynccomp import Engine, InvalidJob, SettingsError, SyncEngine
from asynccomp.config import EngineConfig, InProcess, OnRay, WorkerSettings, server_mode
from asynccomp.ray import RayExecutor
from asynccomp.server import Server, server_paths

from .kernels import ARCH, scale_kernel
from .servers import server_folder
from .test_cli import asynccomp

#: A cluster address nothing listens on: nothing connects while settings are checked.
NOWHERE = "127.0.0.1:9"


@dataclass(frozen=True)
class Case:
    settings: dict[str, Any]
    refused_by: tuple[str, ...]  # the modes that refuse it (the others take it)
    match: str
    compile_args: tuple[str, ...] | None = None  # the same settings on `asynccomp compile`
    serve_args: tuple[str, ...] | None = None  # ... and on `asynccomp serve`
    #: Modes the case does not apply to (a server is not on a server: its own case).
    elsewhere: tuple[str, ...] = ()


API = ("engine", "sync", "server")

CASES = {
    "workers with a Ray executor that may not fall back": Case(
        {"executor": RayExecutor(address=NOWHERE), "nvrtc_workers": 4, "nvcc_workers": 4},
        API,
        "nvrtc_workers, nvcc_workers belong to the executor",
        compile_args=("--ray", NOWHERE, "-j", "4"),
        serve_args=("--ray", NOWHERE, "-j", "4"),
    ),
    "the NVRTC mode with a Ray executor that may not fall back": Case(
        {"executor": RayExecutor(address=NOWHERE), "nvrtc_mode": "processes"},
        API,
        "nvrtc_mode belong to the executor",
    ),
    "workers with a Ray executor that may fall back": Case(
        {"executor": RayExecutor(address=NOWHERE, fallback=True), "nvrtc_workers": 4},
        (),
        "",
    ),
    "runner settings of an engine on a server": Case(
        {"server": "auto", "nvrtc_workers": 2, "cache_dir": "/tmp/x"},
        ("engine", "sync"),
        "nvrtc_workers, cache_dir belong to the server",
        elsewhere=("server",),
    ),
    "a Ray executor of an engine on a server": Case(
        {"server": "auto", "executor": RayExecutor(address=NOWHERE)},
        ("engine", "sync"),
        "executor belong to the server",
        elsewhere=("server",),
    ),
    "client settings given to a server": Case(
        {"arch": ARCH, "dump_dir": "/tmp/dumps", "split_compile": 2, "tvm_fast_path": False},
        ("server",),
        "arch, tvm_fast_path, dump_dir, split_compile belong to each client",
    ),
    "a server given to a server": Case(
        {"server": "auto"}, ("server",), "server belong to each client"
    ),
}


@pytest.fixture
def server_dir() -> Iterator[Path]:
    with server_folder() as folder:
        yield folder


def _modes(folder: Path) -> dict[str, Callable[[dict[str, Any]], object]]:
    paths = server_paths(folder)
    return {
        "engine": lambda settings: Engine(**settings),
        "sync": lambda settings: SyncEngine(**settings),
        "server": lambda settings: Server(paths, mode=server_mode(**settings)),
    }


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_refusal_in_every_mode(name: str, server_dir: Path, tmp_path: Path) -> None:
    case = CASES[name]
    said: dict[str, str] = {}
    told: dict[str, str] = {}  # by the command line
    for mode, make in _modes(server_dir).items():
        if mode in case.elsewhere:
            continue
        if mode in case.refused_by:
            with pytest.raises(SettingsError, match=case.match) as refused:
                make(case.settings)
            said[mode] = str(refused.value)
        else:
            make(case.settings)  # taken: made, not started
    kernel = tmp_path / "k.cu"
    kernel.write_text(scale_kernel())
    env = {"ASYNCCOMP_SERVER_DIR": str(server_dir)}
    for command, args in (
        (("compile", str(kernel), "--arch", ARCH, "--no-server"), case.compile_args),
        (("serve", "--detach"), case.serve_args),
    ):
        if args is None:
            continue
        done = asynccomp(*command, *args, cache=tmp_path / "cache", env=env, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("asynccomp: error: ") and done.stderr.count("\n") == 1
        told[command[0]] = done.stderr.removeprefix("asynccomp: error: ").strip()
    assert len(set(said.values())) <= 1, said  # one message, word for word
    # The command line says it in its own terms (its flags, not Python's names), the
    # same for every command.
    assert len(set(told.values())) <= 1, told
    assert not any("RayExecutor" in text or "Engine(" in text for text in told.values()), told
    assert not list(server_dir.glob("*.sock"))  # `serve` refused before it started


def test_the_rules_are_the_mode_objects() -> None:
    """The keywords map onto the mode objects, whose own check refuses: the same words
    from the object, from the keywords and from EngineConfig, and a SettingsError that
    is still an InvalidJob (callers that caught InvalidJob for settings keep working)."""
    executor = RayExecutor(address=NOWHERE)
    with pytest.raises(SettingsError) as by_mode:
        OnRay(executor, WorkerSettings(nvrtc_workers=4))
    with pytest.raises(SettingsError) as by_keywords:
        Engine(executor=executor, nvrtc_workers=4)
    with pytest.raises(SettingsError) as by_config:
        EngineConfig.from_keywords(executor=executor, nvrtc_workers=4)
    assert str(by_mode.value) == str(by_keywords.value) == str(by_config.value)
    assert isinstance(by_mode.value, InvalidJob) and by_mode.value.field == "executor"
    assert Engine(mode=InProcess(WorkerSettings(nvrtc_workers=1))).nvrtc_workers == 1
