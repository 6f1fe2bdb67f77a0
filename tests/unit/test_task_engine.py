"""mcpx.tasks.engine: compare-and-set transitions and the events each row change is written with,
cancel against completion, TTL expiry, questions inside a task (inputRequests under the caller's
keys), calls adopted as tasks, restart settlement and listing; a real SqliteStore under anyio."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from mcpx.config.model import Config
from mcpx.events.bus import StoredEvent
from mcpx.host.connection import HostConnection, RequestContext
from mcpx.host.dispatch import Dispatcher
from mcpx.host.legacy_task_methods import owner_key
from mcpx.host.subscriptions import Hub
from mcpx.protocol.errors import INTERNAL_ERROR, InternalError, InvalidParams, UpstreamError
from mcpx.protocol.legacy_tasks import PAGE
from mcpx.protocol.revisions import LEGACY_LATEST, Era
from mcpx.records.task import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TERMINAL, WORKING, Status, Task
from mcpx.store.sqlite import SqliteStore
from mcpx.tasks import engine as engine_module
from mcpx.tasks import frame_log
from mcpx.tasks.control import CarryOn, TaskControl
from mcpx.tasks.engine import RESTARTED, TaskEngine, current_run, now_ms
from mcpx.tasks.inputs import WAITING_FOR_INPUT
from mcpx.upstream.pool import UpstreamPool

from .storekit import OWNER, Published, check_event, seed, task_record

pytestmark = pytest.mark.anyio

RESULT = {"content": [{"type": "text", "text": "done"}]}
Call = Callable[[Task], Awaitable[dict[str, Any]]]


# ---- helpers -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(
    path: Path, *, resume: CarryOn | None = None, changes: Changes | None = None
) -> AsyncIterator[TaskEngine]:
    """An engine on `path` under its own task group, closed the way the daemon closes it."""
    on_change = changes.record if changes is not None else None
    engine = TaskEngine(SqliteStore(path, on_commit=Published()), resume=resume, on_change=on_change)
    async with anyio.create_task_group() as tg:
        try:
            await engine.start(tg)
            yield engine
        finally:  # also after a failed assertion: an open aiosqlite thread would keep pytest alive
            with anyio.CancelScope(shield=True):
                await engine.close()
            tg.cancel_scope.cancel()


def published(engine: TaskEngine) -> Published:
    """Every event the engine's store published after its commits."""
    return cast(Published, cast(SqliteStore, engine.store).on_commit)


def of(engine: TaskEngine, task_id: str, *kinds: str) -> list[StoredEvent]:
    return [e for e in published(engine).events if e.event.task_id == task_id and (not kinds or e.event.kind in kinds)]


def record(*, created_ms: int | None = None, ttl_ms: int | None = 600_000, **kw: Any) -> Task:
    return task_record(created_ms=now_ms() if created_ms is None else created_ms, ttl_ms=ttl_ms, **kw)


async def create(engine: TaskEngine, call: Call, *, era: Era = "legacy", ttl_ms: int | None = 600_000) -> Task:
    return await engine.create(
        owner=OWNER,
        connection="c-1",
        by="host:c-1",
        upstream="up",
        tool="echo",
        arguments={"n": 1},
        era=era,
        ttl_ms=ttl_ms,
        poll_ms=1000,
        call=call,
    )


def modern_record(engine: TaskEngine) -> Task:
    """The row a 2026 call gets when it is adopted as a task."""
    return engine.new_record(
        owner=OWNER,
        connection="c-1",
        upstream="up",
        tool="echo",
        arguments={},
        era="modern",
        ttl_ms=60_000,
        poll_ms=1000,
    )


class Changes:
    """Every record the engine saved (its on_change hook), in order, and a way to wait for one."""

    def __init__(self) -> None:
        self.saved: list[Task] = []
        self._read = 0
        self._new = anyio.Event()

    async def record(self, task: Task) -> None:
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


def statuses(engine: TaskEngine, task_id: str) -> list[tuple[Status, Status]]:
    return [(e.event.data["previous"], e.event.data["status"]) for e in of(engine, task_id, "task.status")]


# ---- outcomes, events and compare-and-set ----------------------------------------------------


