"""mcpx.store.sqlite: the batching writer (commit before any handle returns), a bad write failing
alone (savepoints) and a failed COMMIT failing its whole batch, rows, owner pagination, sessions and
questions, on a real aiosqlite file."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup

from mcpx.events.bus import Event
from mcpx.records.question import Question
from mcpx.records.task import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, Task
from mcpx.store import StoreError
from mcpx.store.sqlite import BATCH_MAX, SqliteStore

from .storekit import NOW, OWNER, Running, Site, committed, opened, query, task_record

pytestmark = pytest.mark.anyio


async def commits(store: SqliteStore) -> list[str]:
    """COMMITs the store's writer connection runs from now on, as sqlite traces them."""
    seen: list[str] = []
    assert store.db is not None
    await store.db.set_trace_callback(lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None)
    return seen


def put_all(tg: TaskGroup, store: SqliteStore, tasks: list[Task], errors: list[BaseException]) -> None:
    async def put(task: Task) -> None:
        try:
            await store.put_task(task)
        except StoreError as exc:
            errors.append(exc)

    for task in tasks:
        tg.start_soon(put, task)


def created_event(task: Task) -> Event:
    return Event("task.created", {"tool": task.tool}, task_id=task.id)


# ---- the writer: commit before the write returns, batched ------------------------------------


async def test_a_write_returns_only_after_its_batch_committed(store_site: Site) -> None:
    db = store_site
    task = task_record()
    returned = anyio.Event()
    async with opened(db, writer=False) as w, anyio.create_task_group() as tg:

        async def put() -> None:
            await w.store.put_task(task)
            assert task.id in committed(db)  # visible to another connection the moment put returns
            returned.set()

        tg.start_soon(put)
        await anyio.wait_all_tasks_blocked()
        assert not returned.is_set() and committed(db) == set()  # queued, not yet written
        w.start()
        with anyio.fail_after(5):
            await returned.wait()


