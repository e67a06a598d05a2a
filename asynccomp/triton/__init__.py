"""Triton's compiles on asynccomp's warm worker processes, in parallel.

Triton compiles a ``@triton.jit`` kernel in the calling process, on its first call for
each specialization (MLIR and LLVM passes, then ``ptxas``: about half a second for a
small matmul, more for big tiles), one at a time: threads gain nothing, and
``@triton.autotune`` compiles and benchmarks its configs in turn. One line changes that::

    import asynccomp.triton
    asynccomp.triton.register()        # or: with asynccomp.triton.enabled(): ...

- **Workers**: compiles run in worker processes (one per CPU by default), forked from a
  template that imported Triton and compiled a tiny kernel once, so a worker's first
  compile is a warm one. They run Triton's own ``triton.compile``, with this process's
  Triton settings (``TRITON_*`` and the other variables Triton reads), into Triton's
  cache.
- **Triton's kernels**: what a kernel call, ``kernel.warmup(...)`` or the autotuner gets
  is Triton's ``CompiledKernel``, made from Triton's cache as a cache hit makes it: every
  stage (``asm["ttir"]`` ... ``asm["cubin"]``) byte for byte what Triton alone builds.
  Triton's cache (``TRITON_CACHE_DIR``) keeps working: what the workers build is there,
  and a kernel it already holds is answered without a worker. Before compiling, each
  worker checks that its Triton cache key of the kernel equals this process's; where
  it does not (the kernel's file edited since it was imported), Triton compiles the
  kernel here.
- **Autotune without the serial wall** (:mod:`._autotune`): every config of an
  ``@triton.autotune`` compiles at once, and each is benchmarked (Triton's own
  ``_bench``: the same ``do_bench``, hooks, error handling) as soon as its kernel is
  ready, so compiling and benchmarking overlap; Triton's ``run`` then chooses from the
  same timings as it would alone. A config that fails to compile is dropped or raises
  exactly as in Triton; a worker that dies compiling a config (Triton's C++ aborting)
  or runs past ``timeout`` drops that config only (logged), where Triton's own process
  would have died or hung. ``register(screen=Screen())`` benchmarks every config
  briefly first and in full only those that can win (Triton's full benchmark is ~125 ms
  of GPU time per config, in turn).
- **Many at once** (``kernel.warmup`` of many specializations): ``with
  asynccomp.triton.parallel(): ...`` is Triton's ``AsyncCompileMode`` over the workers.
- **No GPU needed**: :func:`compile_many` compiles Triton ``ASTSource``\\ s (or ``(fn,
  signature, constexprs)`` tuples) for an explicit target (``GPUTarget("cuda", 90,
  32)``) and returns, in order, what ``triton.compile`` returns for each, or its
  exception: precompile a sweep on CPU machines into Triton's cache (share the folder,
  or Triton's remote cache) for the GPU machine to find.
- **Kernels from anywhere**: kernels of importable modules go to the workers by name;
  those defined in ``__main__``, a notebook or a function go by value with cloudpickle
  (the ``triton`` extra installs it). A kernel that cannot go (no cloudpickle, a global
  that does not pickle), or a process with a compiler pipeline hook the workers cannot
  run (``knobs.runtime.add_stages_inspection_hook``, Proton's instrumentation), is
  compiled here by Triton after a :class:`TritonFallbackWarning` that says why.
- **Errors**: a compile error is Triton's own exception (``CompilationError``,
  ``PTXASError``...), raised where Triton raises it; :class:`TritonCompileCrashed` (a
  worker died) and :class:`TritonCompileTimeout` are ``RuntimeError``\\ s and asynccomp
  ``CompileError``\\ s. :func:`statistics` counts what happened.
- **Versions**: Triton 3.6 (tested with 3.6.0: ``pip install '.[triton]'`` in a checkout).
  Another Triton is left alone: :func:`register` warns
  (:class:`TritonVersionWarning`) and replaces nothing, :func:`compile_many` warns and
  compiles in this process.

Not replaced: ``triton.compile`` called directly (use :func:`compile_many`), Gluon
kernels and IR files (Triton's own path), and the ``ptxas`` step stays Triton's own (its
bundled ``ptxas``, run by Triton in the worker: the cubin is Triton's).

Without Triton installed, ``import asynccomp.triton`` works; :func:`register` and
:func:`compile_many` raise ``ImportError``.
"""

from __future__ import annotations

from ._autotune import Screen
from ._compile import TritonStatistics, statistics
from ._errors import TritonCompileCrashed, TritonCompileTimeout
from ._hooks import enabled, parallel, register, registered, unregister
from ._many import compile_many
from ._pool import close
from ._version import SUPPORTED, TESTED, TritonFallbackWarning, TritonVersionWarning

__all__ = (
    "SUPPORTED",
    "Screen",
    "TESTED",
    "TritonCompileCrashed",
    "TritonCompileTimeout",
    "TritonFallbackWarning",
    "TritonStatistics",
    "TritonVersionWarning",
    "close",
    "compile_many",
    "enabled",
    "parallel",
    "register",
    "registered",
    "statistics",
    "unregister",
)