async def test_the_row_and_its_created_event_are_committed_before_the_call_starts(tmp_path: Path) -> None:
    seen: list[tuple[Task | None, list[str]]] = []
    async with running(tmp_path / "mcpx.db") as engine:

        async def call(task: Task) -> dict[str, Any]:
            seen.append((await engine.store.get_task(task.id), [e.event.kind for e in of(engine, task.id)]))
            return RESULT

        task = await create(engine, call)
        done = await engine.wait_terminal(task.id)
        stored = await engine.store.events_since(0, 100, task_id=task.id)
    assert seen == [(task, ["task.created"])] and task.status == WORKING
    assert done is not None and done.status == COMPLETED and done.result == RESULT
    created, finished = stored
    assert (created.event.by, created.event.connection_id) == ("host:c-1", "c-1")
    assert created.event.data["owner"] == "conn" and created.event.data["arguments"] == {"n": 1}
    assert finished.event.data == {"status": COMPLETED, "previous": WORKING, "statusMessage": None, "isError": False}
    assert stored == of(engine, task.id)  # what was published is what was stored
    for event in stored:
        check_event(event)


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
async def test_a_calls_outcome_decides_the_terminal_status_and_its_event(
    tmp_path: Path, era: Era, call: Call, status: str, error: dict[str, Any] | None
) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, call, era=era)
        done = await engine.wait_terminal(task.id)
        (event,) = of(engine, task.id, "task.status")
    assert done is not None and done.status == status and done.error == error
    assert event.event.data["status"] == status and event.event.data.get("error") == error
    check_event(event)


async def test_cancel_marks_the_task_cancelled_stops_its_work_and_records_who_asked(tmp_path: Path) -> None:
    started, stopped = anyio.Event(), anyio.Event()
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever(started, stopped))
        with anyio.fail_after(5):
            await started.wait()
        done = await engine.cancel(task, "stop it", by="operator:ann")
        assert done is not None and done.status == CANCELLED and done.status_message == "stop it"
        with anyio.fail_after(5):
            await stopped.wait()  # the call itself was cancelled
        assert await engine.cancel(task) is None  # a second cancel finds it ended
        assert (await engine.get(task.id)).status == CANCELLED  # type: ignore[union-attr]  # the task exists: created above
        asked, moved = of(engine, task.id, "task.cancel_requested", "task.status")
    assert (asked.event.kind, asked.event.by, asked.event.data) == (
        "task.cancel_requested",
        "operator:ann",
        {"status": WORKING},
    )
    assert (moved.event.by, moved.event.data["status"], moved.seq) == ("operator:ann", CANCELLED, asked.seq + 1)
    assert moved.ts_ms == asked.ts_ms  # one write: the request and the transition together


async def test_cancel_after_completion_changes_nothing_but_the_audit_log_keeps_the_request(tmp_path: Path) -> None:
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine:
        task = await create(engine, returns)
        await engine.wait_terminal(task.id)
        assert await engine.cancel(task, by="host:c-1") is None
        current = await engine.get(task.id)
        kinds = [e.event.kind for e in of(engine, task.id)]
    assert current is not None and current.status == COMPLETED and current.result == RESULT
    assert changes.terminal_statuses(task.id) == [COMPLETED]
    assert kinds == ["task.created", "task.status", "task.cancel_requested"]  # asked, too late


async def test_a_completion_landing_after_cancel_does_not_overwrite_it(tmp_path: Path) -> None:
    started, release, returned = anyio.Event(), anyio.Event(), anyio.Event()

    async def stubborn(task: Task) -> dict[str, Any]:
        with anyio.CancelScope(shield=True):  # finishes although it was cancelled
            started.set()
            await release.wait()
        returned.set()
        return RESULT

    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine:
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
    assert statuses(engine, task.id) == [(WORKING, CANCELLED)]


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

    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine:
        tasks = [await create(engine, call) for _ in range(count)]
        async with anyio.create_task_group() as tg:
            gate.set()  # the calls return on their next turn, while the cancels go in
            for task in tasks:
                tg.start_soon(engine.cancel, task)
        with anyio.fail_after(5):
            await all_exited.wait()
        for task in tasks:
            assert await engine.cancel(task) is None  # queued behind any outcome still landing
        finals = {t.id: (await engine.get(t.id)).status for t in tasks}  # type: ignore[union-attr]  # the tasks exist: created above
    for task in tasks:
        assert changes.terminal_statuses(task.id) == [finals[task.id]]
        assert statuses(engine, task.id) == [(WORKING, finals[task.id])]  # one transition event each


