"""The registry of host connections: who is connected, since when, and who owned which task.

A connection, as the console shows it (DESIGN.md): a 2025-11-25 session; a `mcpx serve` shim
process; a stateless 2026 host, keyed by its principal, else by `clientInfo` name and version with
the peer address. Records are stored (with a `connection.opened|closed` event each), so after a
restart the console still shows who owned what. A session closes when it is deleted, a shim when
its process goes, a stateless host after `connections.idleCloseS` without a request.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from ..events.bus import Event
from ..records.connection_record import ConnectionRecord

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("mcpx.connections")

FLUSH_EVERY_S = 10.0  # how often last-seen times reach the store
RESTARTED = "the mcpx daemon restarted"


CLOSED_KEYS_MAX = 10_000  # closed stateless hosts remembered for their return


def now_ms() -> int:
    return int(time.time() * 1000)


def new_connection_id() -> str:
    return "c-" + secrets.token_urlsafe(9)


class ConnectionRegistry:
    def __init__(
        self,
        store: Store,
        idle_close_s: float,
        *,
        in_use: Callable[[ConnectionRecord], bool] | None = None,
        on_idle_close: Callable[[ConnectionRecord], None] | None = None,
        on_closed: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """`in_use` is asked before a quiet legacy session is closed: True while it is still in use
        (an open stream, a request of mcpx's waiting for its answer), so it stays open however
        quiet. `on_idle_close` is told when a quiet host is closed; `on_closed` hears every closed
        connection's id, however it closed (its own upstream processes stop)."""
        self.store = store
        self.idle_close_s = idle_close_s
        self.live: dict[str, ConnectionRecord] = {}
        self.by_key: dict[str, str] = {}  # stateless identity key -> record id
        self._seen: dict[str, int] = {}  # last-seen times not yet stored
        self.in_use = in_use or (lambda record: False)
        self.on_idle_close = on_idle_close
        self.on_closed = on_closed
        # Stateless hosts closed for being quiet, by identity key: one that comes back takes its
        # record up again instead of leaving a closed row behind per visit (bounded, oldest out).
        self._closed_keys: OrderedDict[str, ConnectionRecord] = OrderedDict()
        # Records being stored by `open`, not live yet: an update meanwhile (a host's process found
        # late, host/http/peer_process.py) waits for it instead of finding no record and being lost.
        self._opening: dict[str, anyio.Event] = {}

    async def restore(self) -> None:
        """Records the previous daemon left open: shims died with it (their socket is gone);
        sessions and stateless hosts carry on (a session survives a restart)."""
        for record in await self.store.connections(open_only=True):
            if record.kind == "shim":
                await self._close(record, RESTARTED)
                continue
            self.live[record.id] = record
            if record.key is not None:
                self.by_key[record.key] = record.id

    def get(self, record_id: str) -> ConnectionRecord | None:
        return self.live.get(record_id)

    def find_stateless(self, key: str) -> ConnectionRecord | None:
        """The record of this stateless host: open, or closed (it came back: the same record opens again)."""
        record_id = self.by_key.get(key)
        if record_id is not None and record_id in self.live:
            return self.live[record_id]
        return self._closed_keys.pop(key, None)

    async def open(self, record: ConnectionRecord) -> ConnectionRecord:
        """Store a new connection (or take back one restored from the store)."""
        if record.id in self.live:
            return self.live[record.id]
        stored = self._opening[record.id] = anyio.Event()
        try:
            opened = [Event("connection.opened", record.wire(), connection_id=record.id)]
            await self.store.put_connection(record, opened)
            self.live[record.id] = record
            if record.key is not None:
                self.by_key[record.key] = record.id
        finally:
            del self._opening[record.id]
            stored.set()
        return record

    async def update(
        self,
        record_id: str,
        *,
        revision: str | None,
        client_info: dict[str, Any],
        capabilities: dict[str, Any] | None,
        label: str | None,
    ) -> None:
        """What a stdio connection learns at initialize: its revision, clientInfo and capabilities,
        and so its label (its clientInfo name may lead it: connections/naming.py)."""
        opening = self._opening.get(record_id)
        if opening is not None:
            await opening.wait()
        record = self.live.get(record_id)
        if record is None:
            return
        record = replace(
            record, revision=revision, client_info=client_info, capabilities=capabilities or {}, label=label
        )
        self.live[record_id] = record
        await self.store.put_connection(record, [Event("connection.updated", record.wire(), connection_id=record_id)])

    def seen(self, record_id: str) -> None:
        if record_id in self.live:
            self._seen[record_id] = now_ms()

    async def close(self, record_id: str, reason: str) -> None:
        record = self.live.pop(record_id, None)
        if record is None:
            return
        if record.key is not None and self.by_key.get(record.key) == record_id:
            del self.by_key[record.key]
            self._closed_keys[record.key] = record
            while len(self._closed_keys) > CLOSED_KEYS_MAX:
                self._closed_keys.popitem(last=False)
        await self._close(record, reason)

    async def _close(self, record: ConnectionRecord, reason: str) -> None:
        last = self._seen.pop(record.id, record.last_seen_ms)
        closed = replace(record, last_seen_ms=last, closed_ms=now_ms(), close_reason=reason)
        event = Event("connection.closed", {"reason": reason}, connection_id=record.id)
        await self.store.put_connection(closed, [event])
        if self.on_closed is not None:
            await self.on_closed(record.id)

    async def run(self) -> None:
        """Store last-seen times now and then, and close stateless hosts gone quiet."""
        while True:
            await anyio.sleep(min(FLUSH_EVERY_S, max(self.idle_close_s / 4, 0.05)))
            try:
                await self.flush()
                await self._close_idle()
            except Exception as exc:  # noqa: BLE001 - bookkeeping; the next round tries again
                log.warning("connection registry upkeep failed: %s", exc)

    async def flush(self) -> None:
        seen, self._seen = self._seen, {}
        if seen:
            # In memory first: a failed write must not make an active host look idle.
            for record_id, ms in seen.items():
                record = self.live.get(record_id)
                if record is not None:
                    self.live[record_id] = replace(record, last_seen_ms=ms)
            await self.store.touch_connections(seen)

    async def _close_idle(self) -> None:
        cutoff = now_ms() - int(self.idle_close_s * 1000)
        for record in list(self.live.values()):
            quiet = record.last_seen_ms < cutoff and record.id not in self._seen
            # A quiet session stays stored (its host may come back with its id, as after a
            # restart); closing it frees what the daemon held for it in memory.
            idle = record.kind == "stateless" or (record.kind == "session" and not self.in_use(record))
            if quiet and idle:
                await self.close(record.id, f"idle for {self.idle_close_s:g} s")
                if self.on_idle_close is not None:
                    self.on_idle_close(record)
