"""asynccomp.ptxas against real ptxas reports from NVRTC and nvcc, plus captured samples.

Numbers asserted exactly are the ones the source fixes (static shared memory sizes,
kernel parameter sizes); the ones ptxas decides (register counts, spill bytes) are
checked against bounds or against ptxas' own warnings about the same function.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from asynccomp.ptxas import (
    KernelResources,
    parse_resource_report,
    parse_resource_report_by_arch,
)

from .nvrtc_flags import without_nvrtc_cache

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings (NVRTC) not installed")


# --- helpers -------------------------------------------------------------------------------


def _check(result: object) -> None:
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC call failed: {result}")


def nvrtc_compile(
    source: str, options: list[str], names: Sequence[str] = ()
) -> tuple[bytes, dict[str, str]]:
    """Compile with real NVRTC; return the raw program log and lowered (mangled) names.
    NVRTC's own cache stays out of it: a hit there has no ptxas report."""
    options = without_nvrtc_cache(options)
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"test_ptxas.cu", 0, [], [])
    _check(err)
    try:
        for name in names:
            _check(nvrtc.nvrtcAddNameExpression(prog, name.encode())[0])
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(err)
        log = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, log)[0])
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"compile failed: {result}\n{log.decode(errors='replace')}")
        lowered = {}
        for name in names:
            err, low = nvrtc.nvrtcGetLoweredName(prog, name.encode())
            _check(err)
            lowered[name] = low.decode()
        return log, lowered
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def find_nvcc() -> Path | None:
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    return default if default.is_file() else None


NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(
    NVCC is None, reason="nvcc not found on PATH or at /usr/local/cuda/bin/nvcc"
)


