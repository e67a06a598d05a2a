"""Prove the TVM preamble fast path changes nothing but compile time.

Every kernel of a folder is compiled with NVRTC twice, as TVM 0.27 compiles it (TVM's
own NVRTC source rewrite, then its options, program name ``tvm_kernels.cu``, all from
:func:`asynccomp.tvm.make_job`): once as it is, and once after
:func:`asynccomp.preamble.rewrite_tvm_preamble`. For each kernel the
SASS of both cubins (``cuobjdump -sass``) is compared, as are the cubin bytes and NVRTC's
log (ptxas ``-v`` resource lines and warnings, whose line numbers the rewrite keeps).

Kernels are spread over a pool of ``spawn`` worker processes (NVRTC's front end runs one
program at a time per process, so threads would not help). Each worker first compiles a
small kernel with and without the shim so that neither side pays NVRTC's first-compile
cost, and the two compiles of a kernel alternate their order from kernel to kernel.

    python -m benchmarks.parity.fast_path_sass                       # the built-in examples
    python -m benchmarks.parity.fast_path_sass --corpus DIR --jobs 2 --arch sm_90a

Exit status: 0 when every kernel was rewritten and gave identical SASS, else 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks._corpus import add_corpus_argument, corpus_files

WARMUP_KERNEL = """
#ifdef __CUDACC_RTC__
  #include <cuda/std/cstdint>
  using cuda::std::uint8_t;
  using cuda::std::uint16_t;
  using cuda::std::uint32_t;
  using cuda::std::uint64_t;
  using cuda::std::int8_t;
  using cuda::std::int16_t;
  using cuda::std::int32_t;
  using cuda::std::int64_t;

  #include <cuda/std/type_traits>
  namespace std {
    using cuda::std::is_same;
    using cuda::std::is_same_v;
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::enable_if;
    using cuda::std::conditional;
  }
#endif
extern "C" __global__ void warmup(float* x) { x[threadIdx.x] *= 2.0f; }
"""


def find_cuobjdump() -> str:
    from cuda import pathfinder

    found = pathfinder.find_nvidia_binary_utility("cuobjdump")
    if not found:
        raise SystemExit("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    return str(found)


@dataclass(frozen=True)
class Compiled:
    seconds: float
    cubin: bytes | None
    log: str
    error: str | None


def tvm_compile(
    code: str, arch: str, *, rewrite: bool, extra_options: Sequence[str] = ()
) -> Compiled:
    """Compile ``code`` with NVRTC exactly as TVM 0.27 does (TVM's source rewrite, options
    and program name, from :func:`asynccomp.tvm.make_job`), in this process, timed; with
    ``rewrite``, after the preamble fast path is applied to TVM's source; with
    ``extra_options`` appended to TVM's."""
    from asynccomp.backends import PreparedCompile
    from asynccomp.backends._nvrtc_api import compile_prepared
    from asynccomp.preamble import rewrite_tvm_preamble
    from asynccomp.tvm import make_job

    job = make_job(code, "cubin", arch)
    source = job.source
    if rewrite:
        shimmed = rewrite_tvm_preamble(source)
        if shimmed is None:
            return Compiled(0.0, None, "", "rewrite_tvm_preamble returned None")
        source = shimmed
    prepared = PreparedCompile(
        backend="nvrtc",
        output="cubin",
        arch=arch,
        source=source,
        filename=f"{job.name}.cu",
        options=(*job.options, *extra_options),
    )
    started = time.perf_counter()
    out = compile_prepared(prepared)
    seconds = time.perf_counter() - started
    error = None if out.status == "ok" else f"{out.status}: {out.message}"
    return Compiled(seconds, out.binary, out.log, error)


def timed_tvm_compiles(files: Sequence[Path], arch: str) -> Iterator[tuple[Path, str, float]]:
    """``(path, source, seconds)`` per kernel, compiled one at a time in this process as
    TVM compiles it with the preamble fast path, after one warm-up compile. A kernel that
    does not compile ends the program with its error (SystemExit, status 1)."""
    warmup = tvm_compile(WARMUP_KERNEL, arch, rewrite=True)
    if warmup.error:
        raise SystemExit(f"the warm-up kernel did not compile: {warmup.error}")
    for path in files:
        source = path.read_text()
        compiled = tvm_compile(source, arch, rewrite=True)
        if compiled.error:
            raise SystemExit(f"{path.name}: {compiled.error}")
        yield path, source, compiled.seconds


