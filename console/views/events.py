"""`:events`: the live audit log, newest first: sequence, time, kind, what it is about. The feed
fills it as it comes (resumed by sequence after a drop, as the tasks list is); on first opening,
the events before the console started are read from `/v1/events`."""

from __future__ import annotations

import time
from typing import Any

from ..backend import BackendError
from ..event_log import EventLog
from .view_screen import Row, ViewScreen

BACKFILL = 500


def clock_of(ts_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}"


class EventsScreen(ViewScreen):
    view = "events"
    columns = ("seq", "time", "kind", "subject")

    def __init__(self, *args: Any, event_log: EventLog, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.event_log = event_log
        self._backfilled = False
        self._version = -1

    async def fetch(self) -> None:
        if self._backfilled:
            return
        self._backfilled = True
        first = self.event_log.rows[0].seq if self.event_log.rows else (self.state.seq or 0) + 1
        since = max(0, first - 1 - BACKFILL)
        if first <= 1:
            return
        try:
            self.event_log.backfill(await self.backend.events(since, min(BACKFILL, first - 1 - since)))
        except BackendError as exc:
            self.notify(f"older events not read: {exc}", severity="warning", timeout=4)

    def paint(self) -> None:
        if (
            self._version == self.event_log.version
            and self._painted is not None
            and self._painted[0] == self.filter_text
        ):
            return  # nothing new: the 1,000 rows are not rebuilt twice a second
        self._version = self.event_log.version
        super().paint()

    def host_name(self, connection: str) -> str | None:
        host = self.state.hosts.get(connection)
        return host.label if host is not None else None

    def rows(self) -> list[Row]:
        return [
            (str(r.seq), (str(r.seq), clock_of(r.ts_ms), r.kind, r.subject(self.host_name)))
            for r in self.event_log.shown(self.filter_text, host_name=self.host_name)
        ]
