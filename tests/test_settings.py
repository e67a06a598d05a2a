"""Settings by mode (asynccomp.config): the value objects, Engine's keywords mapped onto
them in one place, SettingsError apart from job errors, and Engine(mode=..., runner=...)
with a real runner of one's own (the local scheduler, wrapped to record what it is
asked)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Mapping, Sequence
from pathlib import Path

import anyio.abc
import pytest

from asynccomp import CompileJob, Engine, InvalidJob, SettingsError, SyncEngine
from asynccomp.config import (
    DEFAULTS,
    KEYWORDS,
    CacheSettings,
    EngineConfig,
    InProcess,
    JobSettings,
    OnRay,
    OnServer,
    WorkerSettings,
)
from asynccomp.engine import InProcessRunner
from asynccomp.ray import RayExecutor
from asynccomp.runner import CompileRequest, RunEvents, Runner
from asynccomp.toolkit import find_toolkit

from .kernels import ARCH, broken_kernel, scale_kernel

NOWHERE = "127.0.0.1:9"  # nothing connects while settings are checked


def test_the_keywords_are_the_signature_and_the_defaults_the_objects() -> None:
    """Engine's signature lists the keywords config derives from its types, with the
    same defaults; SyncEngine restates nothing (it shows Engine's signature)."""
    parameters = inspect.signature(Engine).parameters
    assert list(parameters)[-2:] == ["mode", "runner"]
    assert set(parameters) - {"mode", "runner"} == set(KEYWORDS)
    for name in KEYWORDS:
        assert parameters[name].default == DEFAULTS[name], name
    assert inspect.signature(SyncEngine) == inspect.signature(Engine)


@pytest.mark.parametrize(
    "keywords, mode",
    [
        ({}, InProcess()),
        (
            {"nvrtc_workers": 2, "cache_dir": False, "nvrtc_mode": "threads"},
            InProcess(WorkerSettings(2, nvrtc_mode="threads"), CacheSettings(cache_dir=False)),
        ),
        ({"server": "on"}, OnServer("auto")),
        ({"server": "off", "nvrtc_workers": 1}, InProcess(WorkerSettings(nvrtc_workers=1))),
        ({"server": "auto", "remote_cache": False}, OnServer(remote_cache=False)),
        (
            {"executor": RayExecutor(address=NOWHERE), "cache": False},
            OnRay(RayExecutor(address=NOWHERE), cache=CacheSettings(cache=False)),
        ),
        (
            {"executor": RayExecutor(address=NOWHERE, fallback=True), "nvcc_workers": 3},
            OnRay(RayExecutor(address=NOWHERE, fallback=True), WorkerSettings(nvcc_workers=3)),
        ),
    ],
)
def test_each_keyword_lands_in_its_mode_and_comes_back(
    keywords: dict[str, object], mode: InProcess | OnServer | OnRay
) -> None:
    engine = Engine(arch=ARCH, **keywords)  # type: ignore[arg-type]
    assert engine.config == EngineConfig(JobSettings(arch=ARCH), mode)
    assert engine.mode == mode
    # The same config from the mode object, and from the keywords it gives back.
    assert Engine(arch=ARCH, mode=mode).config == engine.config
    assert EngineConfig.from_keywords(**engine.config.keywords()) == engine.config


def test_a_mode_object_and_runner_keywords_together_are_refused() -> None:
    with pytest.raises(
        SettingsError,
        match=r"invalid nvrtc_workers 2: nvrtc_workers, cache_dir "
        r"given with mode=OnServer\(\.\.\.\)",
    ) as raised:
        Engine(mode=OnServer(), nvrtc_workers=2, cache_dir="/tmp/x")
    assert raised.value.field == "nvrtc_workers" and raised.value.value == 2
    # Job settings apply in every mode, beside a mode object too.
    assert Engine(arch=ARCH, split_compile=2, mode=OnServer()).split_compile == 2


@pytest.mark.parametrize(
    "make, field, value",
    [
        (lambda: WorkerSettings(nvrtc_workers=0), "nvrtc_workers", 0),
        (lambda: WorkerSettings(nvrtc_mode="fibers"), "nvrtc_mode", "fibers"),  # type: ignore[arg-type]
        (lambda: CacheSettings(memory_cache_bytes=-1), "memory_cache_bytes", -1),
        (lambda: CacheSettings(remote_cache=3), "remote_cache", 3),  # type: ignore[arg-type]
        (lambda: JobSettings(arch="sm90"), "arch", "sm90"),
        (lambda: JobSettings(dump_dir=""), "dump_dir", ""),
        (lambda: OnServer(""), "address", ""),
        (lambda: OnServer("off"), "address", "off"),
        (lambda: OnServer(remote_cache="redis://x"), "remote_cache", "redis://x"),  # type: ignore[arg-type]
        (lambda: OnRay("ray://x"), "executor", "ray://x"),  # type: ignore[arg-type]
        (lambda: InProcess(toolkit="/usr/local/cuda"), "toolkit", "/usr/local/cuda"),  # type: ignore[arg-type]
        (lambda: Engine(server=""), "server", ""),
        (lambda: Engine(remote_cache="redis://"), "remote_cache", "redis://"),
        (lambda: Engine(mode="in process"), "mode", "in process"),  # type: ignore[arg-type]
        (lambda: Engine(runner=object()), "runner", None),  # type: ignore[arg-type]
    ],
)
def test_a_bad_setting_is_a_settings_error_naming_it(
    make: object, field: str, value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "redis://" is refused for want of the team's key: a test Redis of this process
    # (tests/redis_server.py) sets one while it runs.
    monkeypatch.delenv("ASYNCCOMP_REMOTE_CACHE_KEY", raising=False)
    monkeypatch.delenv("ASYNCCOMP_REMOTE_CACHE_KEY_FILE", raising=False)
    with pytest.raises(SettingsError) as raised:
        make()  # type: ignore[operator]
    assert raised.value.field == field
    if value is not None:
        assert raised.value.value == value
    assert str(raised.value).startswith(f"invalid {field} ")


def test_a_bad_job_is_not_a_settings_error() -> None:
    with pytest.raises(InvalidJob) as raised:
        CompileJob(scale_kernel(), arch="sm90")
    assert not isinstance(raised.value, SettingsError)


class RecordingRunner(Runner):
    """A runner of one's own: the local scheduler (InProcessRunner), wrapped to record
    every request it is handed and whether the caller wants the output."""

    def __init__(self) -> None:
        self.inner = InProcessRunner(
            InProcess(WorkerSettings(nvrtc_workers=1, nvcc_workers=1), CacheSettings(cache=False)),
            arch=ARCH,
        )
        self.requests: list[CompileRequest] = []
        self.calls = 0
        self.started = self.closed = False

    @property
    def where(self) -> str:  # type: ignore[override]
        return "recorded, " + self.inner.where

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        await self.inner.start(task_group)
        self.started = True

    async def run(
        self,
        requests: AsyncIterable[Sequence[CompileRequest]],
        events: RunEvents,
        *,
        want: bool = True,
    ) -> None:
        self.calls += 1

        async def recorded() -> AsyncIterable[Sequence[CompileRequest]]:
            async for chunk in requests:
                self.requests.extend(chunk)
                yield chunk

        await self.inner.run(recorded(), events, want=want)

    def slots(self) -> Mapping[str, int]:
        return self.inner.slots()

    def workers(self) -> int:
        return self.inner.workers()

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.closed = True


async def test_a_runner_of_ones_own_runs_every_call(tmp_path: Path) -> None:
    runner = RecordingRunner()
    jobs = [CompileJob(scale_kernel(float(i)), name=f"s{i}") for i in range(3)]
    broken = CompileJob(broken_kernel(), name="broken")
    async with Engine(arch=ARCH, runner=runner, dump_dir=tmp_path / "dumps") as engine:
        assert runner.started and engine.where == "recorded, in process"
        assert engine.cache is None and (engine.nvrtc_workers, engine.nvcc_workers) == (1, 1)
        one = await engine.compile(jobs[0])
        many = await engine.compile_many([*jobs[1:], broken])
        async with engine.as_completed(jobs) as results:
            seen = sorted([result.job.name async for result in results])
        statistics = engine.statistics()
    assert runner.closed and runner.calls == 3
    # Every job reached the runner rendered, with the engine's arch and the options
    # the engine's renderer wrote (-lineinfo for the dump folder).
    # (a batch in the order the engine planned it: longest first).
    names = [r.prepared.filename for r in runner.requests]
    assert names[0] == "s0.cu" and sorted(names[1:4]) == ["broken.cu", "s1.cu", "s2.cu"]
    assert sorted(names[4:]) == ["s0.cu", "s1.cu", "s2.cu"]
    assert all(r.prepared.arch == ARCH for r in runner.requests)
    assert one.ok and one.binary and one.resources["scale"].registers > 0
    assert [r.ok for r in many] == [True, True, False]
    assert "undefined_identifier_42" in (many[2].log or "")
    assert seen == ["s0", "s1", "s2"]
    # The engine's front made the results, dumps and counts, as with its own runner.
    assert statistics.submitted == 7 and statistics.failed == 1 and statistics.compiled == 7
    assert one.dump_dir is not None and (one.dump_dir / "result.json").is_file()


def test_a_runner_takes_the_job_settings_and_the_toolkit_only() -> None:
    toolkit = find_toolkit()
    engine = Engine(arch=ARCH, toolkit=toolkit, runner=RecordingRunner())
    assert engine.config.mode == InProcess(toolkit=toolkit) and engine.toolkit is toolkit
    for settings in ({"nvrtc_workers": 2}, {"server": "auto"}, {"cache": False}):
        with pytest.raises(SettingsError, match=r"given with runner=\.\.\."):
            Engine(runner=RecordingRunner(), **settings)
    with pytest.raises(SettingsError, match="give a mode or a runner"):
        Engine(runner=RecordingRunner(), mode=InProcess())
    with pytest.raises(SettingsError, match=r"given with runner=\.\.\."):
        Engine.from_config(EngineConfig(mode=OnServer()), runner=RecordingRunner())


def test_a_sync_engine_takes_a_runner_as_it_is() -> None:
    runner = RecordingRunner()
    with SyncEngine(arch=ARCH, runner=runner) as engine:
        assert engine.compile(CompileJob(scale_kernel())).ok
    assert runner.closed and len(runner.requests) == 1
