"""House rules on the shape of host/ and protocol/, checked statically with `ast`.

protocol/ imports only protocol/ (it is the pure core everything else builds on); no module of
host/ or protocol/ sits on a circle of imports (TYPE_CHECKING imports count too); the era task
modules get their interface (host/task_host.py), never the dispatcher.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mcpx

ROOT = Path(mcpx.__file__).resolve().parent


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The mcpx modules (or packages) that this file imports."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if (ROOT.parent / sub.replace(".", "/")).with_suffix(".py").exists() else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] == "mcpx" and m != name}


GRAPH = {_module(p): _imports(p) for p in ROOT.rglob("*.py")}


def _cycle_through(start: str, within: str) -> list[str] | None:
    """A path start -> ... -> start over modules under `within`, if there is one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in GRAPH.get(node, set()):
            if not nxt.startswith(within):
                continue
            if nxt == start:
                return [*path, nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_graph_sees_the_dispatcher_and_its_era_modules() -> None:
    assert "mcpx.host.eras" in GRAPH["mcpx.host.dispatch"]
    assert "mcpx.host.task_host" in GRAPH["mcpx.host.legacy_task_methods"] & GRAPH["mcpx.host.modern_task_methods"]


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("mcpx.protocol.")))
def test_protocol_imports_only_protocol(module: str) -> None:
    assert {m for m in GRAPH[module] if not m.startswith("mcpx.protocol")} == set()


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith(("mcpx.host.", "mcpx.protocol."))))
def test_no_module_of_host_or_protocol_is_on_an_import_cycle(module: str) -> None:
    assert _cycle_through(module, "mcpx.") is None


@pytest.mark.parametrize(
    "module",
    [
        "mcpx.host.eras",
        "mcpx.host.legacy_task_methods",
        "mcpx.host.modern_task_methods",
        "mcpx.host.listen",
        "mcpx.host.upstream_call",
    ],
)
def test_era_modules_do_not_import_the_dispatcher(module: str) -> None:
    assert "mcpx.host.dispatch" not in GRAPH[module]
