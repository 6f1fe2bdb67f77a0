"""The feed's events as the events view lists them: the newest few thousand, each one row (seq,
time, kind, subject), filtered by text. Pure: feed messages in, rows out."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KEPT = 5000


@dataclass(frozen=True)
class EventRow:
    seq: int
    ts_ms: int
    kind: str
    subject: str  # what it is about: its task, question or connection (short ids), and who did it

    @staticmethod
    def from_event(ev: Mapping[str, Any]) -> EventRow:
        return EventRow(int(ev.get("seq") or 0), int(ev.get("ts") or 0), str(ev.get("kind") or ""), subject_of(ev))

    def matches(self, text: str) -> bool:
        return not text or text.lower() in f"{self.seq} {self.kind} {self.subject}".lower()


def subject_of(ev: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for key, label in (("taskId", "task"), ("questionId", "question"), ("connectionId", "host")):
        value = ev.get(key)
        if isinstance(value, str) and value:
            parts.append(f"{label} {value[:8]}")
    data = ev.get("data")
    if isinstance(data, Mapping):
        detail = data.get("tool") or data.get("status") or data.get("reason") or data.get("action")
        if isinstance(detail, str) and detail:
            parts.append(detail)
    by = ev.get("by")
    if isinstance(by, str) and by:
        parts.append(f"by {by}")
    return " · ".join(parts)


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

    def shown(self, text: str, limit: int = 1000) -> list[EventRow]:
        """Newest first, those that match `text`, at most `limit`."""
        out: list[EventRow] = []
        for row in reversed(self.rows):
            if row.matches(text):
                out.append(row)
                if len(out) >= limit:
                    break
        return out
