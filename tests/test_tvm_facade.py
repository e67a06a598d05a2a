"""asynccomp.tvm without TVM: TVM 0.27's compile contract on asynccomp's engine.

Everything compiles for real (NVRTC, and nvcc where found). The byte-for-byte comparison
with TVM itself is in test_tvm_parity.py (it needs TVM installed).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import asynccomp.gpu
import asynccomp.tvm
from asynccomp import CompileError
from asynccomp.tvm import (
    _arch,
    _render,
    _runtime,
    compile_cuda,
    make_job,
    tvm_callback_cuda_compile,
)

from .kernels import broken_kernel, needs_nvcc, scale_kernel, slow_kernel

DATA = Path(__file__).parent / "data" / "tvm_kernels"
ELF = b"\x7fELF"
FATBIN = b"\x50\xed\x55\xba"  # the fatbin container's magic, little-endian

TVM_VARIABLES = (
    "TVM_CUDA_COMPILE_MODE",
    "TVM_CUDA_PTXAS_REG_LEVEL",
    "TVM_CUDA_PTXAS_EXTRA_OPTS",
    "TVM_CUDA_NVRTC_EXTRA_OPTS",
    "TVM_CUDA_NVCC_NO_FAST_MATH",
    "TVM_KERNEL_DEBUG",
    "TVM_KERNEL_DUMP",
    "ASYNCCOMP_TVM_FAST_PATH",
)


@pytest.fixture(autouse=True)
def facade_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A clean TVM environment, a known architecture, and a fresh facade engine per test
    (so it uses this test's private cache folder)."""
    for name in TVM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASYNCCOMP_ARCH", "sm_90a")
    yield
    asynccomp.tvm.shutdown()


def test_all_matches_exports() -> None:
    exported = {n for n in dir(asynccomp.tvm) if not n.startswith("_")}
    modules = {n for n in exported if type(getattr(asynccomp.tvm, n)).__name__ == "module"}
    assert set(asynccomp.tvm.__all__) == exported - modules - {"annotations"}
    assert list(asynccomp.tvm.__all__) == sorted(asynccomp.tvm.__all__)


