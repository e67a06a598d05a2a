"""Load a compiled binary with the CUDA driver and run a ``scale`` kernel (GPU tests only)."""

from __future__ import annotations

import ctypes
import struct
from typing import Any


def _check(result: Any) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    from cuda.bindings import driver

    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error: {err}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def run_scale_kernel(binary: bytes, kernel: str, values: list[float]) -> list[float]:
    """``cuModuleLoadData(binary)``, launch ``kernel(float* x, int n)`` over ``values`` and
    return the device's result."""
    from cuda.bindings import driver

    _check(driver.cuInit(0))
    device = _check(driver.cuDeviceGet(0))
    context = _check(driver.cuDevicePrimaryCtxRetain(device))
    _check(driver.cuCtxSetCurrent(context))
    try:
        module = _check(driver.cuModuleLoadData(binary))
        function = _check(driver.cuModuleGetFunction(module, kernel.encode()))
        n = len(values)
        size = 4 * n
        dptr = _check(driver.cuMemAlloc(size))
        host = bytearray(struct.pack(f"{n}f", *values))
        _check(driver.cuMemcpyHtoD(dptr, host, size))
        arg_ptr = ctypes.c_void_p(int(dptr))
        arg_n = ctypes.c_int(n)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(arg_ptr), ctypes.addressof(arg_n))
        threads = 128
        blocks = (n + threads - 1) // threads
        _check(
            driver.cuLaunchKernel(
                function, blocks, 1, 1, threads, 1, 1, 0, 0, ctypes.addressof(params), 0
            )
        )
        _check(driver.cuCtxSynchronize())
        out = bytearray(size)
        _check(driver.cuMemcpyDtoH(out, dptr, size))
        _check(driver.cuMemFree(dptr))
        _check(driver.cuModuleUnload(module))
        return list(struct.unpack(f"{n}f", bytes(out)))
    finally:
        _check(driver.cuDevicePrimaryCtxRelease(device))
