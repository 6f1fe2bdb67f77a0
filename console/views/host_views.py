"""`:hosts`: every host connection shown, with its tasks by status; enter opens its detail: what it
negotiated (revision, capabilities, extensions, from `/v1/connections/{id}`) and its open calls,
tasks and questions (from the feed's state)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..backend import Backend, BackendError
from ..render import age, status_text
from ..state import ConsoleState, Question, TaskRow
from .view_screen import Row, ViewScreen


def open_work(state: ConsoleState, host_id: str) -> tuple[list[TaskRow], list[Question]]:
    """A host's unfinished tasks and calls (newest first) and its open questions (oldest first)."""
    tasks = [t for t in state.visible(host=host_id) if not t.terminal]
    questions = [q for q in state.answer_queue() if q.connection == host_id]
    return tasks, questions


def extensions_of(capabilities: object) -> list[str]:
    ext = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return sorted(ext) if isinstance(ext, dict) else []


def host_facts(conn: dict[str, Any]) -> Table:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    info = conn.get("clientInfo") or {}
    caps = conn.get("capabilities") or {}
    facts.add_row("host", str(conn.get("label") or f"{info.get('name', '')} {info.get('version', '')}".strip()))
    facts.add_row("connection", f"{conn.get('id')} ({conn.get('kind')} over {conn.get('transport')})")
    facts.add_row("revision", str(conn.get("revision") or "2026-07-28 (stateless: per request)"))
    facts.add_row("client", json.dumps(info, ensure_ascii=False))
    plain = sorted(k for k in caps if k != "extensions") if isinstance(caps, dict) else []
    facts.add_row("capabilities", ", ".join(plain) or "none declared")
    facts.add_row("extensions", ", ".join(extensions_of(caps)) or "none")
    facts.add_row(
        "peer", str(conn.get("peer") or "-") + (f", shim pid {conn['shimPid']}" if conn.get("shimPid") else "")
    )
    if conn.get("principal"):
        facts.add_row("principal", str(conn["principal"]))
    if conn.get("closedMs"):
        facts.add_row("closed", f"{age(int(conn['closedMs']))} ago: {conn.get('closeReason') or ''}")
    return facts


def host_detail(conn: dict[str, Any], tasks: list[TaskRow], questions: list[Question]) -> RenderableType:
    parts: list[RenderableType] = [host_facts(conn), Text(f"\nopen calls and tasks ({len(tasks)})", style="bold")]
    for t in tasks:
        line = Text(f"  {t.id[:8]}  {t.kind:<4}  {t.tool} on {t.upstream}  ")
        line.append_text(status_text(t.status))
        if t.status_message:
            line.append(f"  {t.status_message}", style="italic")
        parts.append(line)
    parts.append(Text(f"\nopen questions ({len(questions)})", style="bold"))
    for q in questions:
        line = Text(f"  {q.id[:8]}  {q.kind} from {q.upstream}: {q.message}")
        if q.wire.get("why"):
            line.append(f"\n            {q.wire['why']}", style="italic dim")
        parts.append(line)
    return Group(*parts)


class HostScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HostScreen { align: center middle; }
    HostScreen #host-detail { width: 110; max-width: 95%; height: 80%; border: thick $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "close")]

    def __init__(self, backend: Backend, state: ConsoleState, host_id: str) -> None:
        super().__init__()
        self.backend = backend
        self.state = state
        self.host_id = host_id
        self.connection: dict[str, Any] | None = None
        self.shown: RenderableType | None = None  # what the pane shows now

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="host-detail"):
            yield Static(f"host {self.host_id}: reading…", id="host-body")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.repaint)
        self.call_later(self.load)

    async def load(self) -> None:
        try:
            self.connection = await self.backend.connection(self.host_id)
        except BackendError as exc:
            self.query_one("#host-body", Static).update(Text(f"host {self.host_id}: {exc}", style="red"))
            return
        self.repaint()

    def repaint(self) -> None:
        if self.connection is not None:
            tasks, questions = open_work(self.state, self.host_id)
            self.shown = host_detail(self.connection, tasks, questions)
            self.query_one("#host-body", Static).update(self.shown)

    def action_close(self) -> None:
        self.dismiss(None)


class HostsScreen(ViewScreen):
    view = "hosts"
    columns = ("host", "kind", "transport", "revision", "working", "waiting", "failed", "opened", "state")

    def rows(self) -> list[Row]:
        text = self.filter_text.lower()
        out: list[Row] = []
        for h in self.state.hosts_shown():
            counts = self.state.host_counts(h.id)
            waiting = sum(1 for q in self.state.questions.values() if q.connection == h.id)
            cells = (
                h.label,
                h.kind,
                h.transport,
                h.revision or "2026-07-28",
                str(counts["working"]),
                str(waiting),
                str(counts["failed"]),
                age(h.opened_ms),
                "open" if h.open else f"closed: {h.close_reason or ''}",
            )
            if not text or text in " ".join(cells).lower():
                out.append((h.id, cells))
        return out

    def open(self, key: str) -> None:
        self.app.push_screen(HostScreen(self.backend, self.state, key))