def test_import_does_not_import_tvm() -> None:
    code = (
        "import sys, asynccomp.tvm\n"
        "assert 'tvm' not in sys.modules and 'tvm_ffi' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- rendering


def test_nvrtc_job_has_tvms_source_and_options() -> None:
    code = "#include <cuda.h>\n" + scale_kernel() + "// CUtensorMap\n"
    job = make_job(code, options=["-O3", "-std=c++17", "-DX=1", "-Xptxas", "-lineinfo"])
    assert job.name == "tvm_kernels" and job.backend == "nvrtc" and job.output == "cubin"
    assert job.exact_options and job.arch == "sm_90a"
    assert job.source.startswith(
        _render.NVRTC_PREAMBLE + _render.CUTENSORMAP_DECLARATION + 'extern "C"'
    )
    assert "#include <cuda.h>" not in job.source
    includes = [f"-I{d}" for d in _render.tvm_include_dirs()]
    assert list(job.options) == [
        "--gpu-architecture=sm_90a",
        "-default-device",
        "--device-int128",
        *includes,
        *_render.SILENCE_DEPRECATION,
        *_render.HALF_BFLOAT16_UNDEFINES,
        "--use_fast_math",
        "--ptxas-options=-v",
        "--ptxas-options=--register-usage-level=10",
        "--ptxas-options=--warn-on-local-memory-usage",
        "-DX=1",  # the nvcc-only options are dropped, as TVM drops them
        "-lineinfo",
    ]


def test_environment_variables_go_where_tvm_puts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVM_CUDA_PTXAS_REG_LEVEL", "5")
    monkeypatch.setenv("TVM_CUDA_PTXAS_EXTRA_OPTS", "-O2 --def-load-cache=ca")
    monkeypatch.setenv("TVM_CUDA_NVRTC_EXTRA_OPTS", "--ftz=false")
    nvrtc = list(make_job(scale_kernel(), "ptx", options="-DY").options)
    assert nvrtc[0] == "--gpu-architecture=compute_90a"  # PTX wants a virtual arch
    assert nvrtc[-7:] == [
        "--ptxas-options=-v",
        "--ptxas-options=--register-usage-level=5",
        "--ptxas-options=--warn-on-local-memory-usage",
        "--ptxas-options=-O2",
        "--ptxas-options=--def-load-cache=ca",
        "--ftz=false",
        "-DY",
    ]
    monkeypatch.setenv("TVM_KERNEL_DEBUG", "1")
    monkeypatch.setenv("TVM_CUDA_NVCC_NO_FAST_MATH", "0")  # any value counts, as in TVM
    nvcc = make_job(scale_kernel(), "fatbin", "sm_80", ["-DZ"], "nvcc", dump=True)
    assert nvcc.output == "fatbin" and nvcc.source == scale_kernel()
    assert list(nvcc.options) == [
        "--fatbin",
        "-O3",
        "-lineinfo",
        "-g",
        "-G",
        "-arch",
        "sm_80",
        *_render.HALF_BFLOAT16_UNDEFINES,
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        "--ptxas-options=-v,--register-usage-level=5,--warn-on-local-memory-usage,"
        "-O2,--def-load-cache=ca",
        "-DZ",
    ]


def test_architecture_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given explicitly: nvcc gets "-arch X" (TVM's form for a given arch).
    assert make_job(scale_kernel(), arch="sm_80").options[0] == "--gpu-architecture=sm_80"
    assert make_job(scale_kernel(), arch="compute_80").options[0] == "--gpu-architecture=sm_80"
    # From ASYNCCOMP_ARCH (standing in for TVM's GPU query): nvcc gets TVM's -gencode form.
    monkeypatch.setenv("ASYNCCOMP_ARCH", "sm_100a")
    nvcc = make_job(scale_kernel(), "cubin", compiler="nvcc")
    assert nvcc.arch == "sm_100a"
    assert nvcc.options[2:4] == ("-gencode", "arch=compute_100a,code=sm_100a")
    gencode = ["-gencode", "arch=compute_80,code=sm_80"]  # TVM's list form of arch
    listed = make_job(scale_kernel(), "cubin", gencode, None, "nvcc")
    assert listed.arch == "sm_80" and list(listed.options[2:4]) == gencode
    # The callback's target argument wins over the environment.
    assert _arch.resolve_arch(None, "sm_89").arch == "sm_89"
    assert _arch.resolve_arch(None, '{"kind": "cuda", "arch": "sm_75"}').arch == "sm_75"
    with pytest.raises(ValueError):  # ours without TVM; TVM's own parse error with it
        _arch.resolve_arch(None, "not a target")


def test_no_architecture_gives_tvms_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCCOMP_ARCH")
    monkeypatch.setattr(_arch, "local_gpu_arch", lambda: None)  # as on a machine without GPU
    with pytest.raises(ValueError, match=r"^No CUDA architecture was specified or GPU detected"):
        compile_cuda(scale_kernel())
    with pytest.raises(ValueError, match=r"^No CUDA architecture was specified or GPU detected"):
        tvm_callback_cuda_compile(scale_kernel())
    # An explicit arch needs no lookup at all (TVM's nvcc path looks up anyway and fails).
    assert make_job(scale_kernel(), "fatbin", "sm_90a", compiler="nvcc").arch == "sm_90a"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TVM_CUDA_COMPILE_MODE", "clang", r"^Invalid TVM_CUDA_COMPILE_MODE: clang\. Expected"),
        ("TVM_CUDA_PTXAS_EXTRA_OPTS", '"-O1', r"^TVM_CUDA_PTXAS_EXTRA_OPTS=.*No closing quotation"),
        ("TVM_CUDA_NVRTC_EXTRA_OPTS", "'--ftz", r"^TVM_CUDA_NVRTC_EXTRA_OPTS=.*No closing"),
        ("ASYNCCOMP_ARCH", "hopper", r"^ASYNCCOMP_ARCH='hopper' is not a CUDA architecture"),
        ("ASYNCCOMP_TVM_FAST_PATH", "maybe", r"^ASYNCCOMP_TVM_FAST_PATH='maybe': expected"),
    ],
)
def test_bad_environment_variable_is_a_value_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message):
        tvm_callback_cuda_compile(scale_kernel())


