"""The TVM preamble fast path inside the engine: used when it matches, switchable off,
and the user's own source is compiled when the rewrite fails."""

from __future__ import annotations

from pathlib import Path

from asynccomp import CompileJob, Engine
from asynccomp.preamble import rewrite_tvm_preamble

from .kernels import ARCH, scale_kernel

TVM_KERNEL = (Path(__file__).parent / "data" / "tvm_kernels" / "vector_add.cu").read_text()


async def test_fast_path_is_used_and_switchable(tmp_path: Path) -> None:
    job = CompileJob(TVM_KERNEL, name="vector_add")
    async with Engine(arch=ARCH, dump_dir=tmp_path / "on", cache=False) as engine:
        fast = await engine.compile(job)
    async with Engine(
        arch=ARCH, dump_dir=tmp_path / "off", cache=False, tvm_fast_path=False
    ) as engine:
        plain = await engine.compile(job)
    assert fast.ok and plain.ok
    assert fast.dump_dir is not None and plain.dump_dir is not None
    compiled_fast = (fast.dump_dir / "vector_add.cu").read_text()
    assert compiled_fast == rewrite_tvm_preamble(TVM_KERNEL)
    assert "#include <cuda/std/type_traits>" not in compiled_fast
    assert (plain.dump_dir / "vector_add.cu").read_text() == TVM_KERNEL
    assert fast.resources == plain.resources
    assert not fast.warnings


async def test_a_job_overrides_the_engines_fast_path(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False, tvm_fast_path=False) as engine:
        fast, plain = await engine.compile_many(
            [
                CompileJob(TVM_KERNEL, name="fast", tvm_fast_path=True),
                CompileJob(TVM_KERNEL, name="plain"),
            ]
        )
    assert fast.ok and plain.ok and fast.dump_dir and plain.dump_dir
    assert (fast.dump_dir / "fast.cu").read_text() == rewrite_tvm_preamble(TVM_KERNEL)
    assert (plain.dump_dir / "plain.cu").read_text() == TVM_KERNEL
    async with Engine(arch=ARCH, dump_dir=tmp_path / "2", cache=False) as engine:
        off = await engine.compile(CompileJob(TVM_KERNEL, name="off", tvm_fast_path=False))
    assert off.dump_dir is not None and (off.dump_dir / "off.cu").read_text() == TVM_KERNEL


async def test_sources_without_the_preamble_are_untouched(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        result = await engine.compile(CompileJob(scale_kernel(), name="plain"))
    assert result.dump_dir is not None
    assert (result.dump_dir / "plain.cu").read_text() == scale_kernel()


async def test_failed_rewrite_recompiles_the_original_source(tmp_path: Path) -> None:
    # A TVM kernel with an error of its own: the rewrite fails, so the user's original is
    # compiled too and its diagnostics (and source) are what the result reports.
    source = TVM_KERNEL + 'extern "C" __global__ void extra(float* x) { x[0] = nope_42; }\n'
    assert rewrite_tvm_preamble(source) is not None
    async with Engine(arch=ARCH, cache=False) as engine:
        result = await engine.compile(CompileJob(source, name="extra"))
    assert not result.ok
    assert "nope_42" in result.log
    assert any("fast path" in w for w in result.warnings)
