"""Runs upstream calls as tasks under the daemon's task group: durable, expiring, cancellable.

The engine knows nothing of wire formats: the dispatcher hands it a `call` coroutine and renders
records for each era. Status rules that differ by era (isError -> failed in 2025-11-25, completed
in the extension) are decided here from the record's era.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from ..protocol.errors import INTERNAL_ERROR, InternalError, McpError, UpstreamError
from .model import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TERMINAL, WORKING, Task, legacy_status_for_result, new_task_id
from .store import TaskStore

log = logging.getLogger("mcpx.tasks")

Call = Callable[[Task], Awaitable[dict[str, Any]]]
OnChange = Callable[[Task], Awaitable[None]]
EXPIRY_EVERY_S = 1.0
RESTARTED = "the mcpx daemon restarted while this call was running; its result is lost"


def now_ms() -> int:
    return int(time.time() * 1000)


class _Questions:
    def __init__(self, originals: dict[str, str]) -> None:
        self.originals = originals
        self.answers: dict[str, Any] = {}
        self.done = anyio.Event()


class Run:
    """One upstream call under the engine: becomes a task when `task_id` is set."""

    def __init__(self, era: str) -> None:
        self.era = era
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.task_id: str | None = None
        self.outcome: tuple[str, Any, Any, str | None] | None = None
        self.result: dict[str, Any] | None = None
        self.exception: BaseException | None = None


class TaskEngine:
    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.tg: TaskGroup | None = None
        self.on_change: OnChange | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._changed: dict[str, anyio.Event] = {}
        self._questions: dict[str, _Questions] = {}
        # Every status change re-reads the row and writes under this lock: a cancel and a
        # completion racing each other leave exactly one terminal status (compare-and-set).
        self._transition = anyio.Lock()

    async def start(self, tg: TaskGroup) -> None:
        """Open the store, settle tasks a previous daemon left running, start writer and expiry."""
        await self.store.open()
        self.tg = tg
        tg.start_soon(self.store.run_writer)
        for task in await self.store.all_open():
            if task.upstream_task_id is None:
                await self.store.put(task.move(FAILED, now_ms(), message=RESTARTED, error={"code": INTERNAL_ERROR, "message": RESTARTED}))
        tg.start_soon(self._expire_loop)

    async def create(self, *, owner: str, owner_info: dict[str, Any], upstream: str, tool: str, arguments: dict[str, Any], era: str, ttl_ms: int | None, poll_ms: int, call: Call) -> Task:
        """The row is committed before this returns; only then does the work start."""
        task = self.new_record(owner=owner, owner_info=owner_info, upstream=upstream, tool=tool, arguments=arguments, era=era, ttl_ms=ttl_ms, poll_ms=poll_ms)
        await self.store.put(task)
        run = Run(task.era)
        run.task_id = task.id
        self._start(run, lambda: call(task))
        return task

    def new_record(self, *, owner: str, owner_info: dict[str, Any], upstream: str, tool: str, arguments: dict[str, Any], era: str, ttl_ms: int | None, poll_ms: int) -> Task:
        t = now_ms()
        return Task(new_task_id(), WORKING, t, t, ttl_ms, poll_ms, owner, upstream, tool, arguments, era, owner_info=owner_info)

    def begin(self, era: str, call: Callable[[], Awaitable[dict[str, Any]]]) -> "Run":
        """Start a call that may or may not become a task (2026: the server decides, later)."""
        run = Run(era)
        self._start(run, call)
        return run

    async def adopt(self, run: "Run", task: Task) -> Task:
        """Turn a running call into a task: commit the row, then let the outcome land in it."""
        await self.store.put(task)
        run.task_id = task.id
        self._scopes[task.id] = run.scope
        if run.done.is_set() and run.outcome is not None:  # it finished while the row was written
            await self._finish(task.id, *run.outcome)
        return task

    def _start(self, run: "Run", call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        assert self.tg is not None
        if run.task_id is not None:
            self._scopes[run.task_id] = run.scope
        self.tg.start_soon(self._run, run, call)

    async def _run(self, run: "Run", call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            with run.scope:
                try:
                    result = await call()
                    run.result = result
                    status = legacy_status_for_result(result) if run.era == "legacy" else COMPLETED
                    run.outcome = (status, result, None, "the tool reported an error" if status == FAILED else None)
                except UpstreamError as exc:
                    run.exception = exc
                    run.outcome = (FAILED, None, exc.error, str(exc.error.get("message", "upstream error")))
                except McpError as exc:
                    run.exception = exc
                    run.outcome = (FAILED, None, exc.to_error(), exc.message)
                except Exception as exc:  # the task fails; the daemon does not
                    log.exception("task call crashed")
                    run.exception = exc
                    run.outcome = (FAILED, None, {"code": INTERNAL_ERROR, "message": f"internal error: {exc}"}, "internal error")
        finally:
            if run.task_id is not None:
                self._scopes.pop(run.task_id, None)
            run.done.set()
        if run.outcome is not None and run.task_id is not None:
            with anyio.CancelScope(shield=True):
                await self._finish(run.task_id, *run.outcome)

    async def _finish(self, task_id: str, status: str, result: Any, error: Any, message: str | None) -> None:
        async with self._transition:
            current = await self.store.get(task_id)
            if current is None or current.terminal:
                return  # cancelled (sticky) or expired meanwhile
            try:
                await self._save(current.move(status, now_ms(), message=message, result=result, error=error))
            except Exception as exc:
                log.error("task %s: could not record its outcome: %s", task_id, exc)

    async def _save(self, task: Task) -> None:
        await self.store.put(task)
        event = self._changed.pop(task.id, None)
        if event is not None:
            event.set()
        if self.on_change is not None:
            try:
                await self.on_change(task)
            except Exception:
                log.debug("task change listener failed", exc_info=True)

    async def get(self, task_id: str) -> Task | None:
        task = await self.store.get(task_id)
        if task is not None and task.expires_ms() is not None and task.expires_ms() <= now_ms():  # type: ignore[operator]
            return None  # past its TTL: gone, even if the sweeper has not run yet
        return task

    async def wait_change(self, task_id: str) -> None:
        event = self._changed.setdefault(task_id, anyio.Event())
        await event.wait()

    async def wait_terminal(self, task_id: str) -> Task | None:
        while True:
            task = await self.get(task_id)
            if task is None or task.terminal:
                return task
            with anyio.move_on_after(1.0):  # a periodic re-read also catches expiry
                await self.wait_change(task_id)

    async def cancel(self, task: Task, message: str = "cancelled by the host") -> Task | None:
        """The record is `cancelled` (and stays so) before this returns, and the work is stopped;
        None when the task had already ended (the caller's era decides what that means).
        (2026 allows any honest end state; here the stop always succeeds, so it is `cancelled`.)"""
        async with self._transition:
            current = await self.store.get(task.id)
            if current is None or current.terminal:
                return None
            done = current.move(CANCELLED, now_ms(), message=message)
            await self._save(done)
        self.stop_work(task.id)
        return done

    def stop_work(self, task_id: str) -> None:
        scope = self._scopes.get(task_id)
        if scope is not None:
            scope.cancel()  # the upstream call is cancelled upstream by the session

    # ---- questions inside a task (2026 inputRequests; answered by tasks/update) -------------
    async def ask(self, task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        """Put the task in input_required with these requests, wait until every one is answered,
        and return the answers under the upstream's own keys."""
        task = await self.store.get(task_id)
        if task is None or task.terminal:
            raise InternalError(f"task {task_id} ended before its question could be asked")
        exposed: dict[str, Any] = {}
        originals: dict[str, str] = {}
        used = task.keys_used
        for key, request in requests.items():
            used += 1
            out = f"{used}-{key}"  # unique for the task's whole life (tasks.md:350)
            exposed[out] = request
            originals[out] = key
        waiter = _Questions(originals)
        self._questions[task_id] = waiter
        async with self._transition:
            task = await self.store.get(task_id)
            if task is None or task.terminal:
                raise InternalError(f"task {task_id} ended before its question could be asked")
            await self._save(replace(task.move(INPUT_REQUIRED, now_ms(), message="waiting for input"), input_requests=exposed, keys_used=used))
        try:
            await waiter.done.wait()
        finally:
            self._questions.pop(task_id, None)
        async with self._transition:
            current = await self.store.get(task_id)
            if current is not None and not current.terminal:
                await self._save(current.move(WORKING, now_ms()))
        return waiter.answers

    async def answer(self, task_id: str, responses: dict[str, Any]) -> None:
        """Record answers for outstanding keys; others are ignored (tasks.md:379)."""
        async with self._transition:
            waiter = self._questions.get(task_id)
            task = await self.store.get(task_id)
            if waiter is None or task is None or task.terminal:
                return
            taken = {k: v for k, v in responses.items() if k in task.input_requests}
            if not taken:
                return
            for key, value in taken.items():
                waiter.answers[waiter.originals[key]] = value
            left = {k: v for k, v in task.input_requests.items() if k not in taken}
            await self._save(replace(task, input_requests=left, updated_ms=now_ms()))
        if not left:
            waiter.done.set()

    async def list_owner(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[Task]:
        t = now_ms()
        return [x for x in await self.store.list_owner(owner, after, limit) if x.expires_ms() is None or x.expires_ms() > t]  # type: ignore[operator]

    async def _expire_loop(self) -> None:
        while True:
            await anyio.sleep(EXPIRY_EVERY_S)
            try:
                for task_id in await self.store.expired(now_ms()):
                    self.stop_work(task_id)
                    await self.store.delete(task_id)
                    event = self._changed.pop(task_id, None)
                    if event is not None:
                        event.set()
            except Exception as exc:
                log.warning("task expiry sweep failed: %s", exc)

    async def close(self) -> None:
        for scope in list(self._scopes.values()):
            scope.cancel()
        await self.store.close()


__all__ = ["TaskEngine", "TERMINAL", "replace"]
