"""#26 item 4, stop drains: an outcome that is being written as the daemon stops reaches its row,
and a write queued before the store closes is committed, not dropped with the connection. A real
SqliteStore and TaskEngine under anyio; the slow write is the store's own, delayed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.records.task import COMPLETED, Task
from mcpx.store.sqlite import SqliteStore
from mcpx.tasks.engine import TaskEngine

from .storekit import OWNER, Published, task_record

pytestmark = pytest.mark.anyio

RESULT = {"content": [{"type": "text", "text": "done"}]}


async def test_a_result_that_arrives_as_the_daemon_stops_is_written_before_the_store_closes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path, on_commit=Published())
    engine = TaskEngine(store)
    answer = anyio.Event()
    real_put = store.put_task

    async def slow_put(task: Task, events: Any = ()) -> Any:
        if task.status == COMPLETED:
            await anyio.sleep(0.2)  # the outcome's write is under way when close() begins
        return await real_put(task, events)

    store.put_task = slow_put  # type: ignore[method-assign]  # delays only the outcome's write

    async def call(task: Task) -> dict[str, Any]:
        await answer.wait()
        return RESULT

    async with anyio.create_task_group() as tg:
        await engine.start(tg)
        task = await engine.create(
            owner=OWNER,
            connection="c-1",
            upstream="up",
            tool="echo",
            arguments={},
            era="legacy",
            ttl_ms=600_000,
            poll_ms=1000,
            call=call,
        )
        answer.set()
        await anyio.sleep(0.01)  # the call returned; its outcome is being written
        with anyio.CancelScope(shield=True):
            await engine.close()
        tg.cancel_scope.cancel()

    reopened = SqliteStore(path, on_commit=Published())
    await reopened.open()
    try:
        row = await reopened.get_task(task.id)
        assert row is not None and row.status == COMPLETED and row.result == RESULT
    finally:
        await reopened.close()


async def test_a_write_queued_before_close_is_committed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path, on_commit=Published())
    await store.open()
    rows = [task_record(ttl_ms=600_000) for _ in range(200)]
    outcomes: list[object] = []

    async def put(task: Task) -> None:
        try:
            await store.put_task(task)
            outcomes.append("ok")
        except Exception as exc:  # the test counts what failed
            outcomes.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        async with anyio.create_task_group() as writers:
            for row in rows:
                writers.start_soon(put, row)
            await anyio.wait_all_tasks_blocked()  # every write queued (waiting for its commit), some committed
            await store.close()
        tg.cancel_scope.cancel()
    assert outcomes == ["ok"] * len(rows)
    reopened = SqliteStore(path, on_commit=Published())
    await reopened.open()
    try:
        assert all([await reopened.get_task(r.id) is not None for r in rows])
    finally:
        await reopened.close()