@pytest.mark.parametrize(
    ("variable", "value"),
    [("TVM_CUDA_PTXAS_REG_LEVEL", "bogus"), ("TVM_CUDA_NVRTC_EXTRA_OPTS", "--no-such-flag")],
)
def test_bad_compiler_flag_fails_like_tvm_and_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    # TVM passes these on unchecked, and the compile fails; so does ours, with TVM's
    # message, plus a line saying where the flag came from.
    monkeypatch.setenv(variable, value)
    with pytest.raises(RuntimeError, match=r"^NVRTC compilation failed") as caught:
        tvm_callback_cuda_compile(scale_kernel())
    assert f"{variable}={value!r}" in str(caught.value)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^NVRTC does not support fatbin generation yet"):
        compile_cuda(scale_kernel(), "fatbin")
    with pytest.raises(ValueError, match=r"^target_format must be 'cubin' or 'ptx', got: elf"):
        compile_cuda(scale_kernel(), "elf")
    with pytest.raises(ValueError, match=r"^target_format must be in cubin, ptx, fatbin"):
        compile_cuda(scale_kernel(), "elf", compiler="nvcc")
    with pytest.raises(ValueError, match=r"^CUDA compiler must be 'nvcc' or 'nvrtc', got: hipcc"):
        compile_cuda(scale_kernel(), compiler="hipcc")
    with pytest.raises(ValueError, match=r"^options must be str or list of str"):
        compile_cuda(scale_kernel(), options=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"arch 'sm90' is not a CUDA architecture"):
        compile_cuda(scale_kernel(), arch="sm90")
    with pytest.raises(TypeError, match="code must be a str"):
        compile_cuda(b"__global__ void k() {}")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="iterable of sources"):
        asynccomp.tvm.prefetch(scale_kernel())


# --------------------------------------------------------------------------- compiling


def test_compile_cuda_nvrtc(tmp_path: Path) -> None:
    target = tmp_path / "out.cubin"
    cubin = compile_cuda(scale_kernel(), arch="sm_90a", path_target=str(target))
    assert isinstance(cubin, bytearray) and cubin[:4] == ELF
    assert target.read_bytes() == cubin
    ptx = compile_cuda(scale_kernel(), "ptx", arch="sm_90a")
    assert ptx.startswith(b"//") and ptx.endswith(b"}\n\n\x00")  # TVM keeps the NUL


def test_nvrtc_failure_is_tvms_runtime_error() -> None:
    with pytest.raises(RuntimeError, match=r"^NVRTC compilation failed:\n") as caught:
        compile_cuda(broken_kernel())
    assert "undefined_identifier_42" in str(caught.value)
    assert isinstance(caught.value.__cause__, CompileError)
    assert "undefined_identifier_42" in caught.value.__cause__.log


@needs_nvcc
def test_compile_cuda_nvcc(tmp_path: Path) -> None:
    fatbin = compile_cuda(scale_kernel(), "fatbin", compiler="nvcc", path_target=tmp_path / "f")
    assert fatbin[:4] == FATBIN and (tmp_path / "f").read_bytes() == fatbin
    with pytest.raises(RuntimeError) as caught:
        compile_cuda(broken_kernel(), "fatbin", compiler="nvcc")
    message = str(caught.value)
    assert message.startswith(broken_kernel() + "\nCompilation error:\n")
    assert "undefined_identifier_42" in message
    # nvcc exits 0 with --dryrun and writes nothing: TVM's "empty result" error.
    with pytest.raises(RuntimeError, match=r"^Compilation error: empty result is generated"):
        compile_cuda(scale_kernel(), "fatbin", options=["--dryrun"], compiler="nvcc")


def test_callback_through_tvm_ffi(monkeypatch: pytest.MonkeyPatch) -> None:
    import tvm_ffi

    asynccomp.tvm.register()
    asynccomp.tvm.register()  # idempotent
    callback = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    one_arg = callback(scale_kernel())  # TVM 0.27's C++ call: arch from ASYNCCOMP_ARCH
    assert one_arg == compile_cuda(scale_kernel(), arch="sm_90a")
    two_args = callback(scale_kernel(), "sm_80")  # older TVM / MLC: (code, target)
    assert two_args == compile_cuda(scale_kernel(), arch="sm_80") != one_arg
    with pytest.raises(RuntimeError, match=r"^NVRTC compilation failed:"):
        callback(broken_kernel())
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "NvCc")  # case-insensitive, as in TVM
    if asynccomp.find_toolkit().nvcc is not None:
        assert callback(scale_kernel())[:4] == FATBIN
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "gcc")
    with pytest.raises(ValueError, match="Invalid TVM_CUDA_COMPILE_MODE: gcc"):
        callback(scale_kernel())


