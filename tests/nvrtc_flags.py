"""Options for the tests that call NVRTC directly (not through the engine)."""

from __future__ import annotations

__all__ = ("without_nvrtc_cache",)


def without_nvrtc_cache(options: list[str]) -> list[str]:
    """``options`` and ``--no-cache`` where NVRTC keeps a compile cache of its own
    (12.9 and later, in ``~/.nv/ComputeCache``): a hit there skips ptxas, and the
    ``--ptxas-options=-v`` report with it (NVRTC 13.0 gave an empty log, ``b"\\x00"``:
    NVIDIA/Fuser#4694), so a test that reads the report would depend on what an
    earlier run left there. The engine passes it for the same reason (backends/nvrtc.py)."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    if (major, minor) >= (12, 9) and "--no-cache" not in options:
        return [*options, "--no-cache"]
    return list(options)
