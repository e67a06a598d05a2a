"""MkDocs hooks of asynccomp's manual (``hooks:`` in mkdocs.yml).

- The command-line reference is generated from the parsers ``asynccomp`` itself runs
  (:func:`asynccomp.cli.build_parser`): a line ``<!-- asynccomp-cli NAME -->`` in a page
  becomes that subcommand's usage, description and a table of its arguments (``NAME``
  ``asynccomp``: the top level), so the reference cannot drift from the code.
- ``benchmarks/README.md`` and ``benchmarks/RESULTS.md`` (what each script measures, and
  what they measured) join the manual as they are, at the same paths, so the manual's
  measured claims link to the record itself.
"""

from __future__ import annotations

import argparse
import html
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK_PAGES = ("benchmarks/README.md", "benchmarks/RESULTS.md")
_MARKER = re.compile(r"^<!-- asynccomp-cli (\S+) -->$", re.M)
_WIDTH = "88"  # argparse wraps usage and descriptions to $COLUMNS: one width for all


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for path in BENCHMARK_PAGES:
        files.append(
            File(
                path,
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if "<!-- asynccomp-cli " not in markdown:
        return markdown
    return _MARKER.sub(lambda match: command_reference(match.group(1)), markdown)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from asynccomp.cli import build_parser

    top = build_parser()
    parsers = {"asynccomp": top}
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.update(action.choices)
    return parsers


def _cell(text: str) -> str:
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([|*_\[\]`])", r"\\\1", text)


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        if action.nargs == 0:
            forms = action.option_strings
        else:
            metavar = action.metavar or action.dest.upper()
            forms = [f"{option} {metavar}" for option in action.option_strings]
    else:
        forms = [str(action.metavar or action.dest)]
    return ", ".join(f"`{form}`" for form in forms)


def _meaning(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    meaning = formatter._expand_help(action) if action.help else ""
    if isinstance(action, argparse._SubParsersAction):
        names = ", ".join(f"`{choice.dest}`" for choice in action._choices_actions)
        return f"one of {names} (below)"
    cell = _cell(meaning)
    if action.choices is not None:
        cell = (
            (cell + "; " if cell else "")
            + "one of "
            + ", ".join(f"`{choice}`" for choice in action.choices)
        )
    if action.nargs == "*":
        cell += " (any number)"
    return cell


def command_reference(name: str) -> str:
    """``asynccomp NAME``'s usage, description and arguments, in Markdown."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH
    try:
        parsers = _parsers()
        if name not in parsers:
            raise ValueError(f"no subcommand {name!r}: the parsers have {', '.join(parsers)}")
        parser = parsers[name]
        help_text = parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    # Usage and description as argparse prints them; the arguments as a table.
    head = re.split(r"\n(?:positional arguments|options|optional arguments):\n", help_text)[0]
    rows = [
        f"| {_argument(action)} | {_meaning(parser, action)} |"
        for action in parser._actions
        if action.help != argparse.SUPPRESS
    ]
    return "\n".join(
        ["```text", head.rstrip(), "```", "", "| argument | meaning |", "| --- | --- |", *rows, ""]
    )
