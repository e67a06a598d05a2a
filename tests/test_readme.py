"""Every Python snippet in the README runs as written (each as a file, in a fresh interpreter, with
a private cache and server folder; one that needs TVM itself runs where TVM is), and every
``asynccomp`` command of its shell blocks parses as written (those that need no files of the
reader's run)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .servers import server_folder

README = Path(__file__).resolve().parent.parent / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 5


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its package is missing
        return False


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_snippet_runs(number: int, tmp_path: Path) -> None:
    code = SNIPPETS[number]
    if re.search(r"^\s*(from tvm\b|import tvm\b)", code, re.M) and not importlib.util.find_spec(
        "tvm"
    ):
        pytest.skip("needs TVM itself (pip install 'asynccomp[tvm]')")
    if "meta_schedule" in code and not _importable("tvm.ir.utils"):
        pytest.skip("needs Apache TVM 0.27's MetaSchedule (TileLang's own tvm is another)")
    if "asynccomp.ray" in code and not importlib.util.find_spec("ray"):
        pytest.skip("needs Ray (pip install 'asynccomp[ray]')")
    if "import tilelang" in code and not importlib.util.find_spec("tilelang"):
        pytest.skip(
            "needs TileLang (pip install 'asynccomp[tilelang]'; CI runs it in a venv of its own)"
        )
    if re.search(r"^\s*(from triton\b|import triton\b)", code, re.M) and not _importable("triton"):
        pytest.skip("needs Triton (pip install 'asynccomp[triton]'; CI: a venv of its own)")
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


# Every `asynccomp ...` line of the README's shell blocks (continued lines joined, comments
# and what follows `&&` or `|` left out).
def _shell_commands() -> list[str]:
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in re.split(r"&&|\|", line.split("#", 1)[0]):
                part = part.strip()
                if part.startswith("asynccomp "):
                    commands.append(part)
    return commands


COMMANDS = list(dict.fromkeys(_shell_commands()))


def test_the_readme_shows_the_command_line() -> None:
    assert len(COMMANDS) >= 10
    assert {c.split()[1] for c in COMMANDS} >= {"compile", "bench", "serve", "cache", "doctor"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_line_in_the_readme_parses(command: str) -> None:
    """Each command the README shows is one the command line takes as written (its
    arguments parse; the files it names are the reader's)."""
    from asynccomp.cli import build_parser

    argv = shlex.split(command)[1:]
    if "--" in argv:
        argv = argv[: argv.index("--")]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"the README's `{command}` does not parse (exit {exc.code})")


# The README's commands that need no files of the reader's, run as written.
@pytest.mark.parametrize(
    "command",
    [c for c in COMMANDS if c.split()[1:2] == ["cache"] or c in ("asynccomp doctor",)]
    + [c for c in COMMANDS if c.startswith("asynccomp compile --examples")],
)
def test_readme_commands_without_files_run(command: str, tmp_path: Path) -> None:
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


def test_the_docs_send_no_one_to_files_they_do_not_have() -> None:
    """The corpus the benchmarks read is the one ``benchmarks/corpus/make_corpus.py``
    writes: no document points to the developers' own ``../shared`` folder for it."""
    for document in (README, README.parent / "benchmarks" / "RESULTS.md"):
        text = document.read_text()
        assert "../shared/corpus" not in text, document.name
        assert "--corpus corpus" in text and "make_corpus --out corpus" in text
