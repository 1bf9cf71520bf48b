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


# A module of the left never imports one of the right (the layers above it). Below them all
# are envmgr.targets.base (the Runner a fact or a probe runs its command through) and
# envmgr.targets.urls (URLs parsed into parts): targets run commands, builders make
# environments out of steps, apply and the CLI sit on both.
TARGETS = ("envmgr.targets.local", "envmgr.targets.venv", "envmgr.targets.container", "envmgr.targets.hosts")
ABOVE_BUILDERS = ("envmgr.apply", "envmgr.cli", "envmgr.bench", "envmgr.report", "envmgr.verify")
HIGHER = {
    "envmgr.spec": ("envmgr.targets", "envmgr.builders", "envmgr.ansible", "envmgr.apply", "envmgr.cli",
                    "envmgr.bench", "envmgr.probes"),
    "envmgr.facts": (*TARGETS, "envmgr.builders", "envmgr.ansible", "envmgr.apply", "envmgr.cli", "envmgr.bench",
                     "envmgr.probes"),
    "envmgr.compat": ("envmgr.targets", "envmgr.builders", "envmgr.ansible", "envmgr.apply", "envmgr.cli",
                      "envmgr.probes", "envmgr.bench.matrix", "envmgr.bench.launch"),
    "envmgr.targets": ("envmgr.builders", *ABOVE_BUILDERS, "envmgr.probes.session"),
    "envmgr.ansible": ("envmgr.builders", "envmgr.targets.hosts", *ABOVE_BUILDERS, "envmgr.probes.session"),
    "envmgr.builders": (*ABOVE_BUILDERS, "envmgr.probes.session"),
    "envmgr.probes": ("envmgr.builders", "envmgr.apply", "envmgr.cli", "envmgr.report"),
    "envmgr.state": ("envmgr.targets", "envmgr.builders", "envmgr.ansible", "envmgr.apply", "envmgr.cli"),
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
    assert "envmgr.targets.base" in import_graph()["envmgr.targets.local"]


# Targets are about testinfra's size (its backends: 30-160 lines), builders and the rest small.
# Every package has a ceiling; those above 300 are today's largest module plus a little, a ratchet
# (issue 28: cli.py to shrink to parse-call-render, triage.py's memory arithmetic to move out).
MAX_LINES = {"envmgr.targets": 300, "envmgr.builders": 300, "envmgr.ansible": 300, "envmgr.probes": 400,
             "envmgr.facts": 400, "envmgr.verify": 400, "envmgr.spec": 475, "envmgr.compat": 600,
             "envmgr.report": 650, "envmgr": 850, "envmgr.bench": 1100}


def package_of(module: str) -> str:
    """envmgr.bench.triage -> envmgr.bench; envmgr.cli (a top-level module) -> envmgr."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and module in PACKAGES) else "envmgr"


PACKAGES = {name for name, path in modules().items() if path.name == "__init__.py"}


def test_every_package_has_a_size_limit():
    assert {package_of(name) for name in modules()} <= set(MAX_LINES)


@pytest.mark.parametrize("package", sorted(MAX_LINES))
def test_every_package_s_modules_stay_under_its_limit(package):
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()
             if package_of(name) == package}
    assert sizes and {n: lines for n, lines in sizes.items() if lines > MAX_LINES[package]} == {}