def nvcc_stderr(args: list[str], cwd: Path) -> str:
    assert NVCC is not None
    proc = subprocess.run(
        [str(NVCC), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


# --- kernels -------------------------------------------------------------------------------

KERNELS = r"""
__constant__ float table[100];

__device__ __noinline__ float pick(const float* p, int i) {
  float a[16];
  for (int j = 0; j < 16; j++) a[j] = p[j] * j;
  return a[i & 15];
}

template <typename T, int N>
__global__ void tiled(T* out) {
  __shared__ T s[N];
  s[threadIdx.x] = out[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[N - 1 - threadIdx.x];
}
template __global__ void tiled<float, 256>(float*);
template __global__ void tiled<double, 64>(double*);

extern "C" __global__ void smem256(float* o) {
  __shared__ float s[256];
  s[threadIdx.x] = o[threadIdx.x];
  __syncthreads();
  o[threadIdx.x] = s[255 - threadIdx.x];
}

// A 64-float array written at a run-time index cannot live in registers.
extern "C" __global__ void local64(const float* in, float* out, int i, int n) {
  float a[64];
  for (int j = 0; j < 64; j++) a[j] = in[j];
  a[i & 63] += 1.0f;
  float s = 0.f;
  for (int j = 0; j < n; j++) s += a[(j * 5) & 63];
  out[threadIdx.x] = s;
}

extern "C" __global__ void calls(float* o, int i) { o[0] = pick(o, i) + table[i & 63]; }

extern "C" __global__ void params8(float* o) { o[0] = 1.0f; }
extern "C" __global__ void params24(float* o, int i, double d) { o[i] = (float)d; }
"""

# 48 live accumulators chained across a run-time loop: far more than 32 registers.
SPILLER = r"""
extern "C" __global__ void spiller(const float* __restrict__ in, float* out, int n) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; i++) acc[i] = in[threadIdx.x + i * 1024];
  for (int it = 0; it < n; it++) {
#pragma unroll
    for (int i = 0; i < 48; i++) acc[i] = acc[i] * acc[(i + 7) % 48] + in[it + i];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 48; i++) s += acc[i] * (i + 1);
  out[threadIdx.x] = s;
}
"""

TEMPLATE_NAMES = ["tiled<float, 256>", "tiled<double, 64>"]
ENTRIES = {"smem256", "local64", "calls", "params8", "params24"}


@pytest.fixture(scope="module", params=["sm_80", "sm_90a"])
def nvrtc_report(request: pytest.FixtureRequest) -> tuple[str, bytes, dict[str, str]]:
    arch = request.param
    log, lowered = nvrtc_compile(
        KERNELS, [f"--gpu-architecture={arch}", "--ptxas-options=-v"], TEMPLATE_NAMES
    )
    return arch, log, lowered


@pytest.fixture(scope="module")
def spill_log() -> bytes:
    opts = [
        "--gpu-architecture=sm_90a",
        "--maxrregcount=32",
        "--ptxas-options=-v",
        "--ptxas-options=--warn-on-spills",
        "--ptxas-options=--warn-on-local-memory-usage",
    ]
    return nvrtc_compile(SPILLER, opts)[0]


# --- NVRTC ---------------------------------------------------------------------------------


def test_nvrtc_entries_names_and_arch(nvrtc_report: tuple[str, bytes, dict[str, str]]) -> None:
    arch, log, lowered = nvrtc_report
    assert log.endswith(b"\x00")  # NVRTC's log really carries its NUL; parse it raw
    res = parse_resource_report(log)
    mangled = {lowered[n] for n in TEMPLATE_NAMES}
    assert all(m.startswith("_Z") for m in mangled)
    entries = {name for name, r in res.items() if r.entry}
    assert entries == ENTRIES | mangled
    assert all(res[name].arch == arch for name in res)
    assert all(res[name].registers > 0 for name in entries)
    assert parse_resource_report(log.decode()) == res


def test_nvrtc_static_shared_memory(nvrtc_report: tuple[str, bytes, dict[str, str]]) -> None:
    _, log, lowered = nvrtc_report
    res = parse_resource_report(log)
    assert res["smem256"].shared_memory == 256 * 4
    assert res["smem256"].barriers == 1  # __syncthreads uses barrier 0
    assert res[lowered["tiled<float, 256>"]].shared_memory == 256 * 4
    assert res[lowered["tiled<double, 64>"]].shared_memory == 64 * 8
    assert res["params8"].shared_memory == 0  # ptxas omits "0 bytes smem"
    assert res["params8"].barriers == 0


def test_nvrtc_local_array_goes_to_stack(nvrtc_report: tuple[str, bytes, dict[str, str]]) -> None:
    res = parse_resource_report(nvrtc_report[1])
    local = res["local64"]
    assert local.stack_frame >= 64 * 4
    assert local.cumulative_stack >= local.stack_frame
    assert res["params8"].stack_frame == 0


def test_nvrtc_device_function_reported(nvrtc_report: tuple[str, bytes, dict[str, str]]) -> None:
    res = parse_resource_report(nvrtc_report[1])
    pick = res["_Z4pickPKfi"]  # the __noinline__ device function's own block
    assert not pick.entry
    assert pick.registers == 0  # ptxas prints no "Used" line for device functions
    assert res["calls"].entry


def test_nvrtc_constant_bank_holds_parameters(
    nvrtc_report: tuple[str, bytes, dict[str, str]],
) -> None:
    arch, log, _ = nvrtc_report
    res = parse_resource_report(log)
    if arch == "sm_80":
        # cmem[0] is the driver's bank: a fixed header, then the kernel parameters.
        # (float*) is 8 bytes; (float*, int, double) is 8 + 4 + 4 padding + 8 = 24.
        assert res["params8"].constant_memory > 0
        assert res["params24"].constant_memory - res["params8"].constant_memory == 16
    else:
        # ptxas prints no cmem for sm_90+, so there is nothing to account.
        assert b"cmem" not in log
        assert all(r.constant_memory == 0 for r in res.values())


def test_nvrtc_spills_match_ptxas_warning(spill_log: bytes) -> None:
    res = parse_resource_report(spill_log)
    spiller = res["spiller"]
    assert spiller.registers <= 32
    assert spiller.spill_stores > 0
    assert spiller.spill_loads > 0
    assert spiller.stack_frame >= spiller.spill_stores // 2
    # The warnings come before the report block and repeat its numbers.
    text = spill_log.decode()
    m = re.search(
        r"Registers are spilled to local memory in function 'spiller', "
        r"(\d+) bytes spill stores, (\d+) bytes spill loads",
        text,
    )
    assert m is not None, text
    assert (spiller.spill_stores, spiller.spill_loads) == (int(m[1]), int(m[2]))
    m = re.search(r"Local memory used for function 'spiller', size of stack frame: (\d+)", text)
    assert m is not None, text
    assert spiller.stack_frame == int(m[1])


def test_nvrtc_debug_build_device_function_before_entry() -> None:
    # With -G ptxas reports the device function before any entry of the run;
    # it still gets the run's architecture.
    log, _ = nvrtc_compile(KERNELS, ["--gpu-architecture=sm_90a", "--ptxas-options=-v", "-G"])
    first = re.search(rb"(Function properties for|Compiling entry function) (\S+)", log)
    assert first is not None and first[1] == b"Function properties for", log
    res = parse_resource_report(log)
    assert res["_Z4pickPKfi"].arch == "sm_90a"
    assert not res["_Z4pickPKfi"].entry
    assert set(res) >= ENTRIES


# --- nvcc ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvcc_multiarch(tmp_path_factory: pytest.TempPathFactory) -> str:
    work = tmp_path_factory.mktemp("nvcc")
    (work / "k.cu").write_text(KERNELS + SPILLER)
    # -fatbin: device code only, no host compiler; sm_90a deliberately comes first.
    return nvcc_stderr(
        [
            "-fatbin",
            "k.cu",
            "-o",
            "k.fatbin",
            "--maxrregcount=32",
            "-Xptxas",
            "-v,-warn-spills,-warn-lmem-usage",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
            "-gencode",
            "arch=compute_80,code=sm_80",
        ],
        work,
    )


@needs_nvcc
def test_nvcc_multiarch_highest_wins(nvcc_multiarch: str) -> None:
    log = nvcc_multiarch
    assert "for 'sm_80'" in log and "for 'sm_90a'" in log
    # nvcc indents the stack frame line instead of NVRTC's "ptxas         ." prefix.
    assert re.search(r"^ +\d+ bytes stack frame", log, re.MULTILINE)
    res = parse_resource_report(log)
    assert {r.arch for r in res.values()} == {"sm_90a"}
    assert ENTRIES | {"spiller", "_Z4pickPKfi"} <= set(res)
    assert res["smem256"].shared_memory == 1024
    assert res["_Z5tiledIdLi64EEvPT_"].shared_memory == 512


@needs_nvcc
def test_nvcc_by_arch_keeps_both(nvcc_multiarch: str) -> None:
    by_arch = parse_resource_report_by_arch(nvcc_multiarch)
    assert set(by_arch) == {"sm_80", "sm_90a"}
    for arch, res in by_arch.items():
        assert res["smem256"].shared_memory == 1024, arch
        assert res["smem256"].arch == arch
        assert res["spiller"].registers <= 32
        assert res["spiller"].spill_stores > 0
        assert res["_Z4pickPKfi"].arch == arch
    # Only sm_80 lists the parameter bank.
    assert by_arch["sm_80"]["params24"].constant_memory > 0
    assert by_arch["sm_90a"]["params24"].constant_memory == 0


@needs_nvcc
def test_nvcc_spill_warnings_interleaved(nvcc_multiarch: str) -> None:
    log = nvcc_multiarch
    warned = re.findall(
        r"ptxas warning : Registers are spilled to local memory in function 'spiller', "
        r"(\d+) bytes spill stores, (\d+) bytes spill loads",
        log,
    )
    by_arch = parse_resource_report_by_arch(log)
    # One warning per ptxas run, in -gencode order (sm_90a first here).
    got = [
        (by_arch[a]["spiller"].spill_stores, by_arch[a]["spiller"].spill_loads)
        for a in ("sm_90a", "sm_80")
    ]
    assert [(int(s), int(ld)) for s, ld in warned] == got


@needs_nvcc
def test_nvcc_rdc_then_nvlink_report(tmp_path: Path) -> None:
    assert NVCC is not None
    nvlink = NVCC.parent / "nvlink"
    if not nvlink.is_file():
        pytest.skip(f"nvlink not next to {NVCC}")
    (tmp_path / "k.cu").write_text(KERNELS)
    ptxas_log = nvcc_stderr(
        ["-cubin", "-rdc=true", "-arch=sm_80", "k.cu", "-o", "k.cubin", "-Xptxas", "-v"],
        tmp_path,
    )
    proc = subprocess.run(
        [str(nvlink), "-arch=sm_80", "-v", "k.cubin", "-o", "linked.cubin"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "nvlink info    : Function properties for 'calls':" in proc.stderr
    before = parse_resource_report(ptxas_log)
    after = parse_resource_report(ptxas_log + proc.stderr)
    assert set(after) == set(before)
    calls = after["calls"]
    assert calls.arch == "sm_80"
    # The linker accounts for the callee in another function: more registers, its stack.
    assert calls.registers >= before["calls"].registers
    assert calls.cumulative_stack >= before["_Z4pickPKfi"].stack_frame > 0
    assert calls.spill_stores == before["calls"].spill_stores  # nvlink says nothing of spills
    assert after["smem256"].shared_memory == 1024
    linker_only = parse_resource_report(proc.stderr)
    assert linker_only["calls"].arch is None
    assert linker_only["calls"].registers == calls.registers


# --- captured samples ----------------------------------------------------------------------

NVRTC_SAMPLE = (
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
    "ptxas info    : Function properties for k\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem\n"
    "ptxas info    : Compile time = 2.023 ms\n\x00"
)

# nvcc 13.0, two -gencode targets, spills and warnings (trimmed).
NVCC_SAMPLE = """\
ptxas warning : Registers are spilled to local memory in function 'spill', 336 bytes spill stores, 360 bytes spill loads
ptxas info    : 8 bytes gmem, 400 bytes cmem[3], 8 bytes cmem[4]
ptxas info    : Compiling entry function '_Z3fooILi4EEvPf' for 'sm_80'
ptxas info    : Function properties for _Z3fooILi4EEvPf
    128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 128 bytes cumulative stack size, 1024 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 2.345 ms
ptxas info    : Function properties for _Z3barf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spill' for 'sm_80'
ptxas info    : Function properties for spill
    176 bytes stack frame, 336 bytes spill stores, 360 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 176 bytes cumulative stack size, 372 bytes cmem[0]
ptxas info    : Compile time = 17.889 ms
ptxas warning : Registers are spilled to local memory in function 'spill', 320 bytes spill stores, 332 bytes spill loads
ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function '_Z3fooILi4EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z3fooILi4EEvPf
    128 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 128 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 3.896 ms
ptxas info    : Function properties for _Z3barf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'spill' for 'sm_90a'
ptxas info    : Function properties for spill
    160 bytes stack frame, 320 bytes spill stores, 332 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 160 bytes cumulative stack size
ptxas info    : Compile time = 14.967 ms
"""  # noqa: E501 (verbatim ptxas lines)


def test_sample_nvrtc_exact() -> None:
    res = parse_resource_report(NVRTC_SAMPLE)
    assert res == {
        "k": KernelResources(
            registers=10,
            spill_stores=0,
            spill_loads=0,
            shared_memory=1024,
            stack_frame=0,
            constant_memory=0,
            barriers=1,
            arch="sm_90a",
        )
    }
    assert res["k"].to_dict() == {
        "registers": 10,
        "spill_stores": 0,
        "spill_loads": 0,
        "shared_memory": 1024,
        "stack_frame": 0,
        "constant_memory": 0,
        "barriers": 1,
        "local_memory": 0,
        "arch": "sm_90a",
        "cumulative_stack": 0,
        "entry": True,
    }
    with pytest.raises(FrozenInstanceError):
        res["k"].registers = 1  # type: ignore[misc]


def test_sample_multiarch_and_warnings() -> None:
    res = parse_resource_report(NVCC_SAMPLE)
    assert list(res) == ["_Z3fooILi4EEvPf", "_Z3barf", "spill"]
    foo = res["_Z3fooILi4EEvPf"]
    assert (foo.arch, foo.registers, foo.stack_frame, foo.cumulative_stack) == (
        "sm_90a",
        30,
        128,
        128,
    )
    assert res["spill"].to_dict()["spill_stores"] == 320
    assert res["_Z3barf"].arch == "sm_90a" and not res["_Z3barf"].entry
    by_arch = parse_resource_report_by_arch(NVCC_SAMPLE)
    sm80 = by_arch["sm_80"]
    assert (sm80["spill"].spill_stores, sm80["spill"].spill_loads) == (336, 360)
    assert sm80["spill"].constant_memory == 372  # module-wide cmem[3] is not a function's
    assert sm80["_Z3fooILi4EEvPf"].constant_memory == 360


def test_sample_highest_arch_wins_regardless_of_order() -> None:
    # Each ptxas run starts with its "N bytes gmem" line; put the sm_90a run first.
    gmem = "ptxas info    : 8 bytes gmem"
    warning, sm80, sm90a = NVCC_SAMPLE.replace(gmem, "\x01" + gmem).split("\x01")
    assert "sm_80" in sm80 and "sm_80" not in sm90a
    swapped = warning + sm90a + sm80
    assert parse_resource_report(swapped) == parse_resource_report(NVCC_SAMPLE)


def test_sample_windows_line_endings_prefix_and_nul() -> None:
    # MSBuild prefixes every line with "1>  " and uses CRLF.
    crlf = "".join(f"1>  {line}\r\n" for line in NVCC_SAMPLE.splitlines())
    assert parse_resource_report(crlf + "\x00\x00") == parse_resource_report(NVCC_SAMPLE)
    assert parse_resource_report(NVCC_SAMPLE.encode()) == parse_resource_report(NVCC_SAMPLE)


def test_sample_nul_before_error() -> None:
    # NVRTC, sm_80, a kernel with too much static shared memory: ptxas' report, a
    # NUL, then the error about the same function.
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'toobig' for 'sm_80'\n"
        "ptxas info    : Function properties for toobig\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 10 registers, used 1 barriers, 280000 bytes smem, "
        "360 bytes cmem[0]\n"
        "ptxas info    : Compile time = 1.407 ms\n"
        "\x00ptxas error   : Entry function 'toobig' uses too much shared data "
        "(0x445c0 bytes, 0xc000 max)\n\x00\x00"
    )
    res = parse_resource_report(log)
    assert res["toobig"].shared_memory == 280000
    assert res["toobig"].constant_memory == 360


def test_sample_old_ptxas_formats() -> None:
    # CUDA 3-11 era: demangled names, several cmem banks, "a+b bytes" pairs,
    # textures, no barriers, an entry with no target and no properties block.
    log = (
        "ptxas info    : Compiling entry function 'acos_main'\n"
        "ptxas info    : Used 4 registers, 60+56 bytes lmem, 44+40 bytes smem, "
        "20 bytes cmem[1], 12 bytes cmem[14]\n"
        "ptxas info    : Compiling entry function 'searchkernel(float*, int)' for 'sm_20'\n"
        "ptxas info    : Function properties for searchkernel(float*, int)\n"
        "    72 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 46 registers, 176 bytes cmem[0], 16 bytes cmem[14]\n"
        "ptxas info    : Compiling entry function '_Z4texkPf' for 'sm_80'\n"
        "ptxas info    : Function properties for _Z4texkPf\n"
        "    160 bytes stack frame, 384 bytes spill stores, 384 bytes spill loads\n"
        "ptxas info    : Used 64 registers, 372 bytes cmem[0], 1 textures\n"
    )
    res = parse_resource_report(log)
    search = res["searchkernel(float*, int)"]
    assert (search.registers, search.stack_frame, search.constant_memory) == (46, 72, 192)
    assert search.arch == "sm_20"
    acos = res["acos_main"]
    assert (acos.local_memory, acos.shared_memory, acos.constant_memory) == (116, 84, 32)
    assert acos.arch is None and acos.entry
    assert res["_Z4texkPf"].spill_loads == 384


def test_sample_nvlink_and_jit_link_info_log() -> None:
    # cuLink / nvJitLink info logs carry nvlink's format without the "nvlink" prefix.
    log = (
        "info    : 0 bytes gmem\n"
        "info    : Function properties for 'bcht_insert':\n"
        "info    : used 28 registers, 0 stack, 0 bytes smem, 412 bytes cmem[0], 8 bytes lmem\n"
    )
    r = parse_resource_report(log)["bcht_insert"]
    assert (r.registers, r.constant_memory, r.local_memory, r.arch) == (28, 412, 8, None)


def test_missing_fields_default_to_zero() -> None:
    log = "ptxas info    : Compiling entry function 'lonely' for 'sm_90a'\n"
    r = parse_resource_report(log)["lonely"]
    assert r == KernelResources(0, 0, 0, 0, 0, 0, 0, arch="sm_90a")


@pytest.mark.parametrize(
    "log",
    [
        "",
        "\x00",
        b"",
        b"\xff\xfe\x00garbage",
        "nvcc fatal   : Unsupported gpu architecture 'compute_10'\n",
        'k.cu(2): error: identifier "undefined_identifier_42" is undefined\n',
        "ptxas info    : Used 10 registers\n",  # no function to attach it to
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
        "ptxas info    : 0 bytes gmem\n",
    ],
)
def test_no_report_gives_empty(log: str | bytes) -> None:
    assert parse_resource_report(log) == {}
    assert parse_resource_report_by_arch(log) == {}


def test_weird_input_never_raises() -> None:
    rng = random.Random(1234)
    pieces = [*NVCC_SAMPLE.splitlines(keepends=True), *NVRTC_SAMPLE.splitlines(keepends=True)]
    junk = ["\x00", "\r", "'", ":", "9" * 5000, " for ", "\u2019", "Used ", "cmem[", "+"]
    for _ in range(300):
        chosen = rng.choices(pieces, k=rng.randint(0, 20))
        text = "".join(chosen)
        for _ in range(rng.randint(0, 5)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(junk) + text[at + rng.randint(0, 3) :]
        for result in parse_resource_report(text).values():
            assert isinstance(result, KernelResources)
        parse_resource_report_by_arch(text.encode("utf-8", errors="replace"))
    assert parse_resource_report(None) == {}  # type: ignore[arg-type]
