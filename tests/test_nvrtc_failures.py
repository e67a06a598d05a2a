"""Only NVRTC's verdict on a job's input is a compile error a cache may keep: a source
that does not compile (NVRTC_ERROR_COMPILATION) or an option NVRTC does not take
(NVRTC_ERROR_INVALID_OPTION). Any other result of NVRTC's (out of memory, an internal
error, a file it could not write...) is the job's InternalError, with an NvrtcError
naming the result as its cause, and is never cached, even with ``cache_failures=True``
(issue 19). The classification over every result code, and one real failure of
NVRTC's own: ``-time=`` into a folder that does not exist."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from cuda.bindings import nvrtc

from asynccomp import CompileError, CompileJob, Engine, InternalError
from asynccomp.backends._nvrtc_api import VERDICTS, NvrtcError, status_of

from .kernels import ARCH, broken_kernel, scale_kernel

EXPECTED = {
    "NVRTC_SUCCESS": "ok",
    "NVRTC_ERROR_CANCELLED": "timeout",
    "NVRTC_ERROR_COMPILATION": "failed",
    "NVRTC_ERROR_INVALID_OPTION": "failed",
}


@pytest.mark.parametrize("result", list(nvrtc.nvrtcResult), ids=lambda r: r.name)
def test_every_nvrtc_result_but_a_verdict_is_internal(result: nvrtc.nvrtcResult) -> None:
    assert status_of(result.name) == EXPECTED.get(result.name, "internal")


def test_the_verdicts_and_the_failures_of_nvrtcs_own() -> None:
    names = {r.name for r in nvrtc.nvrtcResult}
    assert VERDICTS == {"NVRTC_ERROR_COMPILATION", "NVRTC_ERROR_INVALID_OPTION"} <= names
    for own in (
        "NVRTC_ERROR_OUT_OF_MEMORY",
        "NVRTC_ERROR_INTERNAL_ERROR",
        "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        "NVRTC_ERROR_INVALID_INPUT",
        "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
    ):
        assert own in names and status_of(own) == "internal"
    assert status_of("NVRTC_ERROR_OF_A_LATER_NVRTC") == "internal"  # unknown: not a verdict


def test_the_cause_crosses_a_process_as_it_is() -> None:
    cause = NvrtcError("NVRTC_ERROR_OUT_OF_MEMORY", "out of memory")
    again = pickle.loads(pickle.dumps(cause))  # a worker process sends it so
    assert (type(again), again.code, str(again)) == (
        NvrtcError,
        "NVRTC_ERROR_OUT_OF_MEMORY",
        "NVRTC_ERROR_OUT_OF_MEMORY: out of memory",
    )


@pytest.mark.parametrize("mode", ["threads", "processes"])
async def test_a_failure_of_nvrtcs_own_is_internal_and_never_cached(
    tmp_path: Path, mode: str
) -> None:
    # NVRTC compiles the source, then cannot write its timing report: a fact about
    # this machine's folders, not about the source.
    job = CompileJob(scale_kernel(), options=[f"-time={tmp_path / 'missing' / 'time.csv'}"])
    settings = {"arch": ARCH, "cache_failures": True, "nvrtc_mode": mode}
    async with Engine(**settings, cache_dir=tmp_path / "cache") as engine:  # type: ignore[arg-type]
        first = await engine.compile(job)
        again = await engine.compile(job)
        assert engine.statistics().compiled == 2
    async with Engine(**settings, cache_dir=tmp_path / "cache") as fresh:  # type: ignore[arg-type]
        third = await fresh.compile(job)
    for result in (first, again, third):
        assert isinstance(result.error, InternalError), result.error
        assert not result.cached
        cause = result.error.__cause__
        assert isinstance(cause, NvrtcError), cause
        assert cause.code == "NVRTC_ERROR_TIME_FILE_WRITE_FAILED"
        assert "not the source's" in str(result.error)
    assert list((tmp_path / "cache").rglob("*.entry")) == []


@pytest.mark.parametrize(
    ("source", "options"),
    [(broken_kernel(), []), (scale_kernel(), ["--no-such-flag"])],
    ids=["COMPILATION", "INVALID_OPTION"],
)
async def test_nvrtcs_verdict_is_still_cached(
    tmp_path: Path, source: str, options: list[str]
) -> None:
    job = CompileJob(source, options=options)
    async with Engine(arch=ARCH, cache_failures=True, cache_dir=tmp_path) as engine:
        first = await engine.compile(job)
        again = await engine.compile(job)
    assert type(first.error) is CompileError and not first.cached
    assert type(again.error) is CompileError and again.cached
