"""Every Python snippet in the README runs as written (each as a file, in a fresh interpreter, with
a private cache and server folder; one that needs TVM itself runs where TVM is)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .servers import server_folder

README = Path(__file__).resolve().parent.parent / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_snippet_runs(number: int, tmp_path: Path) -> None:
    code = SNIPPETS[number]
    if re.search(r"^\s*(from tvm\b|import tvm\b)", code, re.M) and not importlib.util.find_spec(
        "tvm"
    ):
        pytest.skip("needs TVM itself (pip install 'asynccomp[tvm]')")
    if "asynccomp.ray" in code and not importlib.util.find_spec("ray"):
        pytest.skip("needs Ray (pip install 'asynccomp[ray]')")
    if "import tilelang" in code and not importlib.util.find_spec("tilelang"):
        pytest.skip(
            "needs TileLang (pip install 'asynccomp[tilelang]'; CI runs it in a venv of its own)"
        )
    with server_folder() as folder:
        env = {
            **os.environ,
            "ASYNCCOMP_SERVER_DIR": str(folder),
            "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache"),
            "ASYNCCOMP_SERVER": "auto",
        }
        # As a file, as a user saves it (TileLang reads its kernels' source back).
        script = tmp_path / f"snippet_{number}.py"
        script.write_text(code)
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, f"snippet {number} failed:\n{code}\n{done.stderr}"