async def test_wait_terminal_wakes_for_an_outcome_that_lands_while_it_reads_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = anyio.Event()

    async def call(task: Task) -> dict[str, Any]:
        await release.wait()
        return RESULT

    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine:
        task = await create(engine, call)
        store = cast(SqliteStore, engine.store)
        real_get = store.get_task
        reads = 0

        async def get_task(task_id: str) -> Task | None:
            nonlocal reads
            row = await real_get(task_id)
            reads += 1
            if reads == 1:  # wait_terminal's own read: the outcome is committed before it returns
                release.set()
                await changes.next(lambda t: t.id == task.id and t.terminal)
            return row

        monkeypatch.setattr(store, "get_task", get_task)
        began = anyio.current_time()
        done = await engine.wait_terminal(task.id)
        waited = anyio.current_time() - began
    assert done is not None and done.status == COMPLETED
    assert waited < 0.5  # not the 1 s periodic re-read: the change was not missed


async def test_a_task_that_became_an_upstream_task_records_its_id_durably(tmp_path: Path) -> None:
    """With the upstream session it was made in: a daemon that takes the task over asks there."""
    recorded = anyio.Event()

    async def call(task: Task) -> dict[str, Any]:
        run = current_run()
        assert run is not None and run.task_id == task.id
        await engine.set_upstream_task(run, "up-7", "session-1")
        recorded.set()
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, call)
        with anyio.fail_after(5):
            await recorded.wait()
        stored = await engine.store.get_task(task.id)
        kinds = [e.event.kind for e in of(engine, task.id)]
    assert stored is not None and (stored.upstream_task_id, stored.upstream_session) == ("up-7", "session-1")
    assert kinds == ["task.created"]  # nothing a host or operator sees changed


async def test_a_call_adopted_as_a_task_after_it_became_an_upstream_task_keeps_its_session(tmp_path: Path) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        became = anyio.Event()

        async def call() -> dict[str, Any]:
            run = current_run()
            assert run is not None and run.task_id is None
            await engine.set_upstream_task(run, "up-8", "session-2")
            became.set()
            await anyio.Event().wait()
            raise AssertionError("unreachable")

        run = engine.begin("modern", call)
        with anyio.fail_after(5):
            await became.wait()
        task = engine.new_record(
            owner=OWNER, connection="c-1", upstream="up", tool="slow", arguments={}, era="modern",
            ttl_ms=60_000, poll_ms=1000,
        )  # fmt: skip
        await engine.adopt(run, task, by="host:c-1")
        stored = await engine.store.get_task(task.id)
        engine.stop_work(task.id)
    assert stored is not None and (stored.upstream_task_id, stored.upstream_session) == ("up-8", "session-2")


@pytest.mark.parametrize("anchor", ["upstream request", "upstream task"])
async def test_a_handle_waits_until_a_restart_could_carry_the_call_on(tmp_path: Path, anchor: str) -> None:
    """create(anchor_wait_s=...) returns once the row names the upstream work (the request sent to
    a kept server, or the upstream's task): a SIGKILL after the handle cannot cut work that never
    reached the upstream."""

    async def call(task: Task) -> dict[str, Any]:
        run = current_run()
        assert run is not None
        await anyio.sleep(0.05)  # the upstream is reached a little later
        if anchor == "upstream request":
            await engine.set_upstream_request(run, "run-1/7")
        else:
            await engine.set_upstream_task(run, "up-7")
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async with running(tmp_path / "mcpx.db") as engine:
        with anyio.fail_after(5):
            task = await engine.create(
                owner=OWNER, connection="c-1", upstream="up", tool="echo", arguments={}, era="legacy",
                ttl_ms=600_000, poll_ms=1000, call=call, anchor_wait_s=5,
            )  # fmt: skip
        stored = await engine.store.get_task(task.id)
    assert stored is not None
    assert (stored.upstream_request, stored.upstream_task_id) == (
        ("run-1/7", None) if anchor == "upstream request" else (None, "up-7")
    )


async def test_a_handle_waits_no_longer_than_its_bound_nor_past_the_calls_end(tmp_path: Path) -> None:
    async def never_anchored(task: Task) -> dict[str, Any]:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async def quick(task: Task) -> dict[str, Any]:
        return RESULT

    async with running(tmp_path / "mcpx.db") as engine:
        kw: dict[str, Any] = dict(owner=OWNER, connection="c-1", upstream="up", tool="echo", arguments={})
        kw.update(era="legacy", ttl_ms=600_000, poll_ms=1000, anchor_wait_s=0.2)
        started = anyio.current_time()
        await engine.create(call=never_anchored, **kw)
        waited = anyio.current_time() - started
        with anyio.fail_after(0.15):  # an ended call anchors its run: no wait for the bound
            done = await engine.create(call=quick, **kw)
        await engine.wait_terminal(done.id)
    assert 0.2 <= waited < 2


