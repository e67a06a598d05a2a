"""Asking the local GPU for its architecture (only when a job does not name one)."""

from __future__ import annotations

import functools

__all__ = ("local_gpu_arch",)


@functools.cache
def local_gpu_arch(device: int = 0) -> str | None:
    """``"sm_90a"`` for an H100/H200 and so on; ``None`` when no GPU or driver is usable.

    Majors of 9 and above get the ``a`` suffix, as TVM does, so that the
    architecture-specific instructions (wgmma, TMA) those kernels use are allowed.
    """
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, dev = driver.cuDeviceGet(device)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        attr = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
        )
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, minor = driver.cuDeviceGetAttribute(
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
        )
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
    except Exception:  # no libcuda.so, or a driver too old for these bindings
        return None
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"