def test_many_threads_at_once() -> None:
    sources = [scale_kernel(float(i % 4)) for i in range(8)]  # 4 distinct, each twice
    barrier = threading.Barrier(len(sources))

    def compile_one(source: str) -> bytearray:
        barrier.wait()
        return tvm_callback_cuda_compile(source)

    with ThreadPoolExecutor(len(sources)) as pool:
        results = list(pool.map(compile_one, sources))
    assert all(r[:4] == ELF for r in results)
    assert results[:4] == results[4:]
    stats = asynccomp.tvm.engine().statistics()
    assert stats.compiled == 4 and stats.succeeded == 8


def test_caller_inside_a_running_event_loop() -> None:
    async def tvm_build_inside_a_notebook() -> bytearray:
        return tvm_callback_cuda_compile(scale_kernel(5.0))

    assert asyncio.run(tvm_build_inside_a_notebook())[:4] == ELF


#: A TVM process whose facade engine runs forks (TVM's popen workers do), and the child
#: compiles: it gets an engine of its own, and the parent's goes on. Run in a fresh
#: interpreter: a pytest worker's own threads (Ray's and gRPC's, left by earlier tests,
#: with their at-fork handlers) are not the process under test.
FORKING_TVM_PROCESS = """
import faulthandler, json, os, sys
import asynccomp.tvm
from asynccomp.tvm import tvm_callback_cuda_compile
deadline = float(sys.argv[1])
one, seven = json.load(sys.stdin)
before = tvm_callback_cuda_compile(one)
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    status = 1
    try:
        os.close(read_end)
        # Stuck: say where, and end. (Armed here only: a watchdog armed before the fork
        # would leave the child its lock, held by a thread the child does not have.)
        faulthandler.dump_traceback_later(deadline, exit=True)
        cubin = tvm_callback_cuda_compile(seven)
        again = tvm_callback_cuda_compile(one)  # a cache hit (the disk cache is shared)
        os.write(write_end, json.dumps([cubin[:4].hex(), again == before]).encode())
        asynccomp.tvm.shutdown()
        status = 0
    finally:
        os._exit(status)
os.close(write_end)
with os.fdopen(read_end, "rb") as pipe:
    report = pipe.read()  # to its end: the child's exit
_, status = os.waitpid(pid, 0)
print(json.dumps({"child": json.loads(report or "null"), "exit": os.waitstatus_to_exitcode(status),
                  "parent_goes_on": tvm_callback_cuda_compile(one) == before}))
asynccomp.tvm.shutdown()
"""

#: How long each process of it may take: a fresh engine (NVRTC's template started, a
#: worker forked from it) and three compiles, on a loaded machine, many times over.
FORK_DEADLINE = 120.0


def test_child_after_fork_gets_its_own_engine() -> None:
    sources = [scale_kernel(1.0), scale_kernel(7.0)]
    done = subprocess.run(
        [sys.executable, "-c", FORKING_TVM_PROCESS, str(FORK_DEADLINE)],
        input=json.dumps(sources),
        capture_output=True,
        text=True,
        timeout=FORK_DEADLINE + 60,  # the child's watchdog ends it first, saying where
        check=False,
    )
    assert done.returncode == 0, done
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome == {"child": [ELF.hex(), True], "exit": 0, "parent_goes_on": True}, done


def test_an_engine_started_in_the_background_is_the_one_compiles_use() -> None:
    """register()'s early start: the engine starts on a thread of its own, and the first
    compile finds it started (the same engine, no second one)."""
    _runtime.start_in_background()
    starter = _runtime._runtime.starter
    if starter is not None:
        starter.join()  # (it may already have ended)
    started = _runtime._runtime.engine
    assert started is not None and _runtime._runtime.starter is None
    _runtime.start_in_background()  # one runs: nothing to start
    assert _runtime._runtime.starter is None
    assert compile_cuda(scale_kernel(1.0), arch="sm_90a")[:4] == ELF
    assert _runtime._runtime.engine is started


def test_shutdown_waits_for_a_background_start_and_leaves_no_engine() -> None:
    """A shutdown() that comes while the engine starts in the background waits for the
    start, and nothing started is left running; the next compile starts a fresh one."""
    _runtime.start_in_background()
    starter = _runtime._runtime.starter  # (None if it is done already)
    asynccomp.tvm.shutdown()  # before the start, or after: it starts none, or it is closed
    assert starter is None or not starter.is_alive()
    assert _runtime._runtime.engine is None and _runtime._runtime.starter is None
    assert compile_cuda(scale_kernel(2.0), arch="sm_90a")[:4] == ELF


