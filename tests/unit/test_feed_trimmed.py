"""mcpx.api.feed's recovery when the events a subscriber needs were trimmed from the store (#26):
it is told `reset` and sent a fresh snapshot, never a catch-up with a hole in it. The feed endpoint
is served by uvicorn over a real SqliteStore and its bus, and read by a websocket client; the trim
lands between the commit and the subscriber's catch-up."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from websockets.asyncio.client import ClientConnection, connect

from mcpx.api.feed import FeedEndpoint
from mcpx.events.bus import Event, EventBus, StoredEvent

from .storekit import WAIT_S, opened

pytestmark = pytest.mark.anyio
TOKEN = "feed-test-token"


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the test runner's signals stay its own


@contextlib.asynccontextmanager
async def served(feed: FeedEndpoint) -> AsyncIterator[str]:
    """The feed on a port of its own; its ws:// URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    app = Starlette(routes=[WebSocketRoute("/v1/events", feed.__call__)])
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(WAIT_S):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"ws://127.0.0.1:{sock.getsockname()[1]}/v1/events"
        finally:
            server.should_exit = True


async def until(ws: ClientConnection, *kinds: str) -> list[dict[str, Any]]:
    """Messages up to and including the next one of one of `kinds`."""
    got: list[dict[str, Any]] = []
    with anyio.fail_after(WAIT_S):
        while not got or got[-1]["type"] not in kinds:
            got.append(json.loads(await ws.recv()))
    return got


def status(n: int) -> Event:
    return Event("task.status", {"status": "working", "statusMessage": f"step {n}"}, "t1")


async def test_a_lagging_subscriber_whose_missed_events_were_trimmed_gets_reset_and_a_fresh_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpx.db"
    bus = EventBus()
    async with opened(path, bus=bus) as w:
        for n in range(5):
            await w.store.append([status(n)])
        feed = FeedEndpoint(w.store, bus, TOKEN, [], queue_max=1, heartbeat_s=0.05)
        async with (
            served(feed) as url,
            connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws,
        ):
            await ws.send(json.dumps({"type": "subscribe"}))
            [snapshot, *_, _beat] = await until(ws, "heartbeat")  # live from here on
            assert snapshot["type"] == "snapshot" and snapshot["seq"] == 5

            def trim(events: list[StoredEvent]) -> None:
                # The table trimmed to its newest row right after this commit, before the feed
                # could catch the lagging subscriber up (events.maxRows 1, as the sweep would).
                with contextlib.closing(sqlite3.connect(path)) as db, db:
                    db.execute("DELETE FROM events WHERE seq <= ?", (events[-1].seq - 1,))

            w.published.hook = trim
            await w.store.append([status(5), status(6), status(7)])  # 6..8: more than its queue of 1
            w.published.hook = None
            got = await until(ws, "snapshot", "event")  # the fresh snapshot, or (wrongly) event 8
            await w.store.append([status(8)])
            [*_, live] = await until(ws, "event")
    # Told it lagged, then that 6 and 7 are gone: never event 8 right after the gap as if whole.
    assert [m["type"] for m in got if m["type"] != "heartbeat"] == ["gap", "reset", "snapshot"], got
    gap, reset, fresh = (m for m in got if m["type"] != "heartbeat")
    assert gap["after"] == 5 and reset["reason"] == "events up to 7 are no longer stored"
    assert fresh["seq"] == 8
    assert live["seq"] == 9 and live["data"]["statusMessage"] == "step 8"  # and live again after it
