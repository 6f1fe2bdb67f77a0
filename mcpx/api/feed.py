"""`/v1/events`: the live feed, a websocket (protocol in docs/api.md).

The client subscribes (`{"type": "subscribe", ...}`, with the token there if it cannot send an
`Authorization` header). Without `since` it first gets a snapshot (open connections, unfinished
and recent tasks, open questions, as of one sequence number), then every later event in sequence
order; with `since` it gets every event after that one from the store, then the live ones. A
subscriber that falls behind is never waited for: it is told `gap` and caught up from the store.
Whenever events it has not been sent were trimmed from the store first, it is told `reset` and
gets a fresh snapshot instead: it is never silently given a stream with a hole in it.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import anyio
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..events.bus import EVENT_KINDS, QUEUE_MAX, EventBus, EventFilter, StoredEvent, Subscriber
from ..protocol.origin import origin_allowed
from ..store import Store
from .operations import task_summary

log = logging.getLogger("mcpx.feed")

SUBSCRIBE_TIMEOUT_S = 10.0
HEARTBEAT_S = 15.0
PAGE = 500
SNAPSHOT_TASKS = 1000
SNAPSHOT_TASKS_MAX = 20_000


class _Trimmed(Exception):
    """Events a subscriber still needed are no longer stored (`first`: the oldest one that is)."""

    def __init__(self, first: int) -> None:
        super().__init__(first)
        self.first = first


class FeedEndpoint:
    def __init__(
        self,
        store: Store,
        bus: EventBus,
        token: str,
        allowed_origins: list[str],
        *,
        queue_max: int = QUEUE_MAX,
        heartbeat_s: float = HEARTBEAT_S,
        on_gap: Callable[[], None] | None = None,
    ) -> None:
        self.on_gap = on_gap  # counted by the daemon's metrics (mcpx_feed_gaps_total)
        self.store = store
        self.bus = bus
        self.token = token
        self.allowed_origins = allowed_origins
        self.queue_max = queue_max  # events.subscriberQueue
        self.heartbeat_s = heartbeat_s  # events.heartbeatS

    def _token_ok(self, given: object) -> bool:
        return isinstance(given, str) and secrets.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, ws: WebSocket) -> None:
        origin = ws.headers.get("origin")
        if origin is not None and not origin_allowed(origin, self.allowed_origins):
            await _deny(ws, 403, f"origin {origin!r} is not allowed")
            return
        auth = ws.headers.get("authorization", "")
        header_ok = auth.lower().startswith("bearer ") and self._token_ok(auth[7:])
        if auth and not header_ok:
            await _deny(ws, 401, "the mcpx API token is required")
            return
        await ws.accept()
        try:
            with anyio.fail_after(SUBSCRIBE_TIMEOUT_S):
                hello = json.loads(await ws.receive_text())
        except (TimeoutError, ValueError, WebSocketDisconnect, RuntimeError):
            await _close(ws, 4400, "expected a subscribe message")
            return
        if not isinstance(hello, dict) or hello.get("type") != "subscribe":
            await _close(ws, 4400, 'the first message must be {"type": "subscribe", ...}')
            return
        if not header_ok and not self._token_ok(hello.get("token")):
            await _close(ws, 4401, "mcpx API token required")
            return
        try:
            sub = _subscriber(hello, self.queue_max)
            since = _since(hello.get("since"))
            limit = min(int(hello.get("snapshotTasks", SNAPSHOT_TASKS)), SNAPSHOT_TASKS_MAX)
        except (TypeError, ValueError) as exc:
            await _close(ws, 4400, f"bad subscribe message: {exc}")
            return
        self.bus.subscribe(sub)  # first, so nothing committed from now on can be missed
        try:
            async with anyio.create_task_group() as tg:

                async def until_closed() -> None:
                    try:
                        while True:
                            await ws.receive_text()  # nothing more is expected; this notices the end
                    except (WebSocketDisconnect, RuntimeError):
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_closed)
                await self._serve(ws, sub, since, limit)
                tg.cancel_scope.cancel()
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            log.debug("feed subscriber gone: %s", exc)
        finally:
            self.bus.unsubscribe(sub)

    def _heartbeat(self, last: int) -> dict[str, Any]:
        """Nothing new: the newest sequence number, and the operators attached (sent at once when
        they change, so each console shows who else is answering)."""
        return {
            "type": "heartbeat",
            "seq": max(last, self.bus.last_seq),
            "ts": _ms(),
            "operators": self.bus.operators(),
        }

    async def _serve(self, ws: WebSocket, sub: Subscriber, since: int | None, snapshot_limit: int) -> None:
        try:
            if since is None:
                last = await self._snapshot(ws, sub, snapshot_limit)
                last = await self._catch_up(ws, sub, last)
            else:
                last = await self._catch_up(ws, sub, since)
                # Caught up: say so now, not at the next heartbeat, so a resuming client (a console
                # after a restart) knows it is live even when nothing happens.
                await _send(ws, self._heartbeat(last))
        except _Trimmed as gone:
            last = await self._start_over(ws, sub, snapshot_limit, gone)
        while True:
            with anyio.move_on_after(self.heartbeat_s):
                await sub.wait()
            if sub.overflowed:
                sub.queue.clear()
                sub.overflowed = False
                if self.bus.last_seq <= last:
                    continue  # what overflowed was sent already, by a catch-up from the store: no gap
                if self.on_gap is not None:
                    self.on_gap()
                await _send(ws, {"type": "gap", "after": last})
                try:
                    last = await self._catch_up(ws, sub, last)
                except _Trimmed as gone:  # trimmed while it lagged: what it missed is gone
                    last = await self._start_over(ws, sub, snapshot_limit, gone)
                continue
            if not sub.queue:
                await _send(ws, self._heartbeat(last))
                continue
            while sub.queue and not sub.overflowed:
                stored = sub.queue.popleft()
                if stored.seq > last:  # not already sent from the store
                    await _send(ws, _event(stored))
                    last = stored.seq

    async def _snapshot(self, ws: WebSocket, sub: Subscriber, limit: int) -> int:
        snap = await self.store.snapshot(limit)
        asking = {q.task_id for q in snap.questions if q.task_id}
        await _send(
            ws,
            {
                "type": "snapshot",
                "seq": snap.seq,
                "connections": [c.wire() for c in snap.connections],
                "tasks": [task_summary(t, t.id in asking) for t in snap.tasks],
                "questions": [q.wire() for q in snap.questions],
                "operators": self.bus.operators(),
            },
        )
        return snap.seq

    async def _start_over(self, ws: WebSocket, sub: Subscriber, snapshot_limit: int, gone: _Trimmed) -> int:
        """`reset`, a fresh snapshot and the events after it (again, if those go too meanwhile)."""
        while True:
            await _send(ws, {"type": "reset", "reason": f"events up to {gone.first - 1} are no longer stored"})
            last = await self._snapshot(ws, sub, snapshot_limit)
            try:
                return await self._catch_up(ws, sub, last)
            except _Trimmed as again:
                gone = again

    async def _catch_up(self, ws: WebSocket, sub: Subscriber, last: int) -> int:
        """Send every stored event after `last` that the subscriber wants; returns the last seq.
        _Trimmed when some of them are no longer stored (none of that page is sent then)."""
        f = sub.filter
        task_id = next(iter(f.task_ids)) if len(f.task_ids) == 1 else None
        while True:
            page = await self.store.events_since(last, PAGE, task_id=task_id, kinds=f.kinds)
            # Checked after the read: trimming only ever raises the oldest stored seq, so when
            # nothing after `last` is missing now, nothing was when the page was read.
            await self._still_stored(last)
            for stored in page:
                if f.matches(stored.event):
                    await _send(ws, _event(stored))
            if len(page) < PAGE:
                return max(last, page[-1].seq) if page else last
            last = page[-1].seq

    async def _still_stored(self, last: int) -> None:
        """_Trimmed when events after `last` were trimmed from the store."""
        first = await self.store.first_seq()
        if first and last < first - 1:
            raise _Trimmed(first)
        if not first and (newest := await self.store.last_seq()) > last:
            raise _Trimmed(newest + 1)  # none stored, yet some came after `last`: all of those are gone


def _subscriber(hello: dict[str, Any], queue_max: int) -> Subscriber:
    def strings(key: str) -> frozenset[str]:
        value = hello.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{key} must be a list of strings")
        return frozenset(value)

    kinds = strings("kinds")
    unknown = kinds - set(EVENT_KINDS)
    if unknown:
        raise ValueError(f"unknown event kinds: {', '.join(sorted(unknown))}")
    operator = hello.get("operator")
    if operator is not None and not isinstance(operator, str):
        raise ValueError("operator must be a string (the name answers are given under)")
    return Subscriber(
        EventFilter(kinds, strings("tasks"), strings("connections")), operator=operator or None, max_queue=queue_max
    )


def _since(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError("since must be a sequence number (an integer >= 0)")
    return value


def _event(stored: StoredEvent) -> dict[str, Any]:
    return {"type": "event", **stored.wire()}


def _ms() -> int:
    return int(time.time() * 1000)


async def _send(ws: WebSocket, message: dict[str, Any]) -> None:
    await ws.send_text(json.dumps(message, separators=(",", ":"), ensure_ascii=False))


async def _deny(ws: WebSocket, status: int, message: str) -> None:
    """Refuse the upgrade with an HTTP status and a JSON error, as /v1 answers (a server without
    the denial-response extension can only close before accepting, which clients see as 403)."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        await ws.send_denial_response(JSONResponse({"error": message}, status, headers=headers))
    else:
        await ws.close(code=4000 + status, reason=message)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    if ws.client_state != WebSocketState.DISCONNECTED:
        try:
            await ws.close(code=code, reason=reason)
        except (RuntimeError, OSError):
            log.debug("feed: closing an already closed socket")
