"""No import cycles among the project's modules nor among the parts of a package, and the layers
depend one way (docs/architecture.md).

Every import counts, wherever it stands — at module level, under TYPE_CHECKING, inside a function:
an import that only a type checker follows still ties the two modules' designs together, and a
function-local import is a cycle waiting for someone to hoist it.

A package's parts (its modules and subpackages, each taken as a whole) must not import each other
in a circle either: `broker.partition` importing `broker.replication`, which imports
`broker.topics`, which imports `broker.partition`, is no cycle of modules, yet none of the three
can be understood, moved or tested without the others.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "storage", "broker", "client", "pipeline")
# What each top-level package may import (docs/architecture.md §1: protocol <- storage <- broker, protocol <- client <- pipeline).
ALLOWED = {
    "protocol": {"protocol"},
    "storage": {"protocol", "storage"},
    "broker": {"protocol", "storage", "broker"},
    "client": {"protocol", "client"},
    "pipeline": {"protocol", "client", "pipeline"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            out[_module_name(p)] = p
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the submodule when there is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between the parts of each package: `a.b.c` importing `a.d.e` is `a.b` -> `a.d`
    (parts of `a`) and, further down, `a.b.c` -> `a.b.d` within `a.b`."""
    out: dict[str, set[str]] = {}
    for a, deps in graph.items():
        pa = a.split(".")
        for b in deps:
            pb = b.split(".")
            common = 0
            while common < min(len(pa), len(pb)) - 1 and pa[common] == pb[common]:
                common += 1
            if common and pa[:common] == pb[:common] and pa[common] != pb[common]:
                out.setdefault(".".join(pa[:common + 1]), set()).add(".".join(pb[:common + 1]))
    return out


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycles_between_the_parts_of_a_package() -> None:
    cycles = _cycles(package_graph(_graph()))
    assert not cycles, "package import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_layers_depend_one_way() -> None:
    wrong = sorted(f"{a} imports {b}" for a, deps in _graph().items() for b in deps
                   if b.split(".")[0] not in ALLOWED[a.split(".")[0]])
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_checker_sees_a_package_cycle() -> None:
    modules = {"b.p": {"b.p.core"}, "b.p.core": {"b.p.state"}, "b.p.state": {"b.r.session"},
               "b.r.fetcher": {"b.p.core", "b.t"}, "b.t": {"b.p"}}
    assert not _cycles(modules)
    assert _cycles(package_graph(modules)) == [["b.p", "b.r", "b.t"]]