async def test_a_new_status_message_is_one_status_event_and_repeating_it_is_none(tmp_path: Path) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever())
        await engine.set_status_message(task.id, "step 1 of 3")
        await engine.set_status_message(task.id, "step 1 of 3")
        await engine.set_status_message(task.id, "step 2 of 3")
        current = await engine.get(task.id)
        messages = [e.event.data["statusMessage"] for e in of(engine, task.id, "task.status")]
    assert current is not None and current.status_message == "step 2 of 3"
    assert messages == ["step 1 of 3", "step 2 of 3"]


async def test_a_told_message_is_taken_back_to_the_one_before_unless_it_changed_meanwhile(tmp_path: Path) -> None:
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever())
        await engine.set_status_message(task.id, "upstream: step 1")
        before = await engine.set_status_message(task.id, "waiting for an operator")
        await engine.restore_status_message(task.id, "waiting for an operator", before)
        restored = await engine.get(task.id)
        await engine.set_status_message(task.id, "waiting for an operator")
        await engine.set_status_message(task.id, "upstream: step 2")  # the upstream spoke meanwhile
        await engine.restore_status_message(task.id, "waiting for an operator", before)
        kept = await engine.get(task.id)
    assert before == "upstream: step 1"
    assert restored is not None and restored.status_message == "upstream: step 1"
    assert kept is not None and kept.status_message == "upstream: step 2"


# ---- calls that become tasks later (2026: the server decides) ---------------------------------


async def test_calls_adopted_after_they_ended_leave_no_cancel_scope_behind(tmp_path: Path) -> None:
    """A 2026 call adopted as a task once it had already finished has nothing left to cancel: the
    engine keeps no scope for it (it kept one per such task, for good)."""

    async def call() -> dict[str, Any]:
        return RESULT

    async with running(tmp_path / "mcpx.db") as engine:
        for _ in range(50):
            run = engine.begin("modern", call)
            with anyio.fail_after(5):
                await run.done.wait()
            await engine.adopt(run, modern_record(engine), by="host:c-1")
        assert engine._scopes == {}


async def test_an_adopted_call_that_finished_while_its_row_was_written_lands_its_outcome(tmp_path: Path) -> None:
    async with running(tmp_path / "mcpx.db") as engine:

        async def call() -> dict[str, Any]:
            sink = frame_log.current_sink.get()
            assert sink is not None
            sink("upstream", "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
            return RESULT

        run = engine.begin("modern", call)
        with anyio.fail_after(5):
            await run.done.wait()
        task = modern_record(engine)
        adopted = await engine.adopt(run, task, by="host:c-1")
        done = await engine.wait_terminal(task.id)
        kept = engine.frames.frames(task.id)
    assert adopted.status == WORKING and run.task_id == task.id
    assert done is not None and done.status == COMPLETED and done.result == RESULT
    assert [(f.side, f.direction) for f in kept] == [("upstream", "out")]  # held back until adopted
    assert statuses(engine, task.id) == [(WORKING, COMPLETED)]


# ---- TTL -----------------------------------------------------------------------------------


async def test_a_task_past_its_ttl_is_invisible_at_once(tmp_path: Path) -> None:
    old = record(created_ms=now_ms() - 10_000, ttl_ms=5_000)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put_task(old)
        assert await engine.store.get_task(old.id) is not None  # the sweep has not run yet
        assert await engine.get(old.id) is None
        assert await engine.wait_terminal(old.id) is None
        assert await engine.list_owner(OWNER, None, 10) == []


async def test_a_task_without_ttl_never_expires(tmp_path: Path) -> None:
    ancient = record(created_ms=0, ttl_ms=None)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put_task(ancient)
        assert await engine.get(ancient.id) == ancient


async def test_the_sweep_deletes_expired_tasks_with_their_events_and_stops_their_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "EXPIRY_EVERY_S", 0.01)
    started, stopped = anyio.Event(), anyio.Event()
    async with running(tmp_path / "mcpx.db") as engine:
        task = await create(engine, blocked_forever(started, stopped), ttl_ms=100)
        with anyio.fail_after(5):
            await started.wait()
            await stopped.wait()  # the sweep cancelled the work
        expired = await published(engine).until(lambda e: e.event.kind == "task.expired")
        assert await engine.store.get_task(task.id) is None
        left = await engine.store.events_since(0, 100, task_id=task.id)
    assert (expired.event.task_id, expired.event.connection_id, expired.event.by) == (task.id, "c-1", "mcpx")
    assert left == [expired]  # its other events went with the row


