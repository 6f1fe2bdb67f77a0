"""mcpx.tasks.store: the batching writer (commit before any handle), failed batches, pagination,
sessions and questions, on a real aiosqlite file."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from mcpx.tasks.model import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, Task, new_task_id
from mcpx.tasks.store import BATCH_MAX, StoreError, TaskStore

pytestmark = pytest.mark.anyio

OWNER = "conn:alpha"
NOW = 1_700_000_000_000


def record(
    *, owner: str = OWNER, created_ms: int = NOW, ttl_ms: int | None = None, status: str = WORKING, **kw: Any
) -> Task:
    return Task(
        id=kw.pop("id", None) or new_task_id(),
        status=status,
        created_ms=created_ms,
        updated_ms=created_ms,
        ttl_ms=ttl_ms,
        poll_ms=1000,
        owner=owner,
        upstream="up",
        tool="echo",
        **kw,
    )


class Writer:
    """A store whose one writer runs only once `start()` is called, so a test decides what is queued
    before it drains (the writer takes everything queued at that moment as one batch)."""

    def __init__(self, store: TaskStore, tg: TaskGroup) -> None:
        self.store = store
        self._tg = tg

    def start(self) -> None:
        self._tg.start_soon(self.store.run_writer)


@contextlib.asynccontextmanager
async def opened(path: Path, *, writer: bool = True) -> AsyncIterator[Writer]:
    store = TaskStore(path)
    await store.open()
    async with anyio.create_task_group() as tg:
        running = Writer(store, tg)
        if writer:
            running.start()
        try:
            yield running
        finally:
            await store.close()


def committed(path: Path, table: str = "tasks") -> set[str]:
    """Row ids another process would see now: a second, plain sqlite3 connection."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {row[0] for row in db.execute(f"SELECT id FROM {table}")}  # a test-chosen table name


async def transactions(store: TaskStore) -> list[str]:
    """COMMITs the store's connection runs from now on, as sqlite traces them."""
    seen: list[str] = []
    assert store.db is not None
    await store.db.set_trace_callback(lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None)
    return seen


async def put_all(tg: TaskGroup, store: TaskStore, tasks: list[Task], errors: list[BaseException]) -> None:
    async def put(task: Task) -> None:
        try:
            await store.put(task)
        except StoreError as exc:
            errors.append(exc)

    for task in tasks:
        tg.start_soon(put, task)


# ---- the writer: commit before the handle, batched -------------------------------------------


