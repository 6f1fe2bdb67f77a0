"""#26 item 6 against the real daemon: closed history does not pile up. A store that already holds
10,000 closed questions and 10,000 closed connections (a long-lived daemon's), and 500 stateless
hosts that visit and go quiet: after `store.keepClosedS` the sweep leaves only what is open, and
the feed snapshot and `/v1/connections` (paged) show only what they should."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from harness import SQLITE, Api, Daemon, FeedClient, RawHost, stdio_server, wait_until

from mcpx.records.connection_record import ConnectionRecord
from mcpx.records.question import Question
from mcpx.store.sqlite import SqliteStore

pytestmark = pytest.mark.stress  # slow tier (tests/conftest.py): 20,000 rows seeded, 500 hosts

HISTORY = 10_000
VISITORS = 500


async def _seed(path: Path) -> None:
    """A long-lived daemon's history, written as it would have."""
    long_ago = int(time.time() * 1000) - 86_400_000
    store = SqliteStore(path)
    await store.open()
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        async with anyio.create_task_group() as writes:
            for i in range(HISTORY):
                q = Question(f"q{i}", "fx", "roots/list", {}, long_ago, long_ago + 1, status="answered")
                record = ConnectionRecord(f"gone{i}", "stateless", "http", long_ago, long_ago, closed_ms=long_ago + 1)
                writes.start_soon(store.put_question, q)
                writes.start_soon(store.put_connection, record)
        await store.close()


def test_closed_history_is_swept_and_reads_stay_small(tmp_path: Path) -> None:
    config = {
        "mcpServers": {"fx": stdio_server(tmp_path)},
        "store": {"keepClosedS": 2},
        "connections": {"idleCloseS": 0.5},
    }
    d = Daemon(tmp_path, config, name="retention", store=SQLITE)  # seeded as a SQLite file
    d.state_dir.mkdir(parents=True, exist_ok=True)
    anyio.run(_seed, d.state_dir / "mcpx.db")
    d.start()
    try:
        wait_until(lambda: d.store_rows("SELECT COUNT(*) FROM questions")[0][0] == 0, 20, "the seeded history swept")
        assert d.store_rows("SELECT COUNT(*) FROM connections WHERE id LIKE 'gone%'")[0][0] == 0
        for i in range(VISITORS):  # distinct stateless hosts, one request each, then quiet
            with RawHost(d.url) as h:
                info = {"io.modelcontextprotocol/clientInfo": {"name": f"v{i}", "version": "1"}}
                assert h.modern("tools/list", meta=info).status_code == 200
        opened = d.store_rows("SELECT COUNT(*) FROM events WHERE kind = 'connection.opened'")[0][0]
        assert opened >= VISITORS  # each had its record (some are swept already)
        wait_until(lambda: d.store_rows("SELECT COUNT(*) FROM connections")[0][0] == 0, 30, "the visitors swept")
        with Api(d) as api:
            assert api.get("/v1/connections").json()["connections"] == []
        feed = FeedClient(d)
        try:
            assert feed.snapshot()["connections"] == []
        finally:
            feed.close()
    finally:
        d.stop()
        d.check_wire()
