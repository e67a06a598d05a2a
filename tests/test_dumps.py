"""Per-job dump folders, manifests and resource reports, on the real compilers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from asynccomp import CompileJob, CompileTimeout, DumpDirError, Engine

from .fakes import FakeEngine, fake_job
from .kernels import ARCH, broken_kernel, needs_nvcc, ptx_kernel, scale_kernel, slow_kernel
from .sass import cuobjdump, sass

BACKENDS = ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)]

SMEM_KERNEL = """
extern "C" __global__ void smem(float* x) {
  __shared__ float tile[512];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[511 - threadIdx.x];
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_same_name_jobs_get_distinct_complete_folders(tmp_path: Path, backend: str) -> None:
    jobs = [CompileJob(scale_kernel(), name="same/name x", backend=backend) for _ in range(4)]
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        results = await engine.compile_many(jobs)
    folders = [r.dump_dir for r in results]
    assert all(f is not None for f in folders)
    assert len(set(folders)) == 4
    for r in results:
        assert r.ok and r.dump_dir is not None and r.dump_dir.parent == tmp_path
        assert "/" not in r.dump_dir.name and " " not in r.dump_dir.name
        files = {p.name for p in r.dump_dir.iterdir()}
        binary = r.dump_dir / f"same_name_x.{r.output}"
        assert binary.read_bytes() == r.binary
        assert (r.dump_dir / "same_name_x.cu").read_text() == r.job.source
        assert {"command.txt", "compile.log", "result.json"} <= files
        assert "-lineinfo" in r.command
        record = json.loads((r.dump_dir / "result.json").read_text())
        assert record["status"] == "ok" and record["name"] == "same/name x"
        assert record["binary_size"] == len(r.binary or b"")
        assert record["toolkit"]["nvrtc"]
        if backend == "nvcc":
            assert (r.dump_dir / "rerun.sh").is_file()
            assert any(name.endswith(".ptx") for name in files)  # --keep intermediates
    manifest = (tmp_path / "manifest.jsonl").read_text().splitlines()
    assert len(manifest) == 4
    assert {json.loads(line)["folder"] for line in manifest} == {str(f) for f in folders}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_failed_job_folder_is_a_reproduction(tmp_path: Path, backend: str) -> None:
    async with Engine(arch=ARCH, dump_dir=tmp_path) as engine:
        result = await engine.compile(CompileJob(broken_kernel(), name="broken", backend=backend))
    assert not result.ok and result.dump_dir is not None
    assert (result.dump_dir / "broken.cu").read_text() == broken_kernel()
    assert "undefined_identifier_42" in (result.dump_dir / "compile.log").read_text()
    record = json.loads((result.dump_dir / "result.json").read_text())
    assert record["status"] == "failed" and record["error_type"] == "CompileError"


async def test_job_dump_flag_uses_default_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCCOMP_DUMP_DIR", str(tmp_path / "dumps"))
    async with Engine(arch=ARCH) as engine:
        dumped, plain = await engine.compile_many(
            [CompileJob(scale_kernel(), dump=True), CompileJob(scale_kernel(5.0))]
        )
    assert dumped.dump_dir is not None and dumped.dump_dir.parent == tmp_path / "dumps"
    assert plain.dump_dir is None


async def test_a_job_can_name_its_own_dump_root(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, dump_dir=tmp_path / "engine") as engine:
        own, shared = await engine.compile_many(
            [
                CompileJob(scale_kernel(), name="own", dump=tmp_path / "own"),
                CompileJob(scale_kernel(2.0), name="shared"),
            ]
        )
    assert own.ok and own.dump_dir is not None and own.dump_dir.parent == tmp_path / "own"
    assert (own.dump_dir / "own.cubin").read_bytes() == own.binary
    assert shared.dump_dir is not None and shared.dump_dir.parent == tmp_path / "engine"
    # Each root keeps its own manifest.
    for root, name in ((tmp_path / "own", "own"), (tmp_path / "engine", "shared")):
        [line] = (root / "manifest.jsonl").read_text().splitlines()
        assert json.loads(line)["name"] == name


async def test_unusable_job_dump_root_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(CompileJob(scale_kernel(), dump=blocker / "dumps"))
    assert result.ok and result.binary and result.dump_dir is None
    assert any("dump not written" in w and "not usable" in w for w in result.warnings)


async def test_unusable_dump_root_fails_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DumpDirError, match="not usable"):
        async with Engine(arch=ARCH, dump_dir=blocker / "dumps"):
            pass


