"""Load a compiled binary with the CUDA driver and run a kernel on it (GPU tests only)."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


def _check(result: Any) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


@contextmanager
def loaded_module(binary: bytes) -> Iterator[Any]:
    """``cuModuleLoadData(binary)`` in GPU 0's primary context; unloaded afterwards."""
    from cuda.bindings import driver

    _check(driver.cuInit(0))
    device = _check(driver.cuDeviceGet(0))
    context = _check(driver.cuDevicePrimaryCtxRetain(device))
    _check(driver.cuCtxSetCurrent(context))
    try:
        module = _check(driver.cuModuleLoadData(binary))
        try:
            yield module
        finally:
            _check(driver.cuModuleUnload(module))
    finally:
        _check(driver.cuDevicePrimaryCtxRelease(device))


def _to_device(values: Sequence[float]) -> Any:
    from cuda.bindings import driver

    size = 4 * len(values)
    dptr = _check(driver.cuMemAlloc(size))
    _check(driver.cuMemcpyHtoD(dptr, bytearray(struct.pack(f"{len(values)}f", *values)), size))
    return dptr


def _from_device(dptr: Any, count: int) -> list[float]:
    from cuda.bindings import driver

    host = bytearray(4 * count)
    _check(driver.cuMemcpyDtoH(host, dptr, 4 * count))
    _check(driver.cuMemFree(dptr))
    return list(struct.unpack(f"{count}f", bytes(host)))


def _launch(module: Any, kernel: str, args: Sequence[Any], grid: int, block: int) -> None:
    """Launch ``kernel`` with ctypes scalars ``args`` and wait for it."""
    from cuda.bindings import driver

    function = _check(driver.cuModuleGetFunction(module, kernel.encode()))
    params = (ctypes.c_void_p * len(args))(*(ctypes.addressof(a) for a in args))
    _check(
        driver.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, 0, ctypes.addressof(params), 0)
    )
    _check(driver.cuCtxSynchronize())


def run_scale_kernel(binary: bytes, kernel: str, values: list[float]) -> list[float]:
    """``cuModuleLoadData(binary)``, launch ``kernel(float* x, int n)`` over ``values`` and
    return the device's result."""
    with loaded_module(binary) as module:
        n = len(values)
        dptr = _to_device(values)
        threads = 128
        blocks = (n + threads - 1) // threads
        _launch(module, kernel, [ctypes.c_void_p(int(dptr)), ctypes.c_int(n)], blocks, threads)
        return _from_device(dptr, n)


def run_float_kernel(
    binary: bytes, kernel: str, buffers: Sequence[Sequence[float]], grid: int, block: int
) -> list[list[float]]:
    """Launch ``kernel(float* b0, float* b1, ...)`` on device copies of ``buffers`` over a
    1-D ``grid`` x ``block`` and return what the buffers hold afterwards (e.g. TVM's
    ``vector_add_kernel(A, B, C)``)."""
    with loaded_module(binary) as module:
        pointers = [_to_device(values) for values in buffers]
        _launch(module, kernel, [ctypes.c_void_p(int(p)) for p in pointers], grid, block)
        return [_from_device(p, len(v)) for p, v in zip(pointers, buffers, strict=True)]
