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
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from ..config.model import NotifyConfig
from ..events.bus import EventBus, StoredEvent, Subscriber
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
    spec: object = None  # its config entry: a reload keeps a route whose entry and place are the same
    scope: anyio.CancelScope | None = None  # its worker's (made in the event loop): a reload may end it
    gone: bool = False  # a reload removed it: its worker, started or not, ends


@dataclass(eq=False)
class _Tap(Subscriber):
    """A bus subscriber that hands events on at once instead of queueing them for a reader."""

    hand_on: Callable[[StoredEvent], None] = lambda stored: None

    def offer(self, stored: StoredEvent) -> None:
        self.hand_on(stored)


# An unexpected failure of a sink (not an Undelivered): the daemon's rule for background work
# (daemon/background.py) logs it and makes it an event; the event is dropped for that sink.
Report = Callable[[str, BaseException], None]


class Notifier:
    def __init__(
        self,
        bus: EventBus,
        routes: list[Route],
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        answer_link: AnswerLink | None = None,
        report: Report | None = None,
    ) -> None:
        self._bus = bus
        self.routes = routes
        self._client = client  # the webhooks' connections, closed by aclose()
        self._clock = clock
        self._answer_link = answer_link  # a one-time answer link for an opened question (api/answer_links.py)
        self._report = report
        self._tg: TaskGroup | None = None

    @classmethod
    def from_config(
        cls,
        notify: NotifyConfig,
        bus: EventBus,
        client: httpx.AsyncClient,
        answer_link: AnswerLink | None = None,
        report: Report | None = None,
    ) -> Notifier:
        return cls(bus, routes_for(notify, client), client, answer_link=answer_link, report=report)

    def _hand_on(self, stored: StoredEvent) -> None:
        for route in self.routes:
            if stored.event.kind in route.kinds:
                route.outbox.put(stored)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Subscribe, then deliver until cancelled; `started` once no later event can be missed.
        Run again after a failure (daemon/background.py), it carries on with the same outboxes."""
        tap = self._bus.subscribe(_Tap(internal=True, hand_on=self._hand_on))
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for route in self.routes:
                    tg.start_soon(self._work, route)
                task_status.started()
                await anyio.sleep_forever()  # with no sink yet, a reload may bring one (reconfigure)
        finally:
            self._tg = None
            self._bus.unsubscribe(tap)

    def reconfigure(self, notify: NotifyConfig) -> None:
        """A reloaded config's `notify`, applied now: an unchanged sink keeps its queue and counts, a
        changed or removed one stops (an event it is delivering is cut), a new one starts."""
        assert self._client is not None, "a notifier built from the config has a client"
        kept = {(r.name, _key(r.spec)): r for r in self.routes}
        fresh = [kept.pop((r.name, _key(r.spec)), r) for r in routes_for(notify, self._client)]
        for gone in kept.values():
            gone.gone = True
            if gone.scope is not None:
                gone.scope.cancel()
        started = [r for r in fresh if r not in self.routes]
        self.routes = fresh
        if self._tg is not None:
            for route in started:
                self._tg.start_soon(self._work, route)

    async def aclose(self) -> None:
        if self._client is not None:
            with anyio.CancelScope(shield=True):
                await self._client.aclose()

    async def _work(self, route: Route) -> None:
        stats = route.outbox.stats
        with anyio.CancelScope() as route.scope:
            while not route.gone:
                stored = await route.outbox.get()
                try:
                    link = None
                    if stored.event.kind == "question.opened" and self._answer_link is not None:
                        link = self._answer_link(stored.event.data)  # one per notification: each link works once
                    await route.sink.deliver(body(stored, link), stats)
                except Undelivered as exc:
                    stats.failed += 1
                    stats.last_error, stats.last_error_ms = str(exc), int(self._clock() * 1000)
                    log.warning("%s: event %d not delivered: %s", route.name, stored.seq, exc)
                except Exception as exc:  # noqa: BLE001 - a sink's own bug costs its event, never the daemon
                    stats.failed += 1
                    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    stats.last_error, stats.last_error_ms = error, int(self._clock() * 1000)
                    log.error("%s: event %d dropped: %s", route.name, stored.seq, error)
                    if self._report is not None:
                        self._report(route.name, exc)  # logged with its traceback, an event
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


def routes_for(notify: NotifyConfig, client: httpx.AsyncClient) -> list[Route]:
    """A route per configured webhook and command hook, named by its place in the config."""
    routes = [
        Route(f"notify.webhooks[{i}]", Webhook(w.url, w.secret, client), frozenset(w.events), spec=w)
        for i, w in enumerate(notify.webhooks)
    ]
    routes += [
        Route(f"notify.commands[{i}]", CommandHook(list(c.run)), frozenset(c.events), spec=c)
        for i, c in enumerate(notify.commands)
    ]
    return routes


def _key(spec: object) -> object:
    return spec.model_dump_json() if isinstance(spec, BaseModel) else id(spec)
