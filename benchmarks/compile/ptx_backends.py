"""PTX -> cubin three ways: the ``ptx`` backend (ptxas subprocesses), the ``nvjitlink``
backend (nvJitLink in threads), and bare ptxas one file at a time (the floor a script
would have).

The PTX is what NVRTC writes for the built-in examples (or a ``--corpus`` of ``.cu``
files), its ``.version`` lowered to 8.0 so the toolkit's ptxas reads it (NVRTC may be
newer). Each backend compiles the whole set as one batch in a fresh engine (no cache),
``--passes`` times; the medians are printed, with whether both backends' cubins have
the same SASS (``cuobjdump -sass``, when the two compilers are of one release).

    python -m benchmarks.compile.ptx_backends                       # the built-in examples
    python -m benchmarks.compile.ptx_backends --corpus corpus --passes 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from asynccomp import CompileJob, Engine
from asynccomp.backends import NvJitLinkBackend, PtxBackend
from asynccomp.cache import compiler_identity
from asynccomp.toolkit import find_toolkit
from benchmarks._corpus import add_corpus_argument, corpus_files

ARCH = "sm_90a"


def _sources(corpus: Path | None) -> list[tuple[str, str]]:
    return [(f.stem, f.read_text()) for f in corpus_files(corpus)]


async def _ptx(sources: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """NVRTC's PTX of each source, its .version lowered to 8.0."""
    async with Engine(arch=ARCH, cache=False) as engine:
        made = await engine.compile_many(
            [CompileJob(source, name=name, output="ptx") for name, source in sources]
        )
    out = []
    for result in made:
        if result.ok:
            ptx = result.unwrap().decode()
            lowered = re.sub(r"^\.version \S+", ".version 8.0", ptx, count=1, flags=re.M)
            out.append((result.job.name, lowered))
    return out


async def _batch(backend: str, ptx: list[tuple[str, str]]) -> tuple[float, list[bytes]]:
    jobs = [CompileJob(text, name=name, backend=backend) for name, text in ptx]
    async with Engine(arch=ARCH, cache=False) as engine:
        started = time.perf_counter()
        results = await engine.compile_many(jobs)
        elapsed = time.perf_counter() - started
    failed = [r.job.name for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{backend}: {len(failed)} failed, e.g. {results[0].error}")
    return elapsed, [r.unwrap() for r in results]


def _bare(ptxas: str, ptx: list[tuple[str, str]]) -> float:
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for name, text in ptx:
            path = Path(folder, f"{name}.ptx")
            path.write_text(text)
            files.append(path)
        started = time.perf_counter()
        for path in files:
            subprocess.run(
                [ptxas, f"-arch={ARCH}", "-v", "-o", str(path.with_suffix(".cubin")), str(path)],
                check=True,
                capture_output=True,
            )
        return time.perf_counter() - started


def _sass(cubin: bytes) -> str:
    from cuda import pathfinder

    tool = pathfinder.find_nvidia_binary_utility("cuobjdump") or "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        done = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True, check=False)
    return "\n".join(line for line in done.stdout.splitlines() if "/*" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_corpus_argument(parser)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    toolkit = find_toolkit()
    if NvJitLinkBackend.version(toolkit) is None or PtxBackend.version(toolkit) is None:
        sys.exit("needs both ptxas (the CUDA toolkit) and nvJitLink (pip install nvidia-nvjitlink)")
    ptx = anyio.run(_ptx, _sources(args.corpus))
    size = sum(len(text) for _, text in ptx)
    print(f"{len(ptx)} PTX files, {size / 2**20:.1f} MiB; arch {ARCH}")
    print(f"ptx: {compiler_identity('ptx', toolkit)[0]}")
    print(f"nvjitlink: {compiler_identity('nvjitlink', toolkit)[0]}")
    ptxas = compiler_identity("ptx", toolkit)[0].split()[-1]
    times: dict[str, list[float]] = {"ptx": [], "nvjitlink": [], "bare ptxas, serial": []}
    cubins: dict[str, list[bytes]] = {}
    for _ in range(args.passes):
        for backend in ("ptx", "nvjitlink"):
            elapsed, cubins[backend] = anyio.run(_batch, backend, ptx)
            times[backend].append(elapsed)
        times["bare ptxas, serial"].append(_bare(ptxas, ptx))
    for name, values in times.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:<20} median {statistics.median(values):6.2f} s  ({each})")
    same = sum(
        _sass(a) == _sass(b) for a, b in zip(cubins["ptx"], cubins["nvjitlink"], strict=True)
    )
    print(f"same SASS from both backends: {same} of {len(ptx)}")


if __name__ == "__main__":
    main()
