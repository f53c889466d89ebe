"""No import circle among our modules (issue 29): a module's imports, at the top, under
TYPE_CHECKING or inside a function, never lead back to it. A circle that only typing
closes still ties two modules into one: neither can be read, moved or tested alone.
And the packages' arrows hold (README, STYLE): master, slave and frameworks depend on
protocol only, protocol on nothing of ours."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "master", "slave", "frameworks", "cluster")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def our_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Our modules that `name` imports anywhere in its text (`from a import b` counts
    `a.b` when b is a module, else `a`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level-1 steps
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def import_graph() -> dict[str, set[str]]:
    modules = our_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def test_the_finder_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_holds_our_imports() -> None:
    graph = import_graph()
    assert "master.outbox" in graph["master.master"]
    assert "protocol.wire.messages" in graph["slave.slave"]


def circles_in(package: str) -> list[list[str]]:
    return [c for c in cycles(import_graph()) if any(m.split(".")[0] == package for m in c)]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_among_our_modules(package: str) -> None:
    assert circles_in(package) == []


# Who may import whom, by package: protocol is the one all parties share and needs none
# of them; master, slave and frameworks speak only through it; cluster runs them all.
MAY_IMPORT = {
    "protocol": set(),
    "master": {"protocol"},
    "slave": {"protocol"},
    "frameworks": {"protocol"},
    "cluster": {"protocol", "master", "slave", "frameworks"},
}


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_what_its_arrows_allow(package: str) -> None:
    crossing = {
        f"{module} -> {imported}"
        for module, imports in import_graph().items()
        if module.split(".")[0] == package
        for imported in imports
        if imported.split(".")[0] not in {package, *MAY_IMPORT[package]}
    }
    assert crossing == set()
