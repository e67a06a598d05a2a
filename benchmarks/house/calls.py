"""How much of asynccomp one job passes through: calls between asynccomp modules, and the
asynccomp objects built, for one ``await engine.compile(job)`` on a started engine.

A call counts when the calling and the called function live in two different modules of
the package (``asynccomp._front._engine`` -> ``asynccomp._scheduler._pipeline``); a call
within one module does not. An object counts when an ``__init__`` or ``__new__`` of a
class defined in the package runs (dataclasses and named tuples included). Both are
read with :func:`sys.setprofile` on the event loop's thread, from the call to its
result; work in other threads (a cache lookup's, NVRTC's) is not seen.

    python -m benchmarks.house.calls                  # a cache hit, and a compile
    python -m benchmarks.house.calls --json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from types import FrameType
from typing import Any

import anyio

from asynccomp import CompileJob, Engine

SOURCE = 'extern "C" __global__ void one(float* x) { x[threadIdx.x] *= 2.0f; }\n'


class Tracer:
    def __init__(self) -> None:
        self.calls = collections.Counter[tuple[str, str]]()
        self.objects = collections.Counter[str]()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        code = frame.f_code
        if code.co_name in ("__init__", "__new__") and code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            cls = first if isinstance(first, type) else type(first)
            if getattr(cls, "__module__", "").startswith("asynccomp"):
                self.objects[f"{cls.__module__}.{cls.__qualname__}"] += 1
        caller = frame.f_back
        if caller is None or not callee.startswith("asynccomp"):
            return
        source = caller.f_globals.get("__name__", "")
        if source.startswith("asynccomp") and source != callee:
            self.calls[(source, callee)] += 1


async def _measure(**engine: Any) -> dict[str, Any]:
    tracer = Tracer()
    async with Engine(arch="sm_90a", **engine) as e:
        warm = await e.compile(CompileJob(SOURCE, name="warm"))  # the engine's first job
        assert warm.ok, warm.error
        job = CompileJob(SOURCE + "// measured\n", name="measured")
        if engine.get("cache", True):
            await e.compile(job)  # then measured as a hit
        sys.setprofile(tracer)
        try:
            result = await e.compile(job)
        finally:
            sys.setprofile(None)
        assert result.ok, result.error
    return {
        "calls_between_modules": sum(tracer.calls.values()),
        "objects_built": sum(tracer.objects.values()),
        "busiest_edges": [f"{a} -> {b}: {n}" for (a, b), n in tracer.calls.most_common(8)],
        "objects": dict(tracer.objects.most_common()),
    }


async def _main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        hit = await _measure(cache_dir=folder, nvrtc_mode="threads", nvrtc_workers=1)
    compiled = await _measure(cache=False, nvrtc_mode="threads", nvrtc_workers=1)
    return {"cache hit": hit, "compile (threads, no cache)": compiled}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = anyio.run(_main)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for what, found in figures.items():
        print(
            f"{what}: {found['calls_between_modules']} calls between asynccomp modules, "
            f"{found['objects_built']} asynccomp objects built"
        )
        for edge in found["busiest_edges"]:
            print(f"    {edge}")


if __name__ == "__main__":
    main()