async def test_dump_write_failure_keeps_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ASYNCCOMP_DUMP_DIR", str(blocker / "dumps"))
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(CompileJob(scale_kernel(), dump=True))
    assert result.ok and result.binary
    assert result.dump_dir is None
    assert any("dump not written" in w for w in result.warnings)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_resources_from_real_ptxas(backend: str) -> None:
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(
            CompileJob(SMEM_KERNEL, backend=backend, options=["--maxrregcount=32"])
        )
    assert result.ok, result.error
    smem = result.resources["smem"]
    assert smem.shared_memory == 2048
    assert smem.barriers == 1
    assert 0 < smem.registers <= 32
    assert smem.spill_stores == 0 and smem.arch == ARCH


async def test_timed_out_job_is_dumped_with_its_reproduction(tmp_path: Path) -> None:
    job = CompileJob(slow_kernel(), name="slow", timeout=0.5)
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        result = await engine.compile(job)
    assert isinstance(result.error, CompileTimeout)
    assert result.dump_dir is not None
    record = json.loads((result.dump_dir / "result.json").read_text())
    assert record["status"] == "timeout" and record["error_type"] == "CompileTimeout"
    assert (result.dump_dir / "slow.cu").read_text() == job.source
    assert (result.dump_dir / "command.txt").read_text().strip()
    assert not list(result.dump_dir.glob("*.cubin"))
    (line,) = (tmp_path / "manifest.jsonl").read_text().splitlines()
    assert json.loads(line)["status"] == "timeout"


async def test_any_job_name_gives_a_safe_folder(tmp_path: Path) -> None:
    names = ["../../etc/passwd", "ядро ✓ kernel", "x" * 500, ".", "a\\b:c*d?e|f"]
    jobs = [CompileJob(scale_kernel(float(i)), name=n) for i, n in enumerate(names)]
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        results = await engine.compile_many(jobs)
    folders = [r.dump_dir for r in results]
    assert len({f for f in folders if f is not None}) == len(names)
    for r, folder in zip(results, folders, strict=True):
        assert r.ok and folder is not None and folder.parent == tmp_path
        assert len(folder.name) < 100 and folder.name.isascii()
        assert json.loads((folder / "result.json").read_text())["name"] == r.job.name


async def test_concurrent_jobs_into_a_new_big_root_never_repeat_a_sequence(tmp_path: Path) -> None:
    # Each job names the root itself, so the root is opened by the jobs' threads at once;
    # a root holding many folders takes a while to open (it numbers after the highest).
    root = tmp_path / "big"
    root.mkdir()
    for i in range(20_000):
        (root / f"{i:06d}-old-0").mkdir()
    jobs = [fake_job("ok", f"j{i}", dump=root) for i in range(64)]
    async with FakeEngine(arch=ARCH, nvrtc_workers=16, cache=False) as engine:
        results = await engine.compile_many(jobs)
    folders = [r.dump_dir for r in results]
    assert all(f is not None and f.parent == root for f in folders)
    sequences = [int(f.name.split("-", 1)[0]) for f in folders if f is not None]
    assert len(set(sequences)) == 64, sorted(sequences)
    assert min(sequences) >= 20_000


# -- a dump folder reproduces its compile on its own (issue 39) -------------------------

HEADER_X = (
    '#pragma once\n#include "inc/y.h"\n'
    "__device__ float scaled(float v) {\n  return v * 3.0f + OFFSET;\n}\n"
)
HEADER_Y = "#pragma once\n#define OFFSET 1.0f\n"
USES_X = (
    '#include "x.h"\n'
    'extern "C" __global__ void k(float* a) { a[threadIdx.x] = scaled(a[threadIdx.x]); }\n'
)


