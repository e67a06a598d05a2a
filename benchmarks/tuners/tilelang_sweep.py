"""A TileLang matmul autotune's compile phase: TileLang's own compile vs asynccomp's.

    python -m benchmarks.tuners.tilelang_sweep [--configs 64] [--modes ...] [--group 4]
        [--passes 2] [--size 1024] [--entry from_kernel|decorator] [--server] [--no-gpu]
        [--json OUT]

64 configurations of TileLang's classic fp16 matmul (fp32 accumulate): block_M, block_N
in {64, 128}, block_K in {32, 64}, num_stages in {2, 3}, threads in {128, 256},
rasterization on/off. Each mode runs TileLang's own ``AutoTuner.run()`` over them
(``--entry decorator``: the same kernels through ``@tilelang.autotune`` over
``@tilelang.jit``, whose compiles TileLang runs under one lock), with
its benchmarking replaced by a stub that records each compiled kernel, so the wall time
is the compile phase alone (lowering + the compile callback), with TileLang's own
threads (``int(0.9 * CPUs)`` compile workers; ``--threads N`` sets them, at most the
CPUs, for every mode):

- ``tilelang``: TileLang's own callback (nvcc, one process per kernel);
- ``tilelang-grouped``: ``run(enable_grouped_compile=True, group_compile_size=G)``: G
  kernels merged into one source, one nvcc run each;
- ``asynccomp-nvcc``: ``asynccomp.tilelang.register()``: TileLang's nvcc command line on
  asynccomp's engine (same SASS, checked below);
- ``asynccomp-nvrtc``: ``register(backend="nvrtc", pch=True)``: NVRTC worker processes
  that keep a precompiled header of TileLang's headers (another compiler: other SASS);
- ``asynccomp-nvrtc-nopch``: the same without the PCH (not in the default list);
- ``asynccomp-nvcc-grouped``, ``asynccomp-nvrtc-grouped``, ``asynccomp-nvrtc-nopch-grouped``
  (not in the default list): TileLang's grouped compile with ``register()``;
- ``asynccomp-nvcc-inprocess``, ``asynccomp-nvrtc-inprocess`` (not in the default list):
  ``register(lower_in_workers=False)``, TileLang's own threads lowering in this process
  (every other asynccomp mode lowers in worker processes, ``register()``'s default);
- ``lowering-only``: a callback that answers at once with the binary an earlier mode
  built for that source: TileLang's own lowering and bookkeeping, the floor of the
  compile phase whatever compiles (it runs last).

TileLang's caches are off and asynccomp's cache starts empty (a fresh folder, the engine
restarted) for every mode, so every kernel is compiled. Each mode runs ``--passes``
autotunes back to back, the way a tuning session tunes one operator after another: the
first pass of an asynccomp mode starts its engine's workers cold (and, with the PCH,
makes one precompiled header in each), later passes find them warm. Every pass after the
first appends a comment to each source, so it compiles new sources (no cache of
asynccomp's or NVRTC's answers) and TileLang's own modes do the same work again.
asynccomp's engine runs in this process (``--server``: on the compile server, started if
none runs; warm for later modes), with one NVRTC worker / nvcc slot per CPU.

Each mode's line gives its sources' digest and its best config (a stub "latency" made
from each kernel's function, so the same functions give the same best config): compare
them between runs of one mode per process, the fair measurement. Checked after the
timing: every kernel's source is the same in every mode (lowering does not depend on
the compiler or the process; grouped modes with grouped modes), and ``cuobjdump -sass``
of asynccomp's nvcc binary equals TileLang's for each (the NVRTC one is counted, not
expected). With a GPU (unless
``--no-gpu``), every kernel of every mode runs through TileLang on the same inputs and is
compared with torch (``relu(A @ B)`` in fp32, then fp16; atol=rtol=1e-2), and each
asynccomp kernel's output with TileLang's own for the same configuration (bitwise: ``equal``).

The JSON (``--json``) holds one object per mode plus the checks; the text summary one
line per mode.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TILELANG_DISABLE_CACHE", "1")
os.environ.setdefault("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")


def _register_early(argv: list[str]) -> float:
    """``--register-early``: ``asynccomp.tilelang.register()`` for the first of
    ``--modes`` (an asynccomp one) as the program starts, before its ``import tilelang``,
    as the TileLang guide tells users to; its engine and cache settings as ``run_mode``
    makes them. When it was called (``time.perf_counter()``)."""
    started = time.perf_counter()
    mode = argv[argv.index("--modes") + 1].split(",")[0] if "--modes" in argv else ""
    if not mode.startswith("asynccomp") or "inprocess" in mode:
        sys.exit(f"--register-early: the first of --modes must be an asynccomp mode, not {mode!r}")
    os.environ["ASYNCCOMP_SERVER"] = "auto" if "--server" in argv else "off"
    os.environ["ASYNCCOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl-sweep-cache-")
    _register(mode, argv[argv.index("--arch") + 1] if "--arch" in argv else "sm_90a")
    return started


def _register(mode: str, arch: str) -> None:
    """``asynccomp.tilelang.register()`` as asynccomp ``mode`` asks: for the GPU's target
    (TileLang's "auto", a user's default) where there is a GPU, else for ``arch``."""
    import asynccomp.tilelang as atl

    atl.register(
        backend="nvcc" if mode.startswith("asynccomp-nvcc") else "nvrtc",
        pch="nopch" not in mode,
        lower_in_workers="inprocess" not in mode,
        target="auto" if shutil.which("nvidia-smi") else {"kind": "cuda", "arch": arch},
    )


#: When ``--register-early`` registered (``None``: each mode registers as it starts).
REGISTERED_AT = (
    _register_early(sys.argv) if __name__ == "__main__" and "--register-early" in sys.argv else None
)

import tilelang.language as T  # noqa: E402 - after an early register(), as a user's would be

#: When this process had imported TileLang (its own import, after any early register()).
IMPORTED_AT = time.perf_counter()

MODES = ("tilelang", "tilelang-grouped", "asynccomp-nvcc", "asynccomp-nvrtc", "lowering-only")
ALL_MODES = (
    *MODES,
    "asynccomp-nvrtc-nopch",
    "asynccomp-nvcc-grouped",
    "asynccomp-nvrtc-grouped",
    "asynccomp-nvrtc-nopch-grouped",
    "asynccomp-nvcc-inprocess",
    "asynccomp-nvrtc-inprocess",
)
#: The modes run_mode() ran in this process, in order.
RUN_MODES: list[str] = []
#: What "lowering-only" answers with: each kernel's binary from an earlier mode, by source.
EARLIER: dict[str, bytes] = {}
CONFIGS = [
    {"block_M": m, "block_N": n, "block_K": k, "num_stages": s, "threads": t, "raster": r}
    for m, n, k, s, t, r in itertools.product(
        [64, 128], [64, 128], [32, 64], [2, 3], [128, 256], [False, True]
    )
]


def program(
    size: int, block_M: int, block_N: int, block_K: int, num_stages: int, threads: int, raster: bool
) -> Any:
    """One configuration's ``PrimFunc``: ``relu(A @ B)``, fp16 in and out, fp32 accumulate."""
    dtype, accum = "float16", "float32"

    @T.prim_func  # type: ignore[untyped-decorator]
    def main(  # type: ignore[no-untyped-def]
        A: T.Tensor((size, size), dtype),  # type: ignore[valid-type]
        B: T.Tensor((size, size), dtype),  # type: ignore[valid-type]
        C: T.Tensor((size, size), dtype),  # type: ignore[valid-type]
    ):
        with T.Kernel(T.ceildiv(size, block_N), T.ceildiv(size, block_M), threads=threads) as (
            bx,
            by,
        ):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum)
            T.use_swizzle(panel_size=10, enable=raster)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(size, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul(size: int) -> Any:
    """The autotuner's kernel function (TileLang checks that its closure holds plain values
    only, so ``program`` is a global)."""

    def kernel(
        block_M: int = 128,
        block_N: int = 128,
        block_K: int = 32,
        num_stages: int = 2,
        threads: int = 128,
        raster: bool = False,
    ) -> Any:
        return program(size, block_M, block_N, block_K, num_stages, threads, raster)

    return kernel


def decorated(
    size: int, configs: list[dict[str, Any]], arch: str, grouped: bool, group: int
) -> Any:
    """The same kernels through ``@tilelang.autotune`` over ``@tilelang.jit`` (lazy mode),
    what TileLang's examples do; ``kernel()`` runs the autotune."""
    import tilelang

    @tilelang.autotune(  # type: ignore[untyped-decorator]
        configs=configs, warmup=1, rep=1, timeout=0, skip_check=True
    )
    @tilelang.jit(out_idx=[-1], target={"kind": "cuda", "arch": arch})  # type: ignore[untyped-decorator]
    def kernel(
        block_M: int = 128,
        block_N: int = 128,
        block_K: int = 32,
        num_stages: int = 2,
        threads: int = 128,
        raster: bool = False,
    ) -> Any:
        return program(size, block_M, block_N, block_K, num_stages, threads, raster)

    # The decorator has no grouped-compile argument: its tuner's run() is given one.
    if grouped:
        make = kernel.get_tunner

        def get_tunner() -> Any:
            tuner = make()
            run = tuner.run
            tuner.run = lambda *a, **k: run(
                *a, **k, enable_grouped_compile=True, group_compile_size=group
            )
            return tuner

        kernel.get_tunner = get_tunner
    return kernel


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Recorder:
    """Wraps whichever compile callback a mode uses: each call's time, thread, source
    and binary."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.binaries: dict[str, bytes] = {}
        self.t0 = time.perf_counter()
        # Appended to every source from the second pass on: the same kernels, but new
        # sources, so no cache (asynccomp's, NVRTC's own) answers a later pass.
        self.suffix = ""

    def __call__(self, code: str, target: Any, pass_config: Any = None) -> Any:
        start = time.perf_counter()
        error = None
        try:
            out = self.inner(code + self.suffix, target, pass_config)
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc)[-300:]}"
            raise
        finally:
            end = time.perf_counter()
            with self.lock:
                self.calls.append(
                    {
                        "start": start - self.t0,
                        "end": end - self.t0,
                        "thread": threading.current_thread().name,
                        "kernels": max(1, code.count("__global__") // 2),
                        "error": error,
                    }
                )
        with self.lock:
            self.binaries[digest(code)] = bytes(out)
        return out


def run_mode(
    mode: str, args: argparse.Namespace, kernel: Any, configs: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, bytes]]:
    import tilelang  # noqa: F401
    import tvm_ffi
    from tilelang.autotuner import AutoTuner
    from tilelang.cuda.backend import tilelang_callback_cuda_compile as own

    import asynccomp.tilelang as atl

    early = REGISTERED_AT is not None and not RUN_MODES
    if not early:  # (the early register()'s engine and cache are this mode's)
        atl.shutdown()  # a fresh engine and an empty cache for each mode
        os.environ["ASYNCCOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl-sweep-cache-")
    cache = os.environ["ASYNCCOMP_CACHE_DIR"]
    RUN_MODES.append(mode)
    if mode.startswith("asynccomp"):
        _register(mode, args.arch)
        recorder = Recorder(atl.tilelang_callback_cuda_compile)
    elif mode == "lowering-only":
        atl.unregister()

        def answer(code: str, target: Any, pass_config: Any = None) -> bytes:
            return EARLIER[digest(code.split("\n// sweep pass ")[0])]

        recorder = Recorder(answer)
    else:
        atl.unregister()
        recorder = Recorder(own)
    tvm_ffi.register_global_func("tilelang_callback_cuda_compile", recorder, override=True)

    kernels: dict[str, Any] = {}
    grouped = mode.endswith("grouped")

    def record(self: Any, jit_kernel: Any, *rest: Any, **kw: Any) -> tuple[float, None]:
        from tvm import ir

        key = digest(jit_kernel.get_kernel_source())
        if key in kernels:  # grouped: every kernel of a group has the group's source
            key = f"{key}-{len(kernels)}"
        kernels[key] = jit_kernel
        # A "latency" of the kernel's function itself, the same in every mode that builds
        # the same function: the best configuration must then be the same too.
        return 1.0 + ir.structural_hash(jit_kernel.prim_func) % 1_000_003 / 1000.0, None

    original = AutoTuner._benchmark_target
    AutoTuner._benchmark_target = record
    walls: list[float] = []
    rows: list[dict[str, Any]] = []
    best: list[dict[str, Any] | None] = []
    watch = None
    first_start = None
    try:
        for number in range(args.passes):
            kernels.clear()
            recorder.calls = []
            recorder.suffix = f"\n// sweep pass {number}\n" if number else ""
            t0 = time.perf_counter()
            recorder.t0 = t0
            if number == 0 and mode.startswith("asynccomp"):
                watch = ReadyWatch(t0)
                first_start = t0
            if args.entry == "decorator":
                tuned = decorated(args.size, configs, args.arch, grouped, args.group)
                tuned()  # the autotune; its best kernel then
                best.append(tuned._tuner_cache[next(iter(tuned._tuner_cache))][1])
            else:
                tuner = AutoTuner.from_kernel(kernel=kernel, configs=configs)
                tuner.set_compile_args(out_idx=[-1], target={"kind": "cuda", "arch": args.arch})
                tuner.set_profile_args(skip_check=True)
                result = tuner.run(
                    warmup=1,
                    rep=1,
                    timeout=0,
                    enable_grouped_compile=grouped,
                    group_compile_size=args.group,
                )
                best.append(result.config)
            walls.append(time.perf_counter() - t0)
            rows.append(_pass_row(recorder.calls, walls[-1]))
    finally:
        AutoTuner._benchmark_target = original
        ready = watch.stop() if watch is not None else None
    calls = recorder.calls
    stats = atl.engine().statistics() if mode.startswith("asynccomp") else None
    row: dict[str, Any] = {
        "mode": mode,
        "configs": len(configs),
        "kernels_built": len(kernels),
        "wall_s": round(walls[-1], 2),
        "wall_s_per_pass": [round(w, 2) for w in walls],
        "passes": rows,
        "compile_calls": len(calls),
        "failed_calls": sum(c["error"] is not None for c in calls),
        "first_error": next((c["error"] for c in calls if c["error"]), None),
        "callback_busy_s": rows[-1]["callback_busy_s"],
        "peak_callbacks_at_once": rows[-1]["peak_callbacks_at_once"],
        "threads": len({c["thread"] for c in calls}),
        "group": args.group if grouped else None,
        "entry": args.entry,
        "best_config": best[-1] if best else None,
        "uptime": os.getloadavg(),
        "engine": None
        if stats is None
        else {"compiled": stats.compiled, "cache_hits": stats.cache_hits, "workers": stats.workers},
    }
    from asynccomp.tilelang import _pool as lowering

    if mode.startswith("asynccomp") and lowering._pool is not None:
        # joined: its workers forked from a template an earlier process left
        said = lowering._pool.statistics()
        row["lowering"] = {"started": said.started, "forked": said.forked, "joined": said.joined}
        # [seconds from the first pass's start, template ready, workers ready] at each change
        row["lowering_ready"] = ready
    if early and first_start is not None and REGISTERED_AT is not None:  # set-up since
        row["registered_before_s"] = round(first_start - REGISTERED_AT, 2)
        row["tilelang_imported_before_s"] = round(first_start - IMPORTED_AT, 2)
    if mode.startswith("asynccomp-nvrtc") and "nopch" not in mode:
        pool = _local_pool()
        # On the compile server: its counts since it started (made ahead from the last
        # server's hints included), asked before this mode's engine closes.
        row["pch"] = pool.pch_counts() if pool is not None else _server_pch()
        from asynccomp.tilelang import _facade

        ahead = _facade._state.ahead  # register()'s PCH made ahead: made, and when
        if ahead is not None and ahead.ended_at is not None and first_start is not None:
            row["pch_ahead"] = {
                "made": ahead.made,
                "before_s": round(first_start - ahead.ended_at, 2),
            }
    atl.shutdown()
    shutil.rmtree(cache, ignore_errors=True)
    return row, kernels, recorder.binaries


def _pass_row(calls: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    """One pass: its wall time, the callbacks' summed time, the most at once, and the
    median and longest callback."""
    events = sorted([(c["start"], 1) for c in calls] + [(c["end"], -1) for c in calls])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    times = sorted(c["end"] - c["start"] for c in calls)
    return {
        "wall_s": round(wall, 2),
        "callback_busy_s": round(sum(times), 2),
        "peak_callbacks_at_once": peak,
        "median_callback_s": round(times[len(times) // 2], 3) if times else None,
        "longest_callback_s": round(times[-1], 3) if times else None,
        "first_callback_start_s": round(min(c["start"] for c in calls), 3) if calls else None,
        # every callback's [start, end], seconds from the pass's start: where a first
        # pass waits (for lowered configs, or in the compile)
        "calls": sorted([round(c["start"], 2), round(c["end"], 2)] for c in calls),
    }


class ReadyWatch:
    """When asynccomp's TileLang lowering pool had its template, and how many ready
    workers, in seconds from ``t0`` (a pass's start): a first autotune that waits for
    the template's start shows it here. Polls the pool's statistics every 50 ms."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.changes: list[tuple[float, bool, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        from asynccomp.tilelang import _pool as lowering

        last: tuple[bool, int] | None = None
        while not self._stop.wait(0.05):
            pool = lowering._pool
            if pool is None:
                continue
            said = pool.statistics()
            now = (said.template, said.ready)
            if now != last:
                self.changes.append((round(time.perf_counter() - self.t0, 2), *now))
                last = now

    def stop(self) -> list[tuple[float, bool, int]]:
        self._stop.set()
        self._thread.join()
        return self.changes


def _server_pch() -> dict[str, int] | None:
    """The compile server's NVRTC PCH counts (None: no server answers)."""
    from asynccomp import server as server_api

    try:
        counts: dict[str, int] | None = server_api.status()["pch"].get("nvrtc")
    except Exception:  # no server, or one from before these counts
        return None
    return counts


def _local_pool() -> Any:
    """The NVRTC worker pool of the in-process facade engine (None on the server)."""
    from asynccomp.tvm import _runtime

    engine: Any = _runtime._runtime.engine
    try:
        backend = engine.engine._life.parts.runner.backends["nvrtc"]
        return backend.pool
    except AttributeError:
        return None


def sass_of(binary: bytes, tool: str, folder: Path) -> str:
    path = folder / f"{hashlib.sha256(binary).hexdigest()}.cubin"
    path.write_bytes(binary)
    out = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True)
    return "\n".join(line for line in out.stdout.splitlines() if path.name not in line)


def cuobjdump() -> str | None:
    try:
        from cuda import pathfinder

        found = pathfinder.find_nvidia_binary_utility("cuobjdump")
    except Exception:
        found = None
    return str(found) if found else shutil.which("cuobjdump")


def compare_sass(binaries: dict[str, dict[str, bytes]]) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    tool = cuobjdump()
    # Each asynccomp mode against TileLang's mode that builds the same sources.
    pairs = {
        m: "tilelang-grouped" if m.endswith("grouped") else "tilelang"
        for m in binaries
        if m.startswith("asynccomp")
    }
    pairs = {m: ref for m, ref in pairs.items() if ref in binaries}
    if tool is None or not pairs:
        return {"skipped": "no cuobjdump" if tool is None else "no TileLang mode to compare"}
    out: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="tl-sweep-sass-"))
    modes = list(pairs)
    # Each distinct binary disassembled once, as many at a time as there are CPUs (one
    # by one, 384 cuobjdump runs took minutes).
    unique = list({b for m in (*modes, *pairs.values()) for b in binaries[m].values()})
    try:
        with ThreadPoolExecutor(len(os.sched_getaffinity(0))) as pool:
            sass = dict(
                zip(unique, pool.map(lambda b: sass_of(b, tool, folder), unique), strict=True)
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for mode in modes:
        theirs = binaries[pairs[mode]]
        common = [key for key in binaries[mode] if key in theirs]
        same = sum(sass[binaries[mode][key]] == sass[theirs[key]] for key in common)
        out[mode] = {"kernels_compared": len(common), "sass_identical": same}
    return out


def run_on_gpu(kernels: dict[str, dict[str, Any]], size: int) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    reference = torch.relu(a.float() @ b.float()).half()
    outputs: dict[str, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    for mode, built in kernels.items():
        # 64 kernels run in seconds: one that never returns ends the run with a traceback
        # that shows where it waits.
        faulthandler.dump_traceback_later(120, exit=True)
        ok = bad = 0
        worst = 0.0
        outputs[mode] = {}
        started = time.perf_counter()
        for key, kernel in built.items():
            # Which kernel hung, if one does (the traceback only says where).
            watchdog = threading.Timer(
                60,
                lambda m=mode, k=key: print(f"{m}: kernel {k} still runs after 60 s", flush=True),
            )
            watchdog.start()
            c = kernel(a, b)
            torch.cuda.synchronize()
            watchdog.cancel()
            outputs[mode][key] = c
            worst = max(worst, (c.float() - reference.float()).abs().max().item())
            if torch.allclose(c, reference, atol=1e-2, rtol=1e-2):
                ok += 1
            else:
                bad += 1
        summary[mode] = {"match_torch": ok, "mismatch_torch": bad, "max_abs_diff": worst}
        print(
            f"ran {mode}'s {len(built)} kernels in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    faulthandler.cancel_dump_traceback_later()
    # Each asynccomp mode against TileLang's mode that builds the same sources.
    for mode, got in outputs.items():
        reference = "tilelang-grouped" if mode.endswith("grouped") else "tilelang"
        if mode.startswith("tilelang") or reference not in outputs:
            continue
        theirs = outputs[reference]
        common = [k for k in got if k in theirs]
        summary[mode]["equal_to_tilelang"] = sum(torch.equal(got[k], theirs[k]) for k in common)
        summary[mode]["compared_to_tilelang"] = len(common)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=64, help="how many of the 64")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(ALL_MODES)}")
    parser.add_argument(
        "--passes",
        type=int,
        default=2,
        help="autotune runs per mode, on one engine (asynccomp: its workers and their "
        "precompiled headers live on); each pass after the first compiles new sources "
        "(a comment appended), so no cache answers",
    )
    parser.add_argument("--group", type=int, default=4, help="grouped compile's group size")
    parser.add_argument(
        "--entry",
        choices=("from_kernel", "decorator"),
        default="from_kernel",
        help="AutoTuner.from_kernel(...).run() or the @tilelang.autotune decorator",
    )
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="the autotuner's compile threads, every mode (TILELANG_AUTO_TUNING_CPU_COUNTS; "
        "at most the CPUs); 0: TileLang's default, int(0.9 * CPUs)",
    )
    parser.add_argument("--server", action="store_true", help="asynccomp on the compile server")
    parser.add_argument(
        "--register-early",
        action="store_true",
        help="register() for the first mode as the program starts, before TileLang's import",
    )
    parser.add_argument(
        "--setup-seconds",
        type=float,
        default=0.0,
        help="wait this long before the first autotune: a program's own set-up (data, "
        "model) between its start (or its register()) and its first autotune",
    )
    parser.add_argument("--no-gpu", action="store_true", help="compile only; run nothing")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    # Each run starts its own templates (as every figure before shared templates did),
    # unless told: benchmarks/tuners/first_autotune.py measures what sharing saves.
    os.environ.setdefault("ASYNCCOMP_SHARED_TEMPLATES", "off")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(ALL_MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}")
    os.environ["ASYNCCOMP_SERVER"] = "auto" if args.server else "off"
    if args.threads:
        os.environ["TILELANG_AUTO_TUNING_CPU_COUNTS"] = str(args.threads)

    import tilelang
    import torch

    configs = CONFIGS[: args.configs]
    kernel = matmul(args.size)
    gpu = not args.no_gpu and torch.cuda.is_available()
    report: dict[str, Any] = {
        "tilelang": tilelang.__version__,
        "cpus": len(os.sched_getaffinity(0)),
        "configs": len(configs),
        "size": args.size,
        "arch": args.arch,
        "threads_asked": args.threads or None,
        "gpu": torch.cuda.get_device_name() if gpu else None,
        "modes": [],
    }
    kernels: dict[str, dict[str, Any]] = {}
    binaries: dict[str, dict[str, bytes]] = {}
    if "lowering-only" in modes:  # it answers with an earlier mode's binaries
        modes = [m for m in modes if m != "lowering-only"] + ["lowering-only"]
        if not [m for m in modes if m != "lowering-only" and not m.endswith("grouped")]:
            parser.error("lowering-only needs an earlier mode that compiles one kernel per call")
    time.sleep(args.setup_seconds)
    for mode in modes:
        row, built, binary = run_mode(mode, args, kernel, configs)
        if not mode.endswith("grouped"):  # a grouped binary holds several kernels
            EARLIER.update(binary)
        # What a run of another mode in another process compares with (each mode in a
        # fresh process is the fair measurement): its sources and its best config.
        row["sources_digest"] = digest(" ".join(sorted({k.split("-")[0] for k in built})))
        report["modes"].append(row)
        kernels[mode] = built
        binaries[mode] = binary
        passes = " / ".join(f"{w:.2f}" for w in row["wall_s_per_pass"])
        print(
            f"{mode:22} {passes} s  {row['kernels_built']:3d} kernels  "
            f"{row['compile_calls']:3d} compile calls  {row['failed_calls']} failed  "
            f"peak {row['peak_callbacks_at_once']} at once  median callback "
            f"{row['passes'][-1]['median_callback_s']} s  sources {row['sources_digest']}  "
            f"best {row['best_config']}  load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        if args.json:  # after every mode: a later failure loses no timing
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    for grouped in (False, True):
        sources = {
            m: row["sources_digest"]
            for m, row in zip(kernels, report["modes"], strict=True)
            if m.endswith("grouped") == grouped
        }
        name = "same_grouped_sources" if grouped else "same_sources_in_every_mode"
        report[name] = len(set(sources.values())) <= 1
    report["sass"] = compare_sass(binaries)
    print("sass vs tilelang:", json.dumps(report["sass"]))
    if args.json:  # written before the GPU runs too, so a failure there loses no timing
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if gpu:
        report["correctness"] = run_on_gpu(kernels, args.size)
        print("correctness:", json.dumps(report["correctness"]))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
