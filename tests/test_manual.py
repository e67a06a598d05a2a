"""The manual (docs/) stays true: every Python snippet of every page runs as written (as the
README's do: a fresh interpreter, a private cache and server; skipped where TVM, TileLang
or Ray is missing), every ``asynccomp`` command it shows parses, those that need no files
of the reader's run, and the reference pages name every subcommand, every ``Engine``
keyword and every environment variable asynccomp reads.

A snippet that is the README's too runs once, in ``test_readme.py``. Ids name the page:
``-k tilelang`` runs the TileLang guide's snippets alone.
"""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

from .doc_snippets import (
    MANUAL,
    MANUAL_PAGES,
    README,
    ROOT,
    check_parses,
    python_snippets,
    run_command,
    run_snippet,
    runnable_without_files,
    shell_commands,
)


def _name(page: Path) -> str:
    return page.relative_to(MANUAL).as_posix()


_README_SNIPPETS = set(python_snippets(README))
SNIPPETS = [
    pytest.param(code, id=f"{_name(page)}:{number}")
    for page in MANUAL_PAGES
    for number, code in enumerate(python_snippets(page))
    if code not in _README_SNIPPETS
]
_README_COMMANDS = set(shell_commands(README))
COMMANDS = [
    pytest.param(command, _name(page), id=f"{_name(page)}:{command}")
    for page in MANUAL_PAGES
    for command in shell_commands(page)
]
# Each command once (the README's are run by its own test).
_RUN: dict[str, Path] = {}
for _page in MANUAL_PAGES:
    for _command in shell_commands(_page):
        if runnable_without_files(_command) and _command not in _README_COMMANDS:
            _RUN.setdefault(_command, _page)


def test_the_manual_has_snippets_on_every_guide() -> None:
    assert len(SNIPPETS) >= 15
    guides = sorted((MANUAL / "guides").glob("*.md"))
    assert guides, "no guides"
    for guide in guides:
        has_code = python_snippets(guide) or shell_commands(guide)
        assert has_code, f"{_name(guide)} shows no code"


@pytest.mark.parametrize("code", SNIPPETS)
def test_snippet_runs(code: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    name = re.sub(r"\W", "_", request.node.name) + ".py"
    run_snippet(code, name, tmp_path)


@pytest.mark.parametrize(("command", "page"), COMMANDS)
def test_every_command_line_in_the_manual_parses(command: str, page: str) -> None:
    check_parses(command, page)


@pytest.mark.parametrize("command", sorted(_RUN))
def test_manual_commands_without_files_run(command: str, tmp_path: Path) -> None:
    run_command(command, tmp_path)


def _subcommands() -> list[str]:
    from asynccomp.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    raise AssertionError("asynccomp has no subcommands")


def test_the_command_line_reference_has_every_subcommand() -> None:
    """docs/reference/cli.md generates each subcommand's reference from its parser (the
    hook in docs/_ext/hooks.py): a new subcommand needs its line there."""
    text = (MANUAL / "reference" / "cli.md").read_text()
    markers = re.findall(r"^<!-- asynccomp-cli (\S+) -->$", text, re.M)
    assert markers[0] == "asynccomp"
    assert sorted(markers[1:]) == sorted(_subcommands())
    shown = {c.split()[1] for page in MANUAL_PAGES for c in shell_commands(page)}
    assert shown >= set(_subcommands())


def test_the_configuration_reference_has_every_engine_keyword() -> None:
    from asynccomp import Engine

    text = (MANUAL / "reference" / "configuration.md").read_text()
    keywords = [name for name in inspect.signature(Engine).parameters if name != "self"]
    missing = [name for name in keywords if f"| `{name}` |" not in text]
    assert not missing, f"docs/reference/configuration.md lacks Engine keywords {missing}"


# Variables asynccomp sets for its own child processes, not for users (none since the
# process workers of asynccomp/workers/ stopped passing ASYNCCOMP_WORKER_PARENT).
_INTERNAL_VARIABLES: frozenset[str] = frozenset()


def test_the_configuration_reference_has_every_environment_variable() -> None:
    text = (MANUAL / "reference" / "configuration.md").read_text()
    read: set[str] = set()
    for source in (ROOT / "asynccomp").rglob("*.py"):
        read |= set(re.findall(r"\b(ASYNCCOMP_[A-Z][A-Z_]*[A-Z])\b", source.read_text()))
    missing = sorted(read - _INTERNAL_VARIABLES - set(re.findall(r"`(ASYNCCOMP_\w+)`", text)))
    assert not missing, f"docs/reference/configuration.md lacks {missing}"


def test_no_one_is_told_to_install_asynccomp_from_pypi() -> None:
    """asynccomp is not on PyPI, so ``pip install 'asynccomp[ray]'`` fails: the docs and
    the messages say ``pip install '.[ray]'`` in a checkout, or name the package itself.
    The troubleshooting page alone quotes the failing command, to answer it."""
    wrong = re.compile(r"pip install ['\"]?asynccomp\b|\basynccomp\[\w")
    files = [
        README,
        *MANUAL_PAGES,
        *sorted((ROOT / "asynccomp").rglob("*.py")),
        *sorted((ROOT / "tests").rglob("*.py")),
    ]
    allowed = {"docs/troubleshooting.md", "tests/test_manual.py"}
    found = [
        f"{path}:{n}"
        for file in files
        if (path := file.relative_to(ROOT).as_posix()) not in allowed
        for n, line in enumerate(file.read_text().splitlines(), 1)
        if wrong.search(line)
    ]
    assert not found, f"pip install of asynccomp from PyPI at {found}"
