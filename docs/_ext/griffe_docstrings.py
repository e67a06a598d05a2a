"""A griffe extension that reads asynccomp's docstrings as the Markdown mkdocstrings renders.

asynccomp's docstrings are written for ``help()`` and doctest, in reST's idioms: Sphinx
roles (``:class:`~asynccomp.Engine```), ``Example::`` before an indented block, and
``>>>`` sessions. Markdown would show the roles' markup, the double colon, and take
``>>>`` for a quotation; this turns each into its Markdown form (inline code, a colon, a
``pycon`` fence) before the docstrings are parsed. The source files are not touched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

# :class:`~a.b.C` -> `C`; :func:`a.b.f` -> `a.b.f`; :mod:`._x` -> `._x`.
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def _fence_doctests(text: str) -> str:
    """Each ``>>>`` session (its prompts, continuations and output, up to a blank line)
    in a ``pycon`` fence, at its own indentation."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block: list[str] = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


# "    a, b: what both are" in an Args section: one entry per name, as Google style has it.
_SHARED_ARGUMENT = re.compile(r"(?m)^(\s+)(\w+(?:, \w+)+): (.*)$")


def _one_per_name(match: re.Match[str]) -> str:
    indent, names, text = match.groups()
    return "\n".join(f"{indent}{name}: {text}" for name in names.split(", "))


def markdown_of(docstring: str) -> str:
    """The Markdown form of one of asynccomp's docstrings."""
    text = _ROLE.sub(_role, docstring)
    text = _SHARED_ARGUMENT.sub(_one_per_name, text)
    # reST's "Example::" (a literal block follows) is "Example:" before an indented block.
    text = re.sub(r"(?m)(\S)::$", r"\1:", text)
    return _fence_doctests(text)


class ReadRestIdioms(griffe.Extension):
    """Rewrites every docstring griffe loads (see the module's docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _rewrite(pkg)


# Engine's signature reads its defaults from the settings objects (_JOB.arch, ...), where
# each is written once; the manual shows their values.
_SETTING_DEFAULT = re.compile(r"_(?:JOB|WORKERS|CACHE)\.(\w+)")


def _rewrite(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = markdown_of(obj.docstring.value)
    if isinstance(obj, griffe.Function):
        from asynccomp.config import DEFAULTS

        for parameter in obj.parameters:
            match = _SETTING_DEFAULT.fullmatch(str(parameter.default))
            if match and match.group(1) in DEFAULTS:
                parameter.default = repr(DEFAULTS[match.group(1)])
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member)  # type: ignore[arg-type]
