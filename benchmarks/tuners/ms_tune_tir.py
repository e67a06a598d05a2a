"""A real MetaSchedule ``tune_tir``: how long its builder takes, and what it loses to the
builder's timeout, with TVM's own compile callback and with asynccomp.

The workload is an fp32 1024^3 matmul (its candidates lower cleanly), tuned with a
random cost model, ``LocalBuilder(max_workers=--workers)`` and ``LocalRunner``. The one
line asynccomp asks of a TVM user is the builder's initializer::

    LocalBuilder(max_workers=16, initializer=asynccomp.tvm.register)

with which every builder worker (a fresh process per batch) compiles through this user's
compile server; ``--callback warm`` uses ``asynccomp.tvm.Builder(max_workers=16)`` instead
(warm workers made before tuning starts, living across batches). ``LocalBuilder.build``
is timed per batch; a candidate whose build passed the timeout is counted from its
``LocalBuilder: Timeout`` error.

    python -m benchmarks.tuners.ms_tune_tir --callback tvm --trials 64 --workers 16
    python -m benchmarks.tuners.ms_tune_tir --callback asynccomp --trials 64 --workers 16
    python -m benchmarks.tuners.ms_tune_tir --callback warm --trials 64 --workers 16

On a machine without a GPU TVM only emits CUDA source (no compile, every run fails),
which still checks that a tuning session runs unchanged with the line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def matmul(n: int) -> Any:
    from tvm import te

    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def traced_build(mod: Any, target: Any, params: Any) -> Any:
    """LocalBuilder's default build, timed in the builder worker: the whole build and the
    compile callback inside it, one JSON line per candidate in ``$ASYNCCOMP_TUNE_TRACE``."""
    import json as json_
    import os as os_
    import time as time_

    import tvm_ffi
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    name = "tvm_callback_cuda_compile"
    callback = tvm_ffi.get_global_func(name)
    spent = [0.0]

    def timed(code: str, *rest: Any) -> Any:
        started = time_.perf_counter()
        try:
            return callback(code, *rest)
        finally:
            spent[0] += time_.perf_counter() - started

    tvm_ffi.register_global_func(name, timed, override=True)
    started = time_.perf_counter()
    try:
        return default_build(mod, target, params)
    finally:
        tvm_ffi.register_global_func(name, callback, override=True)
        record = {
            "pid": os_.getpid(),
            "build": round(time_.perf_counter() - started, 3),
            "compile": round(spent[0], 3),
        }
        with open(os_.environ["ASYNCCOMP_TUNE_TRACE"], "a") as trace:
            trace.write(json_.dumps(record) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--callback",
        choices=("tvm", "asynccomp", "warm"),
        required=True,
        help="warm: asynccomp.tvm.Builder (warm workers) instead of LocalBuilder",
    )
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--target", default="nvidia/nvidia-h100")
    parser.add_argument("--timeout", type=float, default=30.0, help="LocalBuilder's timeout_sec")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    # Each run starts its own templates (as every figure before shared templates did),
    # unless told: benchmarks/tuners/first_autotune.py measures what sharing saves.
    os.environ.setdefault("ASYNCCOMP_SHARED_TEMPLATES", "off")

    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.builder import LocalBuilder

    import asynccomp.tvm

    batches: list[dict[str, Any]] = []
    # LocalBuilder is TVM's derived-object wrapper; its Python class is ``_cls``.
    wrapper = LocalBuilder
    if args.callback == "warm":
        from asynccomp.tvm._ms_builder import _builder_class

        wrapper = _builder_class()
    builder_class = getattr(wrapper, "_cls", wrapper)
    original = builder_class.build

    made: list[float] = []  # when the builder was made
    ready: list[float] = []  # when the warm builder's workers were all ready

    def timed_build(self: Any, build_inputs: list[Any]) -> list[Any]:
        started = time.perf_counter()
        pool = getattr(self, "pool", None)  # the warm builder's: how many workers ready now
        ready_now = pool.statistics().ready if pool is not None else None
        results: list[Any] = original(self, build_inputs)
        errors = [r.error_msg for r in results if r.error_msg]
        batches.append(
            {
                "candidates": len(build_inputs),
                "seconds": round(time.perf_counter() - started, 3),
                "timeouts": sum("LocalBuilder: Timeout" in e for e in errors),
                "errors": len(errors),
                "first_error": errors[0][:300] if errors else None,
                "seconds_after_builder_made": round(started - made[0], 3),
                "workers_ready_at_start": ready_now,
            }
        )
        print(f"builder batch: {batches[-1]}", flush=True)
        return results

    builder_class.build = timed_build  # timed on the class, before the builder is made
    initializer = asynccomp.tvm.register if args.callback == "asynccomp" else None
    trace = Path(tempfile.mkdtemp()) / "builds.jsonl"
    # asynccomp's prefix: each forked worker has its own process's, and a shared template
    # is not told apart by it
    os.environ["ASYNCCOMP_TUNE_TRACE"] = str(trace)
    # The warm builder is made first, as a user makes it: its workers start importing TVM
    # while MetaSchedule generates its design spaces.
    made.append(time.perf_counter())
    builder = (asynccomp.tvm.Builder if args.callback == "warm" else LocalBuilder)(
        max_workers=args.workers,
        timeout_sec=args.timeout,
        initializer=initializer,
        f_build=traced_build,
    )
    if args.callback == "warm":  # whether the workers' start bounds the first batch
        builder.pool.warm().add_done_callback(lambda _: ready.append(time.perf_counter()))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work_dir:
        ms.tune_tir(
            mod=matmul(args.size),
            target=tvm.target.Target(args.target),
            work_dir=work_dir,
            max_trials_global=args.trials,
            num_trials_per_iter=args.trials,
            builder=builder,
            runner=ms.runner.LocalRunner(),
            cost_model="random",
        )
    total = time.perf_counter() - started
    builds = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    said = builder.pool.statistics() if args.callback == "warm" else None
    summary = {
        "callback": args.callback,
        "trials": args.trials,
        "workers": args.workers,
        "tune_seconds": round(total, 1),
        "builder_seconds": round(sum(b["seconds"] for b in batches), 1),
        "workers_ready_seconds": round(ready[0] - made[0], 1) if ready else None,
        # 1: the builder's workers forked from a template an earlier process left
        "joined": said.joined if said is not None else None,
        # how many of its workers forked from a template (0: each a fresh interpreter)
        "forked": said.forked if said is not None else None,
        "candidates": sum(b["candidates"] for b in batches),
        "timeouts": sum(b["timeouts"] for b in batches),
        "build_errors": sum(b["errors"] for b in batches),
        "batches": batches,
        "finished_builds": len(builds),
        "build_seconds_max": max((b["build"] for b in builds), default=None),
        "compile_seconds_max": max((b["compile"] for b in builds), default=None),
        "build_seconds_median": _median([b["build"] for b in builds]),
        "compile_seconds_median": _median([b["compile"] for b in builds]),
        "compile_share": round(
            sum(b["compile"] for b in builds) / max(1e-9, sum(b["build"] for b in builds)), 3
        ),
        "builds": sorted(builds, key=lambda b: -b["build"])[:12],
    }
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
