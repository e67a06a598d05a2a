"""The facade's public functions (re-exported by :mod:`asynccomp.tvm`, documented there).

``compile_cuda`` is :func:`~asynccomp.tvm._render.render_job` + the process-wide engine
(:mod:`._runtime`) + TVM's exception for a failed compile; the callback picks the
compiler from ``TVM_CUDA_COMPILE_MODE`` and calls it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import EmptyOutput, ToolkitNotFound
from ..result import CompileResult
from ..sync import SyncEngine
from . import _nvshmem, _runtime
from ._render import dump_root_from_environment, ptx_with_terminator, render_job
from ._runtime import FAST_PATH_ENV, fast_path_from_environment

__all__ = (
    "CALLBACK_NAME",
    "FAST_PATH_ENV",
    "compile_cuda",
    "engine",
    "prefetch",
    "register",
    "shutdown",
    "tvm_callback_cuda_compile",
    "where",
)

#: The tvm-ffi global function TVM's CUDA module calls.
CALLBACK_NAME = "tvm_callback_cuda_compile"

# Reported with a failed compile when set: they change the command line silently.
_TVM_OPTION_VARIABLES = (
    "TVM_CUDA_PTXAS_REG_LEVEL",
    "TVM_CUDA_PTXAS_EXTRA_OPTS",
    "TVM_CUDA_NVRTC_EXTRA_OPTS",
    "TVM_CUDA_NVCC_NO_FAST_MATH",
    "TVM_KERNEL_DEBUG",
)


def _job_settings() -> tuple[Path | bool, bool]:
    """What the environment says about the next jobs: their dump root (``False``: no
    dump) and whether they take the preamble fast path."""
    return dump_root_from_environment() or False, fast_path_from_environment()


def engine() -> SyncEngine:
    """The process-wide engine the facade compiles on (started if needed), e.g. to read
    its counters: ``asynccomp.tvm.engine().statistics().cache_hits``."""
    return _runtime.engine()


def where() -> str:
    """Where the facade compiles (started if needed): ``"on the compile server (pid N),
    socket PATH"`` or ``"in process"``; also logged (``asynccomp.tvm``, INFO) at start."""
    return _runtime.where()


def shutdown() -> None:
    """Close the facade's engine now (also done at interpreter exit), stopping
    prefetched compiles nobody waits for; the next compile starts a fresh engine."""
    _runtime.shutdown()


def compile_cuda(
    code: str,
    target_format: str | None = None,
    arch: str | Sequence[str] | None = None,
    options: Sequence[str] | str | None = None,
    path_target: str | os.PathLike[str] | None = None,
    compiler: str = "nvrtc",
) -> bytearray:
    """Compile CUDA source like TVM 0.27's ``tvm.support.nvcc.compile_cuda``.

    Args:
        code: the CUDA source.
        target_format: ``"cubin"`` (NVRTC's default), ``"ptx"``, or ``"fatbin"`` (nvcc
            only; nvcc's default is ``"ptx"``, as in TVM).
        arch: e.g. ``"sm_90a"``; for nvcc also a list of flags such as
            ``["-gencode", "arch=compute_90a,code=sm_90a"]``. ``None``: see the module doc.
        options: extra options (one str or a list); NVRTC drops nvcc-only ones, as TVM.
        path_target: also write the binary to this file.
        compiler: ``"nvrtc"`` or ``"nvcc"``.

    Returns:
        The binary, as a ``bytearray`` (TVM's type).

    Raises:
        ValueError: a bad argument or environment variable, or no architecture to be had.
        RuntimeError: the compile failed. NVRTC's message starts with
            ``"NVRTC compilation failed:"`` and holds its log; nvcc's is the source, then
            ``"\\nCompilation error:\\n"`` and nvcc's output, as in TVM. ``__cause__`` is
            asynccomp's :class:`~asynccomp.CompileError` (with ``.log`` and ``.job``).

    >>> ptx = compile_cuda('extern "C" __global__ void k() {}', "ptx", arch="sm_90a")
    >>> bytes(ptx[:2]), ptx[-1]
    (b'//', 0)
    """
    return _compile(code, target_format, arch, options, path_target, compiler)


def _compile(
    code: str,
    target_format: str | None,
    arch: str | Sequence[str] | None,
    options: Sequence[str] | str | None,
    path_target: str | os.PathLike[str] | None,
    compiler: str,
    target: object = None,
) -> bytearray:
    dump, fast_path = _job_settings()
    rendered = render_job(
        code, target_format, arch, options, compiler, dump=dump, fast_path=fast_path, target=target
    )
    result = _runtime.compile_job(rendered.job)
    binary = _binary_or_raise(result, code)
    if rendered.nvshmem is not None:
        if compiler == "nvcc":
            binary = _nvshmem.link_with_nvlink(code, binary, rendered.arch.arch, rendered.nvshmem)
        else:
            binary = _nvshmem.link_with_driver(binary, rendered.nvshmem)
    elif compiler == "nvrtc" and rendered.job.output == "ptx":
        binary = ptx_with_terminator(binary)
    if path_target:
        Path(path_target).write_bytes(binary)
    return bytearray(binary)


