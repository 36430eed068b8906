"""Imports point one way (DESIGN rule 12): no cycle between modules or top-level packages,
counting imports inside functions and under ``TYPE_CHECKING``; the simulator is started only
by the runner, ``groundscope score`` and the CLI, and no other module imports it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "groundscope"
SIMULATOR_STARTERS = {"groundscope.runner", "groundscope.rescore", "groundscope.cli"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every groundscope module ``name`` imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle_between_modules() -> None:
    cycles = [sorted(c) for c in _cycles(_graph())]
    assert cycles == []


def test_no_import_cycle_between_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        packages.setdefault(_top(module), set()).update(
            _top(t) for t in targets if _top(t) != _top(module))
    cycles = [sorted(c) for c in _cycles(packages)]
    assert cycles == []


def test_only_the_runner_score_and_cli_import_the_simulator() -> None:
    importers = {module for module, targets in _graph().items()
                 if not module.startswith("groundscope.simulator")
                 and any(t.startswith("groundscope.simulator") for t in targets)}
    assert importers == SIMULATOR_STARTERS


def test_the_graph_sees_imports_inside_functions() -> None:
    """The checks above are only as good as the graph: a lazy import counts."""
    graph = _graph()
    assert "groundscope.simulator" in graph["groundscope.runner"]  # a mock run starts its own
    assert "groundscope.report.html" in graph["groundscope.report.build"]  # inside write_page


FOUNDATION = {"groundscope.defaults", "groundscope.tokens", "groundscope.bounds"}


def test_defaults_and_token_rules_sit_beneath_what_uses_them() -> None:
    """DESIGN rule 18: the defaults (``defaults.py``) and the one token estimate's rules
    (``tokens.py``) import nothing of groundscope, and their users take them from there, not
    from each other: the config imports no default from client, dataset or media."""
    graph = _graph()
    assert {m: graph[m] for m in FOUNDATION} == {m: set() for m in FOUNDATION}
    assert "groundscope.defaults" in graph["groundscope.config"]
    assert not graph["groundscope.config"] & {"groundscope.client.limits",
                                              "groundscope.client.answers",
                                              "groundscope.dataset.readers"}
    users = ("groundscope.client.charge", "groundscope.estimate.tokens")
    assert all("groundscope.tokens" in graph[u] for u in users)