def _local_headers(src: Path) -> None:
    """``x.h`` (a device function: its lines are in the line table) and ``inc/y.h``,
    which ``x.h`` includes from its own folder."""
    (src / "inc").mkdir(parents=True)
    (src / "x.h").write_text(HEADER_X)
    (src / "inc" / "y.h").write_text(HEADER_Y)


def _rerun(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(script), *args] if script.suffix == ".py" else ["sh", str(script)]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode", ["threads", "processes"])
async def test_an_nvrtc_dump_reruns_from_its_folder_alone(
    tmp_path: Path, mode: Literal["threads", "processes"]
) -> None:
    """The local headers the compile read are in the dump, and its rerun.py makes the
    same cubin: byte for byte while the headers are where they were, and the same code
    from the copies once they are gone."""
    src = tmp_path / "src"
    _local_headers(src)
    job = CompileJob(USES_X, name="k", options=[f"-I{src}"])
    async with Engine(arch=ARCH, dump_dir=tmp_path / "dumps", cache=False, nvrtc_mode=mode) as e:
        result = await e.compile(job)
    assert result.ok and result.binary and result.dump_dir is not None
    folder = result.dump_dir
    assert (folder / f"headers{src}" / "x.h").read_text() == HEADER_X
    assert (folder / f"headers{src}" / "inc" / "y.h").read_text() == HEADER_Y
    # Run from elsewhere: the script finds its folder.
    exact = _rerun(folder / "rerun.py", cwd=tmp_path)
    assert exact.returncode == 0, exact.stderr
    assert "rerun: wrote rerun/k.cubin: the same bytes as k.cubin" in exact.stdout
    assert (folder / "rerun" / "k.cubin").read_bytes() == result.binary

    (tmp_path / "src").rename(tmp_path / "moved")  # the caller's tree is gone
    alone = _rerun(folder / "rerun.py", cwd=tmp_path)
    assert alone.returncode in (0, 2), alone.stderr  # 2: other bytes (the line table)
    assert "compiling against the copies under headers/" in alone.stderr
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed")
    again = (folder / "rerun" / "k.cubin").read_bytes()
    assert sass(again, tool, tmp_path) == sass(result.binary, tool, tmp_path)


async def test_a_failed_nvrtc_dump_reruns_to_the_same_failure(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        result = await engine.compile(CompileJob(broken_kernel(), name="broken"))
    assert not result.ok and result.dump_dir is not None
    rerun = _rerun(result.dump_dir / "rerun.py", cwd=tmp_path)
    assert rerun.returncode == 1
    assert "undefined_identifier_42" in rerun.stderr and "the compile failed" in rerun.stderr


@needs_nvcc
async def test_an_nvcc_dump_reruns_from_its_folder_alone(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _local_headers(src)
    job = CompileJob(USES_X, name="k", backend="nvcc", options=[f"-I{src}"])
    async with Engine(arch=ARCH, dump_dir=tmp_path / "dumps", cache=False) as engine:
        result = await engine.compile(job)
    assert result.ok and result.binary and result.dump_dir is not None
    folder = result.dump_dir
    assert (folder / f"headers{src}" / "inc" / "y.h").read_text() == HEADER_Y
    (tmp_path / "src").rename(tmp_path / "moved")
    (folder / "k.fatbin").unlink()
    alone = _rerun(folder / "rerun.sh", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed")
    again = (folder / "k.fatbin").read_bytes()
    assert sass(again, tool, tmp_path, "fatbin") == sass(result.binary, tool, tmp_path, "fatbin")


async def test_an_nvjitlink_dump_reruns_to_the_same_cubin(tmp_path: Path) -> None:
    from asynccomp.backends import NvJitLinkBackend

    if NvJitLinkBackend.version(None) is None:
        pytest.skip("nvJitLink is not installed (pip install nvidia-nvjitlink)")
    job = CompileJob(ptx_kernel(4.0), name="linked", backend="nvjitlink")
    async with Engine(arch=ARCH, dump_dir=tmp_path, cache=False) as engine:
        result = await engine.compile(job)
    assert result.ok and result.dump_dir is not None
    rerun = _rerun(result.dump_dir / "rerun.py", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert (result.dump_dir / "rerun" / "linked.cubin").read_bytes() == result.binary