async def test_a_write_returns_only_after_its_batch_committed(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    task = record()
    returned = anyio.Event()
    async with opened(db, writer=False) as w, anyio.create_task_group() as tg:

        async def put() -> None:
            await w.store.put(task)
            assert task.id in committed(db)  # visible to another connection the moment put returns
            returned.set()

        tg.start_soon(put)
        await anyio.wait_all_tasks_blocked()
        assert not returned.is_set() and committed(db) == set()  # queued, not yet written
        w.start()
        with anyio.fail_after(5):
            await returned.wait()


async def test_many_queued_puts_land_in_one_transaction(tmp_path: Path) -> None:
    tasks = [record(created_ms=NOW + i) for i in range(100)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db", writer=False) as w:
        commits = await transactions(w.store)
        async with anyio.create_task_group() as tg:
            await put_all(tg, w.store, tasks, errors)
            await anyio.wait_all_tasks_blocked()  # all 100 are queued
            w.start()
        assert errors == [] and len(commits) == 1
    assert committed(tmp_path / "mcpx.db") == {t.id for t in tasks}


async def test_a_batch_holds_at_most_batch_max_writes(tmp_path: Path) -> None:
    tasks = [record(created_ms=NOW + i) for i in range(BATCH_MAX + 10)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db", writer=False) as w:
        commits = await transactions(w.store)
        async with anyio.create_task_group() as tg:
            await put_all(tg, w.store, tasks, errors)
            await anyio.wait_all_tasks_blocked()
            w.start()
        assert errors == [] and len(commits) == 2
    assert len(committed(tmp_path / "mcpx.db")) == BATCH_MAX + 10


async def test_concurrent_puts_on_a_running_writer_share_few_transactions(tmp_path: Path) -> None:
    tasks = [record(created_ms=NOW + i) for i in range(200)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db") as w:
        commits = await transactions(w.store)
        async with anyio.create_task_group() as tg:
            await put_all(tg, w.store, tasks, errors)
        assert errors == [] and 1 <= len(commits) <= 10  # batched, not one commit per put
        for task in tasks[:3]:
            assert await w.store.get(task.id) == task


# ---- failed writes -------------------------------------------------------------------------


async def test_a_failed_batch_raises_store_error_for_every_waiter_and_the_writer_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    errors: list[BaseException] = []
    async with opened(db, writer=False) as w:
        assert w.store.db is not None
        await w.store.db.execute("PRAGMA query_only = ON")  # every write of the batch fails
        async with anyio.create_task_group() as tg:
            await put_all(tg, w.store, [record() for _ in range(5)], errors)
            await anyio.wait_all_tasks_blocked()
            w.start()
        assert len(errors) == 5 and all(isinstance(e, StoreError) for e in errors)
        assert "readonly" in str(errors[0])

        await w.store.db.execute("PRAGMA query_only = OFF")
        after = record()
        await w.store.put(after)  # the same writer serves the next write
        assert committed(db) == {after.id}


async def test_a_batch_that_fails_midway_leaves_none_of_its_writes(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    failures: list[BaseException] = []
    async with opened(db, writer=False) as w, anyio.create_task_group() as tg:

        async def session_write() -> None:
            try:
                await w.store.put_session("sess-1", {"owner": OWNER})
            except StoreError as exc:
                failures.append(exc)

        tg.start_soon(session_write)  # first in the batch, and would succeed alone
        await anyio.wait_all_tasks_blocked()
        await put_all(tg, w.store, [record()], failures)
        await anyio.wait_all_tasks_blocked()
        with contextlib.closing(sqlite3.connect(db)) as other:
            other.execute("DROP TABLE tasks")  # the batch's task write fails
            other.commit()
        w.start()
    assert len(failures) == 2  # both waiters of the batch learn it
    assert committed(db, "sessions") == set()  # rolled back with the failing write


async def test_a_write_before_open_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        await TaskStore(tmp_path / "mcpx.db").put(record())


# ---- rows ----------------------------------------------------------------------------------


async def test_a_task_round_trips_every_field_and_survives_reopening(tmp_path: Path) -> None:
    task = record(
        ttl_ms=60_000,
        status=INPUT_REQUIRED,
        arguments={"text": "hé", "n": [1, 2]},
        era="modern",
        status_message="waiting for input",
        upstream_task_id="up-1",
        owner_info={"clientInfo": {"name": "h", "version": "1"}},
        input_requests={"1-a": {"method": "elicitation/create", "params": {"message": "?"}}},
        keys_used=1,
    )
    async with opened(tmp_path / "mcpx.db") as w:
        await w.store.put(task)
        assert await w.store.get(task.id) == task
    async with opened(tmp_path / "mcpx.db") as w:
        assert await w.store.get(task.id) == task
        assert await w.store.get("no-such-task") is None


async def test_put_replaces_the_row_and_delete_removes_it(tmp_path: Path) -> None:
    task = record()
    async with opened(tmp_path / "mcpx.db") as w:
        await w.store.put(task)
        done = replace(task, status=COMPLETED, result={"content": []})
        await w.store.put(done)
        assert await w.store.get(task.id) == done
        await w.store.delete(task.id)
        assert await w.store.get(task.id) is None


async def test_all_open_lists_only_tasks_that_have_not_ended(tmp_path: Path) -> None:
    rows = {s: record(status=s) for s in (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)}
    async with opened(tmp_path / "mcpx.db") as w:
        for task in rows.values():
            await w.store.put(task)
        assert {t.id for t in await w.store.all_open()} == {rows[WORKING].id, rows[INPUT_REQUIRED].id}


async def test_expired_names_rows_whose_ttl_has_passed_and_never_rows_without_one(tmp_path: Path) -> None:
    gone = record(created_ms=NOW, ttl_ms=1_000)
    just_gone = record(created_ms=NOW + 1_000, ttl_ms=1_000)  # expires exactly now
    alive = record(created_ms=NOW + 1_000, ttl_ms=1_001)
    forever = record(created_ms=0, ttl_ms=None)
    async with opened(tmp_path / "mcpx.db") as w:
        for task in (gone, just_gone, alive, forever):
            await w.store.put(task)
        assert set(await w.store.expired(NOW + 2_000)) == {gone.id, just_gone.id}


# ---- list_owner: one owner's tasks, by (created_ms, id), after a cursor ----------------------


async def test_list_owner_orders_by_creation_then_id_and_pages_after_a_cursor(tmp_path: Path) -> None:
    mine = [record(created_ms=NOW + i // 2, id=f"t{i:02d}") for i in range(7)]  # pairs share a created_ms
    others = [record(owner="conn:beta", created_ms=NOW + i) for i in range(3)]
    async with opened(tmp_path / "mcpx.db") as w:
        for task in reversed(mine + others):
            await w.store.put(task)
        pages: list[list[str]] = []
        after: tuple[int, str] | None = None
        for _ in range(10):  # bounded: a cursor that does not advance must fail, not hang
            page = await w.store.list_owner(OWNER, after, 3)
            if not page:
                break
            pages.append([t.id for t in page])
            after = (page[-1].created_ms, page[-1].id)
    assert pages == [["t00", "t01", "t02"], ["t03", "t04", "t05"], ["t06"]]


async def test_list_owner_cursor_between_equal_creation_times_uses_the_id(tmp_path: Path) -> None:
    rows = [record(created_ms=NOW, id=i) for i in ("a", "b", "c")]
    async with opened(tmp_path / "mcpx.db") as w:
        for task in rows:
            await w.store.put(task)
        assert [t.id for t in await w.store.list_owner(OWNER, (NOW, "a"), 10)] == ["b", "c"]
        assert await w.store.list_owner(OWNER, (NOW, "c"), 10) == []
        assert await w.store.list_owner("conn:nobody", None, 10) == []


async def test_list_owner_skips_expired_rows_before_the_limit(tmp_path: Path) -> None:
    expired = [record(created_ms=NOW + i, ttl_ms=10, id=f"e{i}") for i in range(3)]
    live = [record(created_ms=NOW + 10 + i, ttl_ms=60_000, id=f"l{i}") for i in range(3)]
    async with opened(tmp_path / "mcpx.db") as w:
        for task in expired + live:
            await w.store.put(task)
        now = NOW + 1_000
        assert [t.id for t in await w.store.list_owner(OWNER, None, 2, now_ms=now)] == ["l0", "l1"]
        assert len(await w.store.list_owner(OWNER, None, 10)) == 6  # without a clock: every row


# ---- sessions and questions ------------------------------------------------------------------


async def test_sessions_round_trip_and_can_be_deleted(tmp_path: Path) -> None:
    async with opened(tmp_path / "mcpx.db") as w:
        await w.store.put_session("s1", {"owner": OWNER, "revision": "2025-11-25"})
        await w.store.put_session("s1", {"owner": OWNER, "revision": "2025-11-25", "logLevel": "info"})
        assert committed(tmp_path / "mcpx.db", "sessions") == {"s1"}
        assert await w.store.get_session("s1") == {"owner": OWNER, "revision": "2025-11-25", "logLevel": "info"}
        await w.store.delete_session("s1")
        assert await w.store.get_session("s1") is None
        assert await w.store.get_session("never") is None


async def test_questions_round_trip_newest_write_first_one_row_per_question(tmp_path: Path) -> None:
    async with opened(tmp_path / "mcpx.db") as w:
        await w.store.put_question("q1", {"id": "q1", "status": "open"})
        await w.store.put_question("q2", {"id": "q2", "status": "open"})
        await w.store.put_question("q1", {"id": "q1", "status": "answered", "answered_by": "operator:ann"})
        assert await w.store.questions() == [
            {"id": "q1", "status": "answered", "answered_by": "operator:ann"},
            {"id": "q2", "status": "open"},
        ]
        assert await w.store.questions(limit=1) == [{"id": "q1", "status": "answered", "answered_by": "operator:ann"}]
