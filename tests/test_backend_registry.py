"""The backend registry: a backend is its module plus one line in
``asynccomp.backends._registry.BACKENDS``, and nothing outside ``asynccomp/backends/``
branches on a backend's name (a guard that reads the code, tested on code that does)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, InvalidJob, UnknownBackend
from asynccomp.backends import BACKENDS, CompilerBackend, backend_class, backend_names
from asynccomp.job import OUTPUT_FORMATS

from .kernels import ARCH

PACKAGE = Path(__file__).resolve().parent.parent / "asynccomp"

#: Where a backend's name may be spelled in a comparison, a lookup or a list of them,
#: and why. Everything else asks the registry.
ALLOWED = {
    "backends/": "the backends themselves, and their registry",
    "tvm/": "the TVM facade mirrors TVM's own compiler choice (nvrtc or nvcc): the user's",
    "tilelang/": "the TileLang facade's backend choice is the user's (nvcc or nvrtc)",
    "bench/": "the benchmark's configurations name the compiler they measure",
    "_front/_view.py": "the public per-backend properties nvrtc_workers, nvcc_workers, nvrtc_mode",
    "cli/_doctor.py": "doctor reports what toolkit discovery found of NVRTC and nvcc "
    "(libraries, headers, places searched), tool by tool",
}


def _mentions_backend(node: ast.AST) -> bool:
    return "backend" in ast.unparse(node).lower()


def _of_toolkit(node: ast.AST) -> bool:
    return "toolkit" in ast.unparse(node).lower()


def name_branches(source: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, code) of every place ``source`` branches on, or looks up by, one of the
    backend ``names``: compared with a name (``backend == "nvcc"``, ``in ("nvrtc",
    "nvcc")``), a lookup by one (``slots["nvrtc"]``, ``.get("nvrtc")``), a list of two
    or more. A name that is an output format too (``"ptx"``) counts only where the
    other side speaks of a backend (``output == "ptx"`` is about the output)."""
    found: list[tuple[int, str]] = []

    def is_name(node: ast.AST, other: ast.AST | None) -> bool:
        if not (isinstance(node, ast.Constant) and node.value in names):
            return False
        if node.value in OUTPUT_FORMATS:
            return other is not None and _mentions_backend(other)
        return True

    for node in ast.walk(ast.parse(source)):
        hit = False
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for i, side in enumerate(sides):
                other = sides[1 - i] if len(sides) == 2 else None
                if is_name(side, other):
                    hit = True
                if isinstance(side, (ast.Tuple, ast.List, ast.Set)) and any(
                    is_name(e, other) for e in side.elts
                ):
                    hit = True
        # A toolkit's fields are named after the tools it found (nvcc's path), not backends.
        elif isinstance(node, ast.Subscript) and not _of_toolkit(node.value):
            hit = is_name(node.slice, node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            hit = (
                node.func.attr == "get"
                and bool(node.args)
                and not _of_toolkit(node.func.value)
                and is_name(node.args[0], node.func)
            )
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            hit = sum(is_name(e, node) for e in node.elts) >= 2
        if hit:
            found.append((getattr(node, "lineno", 0), ast.unparse(node)))
    return found


@pytest.mark.parametrize(
    ("code", "branches"),
    [
        ('if job.backend == "nvcc":\n    pass', True),
        ('if "nvrtc" != prepared.backend:\n    pass', True),
        ('workers = slots["nvrtc"]', True),
        ('workers = slots.get("nvcc", 0)', True),
        ('path = answer.toolkit.get("nvcc")', False),
        ('for backend in ("nvrtc", "nvcc"):\n    pass', True),
        ('if job.backend in ("nvcc",):\n    pass', True),
        ('if job.backend == "ptx":\n    pass', True),
        ('if job.output == "ptx":\n    pass', False),
        ('def f(backend: str = "nvrtc") -> None:\n    pass', False),
        ('"""A docstring naming nvcc and "nvrtc"."""', False),
    ],
)
def test_the_guard_finds_branches_on_a_name(code: str, branches: bool) -> None:
    assert bool(name_branches(code, backend_names())) is branches


def test_nothing_outside_the_backends_branches_on_a_backend_name() -> None:
    names = backend_names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if any(relative.startswith(allowed) for allowed in ALLOWED):
            continue
        found += [
            f"{relative}:{line}: {code}" for line, code in name_branches(path.read_text(), names)
        ]
    assert found == [], "ask the backend's class (asynccomp.backends.backend_class) instead"
    for allowed in ALLOWED:  # no stale exemption
        assert (PACKAGE / allowed).exists(), allowed


def test_an_unknown_backend_is_a_typed_error_listing_the_registered_ones() -> None:
    with pytest.raises(UnknownBackend, match="invalid backend 'clang': expected one of ") as e:
        CompileJob("x", backend="clang")
    assert isinstance(e.value, InvalidJob) and e.value.field == "backend"
    assert e.value.registered == backend_names() == ("nvrtc", "nvcc", "ptx", "nvjitlink")
    with pytest.raises(UnknownBackend):
        backend_class(None)


@pytest.mark.parametrize("name", backend_names())
def test_every_registered_backend_says_all_the_registry_asks(name: str) -> None:
    cls = backend_class(name)
    assert cls.name == name and cls.outputs and set(cls.outputs) <= set(OUTPUT_FORMATS)
    for member in ("create", "version", "archs", "identity", "prepare", "run"):
        assert getattr(cls, member) is not getattr(CompilerBackend, member), member
    base, rate = cls.cost_prior
    assert base > 0 and rate > 0 and cls.worker_memory > 0


def import_graph() -> dict[str, set[str]]:
    """file -> the files it imports (relative to the package), at run time: every
    import statement, in a function too, but those under ``if TYPE_CHECKING:``; a
    submodule's import runs its package's ``__init__`` as well."""
    files = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}

    def module_files(module: list[str]) -> list[str]:
        found = []
        for i in range(1, len(module) + 1):  # each package on the way runs its __init__
            init = "/".join([*module[:i], "__init__.py"])
            if init in files:
                found.append(init)
        leaf = "/".join(module) + ".py"
        return [*found, leaf] if leaf in files else found

    graph: dict[str, set[str]] = {}
    for name in sorted(files):
        tree = ast.parse((PACKAGE / name).read_text())
        skipped = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for child in node.body
            for n in ast.walk(child)
        }
        package = name.split("/")[:-1]
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom):
                module = (node.module or "").split(".") if node.module else []
                if node.level:
                    base = package[: len(package) - node.level + 1] + module
                elif module[:1] == ["asynccomp"]:
                    base = module[1:]
                else:
                    continue
                edges.update(module_files(base))
                for alias in node.names:  # a submodule imported by name
                    edges.update(module_files([*base, alias.name]))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("asynccomp."):
                        edges.update(module_files(alias.name.split(".")[1:]))
        edges.discard(name)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one file (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while True:
                item = stack.pop()
                group.add(item)
                if item == node:
                    break
            if len(group) > 1:
                found.append(group)

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_runs_through_the_backends_or_the_toolkit() -> None:
    """The circle backends -> toolkit -> cache -> backends is gone (type-only imports
    do not count): finding the toolkit never loads the cache, and the job model checks
    a backend's name through the registry, which loads no backend's module."""
    graph = import_graph()
    assert "cache/__init__.py" not in graph["toolkit.py"]
    assert graph["backends/_registry.py"] == {"errors.py"}
    for group in circles(graph):
        assert not any(f.startswith("backends/") or f == "toolkit.py" for f in group), group


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}, "d.py": {"a.py"}}
    assert circles(graph) == [{"a.py", "b.py", "c.py"}]


async def test_a_module_and_its_registry_line_are_a_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backend of the tests' own (it copies its source into the binary), added by its
    registry line only: jobs name it, the engine makes and runs it, the cache keys it."""
    monkeypatch.setitem(BACKENDS, "echo", "tests.fakes:EchoBackend")
    job = CompileJob("hello", name="e", backend="echo")
    assert job.output_format == "cubin"
    async with Engine(arch=ARCH, cache_dir=False) as engine:
        assert engine.slots["echo"] >= 1
        first, again = await engine.compile_many([job, CompileJob("hello", backend="echo")])
        assert engine.compiler_versions["echo"] == "1.0"
    assert first.unwrap() == b"hello" and again.unwrap() == b"hello"
    assert engine.statistics().deduplicated == 1  # one key: the same compile
