"""Real MetaSchedule candidates for the builder tests and benchmark: ReplayTrace samples
of a square fp32 matmul's CUDA design space (post-order-apply, the CUDA rules), as
``LocalBuilder`` receives them from ``tune_tir``; and the CUDA code a built artifact
holds (its source or its binary), to compare builders candidate by candidate."""

from __future__ import annotations

import struct
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


#: The formats a CUDA module of TVM's holds its code in: its CUDA source (a device
#: source module: TVM on a machine without a CUDA driver compiles nothing) or the binary
#: TVM compiled (a CUDA module, on a machine with one: its source is not saved).
CODE_FORMATS = frozenset({"cuda", "cubin", "ptx", "fatbin"})

_U64 = struct.Struct("<Q")


class _Stream:
    """dmlc's binary stream, as TVM writes a module's bytes: integers little-endian,
    a string (or a vector) as its length (8 bytes) and then its bytes (or items)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError(f"{size} bytes wanted at {self.at}, past the end ({len(self.data)})")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def count(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def string(self) -> bytes:
        return self.take(self.count())


def _cuda_module(blob: bytes) -> tuple[str, bytes]:
    """The format and the code of a CUDA module's bytes (TVM's ``SaveToBytes``, the
    same for both kinds of module: the format, the functions' table, the code)."""
    stream = _Stream(blob)
    fmt = stream.string().decode()
    if fmt not in CODE_FORMATS:
        raise ValueError(f"not a CUDA module's format: {fmt!r}")
    for _ in range(stream.count()):  # name -> FunctionInfo
        stream.string()  # the table's key
        stream.string()  # the function's name
        stream.take(4 * stream.count())  # its argument types (DLDataType: 4 bytes)
        for _ in range(stream.count()):  # its launch parameter tags
            stream.string()
        stream.take(4 * stream.count())  # its arguments' extra tags (int)
    code = stream.string()
    if stream.at != len(blob):
        raise ValueError(f"{len(blob) - stream.at} bytes after the module's code")
    return fmt, code


def cuda_code(artifact: str | Path) -> tuple[str, bytes]:
    """The format and the code of the CUDA module inside a ``default_export`` artifact
    (``devc.o`` holds the modules a library imports, each as its kind and its bytes):
    ``("cuda", source)`` where TVM saved the CUDA source (TVM made no binary: no CUDA
    driver), else the binary TVM compiled, e.g. ``("cubin", ...)``."""
    with tarfile.open(artifact) as tar:
        member = tar.extractfile("devc.o")
        assert member is not None
        blob = member.read()
    kind = _U64.pack(4) + b"cuda"
    found = []
    start = blob.find(kind)
    while start >= 0:
        at = start + len(kind)
        (size,) = _U64.unpack_from(blob, at)
        try:
            found.append(_cuda_module(blob[at + 8 : at + 8 + size]))
        except (ValueError, struct.error, UnicodeDecodeError):
            pass  # those bytes only looked like a module's start
        start = blob.find(kind, start + 1)
    if len(found) != 1:
        raise ValueError(f"{artifact}: {len(found)} CUDA modules in devc.o, not one")
    return found[0]


def cuda_source(artifact: str | Path) -> bytes:
    """What a candidate built, to compare builders candidate by candidate: the code of
    the CUDA module in its artifact (:func:`cuda_code`): TVM's CUDA source where the
    artifact holds that, else the binary TVM compiled from it."""
    fmt, code = cuda_code(artifact)
    if fmt == "cuda":
        assert b"__global__" in code, code[:200]
    elif fmt == "cubin":
        assert code.startswith(b"\x7fELF"), code[:16]
    return code


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