def sass_of(cubin: bytes, cuobjdump: str) -> str:
    """``cuobjdump -sass`` of a cubin; lines naming the temporary file are normalised."""
    with tempfile.TemporaryDirectory(prefix="sass_identity_") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        out = subprocess.run(
            [cuobjdump, "-sass", str(path)], capture_output=True, text=True, check=True
        ).stdout
    return "\n".join(
        "<file name line>" if str(path) in line or path.name in line else line
        for line in out.splitlines()
    )


@dataclass(frozen=True)
class KernelReport:
    name: str
    size: int
    rewritten: bool
    t_original: float
    t_rewritten: float
    rewrite_ms: float
    sass_identical: bool
    cubin_identical: bool
    log_identical: bool
    gmem_original: int
    gmem_rewritten: int
    error: str | None
    sass_diff: str


_CONFIG: dict[str, object] = {}


def _worker_init(arch: str, cuobjdump: str, warmup: bool) -> None:
    _CONFIG.update(arch=arch, cuobjdump=cuobjdump)
    if warmup:
        for rewrite in (False, True):
            assert tvm_compile(WARMUP_KERNEL, arch, rewrite=rewrite).error is None


_GMEM_RE = re.compile(r"\b(\d+) bytes gmem\b")


def normalised_log(log: str) -> str:
    """NVRTC's log without ptxas' ``Compile time`` lines and with the module's gmem size
    masked (the shim leaves fewer dead ``__device__`` constants than CCCL; see the
    module docstring of asynccomp.preamble). Everything else, diagnostics with their line
    numbers and every per-kernel resource line included, must match."""
    return "\n".join(
        _GMEM_RE.sub("<N> bytes gmem", line)
        for line in log.splitlines()
        if "Compile time =" not in line
    )


def gmem_bytes(log: str) -> int:
    return sum(int(m.group(1)) for m in _GMEM_RE.finditer(log))


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False)):
        if x != y:
            return f"line {i + 1}:\n  original:  {x.strip()}\n  rewritten: {y.strip()}"
    return f"lengths differ ({len(a.splitlines())} vs {len(b.splitlines())} lines)"


