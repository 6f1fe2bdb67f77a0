"""#26 item 6, retention, on both stores: closed history is swept after `store.keepClosedS` (legacy
sessions of closed connections, closed connections that own no task, closed questions), connection
rows page, the feed snapshot reads the open connections (and the closed owners of its tasks) only,
and a stateless host that comes back takes its record up again instead of leaving one per visit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mcpx.connections.registry import ConnectionRegistry
from mcpx.records.connection_record import ConnectionRecord
from mcpx.records.question import Question

from .storekit import NOW, Site, opened, query, task_record

pytestmark = pytest.mark.anyio

CUT = NOW + 1_000  # the sweep's cut-off: closed before it goes


def conn(cid: str, *, closed_ms: int | None = None, opened_ms: int = NOW) -> ConnectionRecord:
    return ConnectionRecord(cid, "session", "http", opened_ms, opened_ms, closed_ms=closed_ms)


def count(site: Site, table: str) -> int:
    return int(query(site, f"SELECT COUNT(*) FROM {table}")[0][0])


async def test_the_sweep_takes_closed_history_older_than_the_cut_and_nothing_else(store_site: Site) -> None:
    async with opened(store_site) as w:
        s = w.store
        await s.put_connection(conn("old-closed", closed_ms=NOW))  # goes
        await s.put_connection(conn("old-closed-owner", closed_ms=NOW))  # stays: it owns a task
        await s.put_connection(conn("new-closed", closed_ms=CUT + 1))  # stays: too recent
        await s.put_connection(conn("open"))  # stays: open
        await s.put_task(task_record(id="t1", connection="old-closed-owner", ttl_ms=600_000))
        await s.put_session("s-old", {"recordId": "old-closed"})  # goes with its connection
        await s.put_session("s-open", {"recordId": "open"})
        await s.put_session("s-owner", {"recordId": "old-closed-owner"})  # goes: its connection is closed
        for qid, status, created in (
            ("q-old", "answered", NOW),
            ("q-new", "expired", CUT + 1),
            ("q-open", "open", NOW),
            ("q-abandoned", "abandoned", NOW),  # left open by a crash, closed at the next start (#37 item 6)
        ):
            await s.put_question(replace(Question(qid, "up", "roots/list", {}, created, created + 1), status=status))
        await s.sweep_closed(CUT)
        left = sorted(c.id for c in await s.connections())
        assert left == ["new-closed", "old-closed-owner", "open"]
        assert await s.get_session("s-old") is None and await s.get_session("s-owner") is None
        assert await s.get_session("s-open") is not None
        assert await s.get_question("q-old") is None and await s.get_question("q-abandoned") is None
        assert await s.get_question("q-new") is not None and await s.get_question("q-open") is not None
        assert await s.get_task("t1") is not None


async def test_connections_page_in_opening_order(store_site: Site) -> None:
    async with opened(store_site) as w:
        for i in range(7):
            await w.store.put_connection(conn(f"c{i}", opened_ms=NOW + i // 2))  # twos share a ms
        pages: list[list[str]] = []
        after: tuple[int, str] | None = None
        for _ in range(10):
            page = await w.store.connections(after=after, limit=3)
            if not page:
                break
            pages.append([c.id for c in page])
            after = (page[-1].opened_ms, page[-1].id)
        assert pages == [["c0", "c1", "c2"], ["c3", "c4", "c5"], ["c6"]]


async def test_the_snapshot_reads_open_connections_and_closed_owners_of_its_tasks_only(store_site: Site) -> None:
    async with opened(store_site) as w:
        s = w.store
        await s.put_connection(conn("open"))
        await s.put_connection(conn("owner", closed_ms=NOW))
        for i in range(50):
            await s.put_connection(conn(f"gone{i}", closed_ms=NOW))
        await s.put_task(task_record(id="t1", connection="owner", ttl_ms=600_000))
        snap = await s.snapshot(100)
        assert sorted(c.id for c in snap.connections) == ["open", "owner"]


async def test_a_stateless_host_that_comes_back_takes_its_record_up_again(store_site: Site) -> None:
    async with opened(store_site) as w:
        registry = ConnectionRegistry(w.store, idle_close_s=600)
        key = "agent/1@127.0.0.1"
        first = await registry.open(ConnectionRecord("c-1", "stateless", "http", NOW, NOW, key=key))
        for visit in range(200):
            await registry.close(first.id, "idle for 600 s")
            known = registry.find_stateless(key)
            assert known is not None and known.id == "c-1", visit
            await registry.open(ConnectionRecord(known.id, "stateless", "http", NOW + visit, NOW + visit, key=key))
        assert count(store_site, "connections") == 1
        [row] = await w.store.connections()
        assert row.id == "c-1" and row.closed_ms is None


async def test_sqlite_finds_the_open_connections_by_index_not_by_reading_every_closed_one(tmp_path: Path) -> None:
    """The snapshot's cost does not grow with closed history: its query searches an index."""
    path = tmp_path / "s.db"
    async with opened(path):
        pass  # created, at the current schema
    plan = query(path, "EXPLAIN QUERY PLAN SELECT body FROM connections WHERE closed_ms IS NULL OR id IN ('a')")
    detail = " ".join(str(row[-1]) for row in plan)
    assert "connections_closed" in detail and "SCAN connections" not in detail, detail
