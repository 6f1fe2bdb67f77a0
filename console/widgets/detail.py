"""The detail pane: one task as the API tells it, readably, its raw JSON, or its JSON-RPC frames."""

from __future__ import annotations

import json
from typing import Literal

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..render import age, as_json, error, status_text, tool_result
from ..wire import Frame, TaskDetail

Mode = Literal["overview", "raw", "frames"]


def overview(task: TaskDetail, host_label: str) -> RenderableType:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    call = task.get("kind") == "call"
    facts.add_row("plain call" if call else "task", task["id"])
    facts.add_row(
        "status",
        Group(
            status_text(task["status"], task.get("needsInput", False)),
            Text(task.get("statusMessage") or "", style="italic"),
        ),
    )
    facts.add_row("host", f"{host_label} ({task.get('connectionId') or '?'}, {task.get('owner')})")
    what = "call: the host waits for its answer, it holds no task" if call else "task"
    facts.add_row("tool", f"{task.get('tool')} on {task.get('upstream')} ({task.get('era')} {what})")
    if task.get("why"):
        facts.add_row("why", Text(str(task.get("why")), style="italic"))
    if task.get("upstreamTaskId"):
        facts.add_row("upstream task", task["upstreamTaskId"])
    facts.add_row("age", age(task["createdMs"]))
    ttl = task.get("ttlMs")
    facts.add_row(
        "ttl / poll", f"{'unlimited' if ttl is None else f'{ttl // 1000} s'} / {task.get('pollIntervalMs')} ms"
    )
    parts: list[RenderableType] = [facts, Text("\narguments", style="bold"), as_json(task.get("arguments") or {})]
    if task.get("inputRequests"):
        parts.append(Text("\nwaiting for input (press enter to answer)", style="bold yellow"))
        for req in task["inputRequests"]:
            message = (req.get("params") or {}).get("message") or req.get("method")
            parts.append(Text(f"  • {req.get('kind')} from {req.get('upstream')}: {message}"))
    result, failure = task.get("result"), task.get("error")
    if result is not None:
        parts += [Text("\nresult", style="bold"), tool_result(result)]
    if failure is not None:
        parts += [Text("\nerror", style="bold"), error(failure)]
    parts.append(Text("\ntimeline", style="bold"))
    timeline = Table.grid(padding=(0, 1))
    for ev in task.get("events") or []:
        data = ev.get("data") or {}
        what = data.get("status") or data.get("reason") or ""
        message = data.get("statusMessage") or ""
        timeline.add_row(
            Text(f"#{ev['seq']}", style="dim"), ev["kind"], str(what), message, Text(ev.get("by") or "", style="dim")
        )
    parts.append(timeline)
    return Group(*parts)


def frames_view(frames: list[Frame]) -> RenderableType:
    if not frames:
        return Text("no frames kept for this task (they are held in memory, recent tasks only)", style="dim")
    rows: list[RenderableType] = []
    for f in frames:
        arrow = {"in": "→ mcpx", "out": "mcpx →"}[f["direction"]]
        rows.append(Text(f"{f['side']:<8} {arrow}", style="bold cyan" if f["side"] == "host" else "bold magenta"))
        body = f.get("frame") if f.get("frame") is not None else f.get("text")
        rows.append(Text(json.dumps(body, ensure_ascii=False) if not isinstance(body, str) else body + " …(cut)"))
    return Group(*rows)


class DetailPane(VerticalScroll):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.mode: Mode = "overview"
        self.shown_task: TaskDetail | None = None
        self.frames: list[Frame] | None = None
        self.problem: Text | None = None  # the task could not be fetched
        self.host_label = ""

    def compose(self) -> ComposeResult:
        yield Static(Text("select a task", style="dim"), id="detail-body")

    def show(self, task: TaskDetail | None, host_label: str = "", frames: list[Frame] | None = None) -> None:
        self.shown_task, self.host_label, self.problem = task, host_label, None
        if frames is not None:
            self.frames = frames
        self.repaint()

    def show_error(self, task_id: str, why: str) -> None:
        """The task could not be fetched (gone, or the daemon is)."""
        self.shown_task, self.problem = None, Text.assemble(("task ", "bold"), task_id, "\n", (why, "red"))
        self.repaint()

    def tick(self) -> None:
        """Each second: the overview's age moves on with the list's."""
        if self.mode == "overview" and self.shown_task is not None and self.problem is None:
            self.repaint()

    def repaint(self) -> None:
        body = self.query_one("#detail-body", Static)
        if self.problem is not None:
            body.update(self.problem)
        elif self.shown_task is None:
            body.update(Text("select a task", style="dim"))
        elif self.mode == "raw":
            body.update(as_json(self.shown_task))
        elif self.mode == "frames":
            body.update(frames_view(self.frames or []))
        else:
            body.update(overview(self.shown_task, self.host_label))
