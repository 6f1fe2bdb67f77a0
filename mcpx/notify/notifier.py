"""Taps the event bus and feeds each sink's outbox; one worker per sink delivers in order.

The tap runs inside the bus's publish, so it only appends to bounded outboxes: no sink, however
slow, can hold up the bus, a commit or a call (docs/notify.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx
from anyio.abc import TaskStatus

from ..config.model import NotifyConfig
from ..events.bus import EventBus, EventFilter, StoredEvent, Subscriber
from .command_hook import CommandHook
from .outbox import Outbox, SinkStats
from .payload import Undelivered, body
from .webhook import Webhook

log = logging.getLogger("mcpx.notify")

AnswerLink = Callable[[dict[str, Any]], "str | None"]  # an opened question's data -> a link that answers it


class Sink(Protocol):
    kind: str

    @property
    def target(self) -> str: ...

    async def deliver(self, body: bytes, stats: SinkStats) -> None: ...


@dataclass(eq=False)
class Route:
    name: str  # where it is configured, e.g. `notify.webhooks[0]`
    sink: Sink
    kinds: frozenset[str]
    outbox: Outbox = field(default_factory=Outbox)


@dataclass(eq=False)
class _Tap(Subscriber):
    """A bus subscriber that hands events on at once instead of queueing them for a reader."""

    hand_on: Callable[[StoredEvent], None] = lambda stored: None

    def offer(self, stored: StoredEvent) -> None:
        if self.filter.matches(stored.event):
            self.hand_on(stored)


class Notifier:
    def __init__(
        self,
        bus: EventBus,
        routes: list[Route],
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        answer_link: AnswerLink | None = None,
    ) -> None:
        self._bus = bus
        self.routes = routes
        self._client = client  # the webhooks' connections, closed when run() ends
        self._clock = clock
        self._answer_link = answer_link  # a one-time answer link for an opened question (api/answer_links.py)

    @classmethod
    def from_config(
        cls, notify: NotifyConfig, bus: EventBus, client: httpx.AsyncClient, answer_link: AnswerLink | None = None
    ) -> Notifier:
        routes = [
            Route(f"notify.webhooks[{i}]", Webhook(w.url, w.secret, client), frozenset(w.events))
            for i, w in enumerate(notify.webhooks)
        ]
        routes += [
            Route(f"notify.commands[{i}]", CommandHook(list(c.run)), frozenset(c.events))
            for i, c in enumerate(notify.commands)
        ]
        return cls(bus, routes, client, answer_link=answer_link)

    def _hand_on(self, stored: StoredEvent) -> None:
        for route in self.routes:
            if stored.event.kind in route.kinds:
                route.outbox.put(stored)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Subscribe, then deliver until cancelled; `started` once no later event can be missed."""
        kinds = frozenset().union(*(r.kinds for r in self.routes))
        tap = _Tap(filter=EventFilter(kinds=kinds), internal=True, hand_on=self._hand_on)
        if self.routes:  # with none, nothing to subscribe for: it returns at once
            self._bus.subscribe(tap)
        try:
            async with anyio.create_task_group() as tg:
                for route in self.routes:
                    tg.start_soon(self._work, route)
                task_status.started()
        finally:
            self._bus.unsubscribe(tap)
            if self._client is not None:
                with anyio.CancelScope(shield=True):
                    await self._client.aclose()

    async def _work(self, route: Route) -> None:
        stats = route.outbox.stats
        while True:
            stored = await route.outbox.get()
            link = None
            if stored.event.kind == "question.opened" and self._answer_link is not None:
                link = self._answer_link(stored.event.data)  # one per notification: each link works once
            try:
                await route.sink.deliver(body(stored, link), stats)
            except Undelivered as exc:
                stats.failed += 1
                stats.last_error, stats.last_error_ms = str(exc), int(self._clock() * 1000)
                log.warning("%s: event %d not delivered: %s", route.name, stored.seq, exc)
            else:
                stats.delivered += 1

    def status(self) -> list[dict[str, Any]]:
        """Each sink's counts, as /v1/status shows them (`notify`)."""
        return [
            {
                "sink": r.name,
                "kind": r.sink.kind,
                "target": r.sink.target,
                "events": sorted(r.kinds),
                "queued": len(r.outbox.queue),
                "delivered": r.outbox.stats.delivered,
                "failed": r.outbox.stats.failed,
                "dropped": r.outbox.stats.dropped,
                "retries": r.outbox.stats.retries,
                "lastError": r.outbox.stats.last_error,
                "lastErrorMs": r.outbox.stats.last_error_ms,
            }
            for r in self.routes
        ]
