"""A drop-in ``tilelang_callback_cuda_compile`` for TileLang, on asynccomp's engine.

TileLang (0.1.15) compiles every CUDA kernel it builds through the tvm-ffi global
function ``tilelang_callback_cuda_compile`` (``execution_backend="tvm_ffi"``, its default
for CUDA). One line replaces TileLang's own with this one::

    import asynccomp.tilelang; asynccomp.tilelang.register()

- **Same binaries** (``backend="nvcc"``, the default): TileLang's nvcc command line, in
  its order (``-ccbin``, ``--cubin``, ``-O3``, ``-lineinfo``, ``-arch``/``-gencode``,
  ``-std=c++20``, its template and CUTLASS folders, the device flags, fast math, the
  register level, ``TILELANG_VERBOSE``'s flags), plus ``--ptxas-options=-v`` and
  ``-Xcompiler -MMD,-MF,...``, which change no output byte: the SASS is TileLang's
  (tested with cuobjdump). The cubin differs from TileLang's only in the file path ``-lineinfo``
  records.
- **NVRTC** (``register(backend="nvrtc")``, opt-in): TileLang's NVRTC form of the
  source and its options rendered for NVRTC, compiled in NVRTC worker processes that
  keep a precompiled header of TileLang's headers (``pch=True``; the one of its GEMM
  headers made as :func:`register` returns, for ``register(target=...)``:
  :mod:`._pch_ahead`); the architecture is always the target's. **Not the same SASS as
  nvcc**: another compiler (close; check your kernels).
- **The engine**: the process-wide one :mod:`asynccomp.tvm` uses, on this user's compile
  server by default (``ASYNCCOMP_SERVER=off``: in this process), so every thread and
  process TileLang compiles from (``par_compile``, the autotuner's pool, grouped
  compiles) shares one set of workers, one cache and one coalescing of identical
  compiles. nvcc results are cached with the headers each compile read (the host
  preprocessor's ``-MMD``, in the pass nvcc runs anyway), so an edited or upgraded
  TileLang or CUTLASS header is a miss. NVRTC results of TileLang kernels are not
  cached yet: CUTLASS names headers through a macro
  (``#include CUDA_STD_HEADER(type_traits)``), which asynccomp's include scan refuses
  to guess, and a result whose headers are unknown is never cached (identical compiles
  in flight are still shared). TileLang's own binary
  cache (``~/.tilelang``) is not consulted.
- **Lowering in worker processes** (``register(lower_in_workers=True)``, the default):
  the autotuner (``AutoTuner.run``, ``@tilelang.autotune``, grouped or not) and
  ``par_compile`` elaborate and lower each config in warm worker processes, and
  TileLang's own code finishes each kernel here from their IR, on one thread per CPU,
  without the decorator's lock (:mod:`._offload`): the same sources, binaries, best
  config and per-config exceptions as TileLang alone; a crashed worker fails its config
  only (:class:`TileLangLoweringCrashed`).
- **Errors**: a failed compile raises :class:`TileLangCompileError` (a ``RuntimeError``,
  as TileLang's own, and an asynccomp ``CompileError``) with TileLang's message (the
  source, the compiler's output, the command); a timeout
  (``TILELANG_COMPILE_TIMEOUT_SECONDS``) raises :class:`TileLangCompileTimeout`. Both
  are registered with tvm-ffi, so ``tilelang.compile`` re-raises them as themselves,
  though only their message crosses TileLang's C++.
- **Dumps, logs, resources**: ``register(dump=...)`` or TileLang's pass config
  ``cuda.kernels_output_dir`` dump each compile into a folder of its own (source,
  command, log, binary); ``register(on_result=f)`` hands ``f`` every
  :class:`~asynccomp.CompileResult` (log, ``resources`` from ptxas, timings).

Environment variables (read at every compile): TileLang's own
(``TILELANG_COMPILE_TIMEOUT_SECONDS``, ``TILELANG_VERBOSE``, ``CXX``/``CC``,
``TL_TEMPLATE_PATH``, ``TL_CUTLASS_PATH`` as TileLang read them at import),
``ASYNCCOMP_TILELANG_BACKEND`` (``nvcc``/``nvrtc``, when :func:`register` is not told),
``ASYNCCOMP_SERVER``, ``ASYNCCOMP_CACHE_DIR``, ``ASYNCCOMP_NVRTC_PCH_HEAP``.

Without TileLang installed, ``import asynccomp.tilelang`` works and :func:`make_job`
renders jobs for given paths; :func:`register` raises ``ImportError``.
"""

from __future__ import annotations

from ._errors import TileLangCompileError, TileLangCompileTimeout, TileLangLoweringCrashed
from ._facade import (
    BACKEND_ENV,
    CALLBACK_NAME,
    compile_cuda,
    engine,
    register,
    registered,
    shutdown,
    tilelang_callback_cuda_compile,
    unregister,
)
from ._render import PassConfig, TileLangPaths, make_job

__all__ = (
    "BACKEND_ENV",
    "CALLBACK_NAME",
    "PassConfig",
    "TileLangCompileError",
    "TileLangCompileTimeout",
    "TileLangLoweringCrashed",
    "TileLangPaths",
    "compile_cuda",
    "engine",
    "make_job",
    "register",
    "registered",
    "shutdown",
    "tilelang_callback_cuda_compile",
    "unregister",
)
