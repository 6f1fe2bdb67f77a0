"""How things look: statuses in colour, ages, a task's result made readable. No widgets here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text
from rich.tree import Tree

STATUS_STYLE = {
    "working": "bold cyan",
    "input_required": "bold yellow",
    "completed": "green",
    "failed": "bold red",
    "cancelled": "magenta",
}
STATUS_LABEL = {"input_required": "needs input"}


def status_text(status: str, needs_input: bool = False) -> Text:
    label = STATUS_LABEL.get(status, status)
    text = Text(label, style=STATUS_STYLE.get(status, ""))
    if needs_input and status != "input_required":
        text.append(" ?", style="bold yellow")  # a question of its waits, though it works on
    return text


def _wall_ms() -> int:
    return int(time.time() * 1000)


# The console's clock: swapped for a fixed one in snapshot tests, so ages render the same each run.
clock: Callable[[], int] = _wall_ms


def now_ms() -> int:
    return clock()


def age(ms: int, now: int | None = None) -> str:
    seconds = max(0, ((now if now is not None else clock()) - ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def short(task_id: str) -> str:
    return task_id[:8]


def as_json(value: object) -> Syntax:
    return Syntax(json.dumps(value, indent=2, ensure_ascii=False), "json", word_wrap=True, background_color="default")


def value_tree(label: str, value: object) -> Tree:
    """Structured content as a tree: objects and lists as branches, scalars as leaves."""
    tree = Tree(Text(label, style="bold"))

    def grow(node: Tree, v: object) -> None:
        if isinstance(v, dict):
            for k, item in v.items():
                if isinstance(item, (dict, list)):
                    grow(node.add(Text(str(k), style="bold")), item)
                else:
                    node.add(Text.assemble((f"{k}: ", "bold"), json.dumps(item, ensure_ascii=False)))
        elif isinstance(v, list):
            for i, item in enumerate(v):
                if isinstance(item, (dict, list)):
                    grow(node.add(Text(f"[{i}]", style="dim")), item)
                else:
                    node.add(json.dumps(item, ensure_ascii=False))
        else:
            node.add(json.dumps(v, ensure_ascii=False))

    grow(tree, value)
    return tree


def tool_result(result: dict[str, Any]) -> RenderableType:
    """A CallToolResult: its text blocks as text, other blocks named, structured content as a tree."""
    parts: list[RenderableType] = []
    if result.get("isError") is True:
        parts.append(Text("the tool reported an error", style="bold red"))
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(Text(str(block.get("text", ""))))
        elif block.get("type") in ("image", "audio"):
            parts.append(Text(f"[{block['type']}: {block.get('mimeType', '?')}]", style="dim"))
        elif block.get("type") in ("resource", "resource_link"):
            uri = block.get("uri") or (block.get("resource") or {}).get("uri")
            parts.append(Text(f"[{block['type']}: {uri}]", style="dim"))
        else:
            parts.append(Text(f"[{block.get('type')}]", style="dim"))
    if isinstance(result.get("structuredContent"), (dict, list)):
        parts.append(value_tree("structured content", result["structuredContent"]))
    return Group(*parts) if parts else Text("(empty result)", style="dim")


def error(err: dict[str, Any]) -> Text:
    return Text.assemble(("error ", "bold red"), f"{err.get('code')}: ", str(err.get("message", "")))
