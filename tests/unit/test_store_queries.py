"""mcpx.store.sqlite reads for /v1 and the console: `tasks(TaskQuery)` filters and its newest-first
cursor pages, task counts per connection, and the connection rows (last-seen flushes)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcpx.records.connection_record import ConnectionRecord
from mcpx.records.question import Question
from mcpx.records.task import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, Task
from mcpx.store import TaskQuery
from mcpx.store.sqlite import SqliteStore

from .storekit import NOW, Site, opened, query, task_record

pytestmark = pytest.mark.anyio


async def ids(store: SqliteStore, **kw: object) -> list[str]:
    return [t.id for t in await store.tasks(TaskQuery(**kw))]  # type: ignore[arg-type]  # test-chosen filters


async def put(store: SqliteStore, *tasks: Task) -> None:
    for task in tasks:
        await store.put_task(task)


# ---- tasks(TaskQuery) --------------------------------------------------------------------------


async def test_tasks_come_newest_first_with_the_id_breaking_ties(store_site: Site) -> None:
    rows = [
        task_record(id="a", created_ms=NOW),
        task_record(id="b", created_ms=NOW + 5),
        task_record(id="c", created_ms=NOW + 5),
        task_record(id="d", created_ms=NOW + 1),
    ]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert await ids(w.store) == ["c", "b", "d", "a"]
        assert await ids(w.store, limit=2) == ["c", "b"]


async def test_cursor_pages_walk_every_task_once_newest_first(store_site: Site) -> None:
    rows = [task_record(id=f"t{i:02d}", created_ms=NOW + i // 3) for i in range(11)]  # threes share a ms
    async with opened(store_site) as w:
        await put(w.store, *rows)
        pages: list[list[str]] = []
        before: tuple[int, str] | None = None
        for _ in range(10):  # bounded: a cursor that does not advance must fail, not hang
            page = await w.store.tasks(TaskQuery(before=before, limit=4))
            if not page:
                break
            pages.append([t.id for t in page])
            before = (page[-1].created_ms, page[-1].id)
    assert pages == [
        ["t10", "t09", "t08", "t07"],
        ["t06", "t05", "t04", "t03"],
        ["t02", "t01", "t00"],
    ]


async def test_tasks_filter_by_connection_status_and_tool(store_site: Site) -> None:
    rows = [
        task_record(id="w1", status=WORKING, connection="c-1", tool="echo"),
        task_record(id="i1", status=INPUT_REQUIRED, connection="c-1", tool="slow"),
        task_record(id="f2", status=FAILED, connection="c-2", tool="echo"),
        task_record(id="d2", status=COMPLETED, connection="c-2", tool="slow"),
        task_record(id="x0", status=CANCELLED, tool="echo"),
    ]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert sorted(await ids(w.store, connection="c-1")) == ["i1", "w1"]
        assert sorted(await ids(w.store, statuses=frozenset({WORKING, FAILED}))) == ["f2", "w1"]
        assert sorted(await ids(w.store, tool="slow")) == ["d2", "i1"]
        assert await ids(w.store, connection="c-2", tool="echo") == ["f2"]
        assert await ids(w.store, connection="c-2", statuses=frozenset({WORKING})) == []
        assert await ids(w.store, connection="c-nobody") == []


async def test_the_text_filter_matches_id_tool_upstream_and_status_message(store_site: Site) -> None:
    rows = [
        task_record(id="task-needle-1"),
        task_record(id="t2", tool="find_needle"),
        task_record(id="t3", upstream="needles"),
        task_record(id="t4", status_message="waiting for the NEEDLE"),
        task_record(id="t5", arguments={"q": "needle"}),  # arguments are not searched
    ]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert sorted(await ids(w.store, text="needle")) == ["t2", "t3", "t4", "task-needle-1"]


async def test_the_text_filter_takes_like_wildcards_literally(store_site: Site) -> None:
    rows = [
        task_record(id="t1", status_message="100% done"),
        task_record(id="t2", status_message="1000 done"),
        task_record(id="t3", tool="a_b"),
        task_record(id="t4", tool="axb"),
        task_record(id="t5", status_message="C:\\path"),
    ]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert await ids(w.store, text="0%") == ["t1"]
        assert await ids(w.store, text="a_b") == ["t3"]
        assert await ids(w.store, text="C:\\p") == ["t5"]


async def test_the_id_prefix_filter_finds_the_ids_a_short_id_starts_case_and_all(store_site: Site) -> None:
    rows = [task_record(id=i, created_ms=NOW + n) for n, i in enumerate(["abc_1", "abc%2", "abD3", "xabc4"])]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert await ids(w.store, id_prefix="abc") == ["abc%2", "abc_1"]
        assert await ids(w.store, id_prefix="abc_") == ["abc_1"]  # no LIKE wildcard: `_` is itself
        assert await ids(w.store, id_prefix="ABC") == []  # ids are case-sensitive
        assert await ids(w.store, id_prefix="abc_1") == ["abc_1"]
        assert await ids(w.store, id_prefix="a\x00") == []  # a NUL finds nothing, on either store
        asked = [Question(q, "up", "roots/list", {}, NOW, NOW + 1000) for q in ("q-ab1", "q-ab2", "q-cd")]
        for q in asked:
            await w.store.put_question(q)
        found = await w.store.questions(frozenset({"open"}), None, 10, id_prefix="q-ab")
        assert sorted(q.id for q in found) == ["q-ab1", "q-ab2"]


async def test_tasks_past_their_ttl_are_left_out_before_the_limit(store_site: Site) -> None:
    live = [task_record(id=f"l{i}", created_ms=NOW + i, ttl_ms=60_000) for i in range(3)]
    expired = [task_record(id=f"e{i}", created_ms=NOW + 10 + i, ttl_ms=10) for i in range(3)]  # newer, gone
    forever = task_record(id="f", created_ms=NOW - 1, ttl_ms=None)
    async with opened(store_site) as w:
        await put(w.store, *live, *expired, forever)
        assert await ids(w.store, now_ms=NOW + 1_000, limit=3) == ["l2", "l1", "l0"]
        assert await ids(w.store, now_ms=NOW + 1_000) == ["l2", "l1", "l0", "f"]
        assert len(await ids(w.store)) == 7  # without a clock: every row


async def test_task_counts_group_by_connection_and_status(store_site: Site) -> None:
    rows = [
        task_record(status=WORKING, connection="c-1"),
        task_record(status=WORKING, connection="c-1"),
        task_record(status=COMPLETED, connection="c-1"),
        task_record(status=FAILED, connection="c-2"),
        task_record(status=WORKING),
    ]
    async with opened(store_site) as w:
        await put(w.store, *rows)
        assert await w.store.task_counts() == {
            "c-1": {WORKING: 2, COMPLETED: 1},
            "c-2": {FAILED: 1},
            "": {WORKING: 1},  # tasks of no registered connection
        }


# ---- connections -------------------------------------------------------------------------------


def record(cid: str, opened_ms: int, **kw: object) -> ConnectionRecord:
    return ConnectionRecord(cid, "stateless", "http", opened_ms, opened_ms, **kw)  # type: ignore[arg-type]  # test fields


async def test_connections_round_trip_oldest_first_and_open_only_leaves_closed_ones_out(store_site: Site) -> None:
    first = record("c-1", NOW, client_info={"name": "h", "version": "1"}, peer="127.0.0.1", key="h/1@127.0.0.1")
    second = record("c-2", NOW + 1, principal="ann", closed_ms=NOW + 5, close_reason="idle")
    async with opened(store_site) as w:
        await w.store.put_connection(second)
        await w.store.put_connection(first)
        assert await w.store.connections() == [first, second]
        assert await w.store.connections(open_only=True) == [first]
        assert await w.store.get_connection("c-2") == second
        assert await w.store.get_connection("c-none") is None


async def test_touch_connections_stores_last_seen_times_of_open_connections_only(store_site: Site) -> None:
    db = store_site
    live = record("c-live", NOW)
    closed = record("c-closed", NOW, closed_ms=NOW + 1, close_reason="gone")
    async with opened(db) as w:
        await w.store.put_connection(live)
        await w.store.put_connection(closed)
        await w.store.touch_connections({"c-live": NOW + 500, "c-closed": NOW + 500, "c-unknown": NOW + 500})
        assert await w.store.get_connection("c-live") == replace(live, last_seen_ms=NOW + 500)
        assert await w.store.get_connection("c-closed") == closed
        assert w.published.batches == []  # bookkeeping, not an event
    assert query(db, "SELECT id, last_seen_ms FROM connections ORDER BY id") == [
        ("c-closed", NOW),
        ("c-live", NOW + 500),
    ]
