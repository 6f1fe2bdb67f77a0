"""Every change as one event with a sequence number: the feed's stream and the audit log.

An `Event` is built by whoever makes a change (engine, broker, connection registry) and handed to
the store with that change; the store writes both in one transaction and gives the event its
sequence number (`StoredEvent.seq`, the events table's key), then publishes it on the `EventBus`.
So an event exists exactly when its change does, and the bus sees events in commit order.

The bus never blocks a publisher: each subscriber has a bounded queue, and one that falls behind
is marked `overflowed` (it then resumes from the store by sequence; see api/feed.py).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import anyio

from .kinds import EVENT_KINDS as EVENT_KINDS  # re-exported: modules import the kinds from here
from .kinds import EventKind as EventKind

QUEUE_MAX = 2048  # live events a subscriber may lag behind before it resumes from the store


@dataclass(frozen=True)
class Event:
    kind: EventKind
    data: dict[str, Any]
    task_id: str | None = None
    connection_id: str | None = None
    question_id: str | None = None
    by: str | None = None  # who caused it: "host:<connection>", "operator:<name>", "mcpx"


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    ts_ms: int
    event: Event

    def wire(self) -> dict[str, Any]:
        """The event as /v1 and the feed show it (camelCase, nulls left out)."""
        e = self.event
        out: dict[str, Any] = {"seq": self.seq, "ts": self.ts_ms, "kind": e.kind}
        for key, value in (
            ("taskId", e.task_id),
            ("connectionId", e.connection_id),
            ("questionId", e.question_id),
            ("by", e.by),
        ):
            if value is not None:
                out[key] = value
        out["data"] = e.data
        return out


@dataclass(frozen=True)
class EventFilter:
    """What a subscriber wants; empty sets mean everything."""

    kinds: frozenset[str] = frozenset()
    task_ids: frozenset[str] = frozenset()
    connection_ids: frozenset[str] = frozenset()

    def matches(self, event: Event) -> bool:
        if self.kinds and event.kind not in self.kinds:
            return False
        if self.task_ids and event.task_id not in self.task_ids:
            return False
        return not (self.connection_ids and event.connection_id not in self.connection_ids)


@dataclass(eq=False)
class Subscriber:
    filter: EventFilter = field(default_factory=EventFilter)
    operator: str | None = None  # set when this subscriber answers questions (an attached console)
    internal: bool = False  # the daemon's own (remote_changes' relay): not a feed client in /v1/status
    queue: collections.deque[StoredEvent] = field(default_factory=collections.deque)
    overflowed: bool = False
    wake: anyio.Event = field(default_factory=anyio.Event)
    max_queue: int = QUEUE_MAX

    def offer(self, stored: StoredEvent) -> None:
        if self.overflowed or not self.filter.matches(stored.event):
            return
        if len(self.queue) >= self.max_queue:
            self.overflowed = True  # stop queueing: it resumes from the store, never blocks us
            self.queue.clear()
        else:
            self.queue.append(stored)
        self.wake.set()

    async def wait(self) -> None:
        """Until there is something to deliver (or the subscriber overflowed)."""
        if self.queue or self.overflowed:
            return
        self.wake = anyio.Event()
        await self.wake.wait()


class EventBus:
    def __init__(self) -> None:
        self.subscribers: set[Subscriber] = set()
        self.last_seq = 0
        self._operators_changed = anyio.Event()

    def publish(self, events: list[StoredEvent]) -> None:
        for stored in events:
            self.last_seq = max(self.last_seq, stored.seq)
            for sub in self.subscribers:
                sub.offer(stored)

    def subscribe(self, sub: Subscriber) -> Subscriber:
        self.subscribers.add(sub)
        if sub.operator is not None:
            self._notify_operators()
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        if sub.operator is not None:
            self._notify_operators()

    def operators(self) -> list[str]:
        """Names of the operators attached right now (feed subscribers that take questions)."""
        return sorted({s.operator for s in self.subscribers if s.operator is not None})

    async def operator_attached(self) -> None:
        """Returns once at least one operator is attached."""
        while not self.operators():
            changed = self._operators_changed
            await changed.wait()

    def _notify_operators(self) -> None:
        changed, self._operators_changed = self._operators_changed, anyio.Event()
        changed.set()
        for sub in self.subscribers:
            sub.wake.set()  # its feed sends a heartbeat now, naming who is attached (several operators)