def check_kernel(path_str: str, original_first: bool) -> KernelReport:
    from asynccomp.preamble import rewrite_tvm_preamble

    arch = _CONFIG["arch"]
    cuobjdump = _CONFIG["cuobjdump"]
    assert isinstance(arch, str) and isinstance(cuobjdump, str)
    path = Path(path_str)
    code = path.read_text()
    t0 = time.perf_counter()
    for _ in range(20):
        shimmed = rewrite_tvm_preamble(code)
    rewrite_ms = (time.perf_counter() - t0) / 20 * 1e3

    def report(**kw: object) -> KernelReport:
        base: dict[str, object] = {
            "name": path.stem,
            "size": len(code),
            "rewritten": shimmed is not None,
            "t_original": 0.0,
            "t_rewritten": 0.0,
            "rewrite_ms": rewrite_ms,
            "sass_identical": False,
            "cubin_identical": False,
            "log_identical": False,
            "gmem_original": 0,
            "gmem_rewritten": 0,
            "error": None,
            "sass_diff": "",
        }
        base.update(kw)
        return KernelReport(**base)  # type: ignore[arg-type]

    if shimmed is None:
        return report(error="rewrite_tvm_preamble returned None")
    order = ["original", "rewritten"] if original_first else ["rewritten", "original"]
    results = {side: tvm_compile(code, arch, rewrite=side == "rewritten") for side in order}
    orig, new = results["original"], results["rewritten"]
    errors = [f"{side}: {r.error}\n{r.log[-2000:]}" for side, r in results.items() if r.error]
    if errors or orig.cubin is None or new.cubin is None:
        return report(t_original=orig.seconds, t_rewritten=new.seconds, error="\n".join(errors))
    sass_a, sass_b = sass_of(orig.cubin, cuobjdump), sass_of(new.cubin, cuobjdump)
    return report(
        t_original=orig.seconds,
        t_rewritten=new.seconds,
        sass_identical=sass_a == sass_b and bool(sass_a.strip()),
        cubin_identical=orig.cubin == new.cubin,
        log_identical=normalised_log(orig.log) == normalised_log(new.log),
        gmem_original=gmem_bytes(orig.log),
        gmem_rewritten=gmem_bytes(new.log),
        sass_diff="" if sass_a == sass_b else _first_difference(sass_a, sass_b),
    )


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-warmup", action="store_true", help="skip the per-worker warm-up")
    args = parser.parse_args(argv)

    files = corpus_files(args.corpus)
    from asynccomp.tvm import make_job

    options = make_job(WARMUP_KERNEL, "cubin", args.arch).options
    cuobjdump = find_cuobjdump()
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    print(f"corpus: {args.corpus or 'the built-in examples'} ({len(files)} kernels)")
    print(f"NVRTC {major}.{minor}; {args.jobs} spawn worker(s); cuobjdump: {cuobjdump}")
    print("options: " + " ".join(options))
    print()

    wall0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=args.jobs,
        mp_context=ctx,
        initializer=_worker_init,
        initargs=(args.arch, cuobjdump, not args.no_warmup),
    ) as pool:
        # Largest first, so the longest jobs do not end up last.
        by_size = sorted(files, key=lambda f: f.stat().st_size, reverse=True)
        futures = {f: pool.submit(check_kernel, str(f), i % 2 == 0) for i, f in enumerate(by_size)}
        reports = [futures[f].result() for f in files]
    wall = time.perf_counter() - wall0

    header = (
        f"{'kernel':<28} {'KB':>6} {'t_orig s':>9} {'t_shim s':>9} {'speedup':>8} "
        f"{'SASS same':>9} {'cubin same':>10} {'log same*':>9} {'rewrite ms':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in reports:
        speedup = r.t_original / r.t_rewritten if r.t_rewritten > 0 else float("nan")
        print(
            f"{r.name:<28} {r.size / 1024:>6.0f} {r.t_original:>9.3f} {r.t_rewritten:>9.3f} "
            f"{speedup:>7.2f}x {_yes(r.sass_identical):>9} {_yes(r.cubin_identical):>10} "
            f"{_yes(r.log_identical):>9} {r.rewrite_ms:>10.3f}"
        )
        if r.error:
            print(f"    ERROR: {r.error}")
        if r.sass_diff:
            print(f"    first SASS difference at {r.sass_diff}")

    ok = [r for r in reports if r.error is None]
    speedups = [r.t_original / r.t_rewritten for r in ok if r.t_rewritten > 0]
    t_orig = sum(r.t_original for r in ok)
    t_new = sum(r.t_rewritten for r in ok)
    biggest = max(reports, key=lambda r: r.size)
    print()
    print("summary")
    print(f"  kernels:                 {len(reports)} ({len(ok)} compiled on both sides)")
    print(f"  rewritten:               {sum(r.rewritten for r in reports)}/{len(reports)}")
    print(f"  SASS identical:          {sum(r.sass_identical for r in reports)}/{len(reports)}")
    print(f"  cubin bytes identical:   {sum(r.cubin_identical for r in reports)}/{len(reports)}")
    print(
        f"  NVRTC log identical*:    {sum(r.log_identical for r in reports)}/{len(reports)}"
        "  (* ignoring ptxas' compile time and the module's gmem size)"
    )
    print(
        f"  module gmem (dead __device__ constants), median: original "
        f"{statistics.median(r.gmem_original for r in ok) if ok else 0:.0f} B, rewritten "
        f"{statistics.median(r.gmem_rewritten for r in ok) if ok else 0:.0f} B"
    )
    if speedups:
        print(
            f"  NVRTC time, sum:         original {t_orig:.2f} s, rewritten {t_new:.2f} s "
            f"({t_orig / t_new:.2f}x)"
        )
        print(
            f"  per-kernel speedup:      median {statistics.median(speedups):.2f}x, "
            f"min {min(speedups):.2f}x, max {max(speedups):.2f}x, "
            f"geomean {statistics.geometric_mean(speedups):.2f}x"
        )
        print(
            f"  median time per kernel:  original "
            f"{statistics.median(r.t_original for r in ok):.3f} s, rewritten "
            f"{statistics.median(r.t_rewritten for r in ok):.3f} s"
        )
    print(
        f"  rewrite time:            largest file {biggest.name} ({biggest.size / 1024:.0f} KB)"
        f" {biggest.rewrite_ms:.3f} ms; max over corpus "
        f"{max(r.rewrite_ms for r in reports):.3f} ms"
    )
    print(f"  wall time:               {wall:.1f} s with {args.jobs} worker(s), incl. warm-up")
    all_good = all(r.rewritten and r.sass_identical for r in reports)
    print(f"  RESULT:                  {'PASS' if all_good else 'FAIL'}")
    return 0 if all_good else 1


if __name__ == "__main__":
    sys.exit(main())
