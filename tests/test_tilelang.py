"""asynccomp.tilelang against the real TileLang 0.1.15 (skipped without it), no GPU: kernels
are built for ``{"kind": "cuda", "arch": "sm_90a"}``, which lowers and compiles without
one. Its CI step is a venv of its own (.ci/run)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TILELANG_DISABLE_CACHE", "1")  # TileLang's caches sit above ours
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
tilelang = pytest.importorskip("tilelang")

import tvm_ffi  # noqa: E402
from tilelang import language as T  # noqa: E402

import asynccomp.tilelang as atl  # noqa: E402
from asynccomp import CompileError, CompileJob, CompileResult, CompileTimeout  # noqa: E402
from asynccomp.backends._nvrtc_pch_hints import AHEAD_ENV  # noqa: E402
from asynccomp.errors import EmptyOutput, WorkerCrashed  # noqa: E402
from asynccomp.tilelang._errors import message_for  # noqa: E402
from asynccomp.tilelang._pch_ahead import Ahead, gemm  # noqa: E402
from asynccomp.toolkit import find_toolkit  # noqa: E402

from .sass import cuobjdump, sass  # noqa: E402

TARGET = {"kind": "cuda", "arch": "sm_90a"}
needs_nvcc = pytest.mark.skipif(find_toolkit().nvcc is None, reason="nvcc is not installed")


#: TileLang's classic matmul on a 256^3 problem (the PCH probe's kernel).
matmul = gemm


@pytest.fixture
def results() -> Iterator[list[CompileResult]]:
    """Every result of the facade, and TileLang's own callback back afterwards."""
    seen: list[CompileResult] = []
    yield seen
    atl.unregister()


@pytest.fixture
def own_callback() -> Iterator[list[tuple[str, bytes]]]:
    """TileLang's own callback, recording (source, binary) of each compile."""
    from tilelang.cuda.backend import tilelang_callback_cuda_compile as own

    calls: list[tuple[str, bytes]] = []

    def recording(code: str, target: Any, pass_config: Any = None) -> bytearray:
        binary: bytearray = own(code, target, pass_config)
        calls.append((code, bytes(binary)))
        return binary

    tvm_ffi.register_global_func(atl.CALLBACK_NAME, recording, override=True)
    yield calls
    atl.unregister()


def test_the_command_line_is_tilelangs(monkeypatch: pytest.MonkeyPatch) -> None:
    """TileLang's argv (captured from its own callback, nvcc not run) is ours but for
    nvcc's path, the file names and the flags that change no byte."""
    from tilelang.contrib import nvcc as tl_nvcc
    from tilelang.cuda.backend import tilelang_callback_cuda_compile as own
    from tvm.target import Target

    captured: list[list[str]] = []

    class Stop(Exception):
        pass

    def popen(argv: list[str], *args: object, **kwargs: object) -> None:
        captured.append(list(argv))
        raise Stop

    monkeypatch.setattr(tl_nvcc.subprocess, "Popen", popen)
    monkeypatch.setenv("TILELANG_VERBOSE", "1")
    config = {
        "tl.enable_fast_math": True,
        "tl.ptxas_register_usage_level": 8,
        "tl.device_compile_flags": ["-DMY_SWITCH=1 -DOTHER", "--expt-relaxed-constexpr"],
    }
    for target in (
        TARGET,
        {**TARGET, "code": ["sm_90a"]},
        {**TARGET, "code": ["sm_90a", "sm_100a"]},
    ):
        with pytest.raises(Stop):
            own("// k\n", Target(target), config)
        theirs = captured[-1]
        arch, codes = atl._facade._arch_of(Target(target))
        job = atl.make_job("// k\n", arch, codes, atl.PassConfig.read(config))
        assert job.backend == "nvcc" and job.exact_options
        assert job.output == ("fatbin" if len(codes) > 1 else "cubin")
        extras = ["-Xcompiler", "-MMD,-MF,tvm_kernels.d"]  # verbose: ptxas already reports
        assert list(job.options) == theirs[1:-3] + extras
        assert theirs[-3] == "-o"
    monkeypatch.delenv("TILELANG_VERBOSE")
    plain = atl.make_job("// k\n", "sm_90a", (), atl.PassConfig.read(None))
    assert list(plain.options[-3:]) == [
        "--ptxas-options=-v",
        "-Xcompiler",
        "-MMD,-MF,tvm_kernels.d",
    ]


