"""The fault soak's job mix (:mod:`benchmarks.server.soak`): what job ``i`` is, on every
process of a run, and what outcome fits it.

Kinds (shares in :class:`Mix`; the rest are hits):

- ``hit``, ``miss``, ``fail``, ``timeout``: NVRTC or nvcc; cache hits on a few hot
  ``-DF=`` variants, a source of its own, a source that does not compile, a slow source
  with a short timeout.
- ``ptx_hit``, ``ptx_miss``: PTX to a cubin with nvJitLink (``backend="nvjitlink"``,
  which links in worker processes of the compile server), hot variants or PTX of its
  own, each with a generous timeout: a link that hangs is a ``CompileTimeout``, which
  fits no such job.
- ``wedge``: the same PTX with ``-Xptxas=-arch=sm_100a``, which makes nvJitLink 13.5
  fail with ``ERROR_INVALID_INPUT`` and leave a lock held that blocks every later link
  of its process from another thread (R15): its own ``CompileError``, nothing more.
- ``header``: NVRTC or nvcc with ``-include <the run's header>``, a header the chaos
  rewrites (``#define VALUE <n>``, always the same length): its binary must be the one
  for the header's content in effect while the job ran (R14: the header is a
  dependency of the cache entry).
- ``refused``: an options file (``-Xptxas=-optf=FILE``, ``--options-file FILE``, to
  NVRTC, nvcc or nvJitLink): :class:`~asynccomp.InvalidJob` as the job is built, naming
  why (R14: a file the cache key does not cover is refused).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import struct
from typing import Literal

from asynccomp import CompileJob

ARCH = "sm_90a"
Backend = Literal["nvrtc", "nvcc", "nvjitlink"]

#: The outcome each kind's own answer is (a job may also end in what chaos causes).
EXPECTED = {
    "hit": "ok",
    "miss": "ok",
    "fail": "CompileError",
    "timeout": "CompileTimeout",
    "ptx_hit": "ok",
    "ptx_miss": "ok",
    "wedge": "CompileError",
    "header": "ok",
    "refused": "InvalidJob",
    "fork": "ok",  # the one job a forked child compiles (soak_client)
}
#: What the wedge's CompileError says (nvJitLink's own status).
WEDGE_SAYS = "ERROR_INVALID_INPUT"
#: What an options file's InvalidJob says.
REFUSED_SAYS = "an options file"

SCALE = (
    'extern "C" __global__ void scale(float* x, int n) {\n'
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = x[i] * F + 1.0f;\n"
    "}\n"
)
#: Compiled with ``-include <header>``: VALUE comes from the header alone.
WITH_HEADER = (
    'extern "C" __global__ void valued(float* x) {\n'
    "  x[threadIdx.x] = x[threadIdx.x] * F + (float)VALUE;\n"
    "}\n"
)


def header_text(value: int) -> str:
    """The run's header for ``value`` (1000-9999: every version the same length, so
    only its content tells them apart)."""
    return f"#define VALUE {value}\n"


def text_hash(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()[:16]


def _broken(variant: int) -> str:
    return (
        'extern "C" __global__ void broken(float* x) {\n'
        f"  x[threadIdx.x] = undefined_identifier_{variant};\n}}\n"
    )


def _slow(statements: int) -> str:
    body = "".join(
        f"  a = a * {1.0 + i * 1e-6:.7f}f + __sinf(a + {i}.0f);\n" for i in range(statements)
    )
    return 'extern "C" __global__ void slow(float* x) {\n  float a = x[threadIdx.x];\n' + (
        body + "  x[threadIdx.x] = a;\n}\n"
    )


def ptx(factor: float) -> str:
    """PTX of ``x[0] *= factor`` (ISA 8.0, ``.target sm_80``: any ptxas of CUDA 12-13)."""
    bits = struct.unpack(">I", struct.pack(">f", factor))[0]
    return (
        ".version 8.0\n.target sm_80\n.address_size 64\n\n"
        ".visible .entry scale(\n\t.param .u64 scale_param_0\n)\n{\n"
        "\t.reg .b64 %rd<3>;\n\t.reg .f32 %f<3>;\n"
        "\tld.param.u64 %rd1, [scale_param_0];\n"
        "\tcvta.to.global.u64 %rd2, %rd1;\n"
        "\tld.global.f32 %f1, [%rd2];\n"
        f"\tmul.f32 %f2, %f1, 0f{bits:08X};\n"
        "\tst.global.f32 [%rd2], %f2;\n"
        "\tret;\n}\n"
    )


@dataclasses.dataclass(frozen=True)
class Mix:
    """Shares of the job kinds (the rest are hits on ``hot`` variants), and of nvcc.

    The first four kinds are drawn as they always were; ``ptx``, ``wedge``, ``header``
    and ``refused`` by a draw of their own after those (a job of one of them replaces
    the kind drawn first), so the older kinds keep their proportions among themselves.
    ``header_path`` and ``options_file`` are files in the run's folder (the driver
    makes them)."""

    seed: int = 1
    hot: int = 16
    miss: float = 0.02
    fail: float = 0.01
    timeout: float = 0.002
    nvcc: float = 0.1
    slow_timeout: float = 0.5
    slow_statements: int = 20000
    ptx: float = 0.03
    ptx_hot: int = 8
    ptx_miss: float = 0.1  # of the ptx jobs
    ptx_timeout: float = 60.0
    wedge: float = 0.0005
    header: float = 0.01
    header_variants: int = 4
    refused: float = 0.002
    header_path: str = ""
    options_file: str = ""


@dataclasses.dataclass(frozen=True)
class Spec:
    """A job of the mix, before it is built (a ``refused`` one cannot be)."""

    kind: str
    name: str
    backend: Backend
    source: str
    options: tuple[str, ...] = ()
    timeout: float | None = None

    def job(self) -> CompileJob:
        """The job (raises :class:`~asynccomp.InvalidJob` for a ``refused`` one)."""
        return CompileJob(
            self.source,
            name=self.name,
            backend=self.backend,
            arch=ARCH,
            options=self.options,
            timeout=self.timeout,
        )

    def reference_key(self, header: str | None = None) -> str:
        """The same for every job that must compile to the same binary (``header``: the
        content hash of the header a ``header`` job was compiled with)."""
        text = json.dumps([self.backend, self.source, list(self.options), header])
        return hashlib.sha256(text.encode()).hexdigest()


def job_spec(i: int, mix: Mix) -> Spec:
    """Job ``i`` of the mix: the same on every process, every run."""
    rng = random.Random(mix.seed * 1_000_003 + i)
    backend: Backend = "nvcc" if rng.random() < mix.nvcc else "nvrtc"
    draw = rng.random()
    timeout: float | None = None
    source, options = SCALE, ""
    if draw < mix.timeout:
        kind, source, timeout = "timeout", _slow(mix.slow_statements), mix.slow_timeout
    elif draw < mix.timeout + mix.fail:
        kind, source = "fail", _broken(rng.randrange(3))
    elif draw < mix.timeout + mix.fail + mix.miss:
        kind, options = "miss", f"-DF={i}.25f"
    else:
        kind, options = "hit", f"-DF={rng.randrange(mix.hot) + 1}.0f"
    name = f"j{i}"
    new = rng.random()
    if new < mix.wedge:
        return Spec(
            "wedge", name, "nvjitlink", ptx(1.0), ("-Xptxas=-arch=sm_100a",), mix.ptx_timeout
        )
    new -= mix.wedge
    if new < mix.ptx:
        if rng.random() < mix.ptx_miss:
            return Spec("ptx_miss", name, "nvjitlink", ptx(i + 0.25), (), mix.ptx_timeout)
        factor = float(rng.randrange(mix.ptx_hot) + 1)
        return Spec("ptx_hit", name, "nvjitlink", ptx(factor), (), mix.ptx_timeout)
    new -= mix.ptx
    if new < mix.header:
        variant = f"-DF={rng.randrange(mix.header_variants) + 1}.0f"
        return Spec("header", name, backend, WITH_HEADER, ("-include", mix.header_path, variant))
    new -= mix.header
    if new < mix.refused:
        how = rng.randrange(3)
        if how == 0:  # to ptxas, through NVRTC's, nvcc's or nvJitLink's -Xptxas
            target: Backend = ("nvrtc", "nvcc", "nvjitlink")[rng.randrange(3)]
            text = ptx(1.0) if target == "nvjitlink" else SCALE
            return Spec("refused", name, target, text, (f"-Xptxas=-optf={mix.options_file}",))
        refused = (
            ("--options-file", mix.options_file) if how == 1 else (f"-optf={mix.options_file}",)
        )
        return Spec("refused", name, backend, SCALE, ("-DF=1.0f", *refused))
    return Spec(kind, name, backend, source, (options,) if options else (), timeout)


def fork_spec(value: int) -> Spec:
    """The job a forked child compiles: a source of its own (``-DF=<value>.5f``)."""
    return Spec("fork", f"fork{value}", "nvrtc", SCALE, (f"-DF={value}.5f",))
