"""A drop-in ``tvm_callback_cuda_compile`` for Apache TVM, on asynccomp's engine.

TVM compiles every CUDA module it builds through the global function
``tvm_callback_cuda_compile``. One line in a TVM program replaces TVM's own with this one::

    import asynccomp.tvm; asynccomp.tvm.register()

It gives the same binaries as TVM 0.27 (same source rewrite, same options in the same
order, same exception types and message prefixes) and fixes TVM's flaws: the toolkit is
looked up once per process, results are cached (memory and disk) and identical compiles
in flight run once, NVRTC front ends run in parallel worker processes, ``TVM_KERNEL_DUMP``
dumps every compile (NVRTC too) into a folder of its own, and
:func:`prefetch` compiles a batch ahead so TVM's later synchronous callbacks are cache hits.

Without TVM installed, :func:`compile_cuda` works the same (``import asynccomp.tvm`` never
imports TVM):

>>> import asynccomp.tvm
>>> cubin = asynccomp.tvm.compile_cuda(
...     'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }', arch="sm_90a"
... )
>>> bytes(cubin[:4])
b'\\x7fELF'

Environment variables (read at every call):

- TVM's own: ``TVM_CUDA_COMPILE_MODE`` (``nvrtc``, the default, gives cubin; ``nvcc``
  fatbin), ``TVM_CUDA_PTXAS_REG_LEVEL``, ``TVM_CUDA_PTXAS_EXTRA_OPTS``,
  ``TVM_CUDA_NVRTC_EXTRA_OPTS``, ``TVM_CUDA_NVCC_NO_FAST_MATH``, ``TVM_KERNEL_DEBUG``,
  ``TVM_KERNEL_DUMP=<dir>``, ``CUDA_PATH``, ``NVSHMEM_HOME``: as in TVM.
- ``ASYNCCOMP_ARCH=sm_90a``: the architecture when neither ``arch`` nor a TVM target scope
  gives one (before asking the local GPU).
- ``ASYNCCOMP_TVM_FAST_PATH=0``: compile TVM's preamble as is. By default (``1``) its
  ``<cuda/std/type_traits>`` include is replaced by equivalent definitions
  (:mod:`asynccomp.preamble`): about 2x less NVRTC time and the same SASS, but cubins that
  differ from TVM's in a few bytes of dead constants. Set it to ``0`` for byte identity.
- ``ASYNCCOMP_CACHE_DIR``: the on-disk cache (default: the user cache folder).

Architecture, when ``arch`` is not given: the two-argument callback's target, or the
active ``tvm.target.Target.current()`` (only when TVM is already imported), then
``$ASYNCCOMP_ARCH``, then the local GPU (``sm_90a`` for an H100/H200), else TVM's
``ValueError``.
"""

from __future__ import annotations

from ._facade import (
    CALLBACK_NAME,
    FAST_PATH_ENV,
    compile_cuda,
    engine,
    prefetch,
    register,
    shutdown,
    tvm_callback_cuda_compile,
    where,
)
from ._ms_builder import Builder
from ._render import make_job

__all__ = (
    "Builder",
    "CALLBACK_NAME",
    "FAST_PATH_ENV",
    "compile_cuda",
    "engine",
    "make_job",
    "prefetch",
    "register",
    "shutdown",
    "tvm_callback_cuda_compile",
    "where",
)