async def test_the_sweep_deletes_an_expired_task_under_its_lock_so_no_change_writes_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "EXPIRY_EVERY_S", 0.01)
    row = record(status=COMPLETED, result=RESULT, created_ms=now_ms() - 10_000, ttl_ms=1_000)
    async with running(tmp_path / "mcpx.db") as engine:
        with anyio.fail_after(5):
            async with engine._transition.hold(row.id):  # a change of this task is under way
                await engine.store.put_task(row)
                while engine._transition._locks.get(row.id, (None, 0))[1] < 2:
                    await anyio.sleep(0.01)  # bounded by fail_after: until the sweep waits for the lock
                assert await engine.store.get_task(row.id) is not None  # not deleted under the change
            while await engine.store.get_task(row.id) is not None:
                await anyio.sleep(0.01)  # the change done, the sweep deletes it


async def test_the_sweep_trims_the_event_log_to_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "EXPIRY_EVERY_S", 0.001)
    monkeypatch.setattr(engine_module, "TRIM_EVERY", 1)
    async with running(tmp_path / "mcpx.db") as engine:
        engine.events_cap = 3
        for _ in range(5):
            await create(engine, blocked_forever())
        with anyio.fail_after(5):
            while await engine.store.first_seq() != 3:  # bounded polling of the sweep's work
                await anyio.sleep(0.01)
        assert await engine.store.last_seq() == 5


# ---- questions inside a task (inputRequests) ---------------------------------------------------


def asking(*keys: str) -> Callable[[Task], bool]:
    return lambda t: t.status == INPUT_REQUIRED and set(keys) <= set(t.input_requests)


async def test_a_question_is_an_input_request_under_exactly_the_key_the_caller_gave(tmp_path: Path) -> None:
    row = record(era="modern", connection="c-1")
    answers: list[dict[str, Any]] = []
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine, anyio.create_task_group() as tg:
        await engine.store.put_task(row)

        async def ask(requests: dict[str, Any]) -> None:
            answers.append(await engine.ask(row.id, requests))

        tg.start_soon(ask, {"q-a": {"method": "elicitation/create"}, "q-b": {"method": "roots/list"}})
        shown = await changes.next(asking("q-a", "q-b"))
        assert shown.input_requests == {"q-a": {"method": "elicitation/create"}, "q-b": {"method": "roots/list"}}
        assert shown.status_message == WAITING_FOR_INPUT
        assert await engine.answer(row.id, {"q-a": {"action": "accept"}, "q-b": {"roots": []}}) == {"q-a", "q-b"}
        await changes.next(lambda t: t.status == WORKING)

        tg.start_soon(ask, {"q-c": {"method": "elicitation/create"}})
        again = await changes.next(asking("q-c"))
        assert set(again.input_requests) == {"q-c"}
        assert await engine.answer(row.id, {"q-c": {"action": "decline"}}) == {"q-c"}
    assert answers == [{"q-a": {"action": "accept"}, "q-b": {"roots": []}}, {"q-c": {"action": "decline"}}]
    waits = of(engine, row.id, "task.input_required")
    assert [(e.event.data["added"], sorted(e.event.data["requests"])) for e in waits] == [
        (["q-a", "q-b"], ["q-a", "q-b"]),
        (["q-c"], ["q-c"]),
    ]
    assert statuses(engine, row.id) == [
        (WORKING, INPUT_REQUIRED),
        (INPUT_REQUIRED, WORKING),
        (WORKING, INPUT_REQUIRED),
        (INPUT_REQUIRED, WORKING),
    ]
    for event in of(engine, row.id):
        check_event(event)


