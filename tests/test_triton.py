"""asynccomp.triton against the real Triton 3.6 (skipped without it). Kernels are built
for Hopper (``GPUTarget("cuda", 90, 32)``), which needs no GPU; the tests marked ``gpu``
autotune on one. Its CI step is a venv of its own (.ci/run)."""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

triton = pytest.importorskip("triton")

import triton.language as tl  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.errors import CompilationError, CompileTimeAssertionFailure  # noqa: E402
from triton.runtime._async_compile import active_mode  # noqa: E402
from triton.runtime.autotuner import Autotuner, Config  # noqa: E402
from triton.runtime.errors import PTXASError  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import asynccomp.triton as at  # noqa: E402
from asynccomp.errors import CompileError, InvalidJob  # noqa: E402
from asynccomp.triton import _autotune, _hooks  # noqa: E402

from . import triton_kernels as tk  # noqa: E402

STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "cubin")


@pytest.fixture(autouse=True)
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets an empty Triton cache; nothing registered, no workers left after."""
    folder = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    yield folder
    at.unregister()


class Counts:
    """:func:`asynccomp.triton.statistics`' counts since the test began (they are the
    process's)."""

    def __init__(self) -> None:
        self.before = at.statistics()

    def __getattr__(self, name: str) -> Any:
        return getattr(at.statistics(), name) - getattr(self.before, name)


@pytest.fixture
def counts() -> Counts:
    return Counts()


def own_build(source: ASTSource, folder: Path, **options: Any) -> Any:
    """Triton's own ``triton.compile`` here, into a cache of its own (the reference)."""
    saved = os.environ["TRITON_CACHE_DIR"]
    os.environ["TRITON_CACHE_DIR"] = str(folder)
    try:
        return triton.compile(source, target=tk.TARGET, options=options or None)
    finally:
        os.environ["TRITON_CACHE_DIR"] = saved


def assert_same_kernel(ours: Any, theirs: Any) -> None:
    assert type(ours) is type(theirs)
    for stage in STAGES:
        assert ours.asm[stage] == theirs.asm[stage], stage
    assert ours.metadata == theirs.metadata
    assert ours.hash == theirs.hash


# -- compile_many: no GPU ----------------------------------------------------------------


def test_compile_many_builds_what_triton_builds(
    tmp_path: Path, triton_cache: Path, counts: Counts
) -> None:
    sources = [tk.matmul(64, 64), tk.matmul(128, 64, 64), tk.add(256), tk.add(1024)]
    options = [{"num_warps": 4, "num_stages": 3}, {"num_warps": 8, "num_stages": 4}, None, None]
    seen: list[int] = []
    kernels = at.compile_many(
        sources, target=tk.TARGET, options=options, workers=2, on_result=lambda i, _: seen.append(i)
    )
    assert sorted(seen) == [0, 1, 2, 3]
    for kernel, source, opts in zip(kernels, sources, options, strict=True):
        assert_same_kernel(kernel, own_build(source, tmp_path / "own", **(opts or {})))
        assert kernel.src is source  # made with the caller's source, as Triton's own
    # In Triton's cache as Triton puts it: a fresh triton.compile here is a cache hit.
    again = triton.compile(sources[0], target=tk.TARGET, options=options[0])
    assert again.metadata_group == kernels[0].metadata_group
    assert all(Path(p).is_relative_to(triton_cache) for p in again.metadata_group.values())
    assert counts.compiled == 4 and counts.in_process == 0


def test_compile_many_answers_from_tritons_cache_without_a_worker(counts: Counts) -> None:
    first = at.compile_many([tk.add(128)], target=tk.TARGET, workers=1)[0]
    assert counts.compiled == 1
    second = at.compile_many(
        [tk.add(128), (tk.add_kernel, tk.ADD_SIGNATURE, {"BLOCK": 128})], target=tk.TARGET
    )
    assert counts.cache_hits == 2 and counts.compiled == 1
    for kernel in second:
        assert kernel.asm["cubin"] == first.asm["cubin"]


