"""R13: ``python -m asynccomp`` in a folder holding a ``ray.py`` (or an ``anyio.py``)
imports the real modules, never the stray files (Python puts the working folder first
on ``sys.path`` for ``-m``; asynccomp drops it, as ``python -P`` would)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_STRAY = 'from pathlib import Path\nPath({marker!r}).write_text("the stray {name} ran")\n'


@pytest.mark.parametrize("name", ["ray", "anyio"])
def test_a_stray_module_in_the_working_folder_is_not_imported(tmp_path: Path, name: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "MARKER"
    (work / f"{name}.py").write_text(_STRAY.format(marker=str(marker), name=name))
    (work / "k.cu").write_text('extern "C" __global__ void k() {}\n')
    # No cluster to be found: --ray auto looks in Ray's temporary folder too, where a Ray
    # test running beside this one may have a cluster live (on the GPU machine, with Ray
    # installed, its actors then ran in Ray workers, which put the driver's working folder
    # on their sys.path: Ray's doing, not the command's, which is what this test checks).
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(tmp_path / "ray-tmp")
    done = subprocess.run(
        [sys.executable, "-m", "asynccomp", "compile", "--ray", "auto", "--arch", "sm_90a", "k.cu"],
        cwd=work,
        env={**env, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert not marker.exists(), (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr


def test_a_program_that_imports_asynccomp_keeps_its_path(tmp_path: Path) -> None:
    """Only ``python -m asynccomp`` drops the entry: a script importing asynccomp (whose
    own modules lie beside it) keeps its ``sys.path``."""
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\nbefore = list(sys.path)\nimport asynccomp\nprint(sys.path == before)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "True"
