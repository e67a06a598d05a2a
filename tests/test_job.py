from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynccomp import CompileJob, Engine, InvalidJob

from .kernels import scale_kernel

SRC = scale_kernel()


def test_defaults_and_hashable() -> None:
    job = CompileJob(SRC, options=["-DX=1"])
    assert job.output_format == "cubin"
    assert job.options == ("-DX=1",)
    assert CompileJob(SRC, backend="nvcc").output_format == "fatbin"
    assert hash(job) == hash(CompileJob(SRC, options=("-DX=1",)))
    assert job == CompileJob(SRC, options=("-DX=1",))
    with pytest.raises(AttributeError):
        job.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field", "needle"),
    [
        ({"source": ""}, "source", "empty"),
        ({"source": "   \n"}, "source", "empty"),
        ({"source": b"__global__ void k() {}"}, "source", "str"),
        ({"source": 42}, "source", "str"),
        ({"source": "int x;\x00"}, "source", "NUL"),
        ({"name": ""}, "name", "non-empty"),
        ({"backend": "clang"}, "backend", "nvrtc, nvcc"),
        ({"output": "elf"}, "output", "cubin, fatbin, ptx"),
        ({"backend": "nvrtc", "output": "fatbin"}, "output", "nvcc"),
        ({"arch": "sm90"}, "arch", "sm_XY"),
        ({"arch": "sm_9"}, "arch", "sm_XY"),
        ({"arch": "gfx90a"}, "arch", "sm_XY"),
        ({"arch": "sm_90b"}, "arch", "sm_XY"),
        ({"options": "-O3"}, "options", "not one str"),
        ({"options": ["-O3", 3]}, "options", "must be a str"),
        ({"options": [b"-O3"]}, "options", "must be a str"),
        ({"timeout": 0}, "timeout", "positive"),
        ({"timeout": -1.0}, "timeout", "positive"),
        ({"timeout": float("inf")}, "timeout", "finite"),
        ({"timeout": "10"}, "timeout", "number"),
        ({"timeout": True}, "timeout", "number"),
        ({"dump": 1}, "dump", "True, False or a folder path"),
        ({"dump": ""}, "dump", "True, False or a folder path"),
        ({"dump": b"/tmp/dumps"}, "dump", "True, False or a folder path"),
        ({"dump": "/tmp/a\x00b"}, "dump", "without NUL"),
        ({"tvm_fast_path": "off"}, "tvm_fast_path", "True, False or None"),
    ],
)
def test_invalid_values_are_named(kwargs: dict[str, Any], field: str, needle: str) -> None:
    args = {"source": SRC, **kwargs}
    with pytest.raises(InvalidJob) as info:
        CompileJob(**args)
    assert info.value.field == field
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100f", "compute_90", "compute_120a"])
def test_valid_arches(arch: str) -> None:
    assert CompileJob(SRC, arch=arch).arch == arch


@pytest.mark.parametrize(
    "kwargs", [{"arch": "90"}, {"nvrtc_workers": 0}, {"nvcc_workers": -2}, {"nvrtc_workers": 1.5}]
)
def test_invalid_engine_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidJob):
        Engine(**kwargs)


def test_dump_root_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    job = CompileJob(SRC, dump="dumps")
    assert job.dump == job.dump_root == tmp_path / "dumps"
    assert CompileJob(SRC, dump=True).dump_root is None
    assert job == CompileJob(SRC, dump=tmp_path / "dumps")


def test_text_that_stands_for_no_bytes_is_refused_when_the_job_is_made() -> None:
    for field, kwargs in [
        ("source", {"source": scale_kernel() + "// \ud800\n"}),
        ("options", {"source": scale_kernel(), "options": ["-DX=\udfff\ud800"]}),
        ("name", {"source": scale_kernel(), "name": "k\ud83d"}),
    ]:
        with pytest.raises(InvalidJob, match=f"invalid {field} .*lone surrogate"):
            CompileJob(**kwargs)  # type: ignore[arg-type]
