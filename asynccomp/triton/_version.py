"""The Triton versions :mod:`asynccomp.triton` knows, and the check made before anything
of Triton's is replaced.

asynccomp.triton hooks Triton's own functions (``JITFunction._do_compile``, the
autotuner's ``prune_configs``, ``_bench`` and ``warmup``, the async compile mode) and
rebuilds each kernel through Triton's cache, as Triton's cache hit does: a Triton whose
internals it has not been tested against could be broken by that. So a version outside
:data:`SUPPORTED` (or one missing a seam) is never touched: :func:`~asynccomp.triton.register`
warns and installs nothing, :func:`~asynccomp.triton.compile_many` warns and compiles
with ``triton.compile`` in this process; Triton works as it does without asynccomp.
"""

from __future__ import annotations

from ..errors import AsyncCompWarning

__all__ = ("SUPPORTED", "TESTED", "TritonFallbackWarning", "TritonVersionWarning", "unsupported")

#: Triton releases (major.minor) asynccomp.triton runs on.
SUPPORTED = ("3.6",)
#: The exact versions its tests ran against (``pip install '.[triton]'`` in a checkout).
TESTED = ("3.6.0",)


class TritonFallbackWarning(AsyncCompWarning):
    """A Triton compile ran in this process, as Triton runs it without asynccomp, instead
    of in a worker; the message says why (a kernel that cannot be sent to a worker, a
    worker that could not start, a worker that found another kernel under the name)."""


class TritonVersionWarning(TritonFallbackWarning):
    """The installed Triton is not one asynccomp.triton supports: nothing is replaced."""


def unsupported() -> str | None:
    """Why asynccomp.triton must leave this Triton alone, or ``None`` where it can work.
    Imports Triton (``ImportError`` without it)."""
    import triton

    version = str(getattr(triton, "__version__", "unknown"))
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release not in SUPPORTED:
        return (
            f"Triton {version} is not a version asynccomp.triton supports (Triton "
            f"{', '.join(s + '.x' for s in SUPPORTED)}; tested with {', '.join(TESTED)})"
        )
    from triton.runtime import _async_compile, autotuner, jit

    seams = {
        "JITFunction._do_compile": getattr(jit.JITFunction, "_do_compile", None),
        "Autotuner._bench": getattr(autotuner.Autotuner, "_bench", None),
        "Autotuner.prune_configs": getattr(autotuner.Autotuner, "prune_configs", None),
        "AsyncCompileMode": getattr(_async_compile, "AsyncCompileMode", None),
        "FutureKernel": getattr(_async_compile, "FutureKernel", None),
    }
    missing = [name for name, seam in seams.items() if seam is None]
    if missing:
        return f"Triton {version} lacks {', '.join(missing)}, which asynccomp.triton hooks"
    return None
