"""asynccomp.tvm against TVM 0.27 itself: the same binaries, sources and command lines.

Needs ``apache-tvm==0.27.0.post1`` (the ``tvm`` extra; skipped without it):

    python -m pip install -e '.[test,tvm]' && python -m pytest tests/test_tvm_parity.py

Both sides use the same toolkit: TVM finds it through ``$CUDA_PATH`` (set here to the
toolkit root when unset, because TVM's ``which nvcc`` lookup misreads a wrapper script
such as ``/usr/local/bin/nvcc``), and so do we. TVM's nvcc path asks for the target's
architecture even when ``arch`` is given, so its nvcc compiles run in a target scope.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

tvm = pytest.importorskip("tvm")

import asynccomp.tvm  # noqa: E402 - after the skip
from asynccomp.tvm import compile_cuda, make_job  # noqa: E402

from .kernels import needs_nvcc, scale_kernel  # noqa: E402
from .sass import cuobjdump, sass  # noqa: E402

pytestmark = pytest.mark.tvm

tvm_nvcc: Any = tvm.support.nvcc
Target: Any = tvm.target.Target

DATA = Path(__file__).parent / "data" / "tvm_kernels"
KERNELS = sorted(p.name for p in DATA.glob("*.cu"))
ARCH = "sm_90a"


def kernel(name: str) -> str:
    return (DATA / name).read_text()


def _toolkit_root() -> str | None:
    root = asynccomp.find_toolkit().cuda_root
    return str(root) if root else None


@pytest.fixture(autouse=True)
def same_toolkit_and_exact_bytes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if not os.environ.get("CUDA_PATH"):
        root = "/usr/local/cuda" if Path("/usr/local/cuda/include").is_dir() else _toolkit_root()
        if root is None:
            pytest.skip("no CUDA toolkit: TVM's NVRTC path needs one for its headers")
        monkeypatch.setenv("CUDA_PATH", root)
    for name in ("TVM_CUDA_COMPILE_MODE", "TVM_KERNEL_DUMP", "TVM_KERNEL_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASYNCCOMP_TVM_FAST_PATH", "0")  # byte identity needs the source as is
    yield
    asynccomp.tvm.shutdown()


# --------------------------------------------------------------------------- binaries


@pytest.mark.parametrize("name", KERNELS)
def test_nvrtc_cubin_is_byte_identical(name: str) -> None:
    code = kernel(name)
    ours = compile_cuda(code, "cubin", arch=ARCH)
    assert ours == tvm_nvcc.compile_cuda(code, target_format="cubin", arch=ARCH)
    # The callback path, with the architecture from the target scope on both sides.
    with Target({"kind": "cuda", "arch": ARCH}):
        assert asynccomp.tvm.tvm_callback_cuda_compile(code) == ours
        assert tvm_nvcc.tvm_callback_cuda_compile(code) == ours


def test_nvrtc_ptx_is_byte_identical() -> None:
    code = kernel("vector_add.cu")
    ours = compile_cuda(code, "ptx", arch=ARCH)
    assert ours == tvm_nvcc.compile_cuda(code, target_format="ptx", arch=ARCH)
    assert ours.endswith(b"\x00")  # TVM keeps NVRTC's terminating NUL


@needs_nvcc
@pytest.mark.parametrize("name", KERNELS)
def test_nvcc_fatbin_is_byte_identical(name: str) -> None:
    code = kernel(name)
    with Target({"kind": "cuda", "arch": ARCH}):
        theirs = tvm_nvcc.compile_cuda(code, target_format="fatbin", compiler="nvcc")
        assert compile_cuda(code, "fatbin", compiler="nvcc") == theirs
        explicit = tvm_nvcc.compile_cuda(code, "fatbin", arch=ARCH, compiler="nvcc")
        assert compile_cuda(code, "fatbin", arch=ARCH, compiler="nvcc") == explicit


@pytest.mark.parametrize("name", KERNELS)
def test_fast_path_gives_the_same_sass(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    monkeypatch.setenv("ASYNCCOMP_TVM_FAST_PATH", "1")
    code = kernel(name)
    ours = compile_cuda(code, "cubin", arch=ARCH)
    theirs = tvm_nvcc.compile_cuda(code, target_format="cubin", arch=ARCH)
    listing = sass(bytes(theirs), tool, tmp_path)
    assert "Function : " in listing
    assert sass(bytes(ours), tool, tmp_path) == listing
    stats = asynccomp.tvm.engine().statistics()
    assert stats.compiled == 1  # and the fast path really ran: the bytes differ
    assert ours != theirs


# --------------------------------------------------------------------------- command lines


class _Captured(Exception):
    """Stops TVM right where it would start the compiler."""


def _tvm_nvrtc_call(compile_: Callable[[], object]) -> Any:
    """Run TVM's NVRTC path up to nvrtcCompileProgram; return its source, name, options."""
    from cuda.bindings import nvrtc

    seen = SimpleNamespace()
    create = nvrtc.nvrtcCreateProgram

    def create_program(source: bytes, name: bytes, *rest: Any) -> Any:
        seen.source, seen.name = source.decode(), name.decode()
        return create(source, name, *rest)

    def compile_program(_prog: Any, _count: int, options: list[bytes]) -> Any:
        seen.options = [o.decode() for o in options]
        raise _Captured

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nvrtc, "nvrtcCreateProgram", create_program)
        patch.setattr(nvrtc, "nvrtcCompileProgram", compile_program)
        with pytest.raises(_Captured):
            compile_()
    return seen


