"""mcpx.store.sqlite and the event log: each write's events are stored in its own transaction with
consecutive sequence numbers in commit order, read back by `events_since`, published through
`on_commit` exactly once and only after the commit (never for a failed write); a task's events go
with its row; `trim_events` keeps the newest; `snapshot` is one consistent moment."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from mcpx.events.bus import Event, StoredEvent
from mcpx.records.connection_record import ConnectionRecord
from mcpx.records.question import Question
from mcpx.records.task import COMPLETED, FAILED, INPUT_REQUIRED, Task
from mcpx.store import StoreError

from .storekit import NOW, Site, committed, opened, query, task_record

pytestmark = pytest.mark.anyio


def ev(kind: str, task: Task | None = None, **data: object) -> Event:
    return Event(kind, dict(data), task_id=task.id if task else None, by="mcpx")  # type: ignore[arg-type]  # test kinds


def seqs(stored: list[StoredEvent]) -> list[int]:
    return [e.seq for e in stored]


# ---- sequence numbers and publication --------------------------------------------------------


async def test_each_writes_events_get_consecutive_sequence_numbers_in_commit_order(store_site: Site) -> None:
    tasks = [task_record(created_ms=NOW + i) for i in range(5)]
    returned: dict[str, list[StoredEvent]] = {}
    async with opened(store_site, writer=False) as w:
        async with anyio.create_task_group() as tg:

            async def put(task: Task) -> None:
                returned[task.id] = await w.store.put_task(task, [ev("task.created", task), ev("task.status", task)])

            for task in tasks:
                tg.start_soon(put, task)
                await anyio.wait_all_tasks_blocked()  # queued in this order
            w.start()
        stored = await w.store.events_since(0, 100)
    assert [returned[t.id] for t in tasks] == [stored[2 * i : 2 * i + 2] for i in range(5)]
    assert seqs(stored) == list(range(1, 11))
    assert [(e.event.kind, e.event.task_id) for e in stored] == [
        (kind, t.id) for t in tasks for kind in ("task.created", "task.status")
    ]
    assert len({e.ts_ms for e in returned[tasks[0].id]}) == 1  # one write, one time


async def test_events_read_back_exactly_as_they_were_written(store_site: Site) -> None:
    event = Event(
        "question.answered",
        {"by": "operator:ann", "action": "accept", "answer": {"content": {"name": "Zoë"}}},
        task_id="t1",
        connection_id="c-1",
        question_id="q-1",
        by="operator:ann",
    )
    async with opened(store_site) as w:
        (written,) = await w.store.append([event])
        assert await w.store.events_since(0, 10) == [written]
    async with opened(store_site) as w:
        assert await w.store.events_since(0, 10) == [written]  # durable
    assert written.event == event and written.wire() == {
        "seq": 1,
        "ts": written.ts_ms,
        "kind": "question.answered",
        "taskId": "t1",
        "connectionId": "c-1",
        "questionId": "q-1",
        "by": "operator:ann",
        "data": event.data,
    }


async def test_on_commit_publishes_each_batch_once_after_its_commit_before_any_writer_wakes(
    store_site: Site,
) -> None:
    db = store_site
    returned = 0
    checks: list[tuple[int, list[int], int]] = []
    async with opened(db, writer=False) as w:

        def hook(events: list[StoredEvent]) -> None:
            stored = [row[0] for row in query(db, "SELECT seq FROM events ORDER BY seq")]
            checks.append((len(events), stored, returned))  # committed (another connection sees it)

        w.published.hook = hook
        async with anyio.create_task_group() as tg:

            async def append(n: int) -> None:
                nonlocal returned
                await w.store.append([ev("task.status", status=str(n))])
                returned += 1

            for n in range(3):
                tg.start_soon(append, n)
            await anyio.wait_all_tasks_blocked()
            w.start()
        await w.store.append([ev("task.status", status="later")])
    assert checks == [(3, [1, 2, 3], 0), (1, [1, 2, 3, 4], 3)]  # no writer had returned yet
    assert seqs(w.published.events) == [1, 2, 3, 4]  # each published exactly once, in order


async def test_a_failed_write_publishes_and_stores_no_event_and_leaves_no_gap(store_site: Site) -> None:
    db = store_site
    bad = task_record()
    async with opened(db, writer=False) as w:
        failures: list[BaseException] = []
        async with anyio.create_task_group() as tg:

            async def bad_put() -> None:
                try:
                    await w.store.put_task(bad, [ev("task.created", bad)])
                except StoreError as exc:
                    failures.append(exc)

            tg.start_soon(w.store.append, [ev("task.status", status="first")])
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(bad_put)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(w.store.append, [ev("task.status", status="last")])
            await anyio.wait_all_tasks_blocked()
            query(db, "DROP TABLE tasks")
            w.start()
        stored = await w.store.events_since(0, 10)
    assert len(failures) == 1
    assert [e.event.data["status"] for e in stored] == ["first", "last"] and seqs(stored) == [1, 2]
    assert w.published.events == stored


async def test_events_since_filters_by_task_and_kind_and_pages_by_sequence(store_site: Site) -> None:
    a, b = task_record(), task_record()
    async with opened(store_site) as w:
        await w.store.put_task(a, [ev("task.created", a)])
        await w.store.put_task(b, [ev("task.created", b)])
        await w.store.put_task(replace(a, status=COMPLETED), [ev("task.status", a)])
        await w.store.append([ev("connection.opened")])
        assert seqs(await w.store.events_since(0, 100)) == [1, 2, 3, 4]
        assert seqs(await w.store.events_since(1, 2)) == [2, 3]
        assert seqs(await w.store.events_since(4, 10)) == []
        assert seqs(await w.store.events_since(0, 10, task_id=a.id)) == [1, 3]
        assert seqs(await w.store.events_since(0, 10, kinds=frozenset({"task.created"}))) == [1, 2]
        assert seqs(await w.store.events_since(1, 10, task_id=a.id, kinds=frozenset({"task.created"}))) == []
        assert await w.store.first_seq() == 1 and await w.store.last_seq() == 4


async def test_an_empty_log_starts_at_sequence_zero(store_site: Site) -> None:
    async with opened(store_site) as w:
        assert (await w.store.first_seq(), await w.store.last_seq()) == (0, 0)
        assert await w.store.events_since(0, 10) == []
        await w.store.put_task(task_record())  # a write without events publishes nothing
        assert w.published.batches == [] and await w.store.last_seq() == 0


# ---- retention ---------------------------------------------------------------------------------


async def test_delete_task_removes_its_events_and_keeps_the_events_it_is_given(store_site: Site) -> None:
    db = store_site
    gone, kept = task_record(), task_record()
    async with opened(db) as w:
        await w.store.put_task(gone, [ev("task.created", gone)])
        await w.store.put_task(kept, [ev("task.created", kept)])
        await w.store.put_task(replace(gone, status=FAILED), [ev("task.status", gone)])
        (expired,) = await w.store.delete_task(gone.id, [ev("task.expired", gone)])
        # A second sweep (another daemon's, on a shared store) finds the row gone: no second event.
        assert await w.store.delete_task(gone.id, [ev("task.expired", gone)]) == []
        left = await w.store.events_since(0, 10)
        assert await w.store.get_task(gone.id) is None and await w.store.get_task(kept.id) is not None
    assert [(e.seq, e.event.kind, e.event.task_id) for e in left] == [
        (2, "task.created", kept.id),
        (4, "task.expired", gone.id),  # written after the delete: it outlives the row
    ]
    assert expired == left[1] and committed(db) == {kept.id}


async def test_trim_events_drops_the_oldest_beyond_keep_and_never_reuses_a_sequence_number(store_site: Site) -> None:
    async with opened(store_site) as w:
        for n in range(10):
            await w.store.append([ev("task.status", status=str(n))])
        assert await w.store.trim_events(20) == 0  # fewer than keep: nothing to drop
        assert await w.store.trim_events(4) == 6  # everything up to seq 6 is gone
        assert seqs(await w.store.events_since(0, 100)) == [7, 8, 9, 10]
        assert (await w.store.first_seq(), await w.store.last_seq()) == (7, 10)
        assert await w.store.trim_events(4) == 0  # already trimmed
        (newer,) = await w.store.append([ev("task.status", status="after")])
        assert newer.seq == 11


async def test_the_sequence_never_goes_back_when_the_newest_events_are_deleted(store_site: Site) -> None:
    task = task_record()
    async with opened(store_site) as w:
        await w.store.append([ev("connection.opened")])
        await w.store.put_task(task, [ev("task.created", task), ev("task.status", task)])
        await w.store.delete_task(task.id)  # the newest rows go with the task
        assert await w.store.last_seq() == 3
        (after,) = await w.store.append([ev("connection.closed")])
    async with opened(store_site) as w:
        assert await w.store.last_seq() == 4 and after.seq == 4


# ---- snapshot ----------------------------------------------------------------------------------


def connection(cid: str, *, closed: bool = False) -> ConnectionRecord:
    return ConnectionRecord(cid, "session", "http", NOW, NOW, closed_ms=NOW + 1 if closed else None)


async def test_a_snapshot_holds_open_connections_unfinished_and_newest_tasks_and_open_questions(
    store_site: Site,
) -> None:
    old_done = task_record(created_ms=NOW, status=COMPLETED, connection="c-gone")
    old_open = task_record(created_ms=NOW + 1, status=INPUT_REQUIRED, connection="c-open")
    new_done = [task_record(created_ms=NOW + 10 + i, status=COMPLETED, connection="c-owner") for i in range(2)]
    asked = Question("q-open", "up", "roots/list", {}, NOW, NOW + 1000)
    answered = Question("q-done", "up", "roots/list", {}, NOW, NOW + 1000, status="answered")
    async with opened(store_site) as w:
        for record in (connection("c-open"), connection("c-gone", closed=True), connection("c-owner", closed=True)):
            await w.store.put_connection(record, [ev("connection.opened")])
        for task in (old_done, old_open, *new_done):
            await w.store.put_task(task, [ev("task.created", task)])
        await w.store.put_question(asked)
        await w.store.put_question(answered)
        snap = await w.store.snapshot(task_limit=2)
    assert snap.seq == 7
    assert [t.id for t in snap.tasks] == [old_open.id, *(t.id for t in new_done)]  # oldest first
    assert [c.id for c in snap.connections] == ["c-open", "c-owner"]  # a closed one only for its tasks
    assert [q.id for q in snap.questions] == ["q-open"]


async def test_a_snapshot_taken_while_tasks_are_written_is_one_moment(store_site: Site) -> None:
    """Every task whose task.created event is at or below the snapshot's seq is in it, and no other
    (they are all unfinished, so all belong in a snapshot)."""
    tasks = [task_record(created_ms=NOW + i) for i in range(150)]
    snaps = []
    async with opened(store_site) as w:
        done = anyio.Event()
        async with anyio.create_task_group() as tg:

            async def write() -> None:
                for task in tasks:
                    await w.store.put_task(task, [ev("task.created", task)])
                done.set()

            tg.start_soon(write)
            while not done.is_set():
                snaps.append(await w.store.snapshot(task_limit=1))
        created = {e.seq: e.event.task_id for e in await w.store.events_since(0, 1000)}
    assert len(snaps) >= 2
    for snap in snaps:
        assert {t.id for t in snap.tasks} == {tid for seq, tid in created.items() if seq <= snap.seq}
    assert any(0 < snap.seq < len(tasks) for snap in snaps)  # some were taken mid-way
