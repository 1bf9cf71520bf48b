"""The import graph of envmgr, read from the source (``ast``): no cycle, and no module that
imports a layer above its own. Imports inside functions count too: they run all the same."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "envmgr"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "scripts" in path.parts:  # probe scripts run in the target environment, not imported
            continue
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs + ([base] if len(subs) < len(node.names) else [])
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    assert cycles(import_graph()) == []


# A module of the left never imports one of the right (the layers above it). The one seam below
# them all is envmgr.backends.base: the Runner a fact or a probe runs its command through.
BACKENDS = ("envmgr.backends.local", "envmgr.backends.venv", "envmgr.backends.docker", "envmgr.backends.ansible")
HIGHER = {
    "envmgr.spec": ("envmgr.backends", "envmgr.apply", "envmgr.cli", "envmgr.bench", "envmgr.probes"),
    "envmgr.facts": (*BACKENDS, "envmgr.apply", "envmgr.cli", "envmgr.bench", "envmgr.probes"),
    "envmgr.compat": ("envmgr.backends", "envmgr.apply", "envmgr.cli", "envmgr.probes", "envmgr.bench.matrix",
                      "envmgr.bench.launch"),
    "envmgr.backends": ("envmgr.apply", "envmgr.cli", "envmgr.bench.matrix", "envmgr.bench.launch",
                        "envmgr.report", "envmgr.verify", "envmgr.probes.session"),
    "envmgr.probes": ("envmgr.apply", "envmgr.cli", "envmgr.report"),
    "envmgr.state": ("envmgr.backends", "envmgr.apply", "envmgr.cli"),
}


@pytest.mark.parametrize("layer", sorted(HIGHER))
def test_no_module_imports_a_higher_layer(layer):
    graph = import_graph()
    upward = sorted((module, target) for module, targets in graph.items()
                    if module == layer or module.startswith(layer + ".")
                    for target in targets
                    if any(target == high or target.startswith(high + ".") for high in HIGHER[layer]))
    assert upward == []


def test_the_checker_sees_a_cycle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "envmgr.backends.base" in import_graph()["envmgr.backends.local"]
