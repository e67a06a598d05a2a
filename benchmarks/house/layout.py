"""The package's layout in figures: modules, lines, the largest modules, import cycles.

Reads ``asynccomp/`` (or ``--root``) as text with :mod:`ast`; imports nothing of it.
An import inside ``if TYPE_CHECKING:`` is left out (it never runs); every other import
counts, a function-local one too (it runs when the function does: a cycle it closes is
a cycle). ``from package import name`` is an edge to the package's ``__init__.py`` where ``name``
is defined there, to the module where ``name`` is a submodule (the parent package that
every submodule import runs first is no edge). Cycles are the strongly connected
components of that graph with more than one module.

    python -m benchmarks.house.layout                 # this checkout
    python -m benchmarks.house.layout --root /tmp/before/asynccomp --json
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks import REPO


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import that runs, and whether it sits inside a function."""

    def walk(
        node: ast.AST, in_function: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                yield from (item for n in child.orelse for item in walk_one(n, in_function))
                continue
            yield from walk_one(child, in_function)

    def walk_one(
        node: ast.AST, in_function: bool
    ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function
            return
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for n in node.orelse:
                yield from walk_one(n, inside)
            return
        yield from walk(node, inside)

    yield from walk(tree, False)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def graph(root: Path) -> tuple[dict[str, Path], dict[str, set[str]], list[tuple[str, str, int]]]:
    """Modules by name, their import edges, and the function-local imports (module,
    imported module, line) among them."""
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    edges: dict[str, set[str]] = {name: set() for name in modules}
    local: list[tuple[str, str, int]] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, in_function in _runtime_imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                # ``from package import submodule`` needs the package only as every
                # submodule import does (its parent, never counted); a name defined
                # in the package's __init__.py is an edge to it.
                taken = [s for s in submodules if s not in modules]
                targets = submodules + ([base] if taken or not submodules else [])
            for target in targets:
                if target in modules and target != name:
                    edges[name].add(target)
                    if in_function:
                        local.append((name, target, node.lineno))
    return modules, edges, local


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO / "asynccomp", help="the package folder")
    parser.add_argument("--largest", type=int, default=10, help="how many of the largest to list")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    modules, edges, local = graph(root)
    lines = {name: len(path.read_text().splitlines()) for name, path in modules.items()}
    largest = sorted(lines.items(), key=lambda item: -item[1])[: args.largest]
    loops = cycles(edges)
    in_loops = {name for loop in loops for name in loop}
    local_in_loops = [(a, b, n) for a, b, n in local if a in in_loops and b in in_loops]
    in_cycles = [f"{a} -> {b} (line {n})" for a, b, n in local_in_loops]
    report = {
        "modules": len(modules),
        "lines": sum(lines.values()),
        "largest": [{"module": name, "lines": count} for name, count in largest],
        "cycles": loops,
        "function_local_imports": [f"{a} -> {b} (line {n})" for a, b, n in local],
        "function_local_imports_in_cycles": in_cycles,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['modules']} modules, {report['lines']} lines under {root}")
    print(f"largest {args.largest}:")
    for name, count in largest:
        print(f"  {count:5d}  {name}")
    print(f"import cycles (TYPE_CHECKING imports left out): {len(loops)}")
    for loop in loops:
        print(f"  {len(loop)} modules: {', '.join(loop)}")
    print(f"function-local imports: {len(local)}, {len(local_in_loops)} of them inside a cycle")
    for line in in_cycles:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
