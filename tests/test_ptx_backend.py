"""The third backend, PTX -> cubin with the toolkit's real ptxas: hand-written PTX and
PTX that nvcc and NVRTC wrote, in bulk, with resources, dumps, the cache (ptxas's
identity in the key), the CLI's ``--backend ptx`` and its walk over ``.ptx`` files, and
the clear errors (a ``.target`` the arch cannot take, options it refuses). The compile
server and Ray compile it in ``test_doors.py``'s table."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileError, CompileJob, Engine, InvalidJob
from asynccomp.backends import PtxBackend, backend_class
from asynccomp.backends._workdirs import sweep_work_folders
from asynccomp.backends.ptx import target_mismatch
from asynccomp.cache import compiler_identity
from asynccomp.toolkit import find_toolkit

from .kernels import ARCH, needs_nvcc, needs_ptxas, ptx_kernel, scale_kernel
from .processes import bare_environ, run_cli

pytestmark = needs_ptxas


@pytest.mark.parametrize(
    ("target", "arch", "ok"),
    [
        ("sm_80", "sm_80", True),
        ("sm_80", "sm_90a", True),
        ("sm_90", "sm_80", False),
        ("sm_90a", "sm_90a", True),
        ("sm_90a", "sm_90", False),
        ("sm_90a", "sm_100a", False),
        ("sm_80", "compute_90", False),
    ],
)
def test_the_target_rule_is_what_ptxas_does(target: str, arch: str, ok: bool) -> None:
    """Each row checked against the real ptxas too: the rule refuses what it refuses."""
    assert (target_mismatch(target, arch) is None) is ok
    toolkit = find_toolkit()
    ptxas = compiler_identity("ptx", toolkit)[0].split()[-1]
    if arch.startswith("compute_"):
        return  # ptxas takes no virtual architecture at all
    done = subprocess.run(
        [ptxas, f"-arch={arch}", "-o", "/dev/null", "--input-as-string", ptx_kernel(target=target)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode == 0) is ok, done.stderr


async def test_hand_written_ptx_compiles_in_bulk_with_resources() -> None:
    jobs = [CompileJob(ptx_kernel(1.0 + i), name=f"k{i}", backend="ptx") for i in range(12)]
    async with Engine(arch=ARCH, cache=False) as engine:
        results = await engine.compile_many(jobs)
    for result in results:
        assert result.ok, result.error
        assert result.output == "cubin" and result.unwrap().startswith(b"\x7fELF")
        assert result.resources["scale"].arch == ARCH and result.resources["scale"].registers > 0
        assert result.command is not None and result.command[1:3] == (f"-arch={ARCH}", "-v")
    assert len({r.binary for r in results}) == len(results)  # each its own factor


@needs_nvcc
async def test_ptx_from_nvcc_and_nvrtc_compiles() -> None:
    """PTX written by the toolkit's nvcc (read as it is) and by NVRTC (its ``.version``
    set to 8.0: the NVRTC wheel may be newer than the toolkit's ptxas, which then says
    "Unsupported .version" itself, as the last job shows)."""
    async with Engine(arch=ARCH, cache=False) as engine:
        nvcc, nvrtc = await engine.compile_many(
            [
                CompileJob(scale_kernel(3.0), backend="nvcc", output="ptx"),
                CompileJob(scale_kernel(4.0), output="ptx"),
            ]
        )
        nvrtc_ptx = nvrtc.unwrap().decode()
        lowered = re.sub(r"^\.version \S+", ".version 8.0", nvrtc_ptx, count=1, flags=re.M)
        newest = re.sub(r"^\.version \S+", ".version 99.0", nvrtc_ptx, count=1, flags=re.M)
        results = await engine.compile_many(
            [
                CompileJob(nvcc.unwrap().decode(), name="from_nvcc", backend="ptx"),
                CompileJob(lowered, name="from_nvrtc", backend="ptx"),
                CompileJob(newest, name="too_new", backend="ptx"),
            ]
        )
    for result in results[:2]:
        assert result.ok, result.error
        assert result.resources["scale"].registers > 0
    too_new = results[2].error
    assert type(too_new) is CompileError and ".version" in too_new.log  # ptxas's verdict


async def test_a_target_the_arch_cannot_take_is_a_clear_error() -> None:
    with pytest.raises(InvalidJob, match=r"invalid arch 'sm_80': the PTX's \.target sm_90a"):
        CompileJob(ptx_kernel(target="sm_90a"), backend="ptx", arch="sm_80")
    with pytest.raises(InvalidJob, match="ptxas makes SASS for a real GPU"):
        CompileJob(ptx_kernel(), backend="ptx", arch="compute_90")
    # The engine's arch: the job's error, before ptxas runs; the rest of the batch compiles.
    async with Engine(arch="sm_80", cache=False) as engine:
        bad, good = await engine.compile_many(
            [
                CompileJob(ptx_kernel(target="sm_90a"), name="bad", backend="ptx"),
                CompileJob(ptx_kernel(), name="good", backend="ptx"),
            ]
        )
    assert type(bad.error) is CompileError and not bad.command  # ptxas never ran
    assert "the PTX's .target sm_90a compiles for sm_90a only, not sm_80" in str(bad.error)
    assert good.ok, good.error


def _retargeted(before: str, target_line: str) -> str:
    """``ptx_kernel()`` with its ``.target sm_80`` line replaced by ``target_line``
    and ``before`` put above its ``.version``."""
    ptx = ptx_kernel().replace(".target sm_80\n", target_line)
    return ptx.replace(".version", before + ".version", 1)


async def test_a_commented_out_target_is_not_the_target() -> None:
    """ptxas skips comments: a ``.target`` inside one decides nothing."""
    ptx = _retargeted("/*\n.target sm_100a\n*/\n// .target sm_90a\n", ".target sm_80 // sm_90a\n")
    job = CompileJob(ptx, name="scale", backend="ptx", arch="sm_90a")  # sm_80 PTX runs there
    async with Engine(cache=False) as engine:
        result = await engine.compile(job)
    assert result.ok, result.log


@pytest.mark.parametrize(
    "ptx",
    [
        _retargeted("", ".target /* the GPU */ sm_90a\n"),
        _retargeted("", "").replace(".version 8.0\n", ".version 8.0 .target sm_90a\n"),
        _retargeted("", ".target\n  sm_90a, debug\n"),
    ],
    ids=["comment inside", "after another directive on its line", "name on the next line"],
)
def test_the_target_is_found_wherever_ptxas_reads_it(ptx: str) -> None:
    with pytest.raises(InvalidJob, match=r"the PTX's \.target sm_90a compiles for sm_90a only"):
        CompileJob(ptx, backend="ptx", arch="sm_100a")


@pytest.mark.parametrize("option", ["-o=x.cubin", "--output-file=x", "-arch=sm_80", "--gpu-name"])
def test_options_that_name_another_output_or_arch_are_refused(option: str) -> None:
    with pytest.raises(InvalidJob, match=f"invalid options '{option}': refused for ptxas"):
        CompileJob(ptx_kernel(), backend="ptx", options=[option])


def test_outputs_other_than_cubin_are_refused_naming_the_backend() -> None:
    with pytest.raises(InvalidJob, match="backend 'ptx' makes cubin"):
        CompileJob(ptx_kernel(), backend="ptx", output="fatbin")
    with pytest.raises(InvalidJob, match="precompiled headers are NVRTC's; ptx has none"):
        CompileJob(ptx_kernel(), backend="ptx", pch=True)


async def test_ptxas_rejecting_the_source_is_its_verdict_with_the_log() -> None:
    broken = ptx_kernel().replace("mul.f32", "mul.nonsense")
    async with Engine(arch=ARCH, cache=False) as engine:
        result = await engine.compile(CompileJob(broken, name="broken", backend="ptx"))
    assert type(result.error) is CompileError
    assert "line 17" in result.log and "ptxas exited with status" in str(result.error)


async def test_options_reach_ptxas(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, cache=False) as engine:
        plain, limited = await engine.compile_many(
            [
                CompileJob(ptx_kernel(), name="plain", backend="ptx"),
                CompileJob(ptx_kernel(), name="o0", backend="ptx", options=["-O0"]),
            ]
        )
    assert limited.command is not None and "-O0" in limited.command
    assert plain.unwrap() != limited.unwrap()


async def test_the_cache_keys_on_ptxas_identity(tmp_path: Path) -> None:
    toolkit = find_toolkit()
    identity, headers = compiler_identity("ptx", toolkit)
    version = PtxBackend.version(toolkit)
    assert version is not None and identity.startswith(f"ptxas {version} /")
    assert headers == ()  # PTX reads no headers
    assert identity != compiler_identity("nvcc", toolkit)[0]
    job = CompileJob(ptx_kernel(5.0), name="cached", backend="ptx")
    async with Engine(arch=ARCH, cache_dir=tmp_path) as first:
        compiled = await first.compile(job)
    async with Engine(arch=ARCH, cache_dir=tmp_path) as second:
        hit = await second.compile(job)
    assert compiled.ok and not compiled.cached
    assert hit.cached and hit.binary == compiled.binary
    assert hit.resources == compiled.resources


async def test_a_dump_holds_the_ptx_and_a_rerun_that_makes_the_same_cubin(
    tmp_path: Path,
) -> None:
    async with Engine(arch=ARCH, cache=False, dump_dir=tmp_path) as engine:
        result = await engine.compile(CompileJob(ptx_kernel(6.0), name="dumped", backend="ptx"))
    assert result.ok and result.dump_dir is not None
    folder = Path(result.dump_dir)
    assert (folder / "dumped.ptx").read_text() == ptx_kernel(6.0)
    assert "-lineinfo" in (folder / "command.txt").read_text()
    assert "ptxas info" in (folder / "compile.log").read_text()
    assert (folder / "dumped.cubin").read_bytes() == result.binary
    (folder / "dumped.cubin").unlink()
    await anyio.run_process(["sh", str(folder / "rerun.sh")])
    assert (folder / "dumped.cubin").read_bytes() == result.binary


def test_the_cli_compiles_ptx_files_and_walks_folders_for_them(tmp_path: Path) -> None:
    (tmp_path / "src" / "deeper").mkdir(parents=True)
    (tmp_path / "src" / "a.ptx").write_text(ptx_kernel(1.5))
    (tmp_path / "src" / "deeper" / "b.ptx").write_text(ptx_kernel(2.5))
    (tmp_path / "src" / "c.cu").write_text(scale_kernel())  # not a PTX source: not walked
    out = tmp_path / "out"
    env = bare_environ(ASYNCCOMP_SERVER="off", HOME=str(tmp_path))
    done = run_cli(
        "compile", "--backend", "ptx", "--arch", ARCH, "--no-server", "--no-cache",
        str(tmp_path / "src"), "--out", str(out), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.cubin", "b.cubin"]
    assert "2 jobs" in done.stdout
    refused = run_cli("compile", "--backend", "ptx", "--examples", "--arch", ARCH, env=env)
    assert refused.returncode == 2
    assert "--examples are CUDA C++ (.cu): --backend ptx compiles PTX (.ptx)" in refused.stderr


def test_the_registry_entry_says_what_the_engine_runs() -> None:
    cls = backend_class("ptx")
    assert cls is PtxBackend and cls.outputs == ("cubin",) and cls.source_suffix == ".ptx"
    assert CompileJob(ptx_kernel(), backend="ptx").output_format == "cubin"


def test_ptxas_work_folders_of_ended_processes_are_swept(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])  # a pid that has ended
    gone.wait()
    left = tmp_path / f"asynccomp-ptxas-{gone.pid}-ab12_xyz"
    left.mkdir()
    (left / "k.ptx").write_text(ptx_kernel())
    mine = tmp_path / f"asynccomp-ptxas-{os.getpid()}-cd34_xyz"
    mine.mkdir()
    assert sweep_work_folders(str(tmp_path)) == [left.name]
    assert not left.exists() and mine.exists()


async def test_ptx_the_engine_writes_the_engine_assembles() -> None:
    """NVRTC's PTX, then the ptx backend: where the toolkit's ptxas is older than NVRTC
    (the pip wheel's NVRTC beside a system toolkit), it either assembles it or fails with
    one line naming both versions and the backend that works, which then does."""
    from asynccomp.backends import compiler_info

    source = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'
    async with Engine(arch=ARCH, cache=False) as engine:
        ptx = await engine.compile(CompileJob(source, name="k", output="ptx"))
        assert ptx.ok and ptx.binary is not None, ptx.error
        text = ptx.binary.decode()
        assembled = await engine.compile(CompileJob(text, name="k", backend="ptx"))
        if assembled.ok:
            return  # this toolkit's ptxas reads what this NVRTC writes
        message = str(assembled.error).splitlines()[0]
        written = re.search(r"^\s*\.version\s+(\S+)", text, re.M)
        assert written is not None
        assert f".version {written.group(1)}" in message and "reads up to" in message
        if compiler_info("nvjitlink", engine.toolkit).version is None:
            assert "pip install nvidia-nvjitlink" in message
            return
        assert "--backend nvjitlink" in message
        linked = await engine.compile(CompileJob(text, name="k", backend="nvjitlink"))
        assert linked.ok, linked.error
