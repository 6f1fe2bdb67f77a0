"""The feed's events as the events view lists them: the newest few thousand, each one row (seq,
time, kind, subject), filtered by text. A host is named as the hosts pane names it, looked up when
shown (a shim's label is learnt at its initialize, after its first event). Pure: feed messages in,
rows out."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KEPT = 5000
# A connection id to the name its host is shown by (the hosts pane's), when the console knows it.
HostName = Callable[[str], str | None]


def _unnamed(_connection: str) -> str | None:
    return None


@dataclass(frozen=True)
class EventRow:
    seq: int
    ts_ms: int
    kind: str
    about: str  # its task and question (short ids)
    connection: str | None  # the host it is about, named when shown: its label may be learnt later
    detail: str  # its tool, status, reason or action
    by: str | None  # who did it: `operator:olga`, `host:<connection id>`, `mcpx`

    @staticmethod
    def from_event(ev: Mapping[str, Any]) -> EventRow:
        about = []
        for key, label in (("taskId", "task"), ("questionId", "question")):
            value = ev.get(key)
            if isinstance(value, str) and value:
                about.append(f"{label} {value[:8]}")
        connection = ev.get("connectionId")
        data = ev.get("data")
        detail = ""
        if isinstance(data, Mapping):
            found = data.get("tool") or data.get("status") or data.get("reason") or data.get("action")
            detail = found if isinstance(found, str) else ""
        by = ev.get("by")
        return EventRow(
            int(ev.get("seq") or 0),
            int(ev.get("ts") or 0),
            str(ev.get("kind") or ""),
            " · ".join(about),
            connection if isinstance(connection, str) and connection else None,
            detail,
            by if isinstance(by, str) and by else None,
        )

    def subject(self, host_name: HostName = _unnamed) -> str:
        """What it is about and who did it, each host by its name (else its short connection id)."""
        parts = [self.about] if self.about else []
        if self.connection is not None:
            parts.append(f"host {host_name(self.connection) or self.connection[:8]}")
        if self.detail:
            parts.append(self.detail)
        if self.by is not None:
            host = host_name(self.by.removeprefix("host:")) if self.by.startswith("host:") else None
            parts.append(f"by {host or self.by}")
        return " · ".join(parts)

    def matches(self, text: str, host_name: HostName = _unnamed) -> bool:
        """`text` in what is shown, or in the ids behind a named host."""
        if not text:
            return True
        shown = f"{self.seq} {self.kind} {self.subject(host_name)} {self.connection or ''} {self.by or ''}"
        return text.lower() in shown.lower()


def subject_of(ev: Mapping[str, Any], host_name: HostName = _unnamed) -> str:
    return EventRow.from_event(ev).subject(host_name)


class EventLog:
    """The newest `kept` events, in sequence order; an event at or below the newest one is ignored
    (a resumed feed, or a backfill from /v1/events that overlaps it)."""

    def __init__(self, kept: int = KEPT) -> None:
        self.rows: deque[EventRow] = deque(maxlen=kept)
        self.version = 0  # grows with every change, so a view repaints only when it moved

    @property
    def last_seq(self) -> int:
        return self.rows[-1].seq if self.rows else 0

    def apply(self, message: Mapping[str, Any]) -> None:
        """A feed message: events are kept; a snapshot or reset leaves what was kept (it is history)."""
        if message.get("type") == "event":
            self.add([message])

    def add(self, events: Iterable[Mapping[str, Any]]) -> None:
        for ev in events:
            row = EventRow.from_event(ev)
            if row.seq > self.last_seq:
                self.rows.append(row)
                self.version += 1

    def backfill(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Older events (from /v1/events) before the ones kept, in order, without doubles."""
        first = self.rows[0].seq if self.rows else None
        older = [EventRow.from_event(ev) for ev in events]
        older = [r for r in older if first is None or r.seq < first]
        if older:
            kept = list(self.rows)
            self.rows.clear()
            self.rows.extend(sorted({r.seq: r for r in older}.values(), key=lambda r: r.seq) + kept)
            self.version += 1

    def shown(self, text: str, limit: int = 1000, host_name: HostName = _unnamed) -> list[EventRow]:
        """Newest first, those that match `text` (a host by its name or id), at most `limit`."""
        out: list[EventRow] = []
        for row in reversed(self.rows):
            if row.matches(text, host_name):
                out.append(row)
                if len(out) >= limit:
                    break
        return out
