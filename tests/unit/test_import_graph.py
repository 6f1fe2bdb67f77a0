"""House rules on the shape of mcpx/ and console/, checked statically with `ast`.

- No module sits on a circle of imports; imports under `if TYPE_CHECKING:` and inside functions
  count too (a circle hidden from the interpreter is still one for the reader).
- No child reaches back to its parent: a module of a subpackage never imports a module of an
  enclosing package that itself reaches into that subpackage (e.g. upstream/tasks/ importing
  upstream/pool.py, which builds upstream/tasks/). Importing a package's face for `__version__`
  is not a reach back: mcpx/__init__.py imports nothing.
- (The layers, protocol/'s purity and the era modules' interface are import-linter contracts in
  pyproject.toml, run by the check command: `lint-imports`.)
- No two modules share a name, except the `python -m` aliases kept for old command lines.
- At most five modules stay at mcpx/'s top level: the rest live in the room they serve.

`python3 -m tests.unit.test_import_graph` (from the checkout) prints the graph and its circles.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

import console
import mcpx

PACKAGES = {"mcpx": Path(mcpx.__file__).resolve().parent, "console": Path(console.__file__).resolve().parent}
# Old module names kept so that existing command lines still run (each says so in its docstring).
ALIASES = {"mcpx.demo_upstream", "mcpx.upstream.keeper"}


def _module(root: str, path: Path) -> str:
    parts = [root, *path.relative_to(PACKAGES[root]).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files() -> dict[str, Path]:
    return {_module(root, p): p for root, base in PACKAGES.items() for p in sorted(base.rglob("*.py"))}


FILES = _files()


def _imports(name: str, path: Path) -> set[str]:
    """The modules of ours (or packages, when no module of that name exists) this file imports."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in FILES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES and m in FILES and m != name}


GRAPH = {name: _imports(name, path) for name, path in FILES.items()}


def _is_package(name: str) -> bool:
    return FILES[name].name == "__init__.py"


def circles() -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(GRAPH)))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def _reaches(start: str, within: str) -> bool:
    """Whether `start` imports, directly or not, a module inside package `within`."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt.startswith(within + "."):
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def reaches_back() -> list[str]:
    """`child -> parent module` edges where that parent module reaches into the child's subpackage."""
    found = []
    for name, targets in GRAPH.items():
        own = name if _is_package(name) else name.rsplit(".", 1)[0]
        for target in targets:
            if _is_package(target):
                continue  # a package's face (mcpx/__init__.py: __version__), which imports nothing
            parent = target.rsplit(".", 1)[0]
            if not own.startswith(parent + ".") or own == parent:
                continue  # not a module of an enclosing package
            child_package = parent + "." + own[len(parent) + 1 :].split(".")[0]
            if _reaches(target, child_package):
                found.append(f"{name} -> {target} (which reaches into {child_package})")
    return sorted(found)


# ---- the graph sees what it must --------------------------------------------------------------


def test_the_graph_sees_both_packages_and_type_only_imports() -> None:
    assert "mcpx.host.eras" in GRAPH["mcpx.host.dispatch"]
    assert "mcpx.host.task_host" in GRAPH["mcpx.host.legacy_task_methods"] & GRAPH["mcpx.host.modern_task_methods"]
    assert "console.state" in GRAPH["console.app"]
    # connections/registry.py imports the store only under TYPE_CHECKING: the graph still has the edge.
    source = FILES["mcpx.connections.registry"].read_text(encoding="utf-8")
    assert "if TYPE_CHECKING:\n    from ..store import Store" in source
    assert "mcpx.store" in GRAPH["mcpx.connections.registry"]


def test_the_circle_finder_finds_a_circle() -> None:
    saved = dict(GRAPH)
    try:
        GRAPH["mcpx.records.task"] = {*GRAPH["mcpx.records.task"], "mcpx.tasks.engine"}
        assert any("mcpx.records.task" in group and "mcpx.tasks.engine" in group for group in circles())
        GRAPH["mcpx.upstream.tasks.follow"] = {*GRAPH["mcpx.upstream.tasks.follow"], "mcpx.upstream.pool"}
        assert any(line.startswith("mcpx.upstream.tasks.follow -> mcpx.upstream.pool") for line in reaches_back())
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


# ---- the rules --------------------------------------------------------------------------------


def test_no_module_is_on_an_import_circle() -> None:
    assert circles() == []


def test_no_child_module_reaches_back_to_its_parent() -> None:
    assert reaches_back() == []


def test_no_two_modules_share_a_name() -> None:
    by_name = collections.defaultdict(list)
    for name, path in FILES.items():
        if path.name not in ("__init__.py", "__main__.py") and name not in ALIASES:
            by_name[path.name].append(name)
    assert {file: names for file, names in by_name.items() if len(names) > 1} == {}


# What the console may use of mcpx: the client that finds /v1 (the state folder's info file and
# token), and the elicitation form rules every surface shares. Nothing of the daemon itself.
CONSOLE_MAY_IMPORT = {"mcpx.client.daemon_client", "mcpx.questions.elicitation"}


def test_the_console_reaches_the_daemon_only_through_its_public_client() -> None:
    used = {m for name, targets in GRAPH.items() if name.startswith("console") for m in targets}
    assert {m for m in used if m.startswith("mcpx")} <= CONSOLE_MAY_IMPORT


def test_the_top_level_of_mcpx_holds_five_modules_at_most() -> None:
    top = sorted(p.name for p in PACKAGES["mcpx"].glob("*.py"))
    assert len(top) <= 5, top


def main() -> None:
    for name in sorted(GRAPH):
        print(f"{name}: {', '.join(sorted(GRAPH[name])) or '-'}")
    found = circles()
    back = reaches_back()
    print(f"\n{len(GRAPH)} modules; {len(found)} circles; {len(back)} reaches back to a parent")
    for group in found:
        print("circle:", " -> ".join(group))
    for line in back:
        print("reach back:", line)


if __name__ == "__main__":
    main()
