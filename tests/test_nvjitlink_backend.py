"""The fourth backend, PTX -> cubin with the real nvJitLink in worker processes:
PTX in bulk with resources, NVRTC's PTX as it is, the cache (nvJitLink's identity in the
key), dumps, the CLI's ``--backend nvjitlink``, clear errors, a timeout whose thread
keeps its slot until it ends, and what a machine without nvJitLink is told. The compile
server and Ray compile it in ``test_doors.py``'s table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileError, CompileJob, CompileTimeout, Engine, InvalidJob, ToolkitNotFound
from asynccomp.backends import BackendOptions, NvJitLinkBackend, backend_class
from asynccomp.backends import nvjitlink as nvjitlink_module
from asynccomp.cache import compiler_identity
from asynccomp.toolkit import find_toolkit

from .kernels import ARCH, ptx_kernel, scale_kernel
from .processes import bare_environ, run_cli

pytestmark = pytest.mark.skipif(
    NvJitLinkBackend.version(None) is None,
    reason="nvJitLink is not installed (pip install nvidia-nvjitlink)",
)


def _big_ptx(adds: int) -> str:
    """PTX of one kernel of ``adds`` dependent additions: seconds of ptxas's time."""
    body = "".join(f"\tadd.f32 %f1, %f1, 0f3F80{i % 65536:04X};\n" for i in range(adds))
    return (
        ".version 8.0\n.target sm_80\n.address_size 64\n\n"
        ".visible .entry big(\n\t.param .u64 big_param_0\n)\n{\n"
        "\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<2>;\n"
        "\tld.param.u64 %rd1, [big_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
        "\tld.global.f32 %f1, [%rd2];\n" + body + "\tst.global.f32 [%rd2], %f1;\n\tret;\n}\n"
    )


def _slow() -> CompileJob:
    """A job past its timeout long before nvJitLink is done with it (half a second)."""
    return CompileJob(_big_ptx(10_000), name="big", backend="nvjitlink", timeout=0.01)


async def test_ptx_compiles_in_bulk_with_resources_and_nvrtcs_ptx_as_it_is() -> None:
    jobs = [CompileJob(ptx_kernel(1.0 + i), name=f"k{i}", backend="nvjitlink") for i in range(8)]
    async with Engine(arch=ARCH, cache=False) as engine:
        made = await engine.compile(CompileJob(scale_kernel(3.0), output="ptx"))
        from_nvrtc = CompileJob(made.unwrap().decode(), name="nvrtc", backend="nvjitlink")
        results = await engine.compile_many([*jobs, from_nvrtc])
    for result in results:
        assert result.ok, result.error
        assert result.output == "cubin" and result.unwrap().startswith(b"\x7fELF")
        assert result.resources["scale"].arch == ARCH and result.resources["scale"].registers > 0
        assert result.command is not None and result.command[:2] == (f"-arch={ARCH}", "-verbose")
    assert len({r.binary for r in results[:-1]}) == len(jobs)  # each its own factor


def test_the_checks_are_the_ptx_backends() -> None:
    with pytest.raises(InvalidJob, match=r"invalid arch 'sm_80': the PTX's \.target sm_90a"):
        CompileJob(ptx_kernel(target="sm_90a"), backend="nvjitlink", arch="sm_80")
    with pytest.raises(InvalidJob, match="invalid options '-arch=sm_80': refused for nvJitLink"):
        CompileJob(ptx_kernel(), backend="nvjitlink", options=["-arch=sm_80"])
    with pytest.raises(InvalidJob, match="backend 'nvjitlink' makes cubin"):
        CompileJob(ptx_kernel(), backend="nvjitlink", output="ptx")
    assert backend_class("nvjitlink") is NvJitLinkBackend


async def test_bad_ptx_and_bad_options_are_the_jobs_errors_with_nvjitlinks_log() -> None:
    broken = ptx_kernel().replace("mul.f32", "mul.nonsense")
    async with Engine(arch=ARCH, cache=False) as engine:
        bad, unknown, good = await engine.compile_many(
            [
                CompileJob(broken, name="broken", backend="nvjitlink"),
                CompileJob(ptx_kernel(), name="u", backend="nvjitlink", options=["-nonsense"]),
                CompileJob(ptx_kernel(), name="good", backend="nvjitlink", options=["-O0"]),
            ]
        )
    assert type(bad.error) is CompileError and "line 17" in bad.log
    assert "ERROR_PTX_COMPILE" in str(bad.error)
    assert type(unknown.error) is CompileError and "-nonsense" in str(unknown.error)
    assert good.ok and good.command is not None and "-O0" in good.command


