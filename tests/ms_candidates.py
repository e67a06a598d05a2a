"""Real MetaSchedule candidates for the builder tests and benchmark: ReplayTrace samples
of a square fp32 matmul's CUDA design space (post-order-apply, the CUDA rules), as
``LocalBuilder`` receives them from ``tune_tir``; and the CUDA source a built artifact
holds, to compare builders candidate by candidate."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

TARGET = {"kind": "cuda", "arch": "sm_90a", "max_threads_per_block": 1024,
          "max_shared_memory_per_block": 49152, "thread_warp_size": 32}  # fmt: skip


def matmul(n: int) -> Any:
    from tvm import te

    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def candidates(count: int, n: int = 128, seed: int = 1) -> list[Any]:
    """``count`` builder inputs: ReplayTrace candidates of an ``n``^3 matmul."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    target = tvm.target.Target(TARGET)
    context = ms.TuneContext(
        mod=tvm.IRModule({"main": matmul(n)}),
        target=target,
        space_generator="post-order-apply",
        search_strategy=ms.search_strategy.ReplayTrace(),
        task_name=f"matmul{n}",
        rand_state=seed,
        num_threads=1,
    )
    context.pre_tuning(
        max_trials=count,
        num_trials_per_iter=count,
        design_spaces=context.generate_design_space(),
        database=ms.database.MemoryDatabase(),
        cost_model=None,
    )
    found = context.generate_measure_candidates()
    context.post_tuning()
    return [ms.builder.BuilderInput(c.sch.mod, target) for c in found]


def cuda_source(artifact: str | Path) -> bytes:
    """The CUDA source inside a ``default_export`` artifact (``devc.o`` holds the CUDA
    module: its source, from TVM's preamble to the NUL that ends it, and its binary)."""
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("devc.o")
        assert member is not None
        blob = member.read()
    start = blob.index(b"#ifdef __CUDACC_RTC__")
    source = blob[start : blob.index(b"\0", start)]
    assert b"__global__" in source
    return source


#: Eight candidates of a 128^3 matmul, made by :func:`candidates` (``python -m
#: tests.ms_candidates``, about 2 minutes on 2 cores: too long to repeat in every test run)
#: and kept as the builder receives them: pickled (TVM's JSON graph), TVM 0.27.0.post1.
SAVED = Path(__file__).with_name("data") / "ms_matmul128_candidates.pkl"


def saved_candidates() -> list[Any]:
    import pickle

    from tvm.s_tir import meta_schedule as ms

    with SAVED.open("rb") as file:
        pairs = pickle.load(file)
    return [ms.builder.BuilderInput(mod, target) for mod, target in pairs]


if __name__ == "__main__":
    import pickle

    pairs = [(c.mod, c.target) for c in candidates(8)]
    SAVED.write_bytes(pickle.dumps(pairs))


def gated_build(mod: Any, target: Any, params: Any) -> Any:
    """``default_build``, except that the first candidate to come (the one that creates
    ``$ASYNCCOMP_TEST_GATE/claimed``, holding its worker's pid) waits until the test
    creates ``$ASYNCCOMP_TEST_GATE/open``: a build that hangs for as long as a test says."""
    import os
    import time

    from tvm.s_tir.meta_schedule.builder.local_builder import default_build

    gate = Path(os.environ["ASYNCCOMP_TEST_GATE"])
    try:
        fd = os.open(gate / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return default_build(mod, target, params)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    while not (gate / "open").exists():
        time.sleep(0.05)
    return default_build(mod, target, params)


def hang(marker: str) -> None:
    """A task that never ends, once it has written its worker's pid to ``marker``."""
    import os
    import time

    Path(marker).write_text(str(os.getpid()))
    time.sleep(3600)
