"""A warm template answers torch's device count while its initializers run
(``asynccomp/workers/_torch_devices.py``): TileLang's and tvm-ffi's imports ask
``torch.cuda.is_available()``, and torch's NVML count starts CUDA's driver threads on a
GPU machine, after which no fork is safe. A stand-in ``torch`` with torch's own control
flow (its NVML raises) shows when the answer is given and when torch is left to count;
``tests/gpu/test_template_fork.py`` shows the real one on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asynccomp.workers._torch_devices import device_nodes

# torch 2.11's control flow: device_count() returns the cached count when one is set,
# else asks NVML (under PYTORCH_NVML_BASED_CUDA_CHECK=1); it caches only once CUDA is
# initialized (`_initialized`).
_TORCH_CUDA = """\
from .. import version  # noqa: F401 - torch.cuda imports torch.version too

_initialized = False
_cached_device_count = None


def _device_count_nvml():
    raise AssertionError("NVML asked for the device count")


def device_count():
    if _cached_device_count is not None:
        return _cached_device_count
    return _device_count_nvml()


def is_available():
    return device_count() > 0
"""

_PROBE = """\
import json, os, sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from asynccomp.workers._torch_devices import answer_device_count

with answer_device_count(Path(sys.argv[2])) as answered:
    if len(sys.argv) > 3:  # an initializer that chooses for torch before importing it
        os.environ["CUDA_VISIBLE_DEVICES"] = sys.argv[3]
    import torch.cuda

    try:
        inside = [torch.cuda.is_available(), torch.cuda.device_count()]
    except AssertionError as exc:
        inside = str(exc)
loader = torch.cuda.__spec__.loader
print(json.dumps({
    "answered": answered,
    "inside": inside,
    "count_after": torch.cuda._cached_device_count,
    "finders_after": [type(f).__name__ for f in sys.meta_path],
    "loader_patched_after": "exec_module" in vars(loader),
}))
"""


def _probe(
    tmp_path: Path, env: dict[str, str], nodes: list[str], hip: str | None = None, *extra: str
) -> dict[str, object]:
    site = tmp_path / "site"
    (site / "torch" / "cuda").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text(f"hip = {hip!r}\n")
    (site / "torch" / "cuda" / "__init__.py").write_text(_TORCH_CUDA)
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in nodes:
        (dev / name).touch()
    environ = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(site), str(dev), *extra],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


def _finders() -> list[str]:
    """A fresh interpreter's import finders: none of the template's left."""
    code = "import json, sys; print(json.dumps([type(f).__name__ for f in sys.meta_path]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    names: list[str] = json.loads(done.stdout)
    return names


GPUS = ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps"]


def test_device_nodes_are_the_drivers_numbered_ones(tmp_path: Path) -> None:
    for name in [*GPUS, "nvidia10"]:
        (tmp_path / name).touch()
    assert device_nodes(tmp_path) == 3
    assert device_nodes(tmp_path / "missing") == 0


def test_the_initializers_get_the_count_without_nvml_and_the_workers_count_again(
    tmp_path: Path,
) -> None:
    found = _probe(tmp_path, {}, GPUS)
    assert found["answered"] is True
    assert found["inside"] == [True, 2]  # is_available(), device_count(): no NVML asked
    # Afterwards torch counts for itself again (in the forked workers), and the template's
    # import hook and the loader's patch are gone.
    assert found["count_after"] is None
    assert found["finders_after"] == _finders()
    assert found["loader_patched_after"] is False


@pytest.mark.parametrize(
    ("env", "nodes", "hip", "extra"),
    [
        ({"CUDA_VISIBLE_DEVICES": "1"}, GPUS, None, ()),
        ({"PYTORCH_NVML_BASED_CUDA_CHECK": "0"}, GPUS, None, ()),
        ({}, ["nvidiactl"], None, ()),
        ({}, GPUS, "6.2", ()),
        ({}, GPUS, None, ("0",)),
    ],
    ids=[
        "CUDA_VISIBLE_DEVICES set",
        "the user's own NVML setting",
        "no GPU device nodes",
        "a ROCm torch",
        "an initializer sets CUDA_VISIBLE_DEVICES",
    ],
)
def test_torch_counts_for_itself_where_the_answer_could_be_wrong(
    tmp_path: Path, env: dict[str, str], nodes: list[str], hip: str | None, extra: tuple[str, ...]
) -> None:
    found = _probe(tmp_path, env, nodes, hip, *extra)
    assert found["inside"] == "NVML asked for the device count"  # torch's own way
    assert found["count_after"] is None
    assert found["finders_after"] == _finders()
