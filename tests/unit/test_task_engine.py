"""mcpx.tasks.engine: compare-and-set transitions, cancel against completion, TTL expiry, questions
inside a task (inputRequests), restart settlement and listing; a real TaskStore under anyio."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.config import Config
from mcpx.host.connection import HostConnection, RequestContext
from mcpx.host.dispatch import Dispatcher
from mcpx.host.legacy_tasks import PAGE, owner_key
from mcpx.host.subscriptions import Hub
from mcpx.protocol.errors import INTERNAL_ERROR, InternalError, InvalidParams, UpstreamError
from mcpx.protocol.revisions import LEGACY_LATEST
from mcpx.tasks import engine as engine_module
from mcpx.tasks.engine import RESTARTED, TaskEngine, current_run, now_ms
from mcpx.tasks.model import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TERMINAL, WORKING, Task, new_task_id
from mcpx.tasks.store import TaskStore
from mcpx.upstream.pool import UpstreamPool

pytestmark = pytest.mark.anyio

OWNER = "conn:alpha"
RESULT = {"content": [{"type": "text", "text": "done"}]}
Call = Callable[[Task], Awaitable[dict[str, Any]]]


# ---- helpers -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(path: Path, *, resume: Call | None = None) -> AsyncIterator[TaskEngine]:
    """An engine on `path` under its own task group, closed the way the daemon closes it."""
    engine = TaskEngine(TaskStore(path))
    engine.resume = resume
    async with anyio.create_task_group() as tg:
        try:
            await engine.start(tg)
            yield engine
        finally:  # also after a failed assertion: an open aiosqlite thread would keep pytest alive
            await engine.close()
            tg.cancel_scope.cancel()


async def seed(path: Path, *tasks: Task) -> None:
    """Rows as a previous daemon left them."""
    store = TaskStore(path)
    await store.open()
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.run_writer)
        try:
            for task in tasks:
                await store.put(task)
        finally:
            await store.close()


def record(
    *, owner: str = OWNER, created_ms: int | None = None, ttl_ms: int | None = 600_000, status: str = WORKING, **kw: Any
) -> Task:
    created = now_ms() if created_ms is None else created_ms
    return Task(
        id=kw.pop("id", None) or new_task_id(),
        status=status,
        created_ms=created,
        updated_ms=created,
        ttl_ms=ttl_ms,
        poll_ms=1000,
        owner=owner,
        upstream="up",
        tool="echo",
        **kw,
    )


async def create(engine: TaskEngine, call: Call, *, era: str = "legacy", ttl_ms: int | None = 600_000) -> Task:
    return await engine.create(
        owner=OWNER,
        owner_info={},
        upstream="up",
        tool="echo",
        arguments={},
        era=era,
        ttl_ms=ttl_ms,
        poll_ms=1000,
        call=call,
    )


class Changes:
    """Every record the engine saved (its on_change hook), in order, and a way to wait for one."""

    def __init__(self, engine: TaskEngine) -> None:
        self.saved: list[Task] = []
        self._read = 0
        self._new = anyio.Event()
        engine.on_change = self._record

    async def _record(self, task: Task) -> None:
        self.saved.append(task)
        self._new.set()
        self._new = anyio.Event()

    async def next(self, match: Callable[[Task], bool]) -> Task:
        """The first saved record not yet returned that matches."""
        with anyio.fail_after(5):
            while True:
                for i in range(self._read, len(self.saved)):
                    if match(self.saved[i]):
                        self._read = i + 1
                        return self.saved[i]
                await self._new.wait()

    def terminal_statuses(self, task_id: str) -> list[str]:
        return [t.status for t in self.saved if t.id == task_id and t.status in TERMINAL]


def blocked_forever(started: anyio.Event | None = None, stopped: anyio.Event | None = None) -> Call:
    async def call(task: Task) -> dict[str, Any]:
        try:
            if started is not None:
                started.set()
            await anyio.Event().wait()
        finally:
            if stopped is not None:
                stopped.set()
        raise AssertionError("unreachable")

    return call


async def returns(task: Task) -> dict[str, Any]:
    return RESULT


# ---- outcomes and compare-and-set ------------------------------------------------------------


async def test_the_row_is_committed_before_the_call_starts(tmp_path: Path) -> None:
    seen: list[Task | None] = []
    async with running(tmp_path / "mcpx.db") as engine:

        async def call(task: Task) -> dict[str, Any]:
            seen.append(await engine.store.get(task.id))
            return RESULT

        task = await create(engine, call)
        done = await engine.wait_terminal(task.id)
    assert seen == [task] and task.status == WORKING
    assert done is not None and done.status == COMPLETED and done.result == RESULT


async def _raise_upstream(task: Task) -> dict[str, Any]:
    raise UpstreamError({"code": -32000, "message": "tool exploded", "data": {"x": 1}})


async def _raise_ours(task: Task) -> dict[str, Any]:
    raise InvalidParams("bad arguments")


async def _crash(task: Task) -> dict[str, Any]:
    raise ZeroDivisionError("oops")


async def _is_error(task: Task) -> dict[str, Any]:
    return {"content": [], "isError": True}


@pytest.mark.parametrize(
    ("era", "call", "status", "error"),
    [
        ("legacy", _is_error, FAILED, None),  # 2025-11-25: isError fails the task
        ("modern", _is_error, COMPLETED, None),  # the extension: still a completed call
        ("legacy", _raise_upstream, FAILED, {"code": -32000, "message": "tool exploded", "data": {"x": 1}}),
        ("modern", _raise_ours, FAILED, {"code": -32602, "message": "bad arguments"}),
        ("legacy", _crash, FAILED, {"code": INTERNAL_ERROR, "message": "internal error: oops"}),
    ],
    ids=["legacy-isError", "modern-isError", "upstream-error", "mcp-error", "crash"],
)
async def test_a_calls_outcome_decides_the_terminal_status(
    tmp_path: Path, era: str, call: Call, status: str, error: dict[str, Any] | None
) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, call, era=era)
        done = await engine.wait_terminal(task.id)
    assert done is not None and done.status == status and done.error == error


async def test_cancel_marks_the_task_cancelled_and_stops_its_work(tmp_path: Path) -> None:
    started, stopped = anyio.Event(), anyio.Event()
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever(started, stopped))
        with anyio.fail_after(5):
            await started.wait()
        done = await engine.cancel(task, "stop it")
        assert done is not None and done.status == CANCELLED and done.status_message == "stop it"
        with anyio.fail_after(5):
            await stopped.wait()  # the call itself was cancelled
        assert await engine.cancel(task) is None  # a second cancel finds it ended
        assert (await engine.get(task.id)).status == CANCELLED  # type: ignore[union-attr]


async def test_cancel_after_completion_changes_nothing(tmp_path: Path) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        changes = Changes(engine)
        task = await create(engine, returns)
        await engine.wait_terminal(task.id)
        assert await engine.cancel(task) is None
        current = await engine.get(task.id)
    assert current is not None and current.status == COMPLETED and current.result == RESULT
    assert changes.terminal_statuses(task.id) == [COMPLETED]


async def test_a_completion_landing_after_cancel_does_not_overwrite_it(tmp_path: Path) -> None:
    started, release, returned = anyio.Event(), anyio.Event(), anyio.Event()

    async def stubborn(task: Task) -> dict[str, Any]:
        with anyio.CancelScope(shield=True):  # finishes although it was cancelled
            started.set()
            await release.wait()
        returned.set()
        return RESULT

    async with running(tmp_path / "mcpx.db") as engine:
        changes = Changes(engine)
        task = await create(engine, stubborn)
        with anyio.fail_after(5):
            await started.wait()
        assert await engine.cancel(task) is not None
        release.set()
        with anyio.fail_after(5):
            await returned.wait()
        # The outcome's write is queued on the transition lock as the call returns; a later
        # cancel queues behind it, so once it answers, the outcome had its chance.
        assert await engine.cancel(task) is None
        current = await engine.get(task.id)
    assert current is not None and current.status == CANCELLED and current.result is None
    assert changes.terminal_statuses(task.id) == [CANCELLED]


async def test_cancels_racing_completions_leave_exactly_one_terminal_status_each(tmp_path: Path) -> None:
    gate = anyio.Event()
    exited: list[str] = []
    all_exited = anyio.Event()
    count = 20

    async def call(task: Task) -> dict[str, Any]:
        try:
            await gate.wait()
            return RESULT
        finally:
            exited.append(task.id)
            if len(exited) == count:
                all_exited.set()

    async with running(tmp_path / "mcpx.db") as engine:
        changes = Changes(engine)
        tasks = [await create(engine, call) for _ in range(count)]
        async with anyio.create_task_group() as tg:
            gate.set()  # the calls return on their next turn, while the cancels go in
            for task in tasks:
                tg.start_soon(engine.cancel, task)
        with anyio.fail_after(5):
            await all_exited.wait()
        for task in tasks:
            assert await engine.cancel(task) is None  # queued behind any outcome still landing
        finals = {t.id: (await engine.get(t.id)).status for t in tasks}  # type: ignore[union-attr]
    for task in tasks:
        assert changes.terminal_statuses(task.id) == [finals[task.id]]


async def test_a_task_that_became_an_upstream_task_records_its_id_durably(tmp_path: Path) -> None:
    recorded = anyio.Event()

    async def call(task: Task) -> dict[str, Any]:
        run = current_run()
        assert run is not None and run.task_id == task.id
        await engine.set_upstream_task(run, "up-7")
        recorded.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, call)
        with anyio.fail_after(5):
            await recorded.wait()
        stored = await engine.store.get(task.id)
    assert stored is not None and stored.upstream_task_id == "up-7"


# ---- TTL -----------------------------------------------------------------------------------


async def test_a_task_past_its_ttl_is_invisible_at_once(tmp_path: Path) -> None:
    old = record(created_ms=now_ms() - 10_000, ttl_ms=5_000)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put(old)
        assert await engine.store.get(old.id) is not None  # the sweep has not run yet
        assert await engine.get(old.id) is None
        assert await engine.wait_terminal(old.id) is None
        assert await engine.list_owner(OWNER, None, 10) == []


async def test_a_task_without_ttl_never_expires(tmp_path: Path) -> None:
    ancient = record(created_ms=0, ttl_ms=None)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put(ancient)
        assert await engine.get(ancient.id) == ancient


async def test_the_sweep_deletes_expired_tasks_and_stops_their_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "EXPIRY_EVERY_S", 0.01)
    started, stopped = anyio.Event(), anyio.Event()
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever(started, stopped), ttl_ms=100)
        with anyio.fail_after(5):
            await started.wait()
            await stopped.wait()  # the sweep cancelled the work
            while await engine.store.get(task.id) is not None:
                await anyio.sleep(0.01)


# ---- questions inside a task (inputRequests) ---------------------------------------------------


def asking(changes: Changes, *keys: str) -> Callable[[Task], bool]:
    return lambda t: t.status == INPUT_REQUIRED and set(keys) <= set(t.input_requests)


async def test_questions_become_input_requests_under_keys_unique_for_the_tasks_life(tmp_path: Path) -> None:
    row = record(era="modern")
    answers: list[dict[str, Any]] = []
    async with running(tmp_path / "mcpx.db") as engine, anyio.create_task_group() as tg:
        changes = Changes(engine)
        await engine.store.put(row)

        async def ask(requests: dict[str, Any]) -> None:
            answers.append(await engine.ask(row.id, requests))

        tg.start_soon(ask, {"a": {"method": "elicitation/create"}, "b": {"method": "roots/list"}})
        shown = await changes.next(asking(changes, "1-a", "2-b"))
        assert shown.input_requests == {"1-a": {"method": "elicitation/create"}, "2-b": {"method": "roots/list"}}
        await engine.answer(row.id, {"1-a": {"action": "accept"}, "2-b": {"roots": []}})
        await changes.next(lambda t: t.status == WORKING)

        tg.start_soon(ask, {"a": {"method": "elicitation/create"}})  # the upstream reuses its key
        again = await changes.next(asking(changes, "3-a"))
        assert set(again.input_requests) == {"3-a"}  # never "1-a" again
        await engine.answer(row.id, {"3-a": {"action": "decline"}})
    assert answers == [{"a": {"action": "accept"}, "b": {"roots": []}}, {"a": {"action": "decline"}}]


async def test_partial_answers_keep_the_task_waiting_for_the_rest(tmp_path: Path) -> None:
    row = record(era="modern")
    answered = anyio.Event()
    async with running(tmp_path / "mcpx.db") as engine, anyio.create_task_group() as tg:
        changes = Changes(engine)
        await engine.store.put(row)

        async def ask() -> None:
            await engine.ask(row.id, {"a": {"m": 1}, "b": {"m": 2}})
            answered.set()

        tg.start_soon(ask)
        await changes.next(asking(changes, "1-a", "2-b"))
        await engine.answer(row.id, {"1-a": "first"})
        partial = await changes.next(lambda t: set(t.input_requests) == {"2-b"})
        assert partial.status == INPUT_REQUIRED and not answered.is_set()
        await engine.answer(row.id, {"2-b": "second"})
        with anyio.fail_after(5):
            await answered.wait()
        current = await engine.get(row.id)
    assert current is not None and current.status == WORKING and current.input_requests == {}


async def test_unknown_and_repeated_answers_are_ignored(tmp_path: Path) -> None:
    row = record(era="modern")
    got: list[dict[str, Any]] = []
    async with running(tmp_path / "mcpx.db") as engine, anyio.create_task_group() as tg:
        changes = Changes(engine)
        await engine.store.put(row)

        async def ask() -> None:
            got.append(await engine.ask(row.id, {"a": {}, "b": {}}))

        tg.start_soon(ask)
        await changes.next(asking(changes, "1-a", "2-b"))
        await engine.answer(row.id, {"1-a": "kept", "9-x": "unknown", "a": "upstream key, not ours"})
        await changes.next(lambda t: set(t.input_requests) == {"2-b"})
        await engine.answer(row.id, {"1-a": "late duplicate"})  # already settled
        assert set((await engine.get(row.id)).input_requests) == {"2-b"}  # type: ignore[union-attr]
        await engine.answer(row.id, {"2-b": "last"})
    assert got == [{"a": "kept", "b": "last"}]


async def test_an_asker_that_gives_up_withdraws_its_keys_and_the_task_returns_to_working(tmp_path: Path) -> None:
    row = record(era="modern")
    async with running(tmp_path / "mcpx.db") as engine:
        changes = Changes(engine)
        await engine.store.put(row)
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.ask, row.id, {"a": {}})
            await changes.next(asking(changes, "1-a"))
            tg.cancel_scope.cancel()  # the asker gives up (its call was cancelled, timed out, ...)
        back = await changes.next(lambda t: t.status == WORKING)
        assert back.input_requests == {}
        await engine.answer(row.id, {"1-a": "too late"})  # nothing is waiting for it any more
        current = await engine.get(row.id)
    assert current is not None and current.status == WORKING and current.keys_used == 1


async def test_withdrawing_one_asker_leaves_the_other_askers_keys_outstanding(tmp_path: Path) -> None:
    row = record(era="modern")
    second: list[dict[str, Any]] = []
    async with running(tmp_path / "mcpx.db") as engine, anyio.create_task_group() as outer:
        changes = Changes(engine)
        await engine.store.put(row)

        async def ask_b() -> None:
            second.append(await engine.ask(row.id, {"b": {}}))

        async with anyio.create_task_group() as first:
            first.start_soon(engine.ask, row.id, {"a": {}})
            await changes.next(asking(changes, "1-a"))
            outer.start_soon(ask_b)
            await changes.next(asking(changes, "1-a", "2-b"))
            first.cancel_scope.cancel()
        left = await changes.next(lambda t: set(t.input_requests) == {"2-b"})
        assert left.status == INPUT_REQUIRED
        await engine.answer(row.id, {"2-b": "yes"})
    assert second == [{"b": "yes"}]


async def test_asking_in_a_task_that_ended_fails(tmp_path: Path) -> None:
    row = record(status=COMPLETED)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put(row)
        with pytest.raises(InternalError):
            await engine.ask(row.id, {"a": {}})
        with pytest.raises(InternalError):
            await engine.ask("no-such-task", {"a": {}})


# ---- restart settlement ----------------------------------------------------------------------


async def test_start_fails_plain_calls_a_previous_daemon_left_running(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    started = anyio.Event()
    async with running(db) as first:
        cut = await create(first, blocked_forever(started))
        with anyio.fail_after(5):
            await started.wait()
    async with running(db) as second:
        settled = await second.get(cut.id)
    assert settled is not None and settled.status == FAILED and settled.status_message == RESTARTED
    assert settled.error == {"code": INTERNAL_ERROR, "message": RESTARTED}


async def test_start_resumes_tasks_that_follow_an_upstream_task(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    following = record(upstream_task_id="up-1")
    asked = record(status=INPUT_REQUIRED, upstream_task_id="up-2", input_requests={"1-a": {}}, keys_used=1)
    plain = record()
    ended = record(status=COMPLETED, result=RESULT, upstream_task_id="up-3")
    await seed(db, following, asked, plain, ended)
    resumed: list[Task] = []

    async def resume(task: Task) -> dict[str, Any]:
        resumed.append(task)
        return {"content": [{"type": "text", "text": f"from {task.upstream_task_id}"}]}

    async with running(db, resume=resume) as engine:
        done = {t.id: await engine.wait_terminal(t.id) for t in (following, asked, plain, ended)}
    assert sorted((t.id, t.status, t.input_requests) for t in resumed) == sorted(
        [(following.id, WORKING, {}), (asked.id, WORKING, {})]  # its old questions died with the old daemon
    )
    assert done[following.id].result == {"content": [{"type": "text", "text": "from up-1"}]}  # type: ignore[union-attr]
    assert done[asked.id].status == COMPLETED  # type: ignore[union-attr]
    assert done[plain.id].status == FAILED and done[plain.id].status_message == RESTARTED  # type: ignore[union-attr]
    assert done[ended.id] == ended


async def test_without_a_resume_callback_upstream_tasks_fail_as_restarted(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    following = record(upstream_task_id="up-1")
    await seed(db, following)
    async with running(db) as engine:
        settled = await engine.get(following.id)
    assert settled is not None and settled.status == FAILED and settled.status_message == RESTARTED


@pytest.mark.xfail(strict=True, reason="bug: engine.close() closes the store under a task's question clean-up")
async def test_closing_the_engine_while_a_task_waits_for_input_ends_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    engine = TaskEngine(TaskStore(db))
    changes = Changes(engine)

    async def call(task: Task) -> dict[str, Any]:
        await engine.ask(task.id, {"a": {}})
        return RESULT

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:  # as the daemon runs it
            await engine.start(tg)
            task = await create(engine, call, era="modern")
            await changes.next(asking(changes, "1-a"))
            # Shielded so that the store's own close completes even when the task group fails
            # (else aiosqlite's thread outlives the event loop and trips the next test).
            with anyio.CancelScope(shield=True):
                await engine.close()
            tg.cancel_scope.cancel()
    async with running(db) as engine:
        after = await engine.get(task.id)
    assert after is not None and after.status == FAILED and after.status_message == RESTARTED


# ---- listing ---------------------------------------------------------------------------------


async def test_a_listing_page_is_full_of_live_tasks_even_when_expired_ones_sort_first(tmp_path: Path) -> None:
    now = now_ms()
    expired = [record(created_ms=now - 60_000 + i, ttl_ms=1_000) for i in range(3)]
    live = [record(created_ms=now - 30_000 + i) for i in range(5)]
    async with running(tmp_path / "mcpx.db") as engine:
        for task in expired + live:
            await engine.store.put(task)
        page = await engine.list_owner(OWNER, None, 4)
        rest = await engine.list_owner(OWNER, (page[-1].created_ms, page[-1].id), 4)
    assert [t.id for t in page] == [t.id for t in live[:4]]
    assert [t.id for t in rest] == [live[4].id]


async def test_legacy_tasks_list_walks_every_live_task_past_expired_ones(tmp_path: Path) -> None:
    now = now_ms()
    async with running(tmp_path / "mcpx.db") as engine:
        config = Config()
        dispatcher = Dispatcher(config, UpstreamPool(config, tmp_path / "logs"), Hub(), engine)
        ctx = RequestContext(HostConnection("http"), "legacy", LEGACY_LATEST, {}, {}, None, None)
        owner = owner_key(ctx)
        expired = [record(owner=owner, created_ms=now - 60_000 + i, ttl_ms=1_000) for i in range(10)]
        live = [record(owner=owner, created_ms=now - 30_000 + i) for i in range(PAGE + 10)]
        for task in expired + live:
            await engine.store.put(task)
        seen: list[str] = []
        params: dict[str, Any] = {}
        for _ in range(5):
            res = await dispatcher.legacy_tasks.list(ctx, params)
            seen += [t["taskId"] for t in res["tasks"]]
            if "nextCursor" not in res:
                break
            params = {"cursor": res["nextCursor"]}
    assert seen == [t.id for t in live]
