"""How a dump's ``rerun.py`` compiles, for the backends that call a library in process.

A backend that runs a program (nvcc, ptxas) gets ``rerun.sh``, its argv as it ran. One
that calls a library (NVRTC, nvJitLink) has no command line to re-run, so its dump gets
``rerun.py`` (:mod:`asynccomp._dump_repro`), which calls the same library with the same
input and options through ``cuda.bindings`` alone, as the backend does
(:func:`asynccomp.backends._nvrtc_api.compile_prepared`, ``nvjitlink._link``). Each entry
of :data:`RERUN_COMPILERS` is the Python source of that script's ``compile`` function::

    def compile(source: bytes, name: str, options: list[str], output: str)
        -> tuple[bytes | None, str]  # (the binary or None, the compiler's log)

A backend without an entry gets no ``rerun.py`` (its ``command.txt`` still says what ran).
"""

from __future__ import annotations

__all__ = ("RERUN_COMPILERS", "rerun_compiler")

_NVRTC = '''
def compile(source, name, options, output):
    """NVRTC, as asynccomp's NVRTC backend calls it (one program, these options)."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source, name.encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise SystemExit(f"rerun: nvrtcCreateProgram: {err}")
    try:
        flags = [o.encode("utf-8", "surrogateescape") for o in options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log = log.rstrip(b"\\0").decode(errors="replace")
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None, log
        if output == "ptx":
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            binary = b" " * size
            nvrtc.nvrtcGetPTX(prog, binary)
            return binary.rstrip(b"\\0"), log
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        binary = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, binary)
        return binary or None, log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
'''

_NVJITLINK = '''
def compile(source, name, options, output):
    """nvJitLink, as asynccomp's nvjitlink backend calls it (PTX in, a cubin out)."""
    from cuda.bindings import nvjitlink

    def text(handle, size_of, read):
        size = int(size_of(handle))
        if size <= 1:
            return ""
        buffer = bytearray(size)
        read(handle, buffer)
        return buffer.rstrip(b"\\0").decode(errors="replace")

    handle = nvjitlink.create(len(options), list(options))
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, source, len(source), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = text(handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            return None, log + text(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        log = text(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        return bytes(cubin) or None, log
    finally:
        nvjitlink.destroy(handle)
'''

#: Backend name -> the source of ``rerun.py``'s ``compile`` function.
RERUN_COMPILERS: dict[str, str] = {"nvrtc": _NVRTC, "nvjitlink": _NVJITLINK}


def rerun_compiler(backend: str) -> str | None:
    """The ``compile`` function ``rerun.py`` runs for ``backend``, or ``None``."""
    return RERUN_COMPILERS.get(backend)