def test_a_task_from_before_a_shutdown_starts_no_engine_after_it() -> None:
    """What a background task of the facades (TileLang's PCH made at register()) asks
    for: the engine, unless shutdown() came since it began; then none is started."""
    since = _runtime.generation()
    running = _runtime.engine_unless_shut(since)
    assert running is not None and _runtime.engine() is running
    asynccomp.tvm.shutdown()
    assert _runtime.engine_unless_shut(since) is None
    assert _runtime._runtime.engine is None
    assert _runtime.engine_unless_shut(_runtime.generation()) is not None  # a new one


def test_prefetch_makes_the_callbacks_cache_hits() -> None:
    sources = [scale_kernel(float(i), name=f"k{i}") for i in range(3)]
    asynccomp.tvm.prefetch(sources)
    results = [tvm_callback_cuda_compile(s) for s in sources]
    assert all(r[:4] == ELF for r in results)
    stats = asynccomp.tvm.engine().statistics()
    assert stats.compiled == 3  # the prefetches; each callback waited for or hit one
    assert stats.cache_hits + stats.deduplicated == 3
    assert stats.submitted == 6


@needs_nvcc
def test_prefetch_compiles_what_the_callback_will_ask_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvcc")
    source = scale_kernel(5.0)
    asynccomp.tvm.prefetch([source])  # no compiler named: the callback's (nvcc -> fatbin)
    assert tvm_callback_cuda_compile(source)[:4] == FATBIN
    stats = asynccomp.tvm.engine().statistics()
    assert (stats.compiled, stats.cache_hits + stats.deduplicated) == (1, 1)


def test_shutdown_stops_prefetched_compiles(private_cache_dir: Path) -> None:
    asynccomp.tvm.prefetch([slow_kernel()])  # many seconds of compiling
    asynccomp.tvm.shutdown()  # returns without waiting for it...
    assert not list(private_cache_dir.rglob("*.entry"))  # ...so nothing was cached
    assert tvm_callback_cuda_compile(scale_kernel())[:4] == ELF  # a fresh engine


def _dump_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


