"""Toolkit discovery, and what a machine without nvcc looks like."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, ToolkitNotFound
from asynccomp.config import NvrtcModeSetting
from asynccomp.toolkit import Toolkit, discover_toolkit, find_toolkit

from .kernels import ARCH, needs_nvcc, scale_kernel


def test_find_toolkit_is_cached_and_reports_versions() -> None:
    toolkit = find_toolkit()
    assert find_toolkit() is toolkit
    assert toolkit.nvrtc_version is not None and toolkit.nvrtc_version >= (12, 0)
    assert any((d / "cuda_runtime.h").is_file() for d in toolkit.include_dirs)
    assert toolkit.searched


def test_cuda_path_wins(tmp_path: Path) -> None:
    fake = tmp_path / "cuda" / "bin"
    fake.mkdir(parents=True)
    nvcc = fake / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.1, V99.1.7'\n")
    nvcc.chmod(0o755)
    toolkit = discover_toolkit({"CUDA_PATH": str(tmp_path / "cuda"), "PATH": ""})
    assert toolkit.nvcc == nvcc
    assert toolkit.nvcc_version == "99.1.7"
    assert any(s.startswith("$CUDA_PATH/bin/nvcc") and "(found)" in s for s in toolkit.searched)


def test_missing_nvcc_names_every_place_searched() -> None:
    toolkit = discover_toolkit({"PATH": ""}, default_roots=("/nonexistent/cuda",), use_wheels=False)
    assert toolkit.nvcc is None
    text = "\n".join(toolkit.searched)
    for place in ("$CUDA_PATH", "$CUDA_HOME", "PATH", "/nonexistent/cuda", "wheel"):
        assert place in text


@pytest.mark.asyncio
async def test_nvcc_jobs_fail_and_nvrtc_jobs_keep_working() -> None:
    toolkit = discover_toolkit({"PATH": ""}, default_roots=("/nonexistent/cuda",), use_wheels=False)
    jobs = [CompileJob(scale_kernel(), backend="nvcc"), CompileJob(scale_kernel())]
    async with Engine(arch=ARCH, toolkit=toolkit) as engine:
        nvcc_result, nvrtc_result = await engine.compile_many(jobs)
    assert isinstance(nvcc_result.error, ToolkitNotFound)
    message = str(nvcc_result.error)
    assert "/nonexistent/cuda" in message and "CUDA_PATH" in message
    assert nvcc_result.error.searched == toolkit.searched
    assert nvrtc_result.ok


def nvcc_only_toolkit() -> Toolkit:
    """This machine's toolkit as :func:`discover_toolkit` reports it where
    ``cuda.bindings`` cannot load NVRTC (a machine with nvcc and no NVRTC library)."""
    return replace(
        find_toolkit(),
        nvrtc_version=None,
        nvrtc_library=None,
        nvrtc_archs=(),
        nvrtc_error="RuntimeError: Failure finding libnvrtc.so",
    )


@needs_nvcc
@pytest.mark.parametrize("mode", ["threads", "processes"])
async def test_without_nvrtc_the_engine_starts_and_only_nvrtc_jobs_fail(
    mode: NvrtcModeSetting,
) -> None:
    jobs = [
        CompileJob(scale_kernel(1.0), name="nvcc_1", backend="nvcc"),
        CompileJob(scale_kernel(2.0), name="nvrtc_2"),
        CompileJob(scale_kernel(3.0), name="nvcc_3", backend="nvcc"),
    ]
    engine = Engine(arch=ARCH, toolkit=nvcc_only_toolkit(), nvrtc_mode=mode, cache=False)
    async with engine:
        await engine.warm_up()  # nothing to warm for NVRTC: no error either
        first, nvrtc, third = await engine.compile_many(jobs)
        again = await engine.compile(jobs[1])
    assert first.ok and third.ok
    for result in (nvrtc, again):
        assert isinstance(result.error, ToolkitNotFound)
        assert "NVRTC could not be loaded" in str(result.error)
        assert "libnvrtc" in str(result.error)


def test_doctor_prints_what_was_found() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "asynccomp", "doctor"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
        timeout=120,
    ).stdout
    toolkit = find_toolkit()
    lines = {line.split()[0]: line for line in out.splitlines() if line and line[0] != " "}
    assert "{}.{}".format(*toolkit.nvrtc_version or (0, 0)) in lines["NVRTC"]
    assert str(toolkit.nvcc) in lines["nvcc"]
    assert str(toolkit.include_dirs[0]) in out


def test_a_toolkits_hash_is_kept_but_never_travels() -> None:
    """The toolkit is hashed on every compile, so its hash is computed once; a pickled
    toolkit (to a worker, a server) leaves it behind: a string's hash is another
    process's own, and the copy there hashes what it holds."""
    toolkit = find_toolkit()
    assert hash(toolkit) == hash(replace(toolkit)) and toolkit == replace(toolkit)
    assert "_hash" in vars(toolkit)
    code = (
        "import pickle, sys\n"
        "t = pickle.loads(sys.stdin.buffer.read())\n"
        "print('_hash' in vars(t), hash(t) == hash(tuple(getattr(t, f) "
        "for f in t.__dataclass_fields__)))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    child = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(toolkit),
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert child.stdout.split() == [b"False", b"True"], child
