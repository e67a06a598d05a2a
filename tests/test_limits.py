"""Worker counts: one per CPU by default, never more than memory holds, and a count that
was given and lowered says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from asynccomp import Engine, InvalidJob, ResourceLimitWarning
from asynccomp._scheduler import _limits
from asynccomp.backends import NvccBackend, NvrtcBackend, PtxBackend

from .kernels import ARCH, scale_kernel


def test_explicit_counts_are_capped_by_memory_with_a_warning() -> None:
    available = _limits.available_memory()
    assert available is not None  # Linux
    cap = available // NvrtcBackend.worker_memory
    with pytest.warns(ResourceLimitWarning, match=r"nvrtc_workers=100000 lowered to \d+"):
        engine = Engine(arch=ARCH, nvrtc_workers=100_000)
    assert 1 <= engine.nvrtc_workers <= cap
    with pytest.warns(ResourceLimitWarning, match=r"nvcc_workers=100000 lowered"):
        engine = Engine(arch=ARCH, nvcc_workers=100_000)
    assert engine.nvcc_workers <= available // NvccBackend.worker_memory


def test_counts_that_fit_are_kept_and_the_default_is_one_per_cpu() -> None:
    engine = Engine(arch=ARCH, nvrtc_workers=2, nvcc_workers=3)
    assert (engine.nvrtc_workers, engine.nvcc_workers) == (2, 3)
    default = Engine(arch=ARCH)
    assert default.nvrtc_workers <= _limits.default_workers()
    assert default.nvcc_workers <= _limits.default_workers()


def test_a_backend_without_a_setting_gets_the_default_count_capped_by_memory() -> None:
    available = _limits.available_memory()
    assert available is not None  # Linux
    ptx = Engine(arch=ARCH).slots["ptx"]  # the registry's entry: no setting of its own
    assert 1 <= ptx <= min(_limits.default_workers(), available // PtxBackend.worker_memory)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "4"])
def test_bad_counts_are_invalid(value: object) -> None:
    with pytest.raises(InvalidJob, match="nvrtc_workers"):
        Engine(arch=ARCH, nvrtc_workers=value)  # type: ignore[arg-type]


def test_the_command_line_with_a_huge_job_count_starts_one_worker(tmp_path: Path) -> None:
    # "-j 100000" once started ~1,750 NVRTC workers and took the machine down.
    source = tmp_path / "one.cu"
    source.write_text(scale_kernel())
    done = subprocess.run(
        [sys.executable, "-m", "asynccomp", "compile", str(source), "--arch", ARCH, "-j", "100000"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "lowered to" in done.stderr
    assert "1 job" in done.stdout