def test_a_source_that_fails_is_its_slot_only(tmp_path: Path, counts: Counts) -> None:
    sources = [
        tk.add(64),
        ASTSource(tk.undefined_kernel, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 64}),
        ASTSource(tk.asserting_kernel, {"x_ptr": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
        tk.add(512),
    ]
    results = at.compile_many(sources, target=tk.TARGET, workers=2)
    for i in (0, 3):
        assert_same_kernel(results[i], own_build(sources[i], tmp_path / "own"))
    for i, kind in ((1, CompilationError), (2, CompileTimeAssertionFailure)):
        with pytest.raises(kind) as own:
            own_build(sources[i], tmp_path / "own")
        assert type(results[i]) is type(own.value)
        assert str(results[i]) == str(own.value)  # Triton's message, source excerpt included
    assert counts.errors == 2


def test_a_worker_that_aborts_fails_only_its_kernel(tmp_path: Path, counts: Counts) -> None:
    """Triton's C++ aborting (SIGABRT) while compiling one kernel: in Triton's own
    process the program would end; here that kernel fails and the others are built."""
    sources = [tk.add(64), tk.add(tk.ABORT), tk.add(128), tk.add(256)]
    results = at.compile_many(sources, target=tk.TARGET, workers=2)
    crashed = results[1]
    assert isinstance(crashed, at.TritonCompileCrashed)
    assert isinstance(crashed, RuntimeError) and isinstance(crashed, CompileError)
    assert "add_kernel" in str(crashed) and "SIGABRT" in str(crashed)
    for i in (0, 2, 3):
        assert_same_kernel(results[i], own_build(sources[i], tmp_path / "own"))
    workers = at.statistics().workers
    assert counts.crashed == 1 and workers is not None and workers.crashed == 1


def test_a_compile_past_its_timeout_fails_only_its_kernel(tmp_path: Path, counts: Counts) -> None:
    sources = [tk.add(tk.HANG), tk.add(64)]
    results = at.compile_many(sources, target=tk.TARGET, workers=2, timeout=5.0)
    assert isinstance(results[0], at.TritonCompileTimeout)
    assert results[0].timeout == 5.0
    assert_same_kernel(results[1], own_build(sources[1], tmp_path / "own"))
    assert counts.timed_out == 1


def test_a_compile_whose_workers_are_closed_compiles_here(tmp_path: Path, counts: Counts) -> None:
    """Workers ended while a compile waits for one (``close()``, ``unregister()``, another
    worker count): Triton compiles it here, after a warning, not a crash."""
    from asynccomp.triton import _compile

    job = _compile.start(tk.add(64), tk.TARGET)  # the workers are still starting
    assert job.handle is not None
    at.close()
    with pytest.warns(at.TritonFallbackWarning, match="workers were ended"):
        kernel = _compile.finish(job, job.handle.result())
    assert_same_kernel(kernel, own_build(tk.add(64), tmp_path / "own"))
    assert counts.in_process == 1 and counts.crashed == 0


TWO_PROCESSES = """
import asynccomp.triton as at
from tests.triton_kernels import TARGET, slow

kernel = at.compile_many([slow(8)], target=TARGET, workers=1)[0]
stats = at.statistics()
print(type(kernel).__name__, stats.compiled, stats.cache_hits)
"""


def test_processes_compiling_the_same_kernel_at_once_compile_it_once(tmp_path: Path) -> None:
    """Two processes (two ranks of a job) compiling the same kernel at the same time,
    into one Triton cache: one compiles it, the other's worker waits and finds it."""
    script = tmp_path / "rank.py"
    script.write_text(TWO_PROCESSES)
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script)],
            cwd=Path(__file__).resolve().parents[1],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = []
    for rank in ranks:
        out, err = rank.communicate(timeout=300)
        assert rank.returncode == 0, err
        outputs.append(out.split())
    assert sorted(outputs) == [["CompiledKernel", "0", "1"], ["CompiledKernel", "1", "0"]]


NOWHERE = """
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets))
"""


def test_a_kernel_the_workers_cannot_import_compiles_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counts: Counts
) -> None:
    """A module this process loaded from a file off the import path: the worker cannot
    import it; Triton compiles its kernels here (after a warning), and asks no worker
    again for them."""
    import importlib.util

    path = tmp_path / "nowhere_on_the_path.py"
    path.write_text(NOWHERE)
    spec = importlib.util.spec_from_file_location("nowhere_on_the_path", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "nowhere_on_the_path", module)
    spec.loader.exec_module(module)
    signature = {"x_ptr": "*fp32", "BLOCK": "constexpr"}
    with pytest.warns(at.TritonFallbackWarning, match="did not load in the worker"):
        first = at.compile_many([(module.copy, signature, {"BLOCK": 64})], target=tk.TARGET)
    asked = counts.worker_seconds
    assert asked > 0 and counts.in_process == 1
    with pytest.warns(at.TritonFallbackWarning, match="did not load in the worker"):
        second = at.compile_many([(module.copy, signature, {"BLOCK": 128})], target=tk.TARGET)
    assert counts.worker_seconds == asked and counts.in_process == 2  # no worker asked
    own = own_build(ASTSource(module.copy, signature, {"BLOCK": 64}), tmp_path / "own")
    assert_same_kernel(first[0], own)
    assert type(second[0]).__name__ == "CompiledKernel"


def _has_gpu() -> bool:
    from asynccomp.gpu import local_gpu_arch

    return local_gpu_arch() is not None


def test_compile_many_refuses_what_it_cannot_read() -> None:
    with pytest.raises(InvalidJob, match=r"sources\[1\]"):
        at.compile_many([tk.add(64), "add_kernel"], target=tk.TARGET)
    with pytest.raises(InvalidJob, match="2 option sets for 1 sources"):
        at.compile_many([tk.add(64)], target=tk.TARGET, options=[{}, {}])
    with pytest.raises(InvalidJob, match=r"expected a triton\.backends\.compiler\.GPUTarget"):
        at.compile_many([tk.add(64)], target="sm_90")
    if not _has_gpu():
        with pytest.raises(InvalidJob, match=r"no GPU here.*GPUTarget\('cuda', 90, 32\)"):
            at.compile_many([tk.add(64)])  # no target, and no GPU to ask