async def test_many_queued_writes_land_in_one_transaction(tmp_path: Path) -> None:
    tasks = [task_record(created_ms=NOW + i) for i in range(100)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db", writer=False) as w:
        seen = await commits(w.store)
        async with anyio.create_task_group() as tg:
            put_all(tg, w.store, tasks, errors)
            await anyio.wait_all_tasks_blocked()  # all 100 are queued
            w.start()
        assert errors == [] and len(seen) == 1
    assert committed(tmp_path / "mcpx.db") == {t.id for t in tasks}


async def test_a_batch_holds_at_most_batch_max_writes(tmp_path: Path) -> None:
    tasks = [task_record(created_ms=NOW + i) for i in range(BATCH_MAX + 10)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db", writer=False) as w:
        seen = await commits(w.store)
        async with anyio.create_task_group() as tg:
            put_all(tg, w.store, tasks, errors)
            await anyio.wait_all_tasks_blocked()
            w.start()
        assert errors == [] and len(seen) == 2
    assert len(committed(tmp_path / "mcpx.db")) == BATCH_MAX + 10


async def test_concurrent_writes_on_a_running_writer_share_few_transactions(tmp_path: Path) -> None:
    tasks = [task_record(created_ms=NOW + i) for i in range(200)]
    errors: list[BaseException] = []
    async with opened(tmp_path / "mcpx.db") as w:
        seen = await commits(w.store)
        async with anyio.create_task_group() as tg:
            put_all(tg, w.store, tasks, errors)
        assert errors == [] and 1 <= len(seen) <= 10  # batched, not one commit per write
        for task in tasks[:3]:
            assert await w.store.get_task(task.id) == task


# ---- failed writes -------------------------------------------------------------------------


async def test_a_bad_write_fails_alone_and_the_rest_of_its_batch_commits(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    failures: dict[str, BaseException] = {}
    bad = task_record()
    async with opened(db, writer=False) as w:
        async with anyio.create_task_group() as tg:

            async def write(name: str, op: Callable[[], Awaitable[object]]) -> None:
                try:
                    await op()
                except StoreError as exc:
                    failures[name] = exc

            tg.start_soon(write, "before", lambda: w.store.put_session("s-before", {"n": 1}))
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(write, "task", lambda: w.store.put_task(bad, [created_event(bad)]))
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(write, "after", lambda: w.store.put_session("s-after", {"n": 2}))
            await anyio.wait_all_tasks_blocked()
            query(db, "DROP TABLE tasks")  # another process breaks the batch's task write only
            seen = await commits(w.store)
            w.start()
        assert set(failures) == {"task"} and "no such table" in str(failures["task"])
        assert len(seen) == 1  # one transaction: the bad write was rolled back to its savepoint
        assert committed(db, "sessions") == {"s-before", "s-after"}
        assert w.published.events == []  # the failed write's event was never published...
        assert await w.store.events_since(0, 10) == []  # ...nor stored


async def test_every_write_fails_alone_when_the_database_refuses_writes_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "mcpx.db"
    errors: list[BaseException] = []
    async with opened(db, writer=False) as w:
        assert w.store.db is not None
        await w.store.db.execute("PRAGMA query_only = ON")  # every write of the batch fails
        async with anyio.create_task_group() as tg:
            put_all(tg, w.store, [task_record() for _ in range(5)], errors)
            await anyio.wait_all_tasks_blocked()
            w.start()
        assert len(errors) == 5 and all(isinstance(e, StoreError) for e in errors)
        assert "readonly" in str(errors[0])

        await w.store.db.execute("PRAGMA query_only = OFF")
        after = task_record()
        await w.store.put_task(after)  # the same writer serves the next write
        assert committed(db) == {after.id}


async def fail_commits_with_sessions(w: Running, db: Path) -> None:
    """Make COMMIT itself fail: sessions get a deferred foreign key, which only COMMIT checks."""
    with contextlib.closing(sqlite3.connect(db)) as other:
        other.executescript(
            "CREATE TABLE parent (id TEXT PRIMARY KEY); DROP TABLE sessions;"
            " CREATE TABLE sessions (id TEXT PRIMARY KEY, body TEXT NOT NULL"
            " REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);"
        )
    assert w.store.db is not None
    await w.store.db.execute("PRAGMA foreign_keys = ON")


async def test_a_failed_commit_fails_every_write_of_its_batch_and_the_writer_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    errors: list[BaseException] = []
    tasks = [task_record() for _ in range(3)]
    async with opened(db, writer=False) as w:
        await fail_commits_with_sessions(w, db)
        async with anyio.create_task_group() as tg:

            async def session() -> None:
                try:
                    await w.store.put_session("orphan", {})  # its statement succeeds; COMMIT will not
                except StoreError as exc:
                    errors.append(exc)

            put_all(tg, w.store, tasks[:2], errors)
            tg.start_soon(session)
            await anyio.wait_all_tasks_blocked()
            w.start()
        assert len(errors) == 3 and all("FOREIGN KEY" in str(e) for e in errors)
        assert committed(db) == set() and committed(db, "sessions") == set()  # nothing of the batch
        assert w.published.events == []

        assert w.store.db is not None
        await w.store.db.execute("PRAGMA foreign_keys = OFF")
        await w.store.put_task(tasks[2], [created_event(tasks[2])])  # the same writer serves the next
        assert committed(db) == {tasks[2].id}
        assert [e.event.task_id for e in w.published.events] == [tasks[2].id]


async def test_a_write_before_open_or_after_close_raises_store_error(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "mcpx.db")
    with pytest.raises(StoreError, match="not open"):
        await store.put_task(task_record())
    with pytest.raises(StoreError, match="not open"):
        await store.get_task("t")
    async with opened(tmp_path / "mcpx.db") as w:
        pass
    with pytest.raises(StoreError, match="closed"):
        await w.store.put_task(task_record())
    with pytest.raises(StoreError, match="not open"):
        await w.store.get_task("t")


async def test_the_database_file_is_private_to_its_user(tmp_path: Path) -> None:
    async with opened(tmp_path / "state" / "mcpx.db"):
        pass
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "mcpx.db").st_mode) == 0o600


# ---- rows ----------------------------------------------------------------------------------


async def test_a_task_round_trips_every_field_and_survives_reopening(store_site: Site) -> None:
    task = task_record(
        ttl_ms=60_000,
        status=INPUT_REQUIRED,
        arguments={"text": "hé", "n": [1, 2]},
        era="modern",
        status_message="waiting for input",
        upstream_task_id="up-1",
        connection="c-1",
        input_requests={"q-1": {"method": "elicitation/create", "params": {"message": "?"}}},
        result={"content": []},
        error={"code": 1, "message": "x"},
    )
    async with opened(store_site) as w:
        await w.store.put_task(task)
        assert await w.store.get_task(task.id) == task
    async with opened(store_site) as w:
        assert await w.store.get_task(task.id) == task
        assert await w.store.get_task("no-such-task") is None


async def test_a_nul_in_a_peers_string_is_stored_or_finds_nothing_never_an_error(store_site: Site) -> None:
    """PostgreSQL text cannot hold NUL: a hostile id is a miss, not a 500; a message with one
    round-trips (inside JSON), and an event whose actor has one commits with its batch."""
    task = task_record(status_message="a\x00b", arguments={"text": "\x00"})
    async with opened(store_site) as w:
        await w.store.put_task(task, [Event("task.created", {}, task_id=task.id, by="op\x00erator")])
        assert await w.store.get_task(task.id) == task
        assert await w.store.get_task(task.id + "\x00") is None
        assert await w.store.events_since(0, 10, task_id="\x00") == []
        [stored] = await w.store.events_since(0, 10, task_id=task.id)
        assert stored.event.by is not None and stored.event.by.startswith("op")
        await w.store.forward("\x00", "cancel")  # nobody runs it: nothing to tell


async def test_put_replaces_the_row_and_delete_removes_it(store_site: Site) -> None:
    task = task_record()
    async with opened(store_site) as w:
        await w.store.put_task(task)
        done = replace(task, status=COMPLETED, result={"content": []})
        await w.store.put_task(done)
        assert await w.store.get_task(task.id) == done
        await w.store.delete_task(task.id)
        assert await w.store.get_task(task.id) is None
        assert await w.store.delete_task(task.id) == []  # deleting twice is harmless


async def test_all_open_lists_only_tasks_that_have_not_ended(store_site: Site) -> None:
    rows = {s: task_record(status=s) for s in (WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED)}
    async with opened(store_site) as w:
        for task in rows.values():
            await w.store.put_task(task)
        assert {t.id for t in await w.store.all_open()} == {rows[WORKING].id, rows[INPUT_REQUIRED].id}


async def test_expired_names_rows_whose_ttl_has_passed_and_never_rows_without_one(store_site: Site) -> None:
    gone = task_record(created_ms=NOW, ttl_ms=1_000)
    just_gone = task_record(created_ms=NOW + 1_000, ttl_ms=1_000)  # expires exactly now
    alive = task_record(created_ms=NOW + 1_000, ttl_ms=1_001)
    forever = task_record(created_ms=0, ttl_ms=None)
    async with opened(store_site) as w:
        for task in (gone, just_gone, alive, forever):
            await w.store.put_task(task)
        assert {t.id for t in await w.store.expired(NOW + 2_000)} == {gone.id, just_gone.id}


# ---- list_owner: one owner's tasks, by (created_ms, id), after a cursor ----------------------


async def test_list_owner_orders_by_creation_then_id_and_pages_after_a_cursor(store_site: Site) -> None:
    mine = [task_record(created_ms=NOW + i // 2, id=f"t{i:02d}") for i in range(7)]  # pairs share a created_ms
    others = [task_record(owner="conn:beta", created_ms=NOW + i) for i in range(3)]
    async with opened(store_site) as w:
        for task in reversed(mine + others):
            await w.store.put_task(task)
        pages: list[list[str]] = []
        after: tuple[int, str] | None = None
        for _ in range(10):  # bounded: a cursor that does not advance must fail, not hang
            page = await w.store.list_owner(OWNER, after, 3)
            if not page:
                break
            pages.append([t.id for t in page])
            after = (page[-1].created_ms, page[-1].id)
    assert pages == [["t00", "t01", "t02"], ["t03", "t04", "t05"], ["t06"]]


async def test_list_owner_cursor_between_equal_creation_times_uses_the_id(store_site: Site) -> None:
    rows = [task_record(created_ms=NOW, id=i) for i in ("a", "b", "c")]
    async with opened(store_site) as w:
        for task in rows:
            await w.store.put_task(task)
        assert [t.id for t in await w.store.list_owner(OWNER, (NOW, "a"), 10)] == ["b", "c"]
        assert await w.store.list_owner(OWNER, (NOW, "c"), 10) == []
        assert await w.store.list_owner("conn:nobody", None, 10) == []


async def test_list_owner_skips_expired_rows_before_the_limit(store_site: Site) -> None:
    expired = [task_record(created_ms=NOW + i, ttl_ms=10, id=f"e{i}") for i in range(3)]
    live = [task_record(created_ms=NOW + 10 + i, ttl_ms=60_000, id=f"l{i}") for i in range(3)]
    async with opened(store_site) as w:
        for task in expired + live:
            await w.store.put_task(task)
        now = NOW + 1_000
        assert [t.id for t in await w.store.list_owner(OWNER, None, 2, now_ms=now)] == ["l0", "l1"]
        assert len(await w.store.list_owner(OWNER, None, 10)) == 6  # without a clock: every row


# ---- sessions and questions ------------------------------------------------------------------


async def test_sessions_round_trip_and_can_be_deleted(store_site: Site) -> None:
    async with opened(store_site) as w:
        await w.store.put_session("s1", {"owner": OWNER, "revision": "2025-11-25"})
        await w.store.put_session("s1", {"owner": OWNER, "revision": "2025-11-25", "logLevel": "info"})
        assert committed(store_site, "sessions") == {"s1"}
        assert await w.store.get_session("s1") == {"owner": OWNER, "revision": "2025-11-25", "logLevel": "info"}
        await w.store.delete_session("s1")
        assert await w.store.get_session("s1") is None
        assert await w.store.get_session("never") is None


def question(qid: str, created_ms: int, **kw: object) -> Question:
    return Question(qid, "up", "elicitation/create", {"message": "?"}, created_ms, created_ms + 600_000, **kw)  # type: ignore[arg-type]  # test-chosen fields


async def test_questions_round_trip_one_row_per_question_newest_first(store_site: Site) -> None:
    async with opened(store_site) as w:
        await w.store.put_question(question("q1", NOW))
        await w.store.put_question(question("q2", NOW + 1, task_id="t1"))
        answered = question("q1", NOW, status="answered", answered_by="operator:ann", answer={"action": "decline"})
        await w.store.put_question(answered)
        assert await w.store.get_question("q1") == answered
        assert await w.store.get_question("never") is None
        assert [q.id for q in await w.store.questions()] == ["q2", "q1"]
        assert [q.id for q in await w.store.questions(limit=1)] == ["q2"]
        assert [q.id for q in await w.store.questions(frozenset({"answered"}))] == ["q1"]
        assert [q.id for q in await w.store.questions(frozenset({"open", "expired"}))] == ["q2"]
        assert [q.id for q in await w.store.questions(task_id="t1")] == ["q2"]
        assert await w.store.questions(frozenset({"answered"}), task_id="t1") == []
    assert committed(store_site, "questions") == {"q1", "q2"}


async def test_settling_a_question_takes_only_while_its_row_is_open_the_first_answer_wins(store_site: Site) -> None:
    async with opened(store_site) as w:
        await w.store.put_question(question("q1", NOW, task_id="t1"))
        answers = [
            question("q1", NOW, task_id="t1", status="answered", answered_by=f"operator:{who}", answer={"action": who})
            for who in ("ann", "bob", "cy")
        ]
        events = [Event("question.answered", {"by": a.answered_by}, "t1", None, "q1") for a in answers]
        taken: list[bool] = [False] * 3

        async def settle(i: int) -> None:
            taken[i] = await w.store.settle_question(answers[i], [events[i]])

        async with anyio.create_task_group() as tg:  # queued together: one batch, one transaction
            for i in range(3):
                tg.start_soon(settle, i)
        assert taken.count(True) == 1
        winner = answers[taken.index(True)]
        assert await w.store.get_question("q1") == winner
        kinds = [e.event.data for e in await w.store.events_since(0, 100) if e.event.kind == "question.answered"]
        assert kinds == [{"by": winner.answered_by}]  # the refused ones wrote no event either
        expired = replace(winner, status="expired", reason="late")
        assert not await w.store.settle_question(expired)
        assert not await w.store.settle_question(question("never", NOW, status="expired"))
        assert await w.store.get_question("never") is None


async def test_questions_asked_in_the_same_millisecond_list_the_latest_written_first(store_site: Site) -> None:
    async with opened(store_site) as w:
        for qid in ("a", "b", "c"):
            await w.store.put_question(question(qid, NOW))
        assert [q.id for q in await w.store.questions()] == ["c", "b", "a"]


async def test_a_read_after_a_commit_sees_it_while_other_reads_are_in_flight(store_site: Site) -> None:
    """Reads share one connection; each must be one statement run to its end at once. Run as two
    steps (execute, then fetch) an interleaved read kept an older read open, and a task read right
    after its commit (a host polling its new handle) came back unknown now and then under load."""
    async with opened(store_site) as running:
        store = running.store
        for _ in range(3):
            await store.put_task(task_record(owner="noise"))
        missed: list[str] = []
        stop = anyio.Event()

        async def noise() -> None:
            while not stop.is_set():
                await store.list_owner("noise", None, 10)

        async def put_then_read(i: int) -> None:
            task = task_record(owner=f"o{i}")
            await store.put_task(task)
            if await store.get_task(task.id) is None:
                missed.append(task.id)

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(noise)
            for _ in range(20):
                async with anyio.create_task_group() as batch:
                    for i in range(20):
                        batch.start_soon(put_then_read, i)
            stop.set()
        assert missed == [], f"{len(missed)} of 400 tasks unknown right after their commit"
