"""Every Python snippet in the README runs as written (each as a file, in a fresh interpreter,
with a private cache and server folder; one that needs TVM, TileLang or Ray runs where that
is installed), every ``asynccomp`` command of its shell blocks parses as written, and those
that need no files of the reader's run (:mod:`tests.doc_snippets`; the manual's pages get the
same in ``test_manual.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .doc_snippets import (
    README,
    check_parses,
    python_snippets,
    run_command,
    run_snippet,
    runnable_without_files,
    shell_commands,
)

SNIPPETS = python_snippets(README)
COMMANDS = shell_commands(README)

# The quick start: on a fresh machine, one command installs and runs the main job on the
# built-in examples, one runs the tests (.ci/run runs the second as written).
INSTALL_AND_RUN = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && "
    "asynccomp compile --examples --arch sm_90a"
)
RUN_THE_TESTS = ". .venv/bin/activate && pip install -e '.[test]' && python -m pytest"


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 2


def test_the_readme_is_short() -> None:
    """The README is the claim, the quick start and the way into the manual (docs/)."""
    assert len(README.read_text().splitlines()) <= 250


def test_the_quick_start_is_two_commands() -> None:
    blocks = [block.strip() for block in README.read_text().split("```sh\n")[1:]]
    commands = [block.split("\n```", 1)[0] for block in blocks]
    assert INSTALL_AND_RUN in commands
    assert RUN_THE_TESTS in commands
    ci = (README.parent / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]' && python -m pytest\n" in ci


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_snippet_runs(number: int, tmp_path: Path) -> None:
    run_snippet(SNIPPETS[number], f"readme_{number}.py", tmp_path)


def test_the_readme_shows_the_command_line() -> None:
    assert {c.split()[1] for c in COMMANDS} >= {"compile", "bench", "serve", "cache", "doctor"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_line_in_the_readme_parses(command: str) -> None:
    """Each command the README shows is one the command line takes as written (its
    arguments parse; the files it names are the reader's)."""
    check_parses(command, "the README")


@pytest.mark.parametrize("command", [c for c in COMMANDS if runnable_without_files(c)])
def test_readme_commands_without_files_run(command: str, tmp_path: Path) -> None:
    run_command(command, tmp_path)


def test_the_docs_send_no_one_to_files_they_do_not_have() -> None:
    """The corpus the benchmarks read is the one ``benchmarks/corpus/make_corpus.py``
    writes: no document points to the developers' own ``../shared`` folder for it."""
    for document in (README, README.parent / "benchmarks" / "RESULTS.md"):
        text = document.read_text()
        assert "../shared/corpus" not in text, document.name
        assert "--corpus corpus" in text and "make_corpus --out corpus" in text
