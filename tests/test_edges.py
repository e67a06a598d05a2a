"""Hostile or odd input: each a typed error naming the value, or handled, and nothing
else lost. Options nvcc would hand to a shell, names that look like options,
architectures no compiler here takes, runtime-only TVM."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Literal

import pytest

import asynccomp.tvm
from asynccomp import CompileJob, Engine, InvalidJob

from .kernels import ARCH, needs_nvcc, scale_kernel

Backend = Literal["nvrtc", "nvcc"]
BACKENDS = ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)]


@pytest.mark.parametrize(
    "option,why",
    [
        ("-DY=$(touch {marker})", "'\\$' expands"),
        ("-DY=`touch {marker}`", "'`' runs a command"),
        ("-DY=\\\\1", "backslash"),
        ("-DY=1\ntouch {marker}", "line break"),
    ],
)
def test_nvcc_options_a_shell_would_expand_are_refused(
    option: str, why: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(InvalidJob, match=f"invalid options .*refused for nvcc: .*{why}"):
        CompileJob(scale_kernel(), backend="nvcc", options=[option.format(marker=marker)])
    # NVRTC runs no shell: the same option is just a (strange) macro there.
    CompileJob(scale_kernel(), options=[option.format(marker=marker)])


@needs_nvcc
async def test_the_other_shell_characters_reach_nvcc_as_given(tmp_path: Path) -> None:
    # What nvcc quotes itself: a macro the source does not use, holding each character
    # before a command. Nothing may run, and the compile goes through.
    marker = tmp_path / "pwned"
    specials = [";", "|", "&&", ">", "<", "'", '"', "(", ")", " ", "*", "#", "{", "~", "!"]
    jobs = [
        CompileJob(
            scale_kernel(),
            name=f"special{i}",
            backend="nvcc",
            options=[f"-DUNUSED=1{char}touch {marker}"],
        )
        for i, char in enumerate(specials)
    ]
    async with Engine(arch=ARCH, cache=False) as engine:
        results = await engine.compile_many(jobs)
    assert not marker.exists()
    for char, result in zip(specials, results, strict=True):
        if char == '"':  # nvcc's own parser refuses an unpaired quote: a compile error
            assert "Stray '\"' character" in str(result.error)
        else:
            assert result.ok, (char, str(result.error))


def test_the_tvm_facade_refuses_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVM_CUDA_PTXAS_EXTRA_OPTS", "-v$(touch /tmp/asynccomp-pwned)")
    with pytest.raises(ValueError, match="refused for nvcc"):
        asynccomp.tvm.compile_cuda(scale_kernel(), "fatbin", arch=ARCH, compiler="nvcc")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_job_names_that_look_like_options(backend: Backend, tmp_path: Path) -> None:
    names = ["-rf", "-O3", "--keep", "-", "--"]
    jobs = [
        CompileJob(scale_kernel(float(i)), name=n, backend=backend) for i, n in enumerate(names)
    ]
    async with Engine(arch=ARCH, cache=False, dump_dir=tmp_path / "dumps") as engine:
        results = await engine.compile_many(jobs)
    assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
    assert [r.job.name for r in results] == names
    folders = [r.dump_dir for r in results]
    assert all(f is not None and f.parent == tmp_path / "dumps" for f in folders)
    assert not any(f.name.split("-", 1)[1].startswith("-") for f in folders if f)


def test_malformed_architectures_are_refused_when_the_job_is_made() -> None:
    for arch in ["sm_90a\n", " sm_90a", "sm_90A", "sm90", "sm_9", "sm_9000", "gfx90a"]:
        with pytest.raises(InvalidJob, match="invalid arch"):
            CompileJob(scale_kernel(), arch=arch)
        with pytest.raises(InvalidJob, match="invalid arch"):
            Engine(arch=arch)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_architectures_no_compiler_here_takes_are_refused_before_anything_runs(
    backend: str,
) -> None:
    good = CompileJob(scale_kernel(1.0), backend=backend)
    bad = CompileJob(scale_kernel(2.0), arch="sm_999", backend=backend)
    async with Engine(arch=ARCH) as engine:
        with pytest.raises(InvalidJob, match=r"invalid arch 'sm_999': .* supports sm_75, sm_80"):
            await engine.compile_many([good, bad])
        with pytest.raises(InvalidJob, match="sm_80a"):
            await engine.compile(CompileJob(scale_kernel(), arch="sm_80a", backend=backend))
        assert engine.statistics().submitted == 0  # nothing ran
        assert (await engine.compile(good)).ok
    with pytest.raises(InvalidJob, match="sm_999"):
        async with Engine(arch="sm_999"):
            pass  # pragma: no cover


def test_other_bad_values_are_invalid_jobs() -> None:
    with pytest.raises(InvalidJob, match="invalid options None"):
        CompileJob(scale_kernel(), options=None)  # type: ignore[arg-type]
    for name in ("memory_cache_bytes", "disk_cache_bytes"):
        with pytest.raises(InvalidJob, match=name):
            Engine(arch=ARCH, **{name: -1})  # type: ignore[arg-type]
    with pytest.raises(InvalidJob, match="dump_dir"):
        Engine(arch=ARCH, dump_dir="")
    with pytest.raises(InvalidJob, match="cache_dir"):
        Engine(arch=ARCH, cache_dir="")


def test_the_facade_under_a_runtime_only_tvm(monkeypatch: pytest.MonkeyPatch) -> None:
    # TVM's runtime alone (TVM_USE_RUNTIME_LIB=1, or a deployment shipping only the
    # runtime) has no target machinery: Target.current() raises AttributeError there.
    class Target:
        @staticmethod
        def current(allow_none: bool = True) -> object:
            raise AttributeError("module 'tvm.target._ffi_api' has no attribute 'TargetCurrent'")

    runtime_only = types.ModuleType("tvm")
    runtime_only.target = types.SimpleNamespace(Target=Target)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tvm", runtime_only)
    monkeypatch.setenv("ASYNCCOMP_ARCH", ARCH)
    cubin = asynccomp.tvm.tvm_callback_cuda_compile(scale_kernel(5.0))
    assert bytes(cubin[:4]) == b"\x7fELF"
