"""The built-in example kernels: present, well-formed, in sync with their generator, and
compilable by real NVRTC (through cuda.bindings directly, independent of the engine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cuda import pathfinder
from cuda.bindings import nvrtc

from asynccomp.examples import (
    EXAMPLES_DIR,
    example_names,
    example_path,
    example_source,
    example_sources,
)

from .nvrtc_flags import without_nvrtc_cache

ARCH = "sm_90a"
REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "benchmarks" / "corpus" / "make_examples.py"
#: How every TVM 0.27 kernel starts.
TVM_PRELUDE = "\n#ifdef __CUDACC_RTC__\n  #include <cuda/std/cstdint>\n"


def test_names_are_sorted_unique_and_plenty() -> None:
    names = example_names()
    assert len(names) >= 24
    assert names == sorted(set(names))
    assert all(not n.endswith(".cu") and "/" not in n for n in names)


def test_paths_exist() -> None:
    for name in example_names():
        path = example_path(name)
        assert path.is_file(), name
        assert path.name == f"{name}.cu"
        assert path.parent == EXAMPLES_DIR
        assert example_path(f"{name}.cu") == path


def test_unknown_name_raises_key_error() -> None:
    with pytest.raises(KeyError):
        example_path("no_such_kernel")
    with pytest.raises(KeyError):
        example_path("../__init__")


def test_sources_look_like_tvm_kernels() -> None:
    sources = example_sources()
    assert [n for n, _ in sources] == example_names()
    for name, src in sources:
        assert isinstance(src, str) and src, name
        assert src.startswith(TVM_PRELUDE), name
        assert src.count("#include <cuda/std/type_traits>") == 1, name
        assert 'extern "C" __global__ void __launch_bounds__(' in src, name
        assert src == example_source(name)
    # The generated ones (``<stem>_<index>``) use MetaSchedule's entry names.
    generated = [src for name, src in sources if re.fullmatch(r"[a-z0-9_]+_\d+", name)]
    assert len(generated) >= 24
    assert all("__launch_bounds__" in s and " main_kernel(" in s for s in generated)


def test_examples_vary() -> None:
    """A mix of kinds and sizes, as an autotuning sweep would produce."""
    names = example_names()
    for kind in ("ewise_", "softmax_", "layernorm_", "matmul_", "transpose_", "conv2d_"):
        assert any(n.startswith(kind) for n in names), kind
    sizes = [len(src) for _, src in example_sources()]
    assert max(sizes) > 10 * min(sizes)
    assert sum(sizes) < 1_000_000


@pytest.mark.skipif(not GENERATOR.is_file(), reason="generator not shipped (installed wheel)")
def test_files_match_generator() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.corpus.make_examples",
            "--check",
            "--out",
            str(EXAMPLES_DIR),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _check(result: tuple[object, ...]) -> tuple[object, ...]:
    assert result[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS, result[0]
    return result[1:]


def test_smallest_example_compiles_with_nvrtc() -> None:
    """The smallest example through NVRTC with TVM's option set, headers from the wheels."""
    name, src = min(example_sources(), key=lambda item: len(item[1]))
    includes = [
        pathfinder.find_nvidia_header_directory("cudart"),
        pathfinder.find_nvidia_header_directory("cccl"),
    ]
    assert all(includes), includes
    flags = [
        f"--gpu-architecture={ARCH}",
        "-default-device",
        "--device-int128",
        *(f"-I{d}" for d in includes),
        "--use_fast_math",
        "--ptxas-options=-v",
    ]
    # NVRTC's own cache stays out of it: a hit there has no ptxas report to read.
    options = [flag.encode() for flag in without_nvrtc_cache(flags)]
    (prog,) = _check(nvrtc.nvrtcCreateProgram(src.encode(), f"{name}.cu".encode(), 0, [], []))
    try:
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        (log_size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog))
        log = b" " * int(str(log_size))
        _check(nvrtc.nvrtcGetProgramLog(prog, log))
        text = log.decode(errors="replace")
        assert status == nvrtc.nvrtcResult.NVRTC_SUCCESS, text
        assert "Compiling entry function 'main_kernel' for 'sm_90a'" in text
        (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * int(str(size))
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
        assert cubin[:4] == b"\x7fELF"
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