def _tvm_nvcc_argv(compile_: Callable[[], object]) -> list[str]:
    """TVM's nvcc argv, without running nvcc (only TVM's module sees the stand-in)."""
    seen: list[list[str]] = []

    def popen(cmd: list[str], **_: Any) -> Any:
        seen.append(list(cmd))
        raise _Captured

    fake = SimpleNamespace(Popen=popen, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tvm_nvcc, "subprocess", fake)
        with pytest.raises(_Captured):
            compile_()
    return seen[0]


TVM_SETTINGS = {
    "TVM_CUDA_PTXAS_REG_LEVEL": "7",
    "TVM_CUDA_PTXAS_EXTRA_OPTS": "-O2 --def-load-cache=ca",
    "TVM_CUDA_NVRTC_EXTRA_OPTS": "--ftz=false -DFROM_ENV=1",
}
USER_OPTIONS = ["-O3", "-std=c++17", "-DUSER=1", "-Xptxas", "-lineinfo", "-ccbin=gcc"]
# cuda.h is dropped and CUtensorMap declared: both rewrites of TVM's NVRTC path.
TMA_SOURCE = "#include <cuda.h>\n" + scale_kernel() + "// uses CUtensorMap\n"


@pytest.mark.parametrize("settings", [{}, TVM_SETTINGS], ids=["defaults", "environment"])
@pytest.mark.parametrize("output", ["cubin", "ptx"])
def test_nvrtc_source_and_options_are_tvms(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], output: str
) -> None:
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    job = make_job(TMA_SOURCE, output, "sm_90a", USER_OPTIONS)
    theirs = _tvm_nvrtc_call(
        lambda: tvm_nvcc.compile_cuda(TMA_SOURCE, output, "sm_90a", USER_OPTIONS)
    )
    assert job.source == theirs.source
    assert f"{job.name}.cu" == theirs.name
    assert list(job.options) == theirs.options


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_target_scope_architecture_is_tvms(monkeypatch: pytest.MonkeyPatch, arch: str) -> None:
    code = kernel("vector_add.cu")
    with Target({"kind": "cuda", "arch": arch}):
        job = make_job(code)
        theirs = _tvm_nvrtc_call(lambda: tvm_nvcc.compile_cuda(code))
        nvcc_job = make_job(code, "fatbin", compiler="nvcc")
        argv = _tvm_nvcc_argv(lambda: tvm_nvcc.compile_cuda(code, "fatbin", compiler="nvcc"))
    assert list(job.options) == theirs.options
    assert list(nvcc_job.options) == argv[1:-3]


def test_tvm_tag_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCCOMP_ARCH", raising=False)
    with Target("nvidia/nvidia-h100"):
        assert make_job(scale_kernel()).options[0] == "--gpu-architecture=sm_90a"
    # The two-argument callback form with a TVM Target, outside any scope.
    job_arch = asynccomp.tvm._arch.resolve_arch(None, Target("nvidia/nvidia-a100")).arch
    assert job_arch == "sm_80"


@pytest.mark.parametrize("dump", [False, True], ids=["plain", "TVM_KERNEL_DUMP"])
def test_nvcc_argv_is_tvms(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dump: bool) -> None:
    for key, value in TVM_SETTINGS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TVM_KERNEL_DEBUG", "1")
    monkeypatch.setenv("TVM_CUDA_NVCC_NO_FAST_MATH", "1")
    code = scale_kernel()
    job = make_job(code, "fatbin", "sm_90a", USER_OPTIONS, "nvcc", dump=dump)
    if dump:
        monkeypatch.setenv("TVM_KERNEL_DUMP", str(tmp_path))
    with Target({"kind": "cuda", "arch": "sm_90a"}):  # TVM asks for it even so
        argv = _tvm_nvcc_argv(
            lambda: tvm_nvcc.compile_cuda(code, "fatbin", "sm_90a", USER_OPTIONS, compiler="nvcc")
        )
    assert argv[0] == "nvcc" and argv[-3] == "-o" and argv[-1].endswith("tvm_kernels.cu")
    expected = argv[1:-3]
    if dump:
        # TVM's shared --keep-dir is the one thing left out: the engine adds --keep and
        # moves the kept files into each job's own dump folder.
        expected = [a for a in expected if a != "--keep" and not a.startswith("--keep-dir=")]
    assert list(job.options) == expected


# --------------------------------------------------------------------------- registering


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600
    )


def test_registering_before_import_tvm_breaks_tvm() -> None:
    # Why register() imports TVM first: TVM registers its callback without override.
    out = _python(
        "import tvm_ffi\n"
        "tvm_ffi.register_global_func('tvm_callback_cuda_compile', lambda c: c, override=True)\n"
        "import tvm\n"
    )
    assert out.returncode != 0
    assert "`tvm_callback_cuda_compile` is already registered" in out.stderr


def test_register_then_import_tvm_uses_ours() -> None:
    out = _python(
        "import asynccomp.tvm, os\n"
        "asynccomp.tvm.register()\n"
        "import tvm, tvm_ffi\n"
        "from tvm.target import Target\n"
        "callback = tvm_ffi.get_global_func('tvm_callback_cuda_compile')\n"
        "with Target({'kind': 'cuda', 'arch': 'sm_80'}):\n"
        "    cubin = callback('extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }')\n"
        "assert cubin[:4] == b'\\x7fELF', cubin[:4]\n"
        "assert asynccomp.tvm.engine().statistics().completed == 1\n"
        "print('ours')\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ours"