def _binary_or_raise(result: CompileResult, code: str) -> bytes:
    """The binary, or TVM's exception for the failure (chained to asynccomp's error)."""
    if result.ok:
        assert result.binary is not None
        return result.binary
    error = result.error
    nvrtc = result.job.backend == "nvrtc"
    if isinstance(error, ToolkitNotFound):
        if nvrtc:
            message = (
                "Failed to compile CUDA with NVRTC because the `cuda-bindings` package "
                "is not available.\n"
                "Please install it with: pip install cuda-bindings\n"
                f"See: https://nvidia.github.io/cuda-python/\n({error})"
            )
        else:
            message = f"Cannot find CUDA path: {error}"
        raise RuntimeError(message) from error  # noqa: TRY004 - TVM's exception type
    if nvrtc:
        message = (
            f"NVRTC compilation failed:\n{result.log}"
            if result.log.strip()
            else f"NVRTC compilation failed: {error}"
        )
    elif isinstance(error, EmptyOutput):
        # TVM says this for a zero-byte output; for no output file at all (nvcc --dryrun)
        # it lets open() raise FileNotFoundError on its temporary path. One clear
        # RuntimeError for both is what a caller of TVM's contract expects.
        message = "Compilation error: empty result is generated"
    else:
        message = code + "\nCompilation error:\n" + result.log
    settings = [f"{v}={os.environ[v]!r}" for v in _TVM_OPTION_VARIABLES if v in os.environ]
    if settings:
        message += "\n(environment: " + ", ".join(settings) + ")"
    raise RuntimeError(message) from error


def tvm_callback_cuda_compile(code: str, target: object = None) -> bytearray:
    """TVM's compile callback: cubin through NVRTC, or fatbin through nvcc when
    ``TVM_CUDA_COMPILE_MODE=nvcc``.

    TVM 0.27 calls it with one argument; older TVM and downstream projects pass a second,
    the target (a ``tvm.target.Target`` or a string), whose architecture is then used.
    Any other ``TVM_CUDA_COMPILE_MODE`` raises ``ValueError``.

    >>> import tvm_ffi
    >>> register()
    >>> callback = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    >>> len(callback('extern "C" __global__ void k() {}', "sm_90a")) > 0
    True
    """
    compiler, target_format = _callback_mode()
    return _compile(code, target_format, None, None, None, compiler, target)


def _callback_mode() -> tuple[str, str]:
    """(compiler, format) that ``TVM_CUDA_COMPILE_MODE`` asks of the callback."""
    mode = os.environ.get("TVM_CUDA_COMPILE_MODE", "nvrtc").lower()
    if mode == "nvrtc":
        return "nvrtc", "cubin"
    if mode == "nvcc":
        return "nvcc", "fatbin"
    raise ValueError(f"Invalid TVM_CUDA_COMPILE_MODE: {mode}. Expected 'nvcc' or 'nvrtc'.")


def register() -> None:
    """Make TVM compile CUDA through asynccomp: register :func:`tvm_callback_cuda_compile`
    as the tvm-ffi global function ``tvm_callback_cuda_compile``, replacing TVM's.

    Idempotent. When TVM is installed it is imported first: ``import tvm`` registers
    TVM's own callback without ``override`` and fails if one is already registered.

    In a worker of TVM's ``PopenPoolExecutor`` (``LocalBuilder(initializer=
    asynccomp.tvm.register)``), it also imports TVM's tensor intrinsics, quickly (see
    :mod:`asynccomp.tvm._frames`): MetaSchedule's ``default_build`` imports them at the
    worker's first build, inside that candidate's timeout, in 13-20 s on 2 cores.

    >>> import asynccomp.tvm
    >>> asynccomp.tvm.register()
    """
    if "tvm" not in sys.modules and importlib.util.find_spec("tvm") is not None:
        import tvm  # noqa: F401 - for its side effect: TVM registers its callback

    import tvm_ffi

    tvm_ffi.register_global_func(CALLBACK_NAME, tvm_callback_cuda_compile, override=True)
    if _in_tvm_popen_worker():
        from ._frames import import_tensor_intrinsics

        try:
            import_tensor_intrinsics()
        except ImportError:  # a TVM without them (TileLang's): default_build says so itself
            pass


def _in_tvm_popen_worker() -> bool:
    """Whether this process is a worker of TVM's ``PopenPoolExecutor`` (``python -m
    tvm.exec.popen_worker``: LocalBuilder's, LocalRunner's)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "tvm.exec.popen_worker"


def prefetch(
    sources: Iterable[str],
    target_format: str | None = None,
    arch: str | Sequence[str] | None = None,
    options: Sequence[str] | str | None = None,
    compiler: str | None = None,
) -> None:
    """Start compiling ``sources`` in the background, as :func:`compile_cuda` would with
    the same arguments, and return at once; later compiles of them are cache hits (or
    wait for the compile already running).

    ``compiler=None`` (the default) compiles what TVM's callback will ask for: the
    compiler ``TVM_CUDA_COMPILE_MODE`` names (NVRTC -> cubin, nvcc -> fatbin, unless
    ``target_format`` says otherwise). Bad arguments raise here; compile failures surface
    when the source is compiled. Prefetched compiles still running when the facade shuts
    down (at interpreter exit, say) are stopped, not waited for.

    >>> sources = ['extern "C" __global__ void k%d() {}' % i for i in range(4)]
    >>> prefetch(sources, arch="sm_90a")  # an autotuner pushes its batch ahead
    >>> cubin = compile_cuda(sources[0], arch="sm_90a")  # a cache hit, or a short wait
    """
    if isinstance(sources, (str, bytes)):
        raise TypeError("prefetch takes an iterable of sources, not one source")
    if compiler is None:
        compiler, callback_format = _callback_mode()
        target_format = target_format or callback_format
    dump, fast_path = _job_settings()
    jobs = [
        render_job(code, target_format, arch, options, compiler, dump=dump, fast_path=fast_path).job
        for code in sources
    ]
    _runtime.engine().prefetch(jobs)