async def test_the_cache_keys_on_nvjitlinks_identity(tmp_path: Path) -> None:
    toolkit = find_toolkit()
    identity, headers = compiler_identity("nvjitlink", toolkit)
    assert identity.startswith(f"nvjitlink {NvJitLinkBackend.version(toolkit)} ") and not headers
    assert identity != compiler_identity("ptx", toolkit)[0]
    job = CompileJob(ptx_kernel(5.0), name="cached", backend="nvjitlink")
    async with Engine(arch=ARCH, cache_dir=tmp_path) as first:
        compiled = await first.compile(job)
    async with Engine(arch=ARCH, cache_dir=tmp_path) as second:
        hit = await second.compile(job)
    assert compiled.ok and not compiled.cached
    assert hit.cached and hit.binary == compiled.binary and hit.resources == compiled.resources


async def test_a_dump_holds_the_ptx_the_options_and_the_log(tmp_path: Path) -> None:
    async with Engine(arch=ARCH, cache=False, dump_dir=tmp_path) as engine:
        job = CompileJob(ptx_kernel(6.0), name="dumped", backend="nvjitlink")
        result = await engine.compile(job)
    assert result.ok and result.dump_dir is not None
    folder = Path(result.dump_dir)
    assert (folder / "dumped.ptx").read_text() == ptx_kernel(6.0)
    assert "-lineinfo" in (folder / "command.txt").read_text()
    # ptxas's report, as nvJitLink words it ("ptxas info    :" in 13.5, "info    :" in 13.0).
    assert "registers" in (folder / "compile.log").read_text()


async def test_a_timeout_kills_its_worker_and_the_slot_comes_back() -> None:
    backend = NvJitLinkBackend(find_toolkit(), workers=1)
    options = BackendOptions(arch=ARCH)
    slow = backend.prepare(_slow(), options)
    quick = backend.prepare(CompileJob(ptx_kernel(), name="quick", backend="nvjitlink"), options)
    try:
        timed_out = await backend.run(slow)
        assert timed_out.status == "timeout" and "killed" in timed_out.message
        answered = await backend.run(quick)  # a fresh worker takes the one slot
        assert answered.status == "ok" and answered.binary
        assert backend.worker_count() == 1
    finally:
        await backend.aclose()
    assert backend.worker_count() == 0


async def test_a_job_that_wedges_nvjitlink_costs_no_other_job() -> None:
    """R15: nvJitLink 13.5 given ``-Xptxas=-arch=sm_100a`` fails and leaves a lock held
    that blocks the next link of any other thread of its process for ever: in threads,
    every later job of the backend (or of a compile server, for every client) waited
    for ever. Each link runs in a worker process's one thread now."""
    bad = CompileJob(
        ptx_kernel(), name="wedge", backend="nvjitlink", options=["-Xptxas=-arch=sm_100a"]
    )
    good = [CompileJob(ptx_kernel(1.0 + i), name=f"g{i}", backend="nvjitlink") for i in range(6)]
    async with Engine(arch=ARCH, cache=False, workers={"nvjitlink": 2}) as engine:
        with anyio.fail_after(120):
            first = await engine.compile(bad)
            after = await engine.compile_many(good)
    assert not first.ok
    assert all(r.ok for r in after), [str(r.error) for r in after]


async def test_a_timeout_through_the_engine_is_compile_timeout() -> None:
    async with Engine(arch=ARCH, cache=False) as engine:
        result = await engine.compile(_slow())
    assert type(result.error) is CompileTimeout


def test_without_nvjitlink_a_job_is_told_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvjitlink_module, "_library", lambda: (None, "ImportError: no nvJitLink"))
    # A toolkit described without it (find_toolkit()'s was, with it, in this process).
    backend = NvJitLinkBackend(dataclasses.replace(find_toolkit(), compilers=()))
    with pytest.raises(ToolkitNotFound, match="pip install nvidia-nvjitlink") as raised:
        backend.prepare(CompileJob(ptx_kernel(), backend="nvjitlink"), BackendOptions(arch=ARCH))
    assert 'backend="ptx"' in str(raised.value)


def test_the_cli_compiles_ptx_files_with_nvjitlink(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.ptx").write_text(ptx_kernel(1.5))
    (tmp_path / "src" / "b.ptx").write_text(ptx_kernel(2.5))
    out = tmp_path / "out"
    env = bare_environ(ASYNCCOMP_SERVER="off", HOME=str(tmp_path))
    done = run_cli(
        "compile", "--backend", "nvjitlink", "--arch", ARCH, "--no-server", "--no-cache",
        str(tmp_path / "src"), "--out", str(out), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.cubin", "b.cubin"]


async def test_closing_ends_the_workers() -> None:
    backend = NvJitLinkBackend(find_toolkit(), workers=2)
    slow = backend.prepare(_slow(), BackendOptions(arch=ARCH))
    assert (await backend.run(slow)).status == "timeout"
    with anyio.fail_after(60):
        await backend.aclose()
    assert backend.worker_count() == 0