@needs_nvcc
@pytest.mark.skipif(cuobjdump() is None, reason="cuobjdump is not installed")
def test_sass_is_tilelangs_own(
    own_callback: list[tuple[str, bytes]], results: list[CompileResult], tmp_path: Path
) -> None:
    tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
    ((code, theirs),) = own_callback
    atl.register(on_result=results.append)
    kernel = tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
    assert kernel.get_kernel_source() == code
    (result,) = results
    assert result.ok and result.job.backend == "nvcc" and not result.cached
    tool = cuobjdump()
    assert tool is not None
    assert sass(result.binary or b"", tool, tmp_path) == sass(theirs, tool, tmp_path)
    assert result.resources["main_kernel"].registers > 0  # ptxas -v, added
    assert "tilelang" in " ".join(result.command)


@needs_nvcc
def test_par_compile_autotuner_and_grouped_compile(
    results: list[CompileResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tilelang.autotuner import AutoTuner

    monkeypatch.chdir(tmp_path)  # the autotuner writes autotuner.log here
    atl.register(on_result=results.append)
    configs = [{"block_m": 64, "block_n": 64}, {"block_m": 64, "block_n": 128}]
    kernels = tilelang.par_compile(
        [matmul(**c) for c in configs], out_idx=[-1], target=TARGET, num_workers=2
    )
    assert all(k is not None for k in kernels)
    assert [r.cached for r in results] == [False, False]

    def no_benchmark(self: Any, jit_kernel: Any, *args: Any, **kwargs: Any) -> tuple[float, None]:
        return float(len(jit_kernel.get_kernel_source())), None

    tuner = AutoTuner.from_kernel(kernel=matmul, configs=configs)
    tuner.set_compile_args(out_idx=[-1], target=TARGET).set_profile_args(skip_check=True)
    original = AutoTuner._benchmark_target
    AutoTuner._benchmark_target = no_benchmark  # no GPU to time on
    try:
        best = tuner.run(warmup=1, rep=1, timeout=0)
        assert best.config in configs
        # The same sources again: asynccomp's cache answered (it knows their headers).
        assert [r.cached for r in results[2:]] == [True, True]
        grouped = AutoTuner.from_kernel(kernel=matmul, configs=configs)
        grouped.set_compile_args(out_idx=[-1], target=TARGET).set_profile_args(skip_check=True)
        grouped.run(warmup=1, rep=1, timeout=0, enable_grouped_compile=True, group_compile_size=2)
    finally:
        AutoTuner._benchmark_target = original
    (merged,) = results[4:]  # one compile of both kernels, as TileLang's grouped mode does
    assert merged.ok and len(merged.resources) == 2


@needs_nvcc
def test_errors_reach_tilelang_as_its_own(
    results: list[CompileResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    atl.register(on_result=results.append)
    postproc = "tilelang_callback_cuda_postproc"

    def break_it(code: str, target: Any) -> str:
        return code + "\nthis is not CUDA;\n"

    tvm_ffi.register_global_func(postproc, break_it, override=True)
    try:
        with pytest.raises(atl.TileLangCompileError) as caught:
            tilelang.compile(matmul(64, 64, 64), out_idx=[-1], target=TARGET)
        assert isinstance(caught.value, RuntimeError)  # what TileLang's callers catch
        message = str(caught.value)
        source = results[-1].job.source
        assert message.startswith(source) and "\nCompilation error:\n" in message
        assert "this is not CUDA" in message and "\nCommand: " in message
        kernels = tilelang.par_compile(
            [matmul(64, 64, 64)], out_idx=[-1], target=TARGET, ignore_error=True
        )
        assert kernels == [None]
    finally:
        tvm_ffi.remove_global_func(postproc)
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0.3")
    with pytest.raises(atl.TileLangCompileTimeout, match=r"^NVCC compilation timed out after 0.3"):
        tilelang.compile(matmul(64, 64, 128), out_idx=[-1], target=TARGET)
    assert isinstance(results[-1].error, CompileTimeout)


def test_messages_for_failures_without_a_compiler_verdict() -> None:
    job = CompileJob("// k\n", name="tvm_kernels", backend="nvcc", arch="sm_90a")
    empty = CompileResult(job, "cubin", "sm_90a", None, error=EmptyOutput("x", job=job))
    assert message_for(empty, "// k\n") == "Compilation error: empty result is generated"
    crashed = CompileResult(job, "cubin", "sm_90a", None, error=WorkerCrashed("it died", job=job))
    assert message_for(crashed, "// k\n").endswith("(WorkerCrashed): it died")
    error = atl.TileLangCompileError("x", log="log", job=job)
    assert isinstance(error, CompileError) and isinstance(error, RuntimeError)
    timeout = atl.TileLangCompileTimeout("t", timeout=2.0)
    assert isinstance(timeout, CompileTimeout) and timeout.timeout == 2.0


@pytest.mark.parametrize("backend", ["nvcc", "nvrtc"])
def test_the_cache_follows_the_headers(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, results: list[CompileResult]
) -> None:
    """An edited template header is a miss: the host preprocessor's -MMD list (nvcc), or
    asynccomp's include scan (NVRTC; TileLang's real headers defeat it, see the docs)."""
    if backend == "nvcc" and find_toolkit().nvcc is None:
        pytest.skip("nvcc is not installed")
    templates = tmp_path / "src"
    (templates / "tl_templates" / "cuda").mkdir(parents=True)
    real = atl.TileLangPaths.installed()
    # NVRTC's prelude includes TileLang's nvrtc_std.h: keep it reachable.
    (templates / "tl_templates" / "cuda" / "nvrtc_std.h").write_text(
        Path(real.template, "tl_templates", "cuda", "nvrtc_std.h").read_text()
    )
    header = templates / "tl_templates" / "mine.h"
    header.write_text("#define VALUE 1.0f\n")
    monkeypatch.setattr(
        atl._facade._state,
        "paths",
        atl.TileLangPaths(str(templates), real.cutlass, real.host_compiler),
    )
    atl.register(backend=backend, on_result=results.append)  # type: ignore[arg-type]
    code = (
        '#include <tl_templates/mine.h>\nextern "C" __global__ void k(float* x) { x[0] = VALUE; }\n'
    )
    first = atl.compile_cuda(code, "sm_90a", pch=False)
    assert atl.compile_cuda(code, "sm_90a", pch=False) == first
    assert [r.cached for r in results] == [False, True]
    header.write_text("#define VALUE 2.0f\n")
    assert atl.compile_cuda(code, "sm_90a", pch=False) != first
    assert [r.cached for r in results] == [False, True, False]


def test_nvrtc_mode_keeps_the_arch_and_its_pch_changes_no_byte(
    results: list[CompileResult], tmp_path: Path
) -> None:
    """TileLang's own NVRTC path loses the target's arch and asks for a GPU (none here);
    ours compiles for the target, and a PCH made or used gives the same bytes as none.
    NVRTC 13.5 needs a 422 MiB PCH heap for TileLang's headers: made, not refused."""
    atl.register(backend="nvrtc", on_result=results.append)
    tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
    tilelang.compile(matmul(128, 64), out_idx=[-1], target=TARGET)
    made, used = results
    for result in (made, used):
        assert result.ok and result.job.backend == "nvrtc" and result.job.pch
        assert result.command[0] == "-pch" and "--gpu-architecture=sm_90a" in result.command
    assert "creating precompiled header file" in made.log, made.log[-2000:]
    assert "#639-D" not in made.log  # the heap was large enough
    assert "using precompiled header file" in used.log
    for result in (made, used):
        plain = atl.compile_cuda(result.job.source.split("\n", 1)[1], "sm_90a", pch=False)
        assert plain == result.binary
    tool = cuobjdump()
    if tool is not None:
        assert "code for sm_90a" in sass(made.binary or b"", tool, tmp_path)


def test_register_makes_tilelangs_pch_before_the_first_kernel(
    results: list[CompileResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: with NVRTC, register() has the PCH of TileLang's GEMM headers made for
    the target, in the background (a small GEMM lowered in a worker, its header lines
    compiled by the engine): the first kernel, another GEMM, uses it and makes none.
    Once per target and settings: a second register() makes no other."""
    monkeypatch.setenv(AHEAD_ENV, "on")
    atl.shutdown()  # a fresh engine: no PCH made yet
    atl.register(backend="nvrtc", on_result=results.append, lowering_workers=1, target=TARGET)
    ahead = made_ahead()
    assert ahead is not None and ahead.join(timeout=600)
    assert ahead.made is True
    atl.register(backend="nvrtc", on_result=results.append, lowering_workers=1, target=TARGET)
    assert made_ahead() is ahead
    tilelang.compile(matmul(128, 128, 64, 3), out_idx=[-1], target=TARGET)
    (first,) = results
    assert first.ok and "using precompiled header file" in first.log, first.log[-2000:]
    assert "creating precompiled header file" not in first.log
    atl.shutdown()
    assert made_ahead() is None
    monkeypatch.setenv(AHEAD_ENV, "off")
    atl.register(backend="nvrtc", on_result=results.append, lowering_workers=1, target=TARGET)
    assert made_ahead() is None  # none made when told so


def made_ahead() -> Ahead | None:
    """The facade's PCH made ahead, if register() started one."""
    from asynccomp.tilelang import _facade

    return _facade._state.ahead


def test_register_needs_a_known_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        atl.register(backend="clang")  # type: ignore[arg-type]
    assert not atl.registered()


def test_register_refuses_a_target_tilelang_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The target register() makes the PCH for: one TileLang refuses is a ValueError
    then, before anything is registered."""
    monkeypatch.setenv(AHEAD_ENV, "on")
    with pytest.raises(ValueError, match="target 'nonsense'"):
        atl.register(backend="nvrtc", target="nonsense")
    with pytest.raises(ValueError, match="'arch': '90'"):
        atl.register(backend="nvrtc", target={"kind": "cuda", "arch": "90"})
    assert not atl.registered()


def test_register_starts_the_workers_before_tilelang_and_the_engine_with_them(
    results: list[CompileResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: a register() as the program starts: the lowering workers' template is on
    its way before this process imports TileLang (both import it at once), and the engine
    starts in the background, so a first autotune finds both started."""
    from asynccomp.tilelang import _facade, _pool
    from asynccomp.tvm import _runtime

    atl.shutdown()  # no workers, no engine
    pools = []
    importing = _facade._import_tilelang

    def seen_importing() -> Any:
        pools.append(_pool._pool)
        return importing()

    monkeypatch.setattr(_facade, "_import_tilelang", seen_importing)
    atl.register(on_result=results.append, lowering_workers=1)
    [started] = pools
    assert started is not None and not started.closed
    assert _pool.pool(1) is started  # the same workers: register()'s install kept them
    starter = _runtime._runtime.starter
    if starter is not None:  # (it may have ended already)
        starter.join()
    assert _runtime._runtime.engine is not None  # started with no compile asked for


@needs_nvcc
def test_on_the_compile_server_by_default(
    results: list[CompileResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``$ASYNCCOMP_SERVER`` unset (its default, ``auto``), TileLang's compiles run on
    the machine's compile server, started for them, with the same bytes as in process."""
    from .servers import server_folder

    atl.register(on_result=results.append)
    in_process = tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
    assert atl.engine().where == "in process"  # the test session's ASYNCCOMP_SERVER=off
    with server_folder() as folder:
        atl.shutdown()
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        monkeypatch.delenv("ASYNCCOMP_SERVER")
        try:
            on_server = tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
            assert atl.engine().where.startswith("on the compile server (pid ")
            assert on_server.get_kernel_source() == in_process.get_kernel_source()
            first, second = results
            assert second.ok and second.binary == first.binary
            assert second.resources["main_kernel"].registers > 0
        finally:
            atl.shutdown()


@needs_nvcc
def test_dumps_of_every_compile(results: list[CompileResult], tmp_path: Path) -> None:
    """``register(dump=PATH)`` and TileLang's ``cuda.kernels_output_dir`` both keep each
    compile's folder: source, command line, log, binary."""
    atl.register(dump=tmp_path / "dumps", on_result=results.append)
    tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET)
    own_dir = tmp_path / "tilelang-out"
    tilelang.compile(
        matmul(128, 64),
        out_idx=[-1],
        target=TARGET,
        pass_configs={"cuda.kernels_output_dir": str(own_dir)},
    )
    first, second = results
    for result, under in ((first, tmp_path / "dumps"), (second, own_dir)):
        assert result.dump_dir is not None and result.dump_dir.is_relative_to(under)
        names = {p.name for p in result.dump_dir.iterdir()}
        assert "tvm_kernels.cu" in names, names
        assert any(name.endswith(".cubin") for name in names), names
        assert (result.dump_dir / "tvm_kernels.cu").read_text() == result.job.source


@needs_nvcc
def test_the_cache_follows_tilelangs_and_cutlasss_real_headers(
    results: list[CompileResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real TileLang kernel's cached binary is a miss once a CUTLASS or TileLang header
    it includes changes (copies of both trees, so the test may edit them)."""
    import shutil

    real = atl.TileLangPaths.installed()
    templates, cutlass = tmp_path / "src", tmp_path / "cutlass"
    shutil.copytree(real.template, templates)
    shutil.copytree(real.cutlass, cutlass)
    monkeypatch.setattr(
        atl._facade._state,
        "paths",
        atl.TileLangPaths(str(templates), str(cutlass), real.host_compiler),
    )
    atl.register(on_result=results.append)
    code = tilelang.compile(matmul(64, 64), out_idx=[-1], target=TARGET).get_kernel_source()
    assert atl.compile_cuda(code, "sm_90a") == results[0].binary
    assert [r.cached for r in results] == [False, True]
    for header in (
        cutlass / "cute" / "config.hpp",
        templates / "tl_templates" / "cuda" / "common.h",
    ):
        header.write_text(header.read_text() + "\n// edited\n")
        atl.compile_cuda(code, "sm_90a")
        assert results[-1].cached is False, f"an edit of {header.name} was a stale hit"
        atl.compile_cuda(code, "sm_90a")
        assert results[-1].cached is True


# -- Lowering in worker processes (issue 27) ------------------------------------------


def crashing_matmul(block_m: int = 64, crash: bool = False) -> Any:
    """A kernel factory whose ``crash=True`` config kills the process elaborating it, as
    a crash inside TileLang would."""
    if crash:
        os.kill(os.getpid(), signal.SIGKILL)
    return matmul(block_m, 64)


class Sweep:
    """What TileLang's autotuner built: each kernel's source, and a "latency" of its
    function (no GPU to time on), the same in every mode that builds the same function,
    so the best configuration must be the same too."""

    def __init__(self) -> None:
        self.sources: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, jit_kernel: Any) -> tuple[float, None]:
        from tvm import ir

        with self.lock:
            self.sources.append(jit_kernel.get_kernel_source())
        return 1.0 + ir.structural_hash(jit_kernel.prim_func) % 1_000_003 / 1000.0, None


@pytest.fixture
def sweep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Sweep:
    from tilelang.autotuner import AutoTuner

    monkeypatch.chdir(tmp_path)  # the autotuner writes autotuner.log here
    recorded = Sweep()

    def benchmark(tuner: Any, jit_kernel: Any, *args: Any, **kwargs: Any) -> tuple[float, None]:
        return recorded(jit_kernel)

    monkeypatch.setattr(AutoTuner, "_benchmark_target", benchmark)
    return recorded


@pytest.fixture
def lowerings_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The functions TileLang lowers in this process (its ``lower_to_host_device_ir``,
    counted where the facade finds it). Before ``results``/``register`` in a test's
    arguments: torn down after ``unregister``."""
    import importlib

    lowered: list[str] = []
    for name in ("tilelang.engine.lower", "tilelang.autotuner.grouped_compile"):
        module = importlib.import_module(name)
        original = module.lower_to_host_device_ir

        def counting(func: Any, *args: Any, original: Any = original, **kwargs: Any) -> Any:
            lowered.append(str(func.attrs["global_symbol"]))
            return original(func, *args, **kwargs)

        monkeypatch.setattr(module, "lower_to_host_device_ir", counting)
    yield lowered


def workers_ready(count: int = 2) -> None:
    """Wait for the lowering workers: a batch that comes before them has configs
    lowered in this process meanwhile (see test_a_first_autotune_lowers_here_...)."""
    from asynccomp.tilelang import _pool

    assert _pool.pool(count).wait_ready(600), "the lowering workers did not start"


def autotune(kernel: Any, configs: list[dict[str, Any]], grouped: bool = False) -> Any:
    from tilelang.autotuner import AutoTuner

    tuner = AutoTuner.from_kernel(kernel=kernel, configs=configs)
    tuner.set_compile_args(out_idx=[-1], target=TARGET).set_profile_args(skip_check=True)
    return tuner.run(
        warmup=1, rep=1, timeout=0, enable_grouped_compile=grouped, group_compile_size=2
    ).config


CONFIGS = [
    {"block_m": 64, "block_n": 64},
    {"block_m": 64, "block_n": 128},
    {"block_m": 128, "block_n": 64},
]


@needs_nvcc
def test_autotune_lowers_in_workers_with_tilelangs_results(
    lowerings_here: list[str], results: list[CompileResult], sweep: Sweep
) -> None:
    """``AutoTuner.run``, grouped or not: every config elaborated and lowered in a worker
    (none here), the same sources and the same best config as TileLang's own path."""
    atl.register(on_result=results.append, lower_in_workers=False)
    theirs = {grouped: autotune(matmul, CONFIGS[:2], grouped) for grouped in (False, True)}
    their_sources, sweep.sources = sweep.sources, []
    assert len(lowerings_here) == 4
    lowerings_here.clear()
    atl.register(on_result=results.append, lowering_workers=2)
    workers_ready()
    ours = {grouped: autotune(matmul, CONFIGS[:2], grouped) for grouped in (False, True)}
    assert lowerings_here == []
    assert ours == theirs
    assert sorted(sweep.sources) == sorted(their_sources)
    assert all(r.ok for r in results) and len(results) == 2 * (2 + 1)  # grouped: one compile


@needs_nvcc
def test_a_first_autotune_lowers_here_while_the_workers_start(
    lowerings_here: list[str], results: list[CompileResult], sweep: Sweep
) -> None:
    """Issue 36: an autotune that comes while the workers' template still imports
    TileLang does not wait for it: this process lowers configs itself meanwhile (from the
    end of the list), with the same sources and best config as TileLang alone."""
    atl.register(on_result=results.append, lower_in_workers=False)
    theirs = {grouped: autotune(matmul, CONFIGS[:4], grouped) for grouped in (False, True)}
    their_sources, sweep.sources = sweep.sources, []
    lowerings_here.clear()
    atl.register(on_result=results.append, lowering_workers=2)
    from asynccomp.tilelang import _pool

    assert not _pool.pool(2).statistics().template  # still importing TileLang
    ours = {grouped: autotune(matmul, CONFIGS[:4], grouped) for grouped in (False, True)}
    assert ours == theirs
    assert sorted(sweep.sources) == sorted(their_sources)
    assert lowerings_here  # some configs were lowered here, while the workers started
    assert all(r.ok for r in results)


def decorated(configs: list[dict[str, Any]]) -> Any:
    @tilelang.autotune(configs=configs, warmup=1, rep=1, timeout=0, skip_check=True)  # type: ignore[untyped-decorator]
    @tilelang.jit(out_idx=[-1], target=TARGET)  # type: ignore[untyped-decorator]
    def kernel(block_m: int = 64, block_n: int = 64) -> Any:
        return matmul(block_m, block_n)

    return kernel


@needs_nvcc
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one compile thread per CPU")
def test_the_decorator_compiles_configs_together(
    lowerings_here: list[str], results: list[CompileResult], sweep: Sweep
) -> None:
    """``@tilelang.autotune`` holds one lock around each config's whole compile
    (``_pass_configs_lock``): with the facade two compiles are in the callback at once
    (each waits for the other: with the lock, the first would wait alone and fail), with
    TileLang's sources and best config."""
    atl.register(lower_in_workers=False)
    theirs = decorated(CONFIGS[:2])
    theirs()
    their_sources, sweep.sources = sweep.sources, []
    lowerings_here.clear()
    both = threading.Barrier(2, timeout=120)

    def together(result: CompileResult) -> None:
        results.append(result)
        both.wait()

    atl.register(on_result=together, lowering_workers=2)
    workers_ready()
    ours = decorated(CONFIGS[:2])
    ours()
    assert [r.ok for r in results] == [True, True] and lowerings_here == []
    assert sorted(sweep.sources) == sorted(their_sources)
    best = [next(iter(d._tuner_cache.values()))[1] for d in (ours, theirs)]
    assert best[0] == best[1]


NOTEBOOK_CELL = """
from __future__ import annotations  # TileLang then reads annotations in __main__'s globals


def factory(size):
    def kernel(block_m=64):
        @T.prim_func
        def main(A: T.Tensor((size, size), "float16"), B: T.Tensor((size, size), "float16")):
            with T.Kernel(T.ceildiv(size, block_m), threads=128) as bx:
                shared = T.alloc_shared((block_m, size), "float16")
                T.copy(A[bx * block_m, 0], shared)
                T.copy(shared, B[bx * block_m, 0])

        with LOCK:  # a global that does not pickle, where the cell defines one
            return main

    return kernel
"""


def notebook_factory(lock: object, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``factory(256)`` as a notebook cell defines it: in ``__main__`` (the notebook's
    namespace), its source only in the notebook's ``linecache``, a closure."""
    import linecache
    import sys
    import types

    name = f"<notebook-cell-{id(lock)}>"
    lines = NOTEBOOK_CELL.splitlines(keepends=True)
    monkeypatch.setitem(linecache.cache, name, (len(NOTEBOOK_CELL), None, lines, name))
    main = types.ModuleType("__main__")
    main.__dict__.update(T=T, LOCK=lock)
    monkeypatch.setitem(sys.modules, "__main__", main)
    exec(compile(NOTEBOOK_CELL, name, "exec"), main.__dict__)
    return main.factory(256)


@needs_nvcc
def test_factories_from_notebooks_and_main_lower_in_workers(
    monkeypatch: pytest.MonkeyPatch,
    lowerings_here: list[str],
    results: list[CompileResult],
    sweep: Sweep,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A closure defined in ``__main__`` whose source exists only in ``linecache`` (a
    notebook cell) elaborates in a worker, to TileLang's sources; one that does not
    pickle (a lock in its globals) is lowered in this process, with a warning saying
    why."""
    configs = [{"block_m": 64}, {"block_m": 128}]
    atl.register(lower_in_workers=False)
    theirs = autotune(notebook_factory(contextlib.nullcontext(), monkeypatch), configs)
    their_sources, sweep.sources = sweep.sources, []
    lowerings_here.clear()
    atl.register(lowering_workers=2)
    workers_ready()
    assert autotune(notebook_factory(contextlib.nullcontext(), monkeypatch), configs) == theirs
    assert lowerings_here == [] and sorted(sweep.sources) == sorted(their_sources)
    sweep.sources = []
    with caplog.at_level(logging.WARNING, logger="asynccomp.tilelang"):
        assert autotune(notebook_factory(threading.Lock(), monkeypatch), configs) == theirs
    assert len(lowerings_here) == 2 and sorted(sweep.sources) == sorted(their_sources)
    assert "lowering this autotune in this process: the kernel factory does not pickle" in (
        caplog.text
    )


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@needs_nvcc
def test_a_crashed_worker_fails_only_its_config(results: list[CompileResult], sweep: Sweep) -> None:
    tuner_log = logging.getLogger("tilelang.autotuner.tuner")  # TileLang's, not propagated
    records = Records()
    tuner_log.addHandler(records)
    try:
        atl.register(on_result=results.append, lowering_workers=2)
        workers_ready()  # a config lowered here meanwhile would crash as in TileLang's own
        configs = [{"block_m": 64}, {"block_m": 128, "crash": True}, {"block_m": 128}]
        assert autotune(crashing_matmul, configs) in (configs[0], configs[2])
    finally:
        tuner_log.removeHandler(records)
    assert len(sweep.sources) == 2 and len(results) == 2
    assert atl._pool.pool(2).statistics().crashed == 1
    (failed,) = [m for m in records.messages if m.startswith("Compilation failed")]
    assert "{'block_m': 128, 'crash': True}" in failed
    assert "the asynccomp worker process elaborating and lowering this config died" in failed


def test_errors_are_tilelangs_per_config(
    lowerings_here: list[str], results: list[CompileResult]
) -> None:
    """A config TileLang's lowering refuses raises TileLang's exception, type and
    message, from ``par_compile`` in workers; the others are unaffected."""
    tvm_ffi.register_global_func(atl.CALLBACK_NAME, lambda *args: b"\0", override=True)
    bad = [matmul(8, 8, 8), matmul(64, 64, 1)]  # TVM's InternalError, a ValueError
    theirs = []
    for func in bad:
        with pytest.raises(Exception) as caught:
            tilelang.compile(func, out_idx=[-1], target=TARGET)
        theirs.append(caught.value)
    atl.register(lowering_workers=2)
    workers_ready()
    tvm_ffi.register_global_func(atl.CALLBACK_NAME, lambda *args: b"\0", override=True)
    lowerings_here.clear()
    for func, their in zip(bad, theirs, strict=True):
        with pytest.raises(type(their)) as caught:
            tilelang.par_compile([func], out_idx=[-1], target=TARGET)
        assert str(caught.value) == str(their)
    kernels = tilelang.par_compile(
        [*bad, matmul(64, 64)], out_idx=[-1], target=TARGET, ignore_error=True
    )
    assert kernels[:2] == [None, None] and kernels[2] is not None
    assert lowerings_here == []


def test_lowering_in_workers_opts_out() -> None:
    """``register(lower_in_workers=False)`` and ``unregister()`` leave TileLang's own
    functions in place, and no worker."""
    from tilelang.autotuner.tuner import AutoTuner

    own = AutoTuner._prepare_compile_execution
    own_par_compile = tilelang.par_compile
    try:
        atl.register(lowering_workers=2)
        assert AutoTuner._prepare_compile_execution is not own
        assert tilelang.par_compile is not own_par_compile
        atl.register(lower_in_workers=False)
        assert AutoTuner._prepare_compile_execution is own
        assert tilelang.par_compile is own_par_compile
        assert atl._pool._pool is None
        with pytest.raises(ValueError, match="lowering_workers"):
            atl.register(lowering_workers=0)
    finally:
        atl.unregister()
    assert AutoTuner._prepare_compile_execution is own