@pytest.mark.parametrize("backend", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
def test_kernel_dump_gives_each_compile_its_own_folder(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "dumps"
    monkeypatch.setenv("TVM_KERNEL_DUMP", str(root))
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", backend)
    source = scale_kernel(3.0)
    barrier = threading.Barrier(2)

    def compile_one(_: int) -> bytearray:
        barrier.wait()  # the same source, twice at once: TVM's fixed names would clash
        return tvm_callback_cuda_compile(source)

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(compile_one, range(2))
    assert first == second
    folders = _dump_folders(root)
    assert len(folders) == 2
    suffix = "cubin" if backend == "nvrtc" else "fatbin"
    for folder in folders:
        assert (folder / "tvm_kernels.cu").is_file()
        assert (folder / f"tvm_kernels.{suffix}").read_bytes() == first
        assert "-lineinfo" in (folder / "command.txt").read_text()
    if backend == "nvcc":  # nvcc's --keep intermediates land in the job's own folder
        assert any(p.suffix == ".ptx" for folder in folders for p in folder.iterdir())
    assert len((root / "manifest.jsonl").read_text().splitlines()) == 2


def test_changing_dump_and_fast_path_keeps_one_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tvm_kernel = (DATA / "vector_add.cu").read_text()
    plain = tvm_callback_cuda_compile(tvm_kernel)
    engine = asynccomp.tvm.engine()
    monkeypatch.setenv("TVM_KERNEL_DUMP", str(tmp_path / "on"))
    fast = tvm_callback_cuda_compile(tvm_kernel)
    monkeypatch.setenv("ASYNCCOMP_TVM_FAST_PATH", "0")
    monkeypatch.setenv("TVM_KERNEL_DUMP", str(tmp_path / "off"))
    exact = tvm_callback_cuda_compile(tvm_kernel)
    monkeypatch.delenv("TVM_KERNEL_DUMP")
    again = tvm_callback_cuda_compile(tvm_kernel)
    assert asynccomp.tvm.engine() is engine  # the settings travel with the jobs
    # Four different compiles (fast path on/off x -lineinfo for the dump or not).
    assert (engine.statistics().submitted, engine.statistics().compiled) == (4, 4)
    assert all(b[:4] == ELF for b in (plain, fast, exact, again))
    assert len({bytes(b) for b in (plain, fast, exact, again)}) == 4
    [on] = _dump_folders(tmp_path / "on")
    [off] = _dump_folders(tmp_path / "off")
    header = "#include <cuda/std/type_traits>"
    assert header not in (on / "tvm_kernels.cu").read_text()  # the fast path's shim
    assert header in (off / "tvm_kernels.cu").read_text()  # TVM's source as is
    assert (off / "tvm_kernels.cubin").read_bytes() == exact


# --------------------------------------------------------------------------- NVSHMEM

NVSHMEM_KERNEL = (
    "#include <nvshmem.h>\n"
    'extern "C" __global__ void my_pe(int* out) { out[0] = nvshmem_my_pe(); }\n'
)


def _nvshmem_found() -> bool:
    from asynccomp.tvm import _nvshmem

    try:
        _nvshmem.find_nvshmem_paths()
    except RuntimeError:
        return False
    return True


def test_nvshmem_missing_gives_tvms_error(monkeypatch: pytest.MonkeyPatch) -> None:
    if _nvshmem_found():
        pytest.skip("NVSHMEM is installed here")
    with pytest.raises(RuntimeError, match=r"^Error: Could not find NVSHMEM installation\."):
        compile_cuda(NVSHMEM_KERNEL)
    with pytest.raises(RuntimeError, match=r"^Error: Could not find NVSHMEM installation\."):
        compile_cuda(NVSHMEM_KERNEL, compiler="nvcc")


@needs_nvcc
def test_nvshmem_source_is_compiled_relocatable_and_linked_with_nvlink() -> None:
    if not _nvshmem_found():
        pytest.skip("NVSHMEM not found (set NVSHMEM_HOME, or pip install nvidia-nvshmem-cu13)")
    job = make_job(NVSHMEM_KERNEL, "fatbin", compiler="nvcc")
    assert job.output == "cubin"  # NVSHMEM forces cubin, as in TVM
    assert list(job.options[-4:-2]) == ["-c", "-rdc=true"]
    cubin = compile_cuda(NVSHMEM_KERNEL, "fatbin", compiler="nvcc")
    assert cubin[:4] == ELF


def test_nvshmem_source_through_nvrtc() -> None:
    if not _nvshmem_found():
        pytest.skip("NVSHMEM not found (set NVSHMEM_HOME, or pip install nvidia-nvshmem-cu13)")
    job = make_job(NVSHMEM_KERNEL, "ptx")
    assert job.output == "cubin" and job.options[3:5] == ("-rdc", "true")
    assert job.source.startswith(_render.NVSHMEM_NVRTC_PREAMBLE + _render.NVRTC_PREAMBLE)
    # The first stage, a relocatable cubin, compiles anywhere; TVM links it through the
    # CUDA driver, which needs a GPU (tests/gpu covers that where NVSHMEM is installed).
    assert asynccomp.tvm.engine().compile(job).unwrap()[:4] == ELF
    if asynccomp.gpu.local_gpu_arch() is None:
        with pytest.raises(RuntimeError, match=r"^Failed to initialize CUDA"):
            compile_cuda(NVSHMEM_KERNEL)


def test_the_facade_says_which_compile_server_it_uses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The facade's server (one per toolkit and server folder, started on first use) is
    named, with its socket, by ``where()`` and in one INFO line as it starts."""
    from asynccomp.server import server_paths

    from .servers import server_folder, server_pid

    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        monkeypatch.setenv("ASYNCCOMP_SERVER", "auto")
        asynccomp.tvm.shutdown()
        with caplog.at_level("INFO", logger="asynccomp.tvm"):
            said = asynccomp.tvm.where()
        paths = server_paths(folder)
        pid = server_pid(paths)
        assert said == f"on the compile server (pid {pid}), socket {paths.socket}"
        assert [r.getMessage() for r in caplog.records if r.name == "asynccomp.tvm"] == [
            f"asynccomp.tvm: compiling {said}"
        ]
        assert asynccomp.tvm.compile_cuda(scale_kernel(), arch="sm_90a")[:4] == ELF
        asynccomp.tvm.shutdown()
    monkeypatch.setenv("ASYNCCOMP_SERVER", "off")
    assert asynccomp.tvm.where() == "in process"
