"""What the README's and the manual's tests share: reading a page's snippets and commands,
and running them as a reader would.

Every ```python block of a page runs as written, as a file in a fresh interpreter, with
a private cache and compile-server folder; one that needs TVM, TileLang or Ray is skipped
where that is not installed. Every ``asynccomp`` command of its ```sh and ```console
blocks parses as written, and those that need no files of the reader's run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .servers import server_folder

__all__ = (
    "MANUAL",
    "MANUAL_PAGES",
    "README",
    "ROOT",
    "check_parses",
    "python_snippets",
    "run_command",
    "run_snippet",
    "runnable_without_files",
    "shell_commands",
    "skip_reason",
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MANUAL = ROOT / "docs"
#: The manual's pages (its hooks' folder, docs/_ext, holds none).
MANUAL_PAGES = sorted(p for p in MANUAL.rglob("*.md") if "_ext" not in p.parts)


def python_snippets(page: Path) -> list[str]:
    """The page's ```python blocks, in order (a block indented in a list, dedented)."""
    blocks = re.findall(r"^( *)```python\n(.*?)^\1```", page.read_text(), re.S | re.M)
    return [textwrap.dedent(code) for _, code in blocks]


def shell_commands(page: Path) -> list[str]:
    """Every ``asynccomp ...`` command of the page's ```sh blocks (continued lines joined,
    comments and what follows ``&&`` or ``|`` split off) and of its ```console blocks
    (the lines after a ``$`` prompt), each once, in order."""
    text = page.read_text()
    lines: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M):
        lines += re.sub(r"\\\n\s*", " ", block).splitlines()
    for block in re.findall(r"^```console\n(.*?)^```", text, re.S | re.M):
        lines += [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    commands: list[str] = []
    for line in lines:
        for part in re.split(r"&&|\|", line.split("#", 1)[0]):
            part = part.strip()
            if part.startswith("asynccomp ") or part == "asynccomp":
                commands.append(part)
    return list(dict.fromkeys(commands))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its package is missing
        return False


def skip_reason(code: str) -> str | None:
    """Why this snippet cannot run here (a framework it needs is missing), or ``None``."""
    if re.search(r"^\s*(from tvm\b|import tvm\b)", code, re.M) and not _importable("tvm"):
        return "needs TVM itself (pip install '.[tvm]' in the checkout)"
    if "meta_schedule" in code and not _importable("tvm.ir.utils"):
        return "needs Apache TVM 0.27's MetaSchedule (TileLang's own tvm is another)"
    if "asynccomp.ray" in code and not _importable("ray"):
        return "needs Ray (pip install '.[ray]' in the checkout)"
    if "import tilelang" in code and not _importable("tilelang"):
        return "needs TileLang (pip install '.[tilelang]'; CI runs it in a venv of its own)"
    if re.search(r"^\s*(from triton\b|import triton\b)", code, re.M) and not _importable("triton"):
        return "needs Triton (pip install '.[triton]'; CI runs it in a venv of its own)"
    return None


def run_snippet(code: str, name: str, tmp_path: Path) -> None:
    """Run ``code`` as the file ``name`` (as a user saves it: TileLang reads its kernels'
    source back) in a fresh interpreter, in ``tmp_path``, on a private compile server."""
    reason = skip_reason(code)
    if reason is not None:
        pytest.skip(reason)
    with server_folder() as folder:
        env = {
            **os.environ,
            "ASYNCCOMP_SERVER_DIR": str(folder),
            "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache"),
            "ASYNCCOMP_SERVER": "auto",
        }
        script = tmp_path / name
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
    assert done.returncode == 0, f"{name} failed:\n{code}\n{done.stderr}"


def check_parses(command: str, where: str) -> None:
    """``command`` is one the command line takes as written (the files it names are the
    reader's)."""
    from asynccomp.cli import build_parser

    argv = shlex.split(command)[1:]
    if "--" in argv:
        argv = argv[: argv.index("--")]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}'s `{command}` does not parse (exit {exc.code})")


def runnable_without_files(command: str) -> bool:
    """Whether a shown command can run as written on any machine: ``cache`` and
    ``doctor`` (a private cache folder), and compiles of the built-in examples."""
    words = command.split()
    return words[1:2] in (["cache"], ["doctor"]) or command.startswith(
        "asynccomp compile --examples"
    )


def run_command(command: str, tmp_path: Path) -> None:
    """Run a shown command as written, with a private cache and server folder."""
    with server_folder() as folder:
        env = {
            **os.environ,
            "ASYNCCOMP_SERVER_DIR": str(folder),
            "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache"),
            "ASYNCCOMP_SERVER": "off",
        }
        done = subprocess.run(
            [sys.executable, "-m", "asynccomp", *shlex.split(command)[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stderr}"
