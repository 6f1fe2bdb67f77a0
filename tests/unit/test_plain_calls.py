"""mcpx.tasks.plain_calls: a host's plain call listed when it runs long or asks, its row ended with
its outcome, an operator's cancel, the daemon stopping, and the races between them; a real
SqliteStore and TaskEngine under anyio."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.protocol.errors import UpstreamError, UpstreamUnavailable
from mcpx.records.task import CANCELLED, COMPLETED, FAILED, Task
from mcpx.store.sqlite import SqliteStore
from mcpx.tasks.engine import RESTARTED, TaskEngine
from mcpx.tasks.plain_calls import CallInfo, LiveCall, OperatorCancelled, PlainCalls, progress_text

from .storekit import Published

pytestmark = pytest.mark.anyio

INFO = CallInfo("c-1", "up", "slow", {"n": 1}, "legacy")
RESULT = {"content": [{"type": "text", "text": "done"}]}
KEEP_MS = 60_000


@contextlib.asynccontextmanager
async def listing(path: Path, show_after_ms: int = 50) -> AsyncIterator[PlainCalls]:
    engine = TaskEngine(SqliteStore(path, on_commit=Published()), calls_keep_ms=KEEP_MS)
    async with anyio.create_task_group() as tg:
        try:
            await engine.start(tg)
            calls = PlainCalls(engine, show_after_ms=show_after_ms, poll_ms=1000)
            tg.start_soon(calls.sweep)
            yield calls
        finally:
            with anyio.CancelScope(shield=True):
                await engine.close()
            tg.cancel_scope.cancel()


def published(calls: PlainCalls) -> Published:
    on_commit = calls.engine.store.on_commit  # type: ignore[attr-defined]  # the Store protocol has no on_commit; SqliteStore has
    assert isinstance(on_commit, Published)
    return on_commit


async def test_a_call_that_ends_before_show_after_leaves_no_row(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db", show_after_ms=200) as calls:
        seen: list[LiveCall] = []

        async def quick(live: LiveCall) -> dict[str, Any]:
            seen.append(live)
            return RESULT

        for _ in range(50):
            assert await calls.run(INFO, quick) == RESULT
        await anyio.sleep(0.3)
        assert all(live.row_id is None for live in seen)
        assert published(calls).events == []
        assert not calls._unlisted  # nothing kept of them


async def test_a_long_call_is_listed_then_ended_with_its_outcome(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db") as calls:
        lives: list[LiveCall] = []

        async def slow(live: LiveCall) -> dict[str, Any]:
            lives.append(live)
            live.progress({"progressToken": "t", "progress": 1, "total": 4})
            await anyio.sleep(0.3)
            return RESULT

        assert await calls.run(INFO, slow) == RESULT
        [live] = lives
        assert live.row_id is not None
        row = await calls.engine.store.get_task(live.row_id)
        assert row is not None
        assert (row.kind, row.owner, row.status, row.connection) == ("call", "call:c-1", COMPLETED, "c-1")
        assert (row.upstream, row.tool, row.arguments, row.result) == ("up", "slow", {"n": 1}, RESULT)
        assert row.created_ms == live.started_ms  # listed late, shown from when it began
        assert row.ttl_ms == row.updated_ms - row.created_ms + KEEP_MS  # listed for KEEP_MS after its end
        assert live.row_id not in calls.engine._scopes
        assert calls.engine.active.count() == 0  # never counted against the task limits


async def test_progress_becomes_the_rows_status_message(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db", show_after_ms=0) as calls:
        seen: list[str | None] = []

        async def slow(live: LiveCall) -> dict[str, Any]:
            await live.row()
            live.progress({"progressToken": "t", "progress": 2, "message": "copying"})
            await anyio.sleep(0.1)
            assert live.row_id is not None
            row = await calls.engine.store.get_task(live.row_id)
            seen.append(row.status_message if row else None)
            return RESULT

        await calls.run(INFO, slow)
        assert seen == ["copying"]


async def test_a_question_lists_the_call_at_once_and_only_once(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db", show_after_ms=60_000) as calls:

        async def asks(live: LiveCall) -> dict[str, Any]:
            first, again = await live.row(), await live.row()
            assert first is not None and first == again
            return RESULT

        await calls.run(INFO, asks)


async def test_an_operator_cancel_raises_operator_cancelled_and_ends_the_row(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db") as calls:
        upstream_cancelled = anyio.Event()

        async def slow(live: LiveCall) -> dict[str, Any]:
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                upstream_cancelled.set()  # the session cancels the upstream request here
                raise
            return RESULT

        async def operator() -> None:
            while not calls.engine._scopes:
                await anyio.sleep(0.01)
            row = await calls.engine.store.get_task(next(iter(calls.engine._scopes)))
            assert row is not None
            await calls.engine.cancel(row, "cancelled by operator alice", by="operator:alice")

        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            with pytest.raises(OperatorCancelled) as stopped:
                await calls.run(INFO, slow)
        assert stopped.value.message == "cancelled by operator alice"
        assert upstream_cancelled.is_set()
        [row_id] = [e.event.task_id for e in published(calls).events if e.event.kind == "task.created"]
        row = await calls.engine.store.get_task(str(row_id))
        assert row is not None and row.status == CANCELLED and row.ttl_ms is not None
        assert not calls.engine._scopes


async def test_the_host_cancelling_ends_the_row_cancelled(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db", show_after_ms=0) as calls:
        ids: list[str] = []

        async def slow(live: LiveCall) -> dict[str, Any]:
            row_id = await live.row()
            assert row_id is not None
            ids.append(row_id)
            await anyio.sleep(30)
            return RESULT

        with anyio.move_on_after(0.2):  # the host's request is cancelled from outside
            await calls.run(INFO, slow)
        row = await calls.engine.store.get_task(ids[0])
        assert row is not None and row.status == CANCELLED and row.status_message == "cancelled by the host"


async def test_a_failing_call_fails_its_row(tmp_path: Path) -> None:
    async with listing(tmp_path / "s.db", show_after_ms=0) as calls:
        ids: list[str] = []

        async def fails(live: LiveCall) -> dict[str, Any]:
            ids.append(str(await live.row()))
            raise UpstreamError({"code": -32000, "message": "boom"})

        with pytest.raises(UpstreamError):
            await calls.run(INFO, fails)
        row = await calls.engine.store.get_task(ids[0])
        assert row is not None and row.status == FAILED and row.error == {"code": -32000, "message": "boom"}


async def test_a_call_ending_while_its_row_is_written_still_ends_the_row(tmp_path: Path) -> None:
    """The sweeper lists the call and the call ends during that write: the outcome waits for the row."""
    async with listing(tmp_path / "s.db", show_after_ms=0) as calls:
        store = calls.engine.store
        real_put = store.put_task
        gate = anyio.Event()

        async def slow_put(task: Task, events: Any) -> None:
            await gate.wait()
            await real_put(task, events)

        store.put_task = slow_put  # type: ignore[method-assign]  # a slow store write, for this race alone
        lives: list[LiveCall] = []

        async def quick(live: LiveCall) -> dict[str, Any]:
            lives.append(live)
            while live.written is None:  # the sweeper has begun writing its row
                await anyio.sleep(0.005)
            return RESULT

        async def release() -> None:
            await anyio.sleep(0.1)
            gate.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
            assert await calls.run(INFO, quick) == RESULT
        store.put_task = real_put  # type: ignore[method-assign]  # put back
        row = await store.get_task(str(lives[0].row_id))
        assert row is not None and row.status == COMPLETED


async def test_the_daemon_stopping_cuts_the_call_and_the_next_one_fails_its_row(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    ids: list[str] = []
    outcome: list[BaseException] = []
    engine = TaskEngine(SqliteStore(path, on_commit=Published()), calls_keep_ms=KEEP_MS)
    async with anyio.create_task_group() as tg:
        await engine.start(tg)
        calls = PlainCalls(engine, show_after_ms=0, poll_ms=1000)

        async def slow(live: LiveCall) -> dict[str, Any]:
            ids.append(str(await live.row()))
            await anyio.sleep(30)
            return RESULT

        async def host() -> None:
            try:
                await calls.run(INFO, slow)
            except UpstreamUnavailable as exc:
                outcome.append(exc)

        tg.start_soon(host)
        while not ids:
            await anyio.sleep(0.01)
        with anyio.CancelScope(shield=True):
            await engine.close()  # cancels what runs, as a daemon stopping does
        tg.cancel_scope.cancel()
    assert outcome and "stopped" in str(outcome[0])
    async with listing(path) as again:
        row = await again.engine.store.get_task(ids[0])
        assert row is not None and row.status == FAILED and row.status_message == RESTARTED
        assert row.ttl_ms is not None


def test_progress_text() -> None:
    assert progress_text({"progress": 3, "total": 10}) == "progress 3/10"
    assert progress_text({"progress": 0.5}) == "progress 0.5"
    assert progress_text({"progress": 1, "message": "copying"}) == "copying"
    assert progress_text({"progress": True}) is None
    assert progress_text({}) is None
