"""Toolkit discovery, and what a machine without nvcc looks like."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, ToolkitNotFound
from asynccomp.toolkit import discover_toolkit, find_toolkit

from .kernels import ARCH, scale_kernel


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