async def test_partial_answers_keep_the_task_waiting_for_the_rest(tmp_path: Path) -> None:
    row = record(era="modern")
    answered = anyio.Event()
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine, anyio.create_task_group() as tg:
        await engine.store.put_task(row)

        async def ask() -> None:
            await engine.ask(row.id, {"a": {"m": 1}, "b": {"m": 2}})
            answered.set()

        tg.start_soon(ask)
        await changes.next(asking("a", "b"))
        assert await engine.answer(row.id, {"a": "first"}) == {"a"}
        partial = await changes.next(lambda t: set(t.input_requests) == {"b"})
        assert partial.status == INPUT_REQUIRED and not answered.is_set()
        assert await engine.answer(row.id, {"b": "second"}) == {"b"}
        with anyio.fail_after(5):
            await answered.wait()
        current = await engine.get(row.id)
    assert current is not None and current.status == WORKING and current.input_requests == {}
    narrowed = of(engine, row.id, "task.input_required")[-1]
    assert narrowed.event.data == {"requests": {"b": {"m": 2}}, "added": []}  # what it still waits on


async def test_unknown_and_repeated_answers_are_ignored(tmp_path: Path) -> None:
    row = record(era="modern")
    got: list[dict[str, Any]] = []
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine, anyio.create_task_group() as tg:
        await engine.store.put_task(row)

        async def ask() -> None:
            got.append(await engine.ask(row.id, {"a": {}, "b": {}}))

        tg.start_soon(ask)
        await changes.next(asking("a", "b"))
        assert await engine.answer(row.id, {"a": "kept", "x": "unknown"}) == {"a"}
        await changes.next(lambda t: set(t.input_requests) == {"b"})
        assert await engine.answer(row.id, {"a": "late duplicate"}) == set()  # already settled
        assert set((await engine.get(row.id)).input_requests) == {"b"}  # type: ignore[union-attr]  # the task exists: created above
        assert await engine.answer("no-such-task", {"b": "lost"}) == set()
        assert await engine.answer(row.id, {"b": "last"}) == {"b"}
    assert got == [{"a": "kept", "b": "last"}]


async def test_an_asker_that_gives_up_withdraws_its_keys_and_the_task_returns_to_working(tmp_path: Path) -> None:
    row = record(era="modern")
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine:
        await engine.store.put_task(row)
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.ask, row.id, {"a": {}})
            await changes.next(asking("a"))
            tg.cancel_scope.cancel()  # the asker gives up (its call was cancelled, timed out, ...)
        back = await changes.next(lambda t: t.status == WORKING)
        assert back.input_requests == {}
        assert await engine.answer(row.id, {"a": "too late"}) == set()  # nothing waits for it any more
        current = await engine.get(row.id)
    assert current is not None and current.status == WORKING and current.input_requests == {}


async def test_withdrawing_one_asker_leaves_the_other_askers_keys_outstanding(tmp_path: Path) -> None:
    row = record(era="modern")
    second: list[dict[str, Any]] = []
    changes = Changes()
    async with running(tmp_path / "mcpx.db", changes=changes) as engine, anyio.create_task_group() as outer:
        await engine.store.put_task(row)

        async def ask_b() -> None:
            second.append(await engine.ask(row.id, {"b": {}}))

        async with anyio.create_task_group() as first:
            first.start_soon(engine.ask, row.id, {"a": {}})
            await changes.next(asking("a"))
            outer.start_soon(ask_b)
            await changes.next(asking("a", "b"))
            first.cancel_scope.cancel()
        left = await changes.next(lambda t: set(t.input_requests) == {"b"})
        assert left.status == INPUT_REQUIRED
        assert await engine.answer(row.id, {"b": "yes"}) == {"b"}
    assert second == [{"b": "yes"}]


async def test_asking_in_a_task_that_ended_fails(tmp_path: Path) -> None:
    row = record(status=COMPLETED)
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put_task(row)
        with pytest.raises(InternalError):
            await engine.ask(row.id, {"a": {}})
        with pytest.raises(InternalError):
            await engine.ask("no-such-task", {"a": {}})
        assert not engine.inputs.outstanding("a")


async def test_a_legacy_task_shows_input_required_while_its_host_is_asked(tmp_path: Path) -> None:
    row = record()
    async with running(tmp_path / "mcpx.db") as engine:
        await engine.store.put_task(row)
        async with engine.asking(row.id):
            during = await engine.get(row.id)
        after = await engine.get(row.id)
    assert during is not None and (during.status, during.status_message) == (INPUT_REQUIRED, WAITING_FOR_INPUT)
    assert after is not None and (after.status, after.status_message) == (WORKING, None)
    assert statuses(engine, row.id) == [(WORKING, INPUT_REQUIRED), (INPUT_REQUIRED, WORKING)]


