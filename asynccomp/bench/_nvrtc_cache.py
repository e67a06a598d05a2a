"""NVRTC's own cache, which a benchmark of compile speed must not measure.

NVRTC 12.9 and later keep a cache of their own in the CUDA driver's compute cache
(``~/.nv/ComputeCache``, or ``$CUDA_CACHE_PATH``), shared by every process of the machine,
whenever a CUDA driver can be loaded: so on GPU machines, never on CPU-only ones. Its key
is not the source text: on an H100 (2026-12-07, ``benchmarks/compile/nvrtc_cache.py``) the
largest corpus kernel compiled in 11.9 s, then 0.82 s the same again in a new process,
0.73 s with a comment appended and 0.69 s with one more ``-D`` option, and 11.3 s with
``CUDA_CACHE_DISABLE=1``. So the comment each pass adds to its sources does not make them
new to NVRTC, and a benchmark that leaves the cache on times its hits: 60 corpus kernels
on 16 workers took 0.85 s with it on, 14.2 s with it off. An autotuner's candidates are
new programs, so the benchmark turns it off unless asked. (The engine's own option lists
carry ``--no-cache`` already; the ``tvm`` style's jobs use TVM's exact command line,
which does not.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

#: What NVRTC (and the driver) read to leave the compute cache alone.
SWITCH = "CUDA_CACHE_DISABLE"


@contextlib.contextmanager
def nvrtc_cache(on: bool) -> Iterator[None]:
    """NVRTC's own cache on (as the environment has it) or off (``CUDA_CACHE_DISABLE=1``)
    for the NVRTC of every process started inside, and of this one if it has not compiled
    yet; the environment as it was afterwards.

    NVRTC reads the variable once per process, at its first compile: worker processes
    started inside read it as set here; a process that compiled with NVRTC before keeps
    what it read then (for the in-process configurations, ``tvm`` and ``threads``, the
    report's "NVRTC's own cache off" is then what was asked, not what NVRTC did). The
    environment is the process's: two runs at once in one process share it.

    >>> with nvrtc_cache(False):
    ...     os.environ["CUDA_CACHE_DISABLE"]
    '1'
    """
    if on:
        yield
        return
    before = os.environ.get(SWITCH)
    os.environ[SWITCH] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = before
