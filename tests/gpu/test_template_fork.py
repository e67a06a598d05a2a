"""On a GPU machine with torch: a warm template whose initializers ask
``torch.cuda.is_available()`` (TileLang's and tvm-ffi's imports do) is still one thread,
so its workers are forked, and each can use CUDA itself (issue 36: on the H100 every
TileLang and tvm-builder worker was spawned, the templates holding a CUDA driver thread)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from asynccomp.workers import PoolSettings, WorkerPool

from .. import warm_tasks

pytestmark = pytest.mark.skipif(
    not Path("/dev/nvidia0").exists() or importlib.util.find_spec("torch") is None,
    reason="needs an NVIDIA GPU and torch",
)


def test_a_template_that_asks_torch_for_cuda_is_forked_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pool = WorkerPool(PoolSettings("torch", 2, [warm_tasks.import_torch_cuda]))
    try:
        results = warm_tasks.within(
            300, lambda: pool.map(warm_tasks.torch_cuda_usable, [(), ()]), "map"
        )
        stats = pool.statistics()
    finally:
        pool.close()
    assert [r.outcome for r in results] == ["done", "done"], results
    assert stats.forked == stats.started == 2 and stats.template
    assert [r.value for r in results] == [(False, True, True)] * 2