# ---- restart settlement and shutdown -----------------------------------------------------------


async def test_start_fails_plain_calls_a_previous_daemon_left_running(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    started = anyio.Event()
    async with running(db) as first:
        cut = await create(first, blocked_forever(started))
        with anyio.fail_after(5):
            await started.wait()
    async with running(db) as second:
        settled = await second.get(cut.id)
        (event,) = of(second, cut.id, "task.status")
    assert settled is not None and settled.status == FAILED and settled.status_message == RESTARTED
    assert settled.error == {"code": INTERNAL_ERROR, "message": RESTARTED}
    assert event.event.by == "mcpx" and event.event.data["error"] == settled.error


async def test_start_resumes_tasks_that_follow_an_upstream_task(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    following = record(upstream_task_id="up-1")
    asked = record(status=INPUT_REQUIRED, upstream_task_id="up-2", input_requests={"q-1": {}})
    plain = record()
    ended = record(status=COMPLETED, result=RESULT, upstream_task_id="up-3")
    await seed(db, following, asked, plain, ended)
    resumed: list[Task] = []

    async def resume(task: Task, control: TaskControl) -> dict[str, Any]:
        resumed.append(task)
        return {"content": [{"type": "text", "text": f"from {task.upstream_task_id}"}]}

    async with running(db, resume=resume) as engine:
        done = {t.id: await engine.wait_terminal(t.id) for t in (following, asked, plain, ended)}
    assert sorted((t.id, t.status, t.input_requests) for t in resumed) == sorted(
        [(following.id, WORKING, {}), (asked.id, WORKING, {})]  # its old questions died with the old daemon
    )
    assert done[following.id].result == {"content": [{"type": "text", "text": "from up-1"}]}  # type: ignore[union-attr]  # these tasks exist, so wait_terminal returns each ended
    assert done[asked.id].status == COMPLETED  # type: ignore[union-attr]  # as above
    assert done[plain.id].status == FAILED and done[plain.id].status_message == RESTARTED  # type: ignore[union-attr]  # as above
    assert done[ended.id] == ended


async def test_without_a_resume_callback_upstream_tasks_fail_as_restarted(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    following = record(upstream_task_id="up-1")
    await seed(db, following)
    async with running(db) as engine:
        settled = await engine.get(following.id)
    assert settled is not None and settled.status == FAILED and settled.status_message == RESTARTED


async def test_closing_the_engine_while_a_task_waits_for_input_ends_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "mcpx.db"
    changes = Changes()
    engine = TaskEngine(SqliteStore(db, on_commit=Published()), on_change=changes.record)

    async def call(task: Task) -> dict[str, Any]:
        await engine.ask(task.id, {"q-1": {}})
        return RESULT

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:  # as the daemon runs it
            await engine.start(tg)
            task = await create(engine, call, era="modern")
            await changes.next(asking("q-1"))
            # Shielded so that the store's own close completes even when the task group fails
            # (else aiosqlite's thread outlives the event loop and trips the next test).
            with anyio.CancelScope(shield=True):
                await engine.close()
            tg.cancel_scope.cancel()
    # The question's clean-up was written before the store closed: the task waits on nothing.
    assert statuses(engine, task.id) == [(WORKING, INPUT_REQUIRED), (INPUT_REQUIRED, WORKING)]
    async with running(db) as engine:
        after = await engine.get(task.id)
    assert after is not None and after.status == FAILED and after.status_message == RESTARTED
    assert after.input_requests == {}


# ---- listing ---------------------------------------------------------------------------------


async def test_a_listing_page_is_full_of_live_tasks_even_when_expired_ones_sort_first(tmp_path: Path) -> None:
    now = now_ms()
    expired = [record(created_ms=now - 60_000 + i, ttl_ms=1_000) for i in range(3)]
    live = [record(created_ms=now - 30_000 + i) for i in range(5)]
    async with running(tmp_path / "mcpx.db") as engine:
        for task in expired + live:
            await engine.store.put_task(task)
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
            await engine.store.put_task(task)
        seen: list[str] = []
        params: dict[str, Any] = {}
        for _ in range(5):
            res = await dispatcher.legacy_tasks.list(ctx, params)
            seen += [t["taskId"] for t in res["tasks"]]
            if "nextCursor" not in res:
                break
            params = {"cursor": res["nextCursor"]}
    assert seen == [t.id for t in live]