def test_triton_refusing_the_options_is_that_slots_exception() -> None:
    results = at.compile_many(
        [tk.add(64), tk.add(64)], target=tk.TARGET, options=[{"num_warps": 3}, None], workers=1
    )
    assert isinstance(results[0], AssertionError)  # Triton's: "num_warps must be a power of 2"
    assert type(results[1]).__name__ == "CompiledKernel"


# -- kernels defined outside importable modules ------------------------------------------


def closure_kernel(scale: float) -> Any:
    factor = tl.constexpr(scale)  # a kernel reads constexpr values only

    @triton.jit  # type: ignore[untyped-decorator]
    def scaled(x_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offsets = tl.arange(0, BLOCK)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * factor)

    return scaled


def test_a_closure_kernel_travels_by_value(tmp_path: Path, counts: Counts) -> None:
    pytest.importorskip("cloudpickle")
    kernel = closure_kernel(3.0)
    source = ASTSource(kernel, {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128})
    result = at.compile_many([source], target=tk.TARGET, workers=1)[0]
    # The same line info (the file name and lines travel with it) and the same constant.
    assert_same_kernel(result, own_build(source, tmp_path / "own"))
    assert counts.in_process == 0 and counts.compiled == 1


def test_without_cloudpickle_a_closure_kernel_compiles_here_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counts: Counts
) -> None:
    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # import cloudpickle fails
    source = ASTSource(closure_kernel(2.0), {"x_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 64})
    with pytest.warns(at.TritonFallbackWarning, match=r"closure.*needs cloudpickle"):
        result = at.compile_many([source, tk.add(64)], target=tk.TARGET, workers=1)
    assert_same_kernel(result[0], own_build(source, tmp_path / "own"))
    assert counts.in_process == 1 and counts.compiled == 1


MAIN_SCRIPT = """
import os, sys
import triton
import triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
import asynccomp.triton as at

TARGET = GPUTarget("cuda", 90, 32)

LIMIT = tl.constexpr(100)

@triton.jit
def relu(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offsets < n) & (offsets < LIMIT)
    tl.store(x_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)

if __name__ == "__main__":
    source = ASTSource(relu, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 256})
    ours = at.compile_many([source], target=TARGET, workers=1)[0]
    if isinstance(ours, Exception):
        raise ours
    os.environ["TRITON_CACHE_DIR"] = sys.argv[1]
    own = triton.compile(source, target=TARGET)
    assert all(ours.asm[s] == own.asm[s] for s in own.asm), "not Triton's kernel"
    stats = at.statistics()
    print("same kernel", stats.compiled, stats.in_process)
"""


def test_a_main_kernel_travels_by_value(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A script's kernel (``__main__``): by value, with its file's lines and globals."""
    pytest.importorskip("cloudpickle")
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(MAIN_SCRIPT))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "own")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["same", "kernel", "1", "0"]  # in a worker, not here


# -- versions ------------------------------------------------------------------------------


def test_an_unknown_triton_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counts: Counts
) -> None:
    own_do_compile, own_bench = JITFunction._do_compile, Autotuner._bench
    monkeypatch.setattr(triton, "__version__", "9.9.0")
    with pytest.warns(at.TritonVersionWarning, match=r"Triton 9\.9\.0 is not a version"):
        assert at.register() is False
    assert not at.registered()
    assert JITFunction._do_compile is own_do_compile and Autotuner._bench is own_bench
    with pytest.warns(at.TritonVersionWarning, match="compiles in this process"):
        result = at.compile_many([tk.add(64)], target=tk.TARGET)
    assert_same_kernel(result[0], own_build(tk.add(64), tmp_path / "own"))
    assert at.statistics().workers is None and counts.compiled == 0  # no worker started


# -- register(): the JIT's compiles --------------------------------------------------------


def test_register_installs_and_removes_the_hooks() -> None:
    own = {
        "do_compile": JITFunction._do_compile,
        "prune": Autotuner.prune_configs,
        "bench": Autotuner._bench,
        "warmup": Autotuner.warmup,
    }
    with at.enabled(workers=1) as done:
        assert done and at.registered()
        assert JITFunction._do_compile is _hooks._do_compile
        assert Autotuner._bench is _autotune._bench
        assert Autotuner.prune_configs is _autotune._prune_configs
        assert Autotuner.warmup is _autotune._warmup
        with at.enabled(workers=3):  # registered already: left as it is
            assert at.registered()
        assert at.registered()
        at.register(workers=1, autotune=False)
        assert Autotuner._bench is own["bench"] and JITFunction._do_compile is _hooks._do_compile
    assert not at.registered()
    assert JITFunction._do_compile is own["do_compile"]
    assert Autotuner.prune_configs is own["prune"]
    assert Autotuner._bench is own["bench"] and Autotuner.warmup is own["warmup"]


class FakeGPU:
    """A stand-in for Triton's CUDA driver (installed with Triton's own
    ``driver.set_active``): Hopper as the current target, a binary "loads" and a kernel
    "launches" by noting its constants, so the JIT's own ``run`` (its binder, its caches,
    ``_do_compile``) and the autotuner run here as on a GPU, every compile real."""

    class Utils:
        def get_device_properties(self, device: int) -> dict[str, int]:
            return {"max_shared_mem": 232448}  # an H100's

        def load_binary(self, name: str, kernel: bytes, shared: int, device: int) -> Any:
            return (1, 1, 32, 0, 1024)  # module, function, registers, spills, threads

    def __init__(self) -> None:
        self.utils = self.Utils()
        self.launched: list[dict[tuple[int, ...], Any]] = []
        gpu = self

        class Launcher:
            def __init__(self, src: Any, metadata: Any) -> None:
                self.src = src

            def __call__(self, *args: Any) -> None:
                gpu.launched.append(dict(self.src.constants))

        self.launcher_cls = Launcher

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int) -> int:
        return 0

    def get_current_target(self) -> Any:
        return tk.TARGET


class Tensor:
    """What the JIT reads of a tensor argument: a 16-byte aligned pointer and a dtype."""

    def __init__(self, dtype: Any = tl.float32) -> None:
        self.dtype = dtype

    def data_ptr(self) -> int:
        return 1 << 20


JIT_KERNELS = (tk.add_kernel, tk.asserting_kernel)


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGPU]:
    from triton.runtime.driver import driver

    fake = FakeGPU()
    monkeypatch.setattr(driver, "_active", fake)
    for kernel in JIT_KERNELS:  # the JIT's caches of the kernels: none from other tests
        kernel.device_caches.clear()
    yield fake
    for kernel in JIT_KERNELS:
        kernel.device_caches.clear()


def own_cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Triton's cache folder from now on (a run that must compile everything)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    for kernel in JIT_KERNELS:
        kernel.device_caches.clear()


ADD_ARGS = (Tensor(), Tensor(), Tensor(), 1000)


def test_a_jit_kernels_first_call_compiles_in_a_worker(
    tmp_path: Path, gpu: FakeGPU, counts: Counts
) -> None:
    at.register(workers=2)
    kernel = tk.add_kernel[(4,)](*ADD_ARGS, BLOCK=256)
    assert gpu.launched == [{(4,): 256}]
    assert counts.compiled == 1 and counts.in_process == 0
    assert list(tk.add_kernel.device_caches[0][0].values()) == [kernel]  # the JIT's cache
    assert_same_kernel(kernel, own_build(kernel.src, tmp_path / "own", debug=False))
    tk.add_kernel[(4,)](*ADD_ARGS, BLOCK=256)  # a second call: the JIT's cache
    assert counts.compiled == 1 and len(gpu.launched) == 2


def test_warmups_in_parallel_compile_on_the_workers(gpu: FakeGPU, counts: Counts) -> None:
    at.register(workers=2)
    blocks = (64, 128, 256, 512)
    with at.parallel():  # Triton's AsyncCompileMode: each warmup returns at once
        pending = [tk.add_kernel.warmup(*ADD_ARGS, BLOCK=b, grid=(1,)) for b in blocks]
        assert all(hasattr(p, "result") for p in pending)
    assert counts.compiled == 4 and len(tk.add_kernel.device_caches[0][0]) == 4
    at.unregister()  # the kernels keep asynccomp's compile, which is Triton's now
    tk.add_kernel.warmup(*ADD_ARGS, BLOCK=1024, grid=(1,))
    assert counts.compiled == 4 and len(tk.add_kernel.device_caches[0][0]) == 5


def real_autotune(
    kernel: Any, gpu: FakeGPU, timings: dict[int, float], args: tuple[Any, ...]
) -> Autotuner:
    """``@triton.autotune`` over ``kernel``, configs BLOCK in ``timings``, whose
    benchmark measures the (given) timing of the config launched."""

    def do_bench(kernel_call: Any, quantiles: Any) -> list[float]:
        kernel_call()
        t = timings[next(iter(gpu.launched[-1].values()))]
        return [t, t, t]

    configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in timings]
    tuned: Autotuner = triton.autotune(configs, key=["n"], do_bench=do_bench)(kernel)
    tuned[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](*args)
    return tuned


def test_a_real_autotune_matches_tritons_own(
    tmp_path: Path, gpu: FakeGPU, counts: Counts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``@triton.autotune`` (the JIT, its caches, every compile real; launches
    stood in for): the same best config and timings as Triton's own, every config's
    kernel Triton's own, all compiled on the workers."""
    timings = {32: 3.0, 64: 1.0, 128: 1.0, 256: 2.0, 512: 4.0}
    own_cache(monkeypatch, tmp_path / "own")
    theirs = real_autotune(tk.add_kernel, gpu, timings, ADD_ARGS)
    their_kernels = dict(tk.add_kernel.device_caches[0][0])
    own_cache(monkeypatch, tmp_path / "ours")
    at.register(workers=2)
    ours = real_autotune(tk.add_kernel, gpu, timings, ADD_ARGS)
    assert str(ours.best_config) == str(theirs.best_config) == str(triton.Config({"BLOCK": 64}))
    assert list(ours.configs_timings.items()) == list(theirs.configs_timings.items())
    assert counts.compiled == 5 and counts.in_process == 0
    our_kernels = tk.add_kernel.device_caches[0][0]
    assert our_kernels.keys() == their_kernels.keys()
    for key, kernel in our_kernels.items():
        assert_same_kernel(kernel, their_kernels[key])
    assert gpu.launched[-1] == {(4,): 64}  # then the best config runs


def test_a_real_autotune_drops_what_triton_drops(
    tmp_path: Path, gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config failing ``tl.static_assert`` (CompileTimeAssertionFailure, which Triton's
    ``_bench`` catches): an infinite timing, in Triton's own autotune and here."""
    timings = {32: 2.0, 64: 1.0, 128: 0.5}  # 128 would win, but does not compile
    args = (Tensor(tl.int32),)
    own_cache(monkeypatch, tmp_path / "own")
    theirs = real_autotune(tk.asserting_kernel, gpu, timings, args)
    own_cache(monkeypatch, tmp_path / "ours")
    at.register(workers=2)
    ours = real_autotune(tk.asserting_kernel, gpu, timings, args)
    assert ours.best_config.kwargs == theirs.best_config.kwargs == {"BLOCK": 64}
    assert list(ours.configs_timings.values()) == list(theirs.configs_timings.values())
    assert list(ours.configs_timings.values())[2] == [float("inf")] * 3


def test_a_real_autotune_survives_an_abort_and_a_hang(
    gpu: FakeGPU, counts: Counts, caplog: pytest.LogCaptureFixture
) -> None:
    """Triton's C++ aborting on one config (in Triton's own process: the end of it) and
    another's compile hanging: each costs its config only."""
    at.register(workers=2, timeout=5.0)
    timings = {tk.ABORT: 0.1, tk.HANG: 0.1, 64: 2.0, 128: 1.0}
    with caplog.at_level(logging.WARNING, logger="asynccomp.triton"):
        ours = real_autotune(tk.add_kernel, gpu, timings, ADD_ARGS)
    assert ours.best_config.kwargs == {"BLOCK": 128}
    dropped = [list(ours.configs_timings.values())[i] for i in (0, 1)]
    assert dropped == [[float("inf")] * 3] * 2
    assert counts.crashed == 1 and counts.timed_out == 1
    assert sum("dropped" in r.getMessage() for r in caplog.records) == 2


def test_a_real_autotune_warmup_is_tritons(
    tmp_path: Path, gpu: FakeGPU, counts: Counts, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = [triton.Config({"BLOCK": b}) for b in (64, 128, 256)]
    tuned = triton.autotune(configs, key=["n"])(tk.add_kernel)
    own_cache(monkeypatch, tmp_path / "own")
    theirs = tuned.warmup(*ADD_ARGS, grid=(1,))
    own_cache(monkeypatch, tmp_path / "ours")
    at.register(workers=2)
    ours = tuned.warmup(*ADD_ARGS, grid=(1,))
    assert counts.compiled == 3 and gpu.launched == []
    for mine, own in zip(ours, theirs, strict=True):
        assert_same_kernel(mine, own)


def test_a_pipeline_hook_keeps_the_compile_here(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def hook(backend: Any, stages: Any, options: Any, language: Any, capability: Any) -> None:
        seen.append("stages")

    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", hook)
    at.register(workers=1)
    with pytest.warns(at.TritonFallbackWarning, match="add_stages_inspection_hook"):
        result = at.compile_many([tk.add(64)], target=tk.TARGET)
    assert seen == ["stages"] and type(result[0]).__name__ == "CompiledKernel"


# -- the autotuner: choice, order, failures (no GPU: fake kernels, given timings) ----------


class FakeKernel:
    """Stands for a ``JITFunction`` under an ``Autotuner``: ``run`` compiles (a sleep, or
    a given exception) per config, through Triton's async compile mode where one is
    active, as ``JITFunction._do_compile`` does, and "launches" by noting the config."""

    arg_names: ClassVar[list[str]] = ["x", "n"]

    def __init__(
        self,
        fails: dict[int, BaseException] | None = None,
        gates: dict[int, threading.Event] | None = None,
        together: threading.Barrier | None = None,
    ):
        self.fails, self.gates, self.together = fails or {}, gates or {}, together
        self.cache: dict[int, str] = {}
        self.launched: list[int] = []
        self.compiled: list[int] = []
        self.lock = threading.Lock()
        self.on_launch: Any = None

        def fn(x: Any, n: Any, BLOCK: Any) -> None:  # Autotuner reads its name
            pass

        self.fn = fn

    def _compile(self, block: int) -> str:
        if block in self.gates:  # this compile ends only once the gate opens
            assert self.gates[block].wait(60), f"config {block}'s gate never opened"
        if self.together is not None:  # these compiles end only if they run at once
            self.together.wait()
        with self.lock:
            self.compiled.append(block)
        if block in self.fails:
            raise self.fails[block]
        return f"kernel-{block}"

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        block = kwargs["BLOCK"]
        kernel: Any = self.cache.get(block)
        if kernel is None:
            mode = active_mode.get()
            if mode is not None:
                kernel = mode.submit(
                    block,
                    functools.partial(self._compile, block),
                    lambda k, b=block: self.cache.__setitem__(b, k),
                )
            else:
                kernel = self._compile(block)
                self.cache[block] = kernel
        if warmup:
            return kernel
        if hasattr(kernel, "result"):
            kernel = kernel.result()
        self.launched.append(block)
        if self.on_launch is not None:
            self.on_launch(self.launched)
        return kernel

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self.run(*args, grid=grid, warmup=True, **kwargs)


def tuner(fake: FakeKernel, timings: dict[int, float], **settings: Any) -> Autotuner:
    configs = [Config({"BLOCK": b}, num_warps=4) for b in sorted(timings)]

    def do_bench(kernel_call: Any, quantiles: Any) -> list[float]:
        kernel_call()
        t = timings[fake.launched[-1]]
        return [t, t, t]

    return Autotuner(
        fake, fake.arg_names, configs, ["n"], None, None, do_bench=do_bench, **settings
    )


def autotune(timings: dict[int, float], fake: FakeKernel, **settings: Any) -> tuple[Any, Autotuner]:
    """The best config's BLOCK (or what the autotune raised), and the autotuner."""
    autotuner = tuner(fake, timings, **settings)
    try:
        autotuner.run("x", 1000, grid=(1,), warmup=False)
    except Exception as exc:
        return exc, autotuner
    return autotuner.best_config.kwargs["BLOCK"], autotuner


# Config BLOCK -> its (given) benchmark timing; ties break by the configs' order.
TIMINGS = {16: 5.0, 32: 2.0, 64: 3.0, 128: 2.0, 256: 9.0}


def slowest_first() -> FakeKernel:
    """Config 16's compile ends only once every other config has been benchmarked."""
    last = threading.Event()
    fake = FakeKernel(gates={16: last})

    def launched(blocks: list[int]) -> None:
        if {32, 64, 128, 256} <= set(blocks):
            last.set()

    fake.on_launch = launched
    return fake


def test_autotune_chooses_as_triton_does_from_the_same_timings() -> None:
    their_fake = FakeKernel()
    theirs, their_tuner = autotune(TIMINGS, their_fake)
    at.register(workers=4)
    our_fake = slowest_first()
    ours, our_tuner = autotune(TIMINGS, our_fake)
    assert theirs == ours == 32  # the first of the two fastest, as min() over the list
    assert list(our_tuner.configs_timings.items()) == list(their_tuner.configs_timings.items())
    assert their_fake.launched[:5] == [16, 32, 64, 128, 256]  # Triton: in the configs' order
    # Here: compiled at once, benchmarked as each was ready (16, gated, ready last).
    assert our_fake.launched[4] == 16 and sorted(our_fake.launched[:5]) == sorted(TIMINGS)
    assert our_fake.launched[5] == ours  # then run launches the best config, as Triton's
    assert our_tuner.__dict__.get("_asynccomp_round") is None


def test_autotune_failures_are_tritons() -> None:
    """A ptxas error (caught by Triton's _bench): infinite timing; a compile error it
    does not catch: raised at that config, as Triton raises it."""
    ptxas: dict[int, BaseException] = {32: PTXASError("register spill")}
    theirs, their_tuner = autotune(TIMINGS, FakeKernel(ptxas))
    at.register(workers=4)
    ours, our_tuner = autotune(TIMINGS, FakeKernel(ptxas))
    assert theirs == ours == 128
    assert our_tuner.configs_timings[Config({"BLOCK": 32}, num_warps=4)] == [float("inf")] * 3
    assert list(our_tuner.configs_timings.items()) == list(their_tuner.configs_timings.items())

    at.unregister()
    broken: dict[int, BaseException] = {64: ValueError("not a kernel"), 256: KeyError("later")}
    their_fake = FakeKernel(broken)
    theirs, _ = autotune(TIMINGS, their_fake)
    at.register(workers=4)
    our_fake = FakeKernel(broken)
    ours, _ = autotune(TIMINGS, our_fake)
    assert type(ours) is type(theirs) is ValueError and str(ours) == str(theirs)
    assert their_fake.launched == [16, 32]  # Triton: the configs before it, then it raised
    assert {16, 32} <= set(our_fake.launched)


def test_an_autotune_config_whose_worker_dies_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    at.register(workers=4)
    fails: dict[int, BaseException] = {
        16: at.TritonCompileCrashed("died"),
        128: at.TritonCompileTimeout("slow", timeout=1),
    }
    with caplog.at_level(logging.WARNING, logger="asynccomp.triton"):
        ours, our_tuner = autotune(TIMINGS, FakeKernel(fails))
    assert ours == 32
    timings = our_tuner.configs_timings
    assert timings[Config({"BLOCK": 16}, num_warps=4)] == [float("inf")] * 3
    assert timings[Config({"BLOCK": 128}, num_warps=4)] == [float("inf")] * 3
    assert sum("dropped" in r.getMessage() for r in caplog.records) == 2


def test_autotune_warmup_compiles_every_config_at_once() -> None:
    at.register(workers=4)
    # Each compile ends only once all three run at the same time (in turn: a timeout).
    fake = FakeKernel(together=threading.Barrier(3, timeout=60))
    autotuner = tuner(fake, {16: 1.0, 32: 1.0, 64: 1.0})
    kernels = autotuner.warmup("x", 1000, grid=(1,))
    assert kernels == ["kernel-16", "kernel-32", "kernel-64"]  # Triton's order and kernels
    assert fake.launched == []


def test_autotune_inside_the_users_async_mode_is_tritons() -> None:
    at.register(workers=2)
    fake = FakeKernel()
    autotuner = tuner(fake, TIMINGS)
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        from triton.runtime._async_compile import AsyncCompileMode

        with AsyncCompileMode(executor):
            autotuner.run("x", 1000, grid=(1,), warmup=False)
    assert fake.launched[:5] == [16, 32, 64, 128, 256]
    assert autotuner.best_config.kwargs["BLOCK"] == 32


# -- screening: brief benchmarks first, full ones for the configs that can win ---------------


class Benches:
    """Triton's default benchmark as a screened autotune meets it (no GPU): the brief one
    (``triton.testing.do_bench`` with the screen's ``rep``) answers ``brief[BLOCK]``, the
    full one (the autotuner's ``do_bench``) ``full[BLOCK]``; both note what they timed."""

    def __init__(self, fake: FakeKernel, brief: dict[int, float], full: dict[int, float]):
        self.fake, self.brief, self.full = fake, brief, full
        self.timed: list[tuple[str, int]] = []

    def _timed(self, kind: str, kernel_call: Any, table: dict[int, float]) -> list[float]:
        kernel_call()
        block = self.fake.launched[-1]
        self.timed.append((kind, block))
        return [table[block]] * 3

    def do_bench(self, kernel_call: Any, warmup: float, rep: float, quantiles: Any) -> list[float]:
        assert (warmup, rep) == (1.0, 10.0)  # Screen()'s
        return self._timed("brief", kernel_call, self.brief)

    def autotuner_bench(self, kernel_call: Any, quantiles: Any) -> list[float]:
        return self._timed("full", kernel_call, self.full)


def screened(
    monkeypatch: pytest.MonkeyPatch,
    brief: dict[int, float],
    full: dict[int, float],
    fake: FakeKernel | None = None,
) -> tuple[Any, Autotuner, Benches]:
    """An autotune over configs BLOCK in ``brief`` with Triton's default benchmark (the
    autotuner's ``do_bench`` property, here without a GPU: ``full``), screened."""
    fake = fake or FakeKernel()
    benches = Benches(fake, brief, full)
    monkeypatch.setattr(triton.testing, "do_bench", benches.do_bench)
    configs = [Config({"BLOCK": b}, num_warps=4) for b in sorted(brief)]
    tuned = Autotuner(fake, fake.arg_names, configs, ["n"], None, None)
    assert tuned._do_bench is None  # Triton's default benchmark: screening applies
    tuned.__dict__["do_bench"] = benches.autotuner_bench  # what the property caches
    try:
        tuned.run("x", 1000, grid=(1,), warmup=False)
    except Exception as exc:
        return exc, tuned, benches
    return tuned.best_config.kwargs["BLOCK"], tuned, benches


def test_screening_benchmarks_in_full_only_the_configs_that_can_win(
    monkeypatch: pytest.MonkeyPatch, counts: Counts
) -> None:
    at.register(workers=2, screen=True)
    brief = {16: 5.0, 32: 2.0, 64: 2.1, 128: 3.0, 256: 9.0}
    full = {16: 5.1, 32: 2.05, 64: 1.9, 128: 3.1, 256: 9.2}
    best, tuned, benches = screened(monkeypatch, brief, full)
    # 32 and 64 are within 1.1x of the fastest brief timing (2.0): timed in full, and 64
    # is faster in full. The others keep their brief timing.
    assert best == 64
    assert sorted(b for kind, b in benches.timed if kind == "full") == [32, 64]
    assert sorted(b for kind, b in benches.timed if kind == "brief") == sorted(brief)
    timings = {c.kwargs["BLOCK"]: t[0] for c, t in tuned.configs_timings.items()}
    assert timings == {16: 5.0, 32: 2.05, 64: 1.9, 128: 3.0, 256: 9.0}
    assert (counts.short_benchmarks, counts.full_benchmarks) == (5, 2)
    # Where the call went: each benchmark's wall time is counted under its kind.
    assert counts.short_benchmark_seconds > 0 and counts.full_benchmark_seconds > 0
    assert counts.compile_wait_seconds >= 0
    assert tuned.__dict__["do_bench"] == benches.autotuner_bench  # given back after each


def test_screening_times_in_full_a_config_timed_briefly_below_the_best_full_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A config whose brief timing was optimistic: the configs outside ``keep_within``
    whose brief timing beats its full one are timed in full too, so the config chosen has
    a full timing and none timed only briefly measured faster than it."""
    at.register(workers=2, screen=at.Screen(keep_within=1.05))
    brief = {16: 1.0, 32: 1.5, 64: 2.5, 128: 4.0}
    full = {16: 3.0, 32: 1.6, 64: 2.6, 128: 4.1}
    best, tuned, benches = screened(monkeypatch, brief, full)
    assert best == 32
    full_timed = [b for kind, b in benches.timed if kind == "full"]
    assert full_timed == [16, 32]  # 16 first (within), then 32 (1.5 < 3.0); 64: 2.5 > 1.6
    timings = {c.kwargs["BLOCK"]: t[0] for c, t in tuned.configs_timings.items()}
    assert timings == {16: 3.0, 32: 1.6, 64: 2.5, 128: 4.0}


def test_screening_failures_are_tritons(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ptxas error: an infinite timing (from the brief benchmark, no full one); an
    error Triton's _bench does not catch: raised at that config, as Triton raises it."""
    at.register(workers=2, screen=True)
    brief = {16: 5.0, 32: 2.0, 64: 3.0, 128: 2.0}
    full = dict(brief)
    ptxas: dict[int, BaseException] = {32: PTXASError("register spill")}
    best, tuned, benches = screened(monkeypatch, brief, full, FakeKernel(ptxas))
    assert best == 128
    assert tuned.configs_timings[Config({"BLOCK": 32}, num_warps=4)] == [float("inf")] * 3
    assert ("full", 32) not in benches.timed

    at.unregister()
    at.register(workers=2, screen=True)
    broken: dict[int, BaseException] = {64: ValueError("not a kernel")}
    raised, _, _ = screened(monkeypatch, brief, full, FakeKernel(broken))
    assert type(raised) is ValueError and str(raised) == "not a kernel"


def test_an_autotune_with_its_own_do_bench_is_not_screened(
    monkeypatch: pytest.MonkeyPatch, counts: Counts
) -> None:
    """A ``do_bench=`` of the user's may measure in other units: every config gets it."""
    at.register(workers=2, screen=True)
    monkeypatch.setattr(triton.testing, "do_bench", None)  # never called
    best, _ = autotune(TIMINGS, FakeKernel())
    assert best == 32
    assert (counts.short_benchmarks, counts.full_benchmarks) == (0, 5)
    assert counts.short_benchmark_seconds == 0 and counts.full_benchmark_seconds > 0


@pytest.mark.parametrize(
    "screen",
    [
        at.Screen,  # made inside the test: its errors are the test's
        "yes",
        1,
    ],
)
def test_a_bad_screen_is_a_settings_error(screen: Any) -> None:
    from asynccomp.errors import SettingsError

    if screen is at.Screen:
        for bad in ({"keep_within": 0.5}, {"rep_ms": 0}, {"warmup_ms": float("inf")}):
            with pytest.raises(SettingsError):
                at.Screen(**bad)
        return
    with pytest.raises(SettingsError, match="screen"):
        at.register(workers=1, screen=screen)
    assert not at.registered()


# -- on a GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
def test_autotune_on_a_gpu_matches_tritons_own(tmp_path: Path) -> None:
    """A real autotune of the matmul (benchmarks/tuners/triton_sweep.py --gpu, each mode
    in a fresh process): the same best config as Triton's own given the same timings
    (screened: Triton's best benchmarked in full, or screened out by its own brief
    timing, since each process's timings differ by up to 14%), every config's
    cubin and output equal to Triton's own build's, close to torch's."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.tuners.triton_sweep",
            "--gpu",
            "--configs",
            "6",
            "--size",
            "256",
            "--json",
            str(report),
        ],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    checks = json.loads(report.read_text())
    assert checks["same_best"], (checks["asynccomp"]["best"], checks["triton"]["best"])
    # Screened: each process chooses on its own timings, so a config within their noise of
    # Triton's best may win; the screen must not have dropped Triton's best unfairly.
    screened = checks["asynccomp-screen"]
    assert checks["screen_within"], (screened["briefly"], screened["measured"])
    assert checks["outputs_equal"] and checks["close_to_torch"], done.stdout
    assert done.returncode == 0
