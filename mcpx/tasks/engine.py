"""Runs upstream calls as tasks under the daemon's task group: durable, expiring, cancellable.

The engine knows nothing of wire formats: the dispatcher hands it a `call` coroutine and renders
records for each era. Status rules that differ by era (isError -> failed in 2025-11-25, completed
in the extension) are decided here from the record's era.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..protocol.errors import INTERNAL_ERROR, InternalError, McpError, UpstreamError
from ..protocol.revisions import Era
from .model import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    Status,
    Task,
    legacy_status_for_result,
    new_task_id,
)
from .store import StoreError, TaskStore

log = logging.getLogger("mcpx.tasks")

Call = Callable[[Task], Awaitable[dict[str, Any]]]
OnChange = Callable[[Task], Awaitable[None]]
# Finishes a task a previous daemon left running, from its `upstream_task_id`: the CallToolResult
# (shaped for the task's era) or an exception, exactly like a `Call`. Set by the daemon.
Resume = Callable[[Task], Awaitable[dict[str, Any]]]
EXPIRY_EVERY_S = 1.0
RESTARTED = "the mcpx daemon restarted while this call was running; its result is lost"


def now_ms() -> int:
    return int(time.time() * 1000)


_CURRENT_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("mcpx_task_run", default=None)


def current_run() -> Run | None:
    """The engine Run the calling code executes under (an mcpx task, or a 2026 call that may
    become one), or None for an ordinary call."""
    return _CURRENT_RUN.get()


class _Questions:
    def __init__(self, originals: dict[str, str]) -> None:
        self.originals = originals  # exposed key -> the upstream's key
        self.remaining: set[str] = set()
        self.answers: dict[str, Any] = {}
        self.done = anyio.Event()


@dataclass(frozen=True)
class Outcome:
    """How a run ended, to be written into its task row."""

    status: Status
    result: dict[str, Any] | None = None  # the CallToolResult
    error: dict[str, Any] | None = None  # a JSON-RPC error object
    message: str | None = None  # the task's status message


class Run:
    """One upstream call under the engine: becomes a task when `task_id` is set."""

    def __init__(self, era: Era) -> None:
        self.era = era
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.task_id: str | None = None
        self.adopted = anyio.Event()  # set once `task_id` names a committed row
        self.upstream_task_id: str | None = None  # the upstream's own task, when the call is one
        self.outcome: Outcome | None = None
        self.result: dict[str, Any] | None = None
        self.exception: BaseException | None = None
        self.taskable = True  # False for a 2026 call that may never become a task


class TaskEngine:
    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.tg: TaskGroup | None = None
        self.on_change: OnChange | None = None
        self.resume: Resume | None = None
        self._closing = anyio.Event()  # set by close(): upstream tasks are left running, to be resumed
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._changed: dict[str, anyio.Event] = {}
        self._waiting: dict[str, _Questions] = {}  # exposed question key -> its asker
        # Every status change re-reads the row and writes under this lock: a cancel and a
        # completion racing each other leave exactly one terminal status (compare-and-set).
        self._transition = anyio.Lock()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    async def start(self, tg: TaskGroup) -> None:
        """Open the store, settle tasks a previous daemon left running, start writer and expiry."""
        await self.store.open()
        self.tg = tg
        tg.start_soon(self.store.run_writer)
        for task in await self.store.all_open():
            if task.upstream_task_id is None or self.resume is None:
                await self.store.put(
                    task.move(FAILED, now_ms(), message=RESTARTED, error={"code": INTERNAL_ERROR, "message": RESTARTED})
                )
            else:
                if task.status == INPUT_REQUIRED:  # the previous daemon's questions died with it
                    task = task.move(WORKING, now_ms())
                    await self.store.put(task)
                self._resume(task)
        tg.start_soon(self._expire_loop)

    def _resume(self, task: Task) -> None:
        """Keep following the upstream task this row names; its outcome lands as usual. The
        callback waits for the upstream to be ready (the pool starts after the engine)."""
        resume = self.resume
        assert resume is not None
        run = Run(task.era)
        run.task_id = task.id
        run.upstream_task_id = task.upstream_task_id
        log.info("task %s: resuming upstream task %s on %s", task.id, task.upstream_task_id, task.upstream)
        self._start(run, lambda: resume(task))

    async def set_upstream_task(self, run: Run, upstream_task_id: str) -> None:
        """The call under `run` became an upstream task: remember its id, durably once the run
        is a task (so a restarted daemon resumes it instead of failing it)."""
        run.upstream_task_id = upstream_task_id
        if run.task_id is not None:
            await self._store_upstream_id(run.task_id, upstream_task_id)

    async def _store_upstream_id(self, task_id: str, upstream_task_id: str) -> None:
        async with self._transition:
            current = await self.store.get(task_id)
            if current is None or current.terminal or current.upstream_task_id == upstream_task_id:
                return
            await self.store.put(replace(current, upstream_task_id=upstream_task_id))

    async def create(
        self,
        *,
        owner: str,
        owner_info: dict[str, Any],
        upstream: str,
        tool: str,
        arguments: dict[str, Any],
        era: Era,
        ttl_ms: int | None,
        poll_ms: int,
        call: Call,
    ) -> Task:
        """The row is committed before this returns; only then does the work start."""
        task = self.new_record(
            owner=owner,
            owner_info=owner_info,
            upstream=upstream,
            tool=tool,
            arguments=arguments,
            era=era,
            ttl_ms=ttl_ms,
            poll_ms=poll_ms,
        )
        await self.store.put(task)
        run = Run(task.era)
        run.task_id = task.id
        self._start(run, lambda: call(task))
        return task

    def new_record(
        self,
        *,
        owner: str,
        owner_info: dict[str, Any],
        upstream: str,
        tool: str,
        arguments: dict[str, Any],
        era: Era,
        ttl_ms: int | None,
        poll_ms: int,
    ) -> Task:
        t = now_ms()
        return Task(
            new_task_id(), WORKING, t, t, ttl_ms, poll_ms, owner, upstream, tool, arguments, era, owner_info=owner_info
        )

    def begin(self, era: Era, call: Callable[[], Awaitable[dict[str, Any]]]) -> Run:
        """Start a call that may or may not become a task (2026: the server decides, later)."""
        run = Run(era)
        self._start(run, call)
        return run

    async def adopt(self, run: Run, task: Task) -> Task:
        """Turn a running call into a task: commit the row, then let the outcome land in it."""
        if run.upstream_task_id is not None:
            task = replace(task, upstream_task_id=run.upstream_task_id)
        await self.store.put(task)
        run.task_id = task.id
        run.adopted.set()
        self._scopes[task.id] = run.scope
        if run.upstream_task_id is not None and run.upstream_task_id != task.upstream_task_id:
            await self._store_upstream_id(task.id, run.upstream_task_id)  # it arrived during the put
        if run.done.is_set() and run.outcome is not None:  # it finished while the row was written
            await self._finish(task.id, run.outcome)
        return task

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: object) -> None:
        """Run `fn(*args)` in the background under the daemon's task group."""
        assert self.tg is not None, "engine not started"
        self.tg.start_soon(fn, *args)

    def _start(self, run: Run, call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        assert self.tg is not None
        if run.task_id is not None:
            self._scopes[run.task_id] = run.scope
            run.adopted.set()
        # The call sees its Run (current_run()): that is how the dispatcher knows a call runs
        # under the engine and may become an upstream task. The new task copies this context.
        token = _CURRENT_RUN.set(run)
        try:
            self.tg.start_soon(self._run, run, call)
        finally:
            _CURRENT_RUN.reset(token)

    async def _run(self, run: Run, call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            with run.scope:
                try:
                    result = await call()
                    run.result = result
                    status = legacy_status_for_result(result) if run.era == "legacy" else COMPLETED
                    message = "the tool reported an error" if status == FAILED else None
                    run.outcome = Outcome(status, result=result, message=message)
                except UpstreamError as exc:
                    run.exception = exc
                    run.outcome = Outcome(
                        FAILED, error=exc.error, message=str(exc.error.get("message", "upstream error"))
                    )
                except McpError as exc:
                    run.exception = exc
                    run.outcome = Outcome(FAILED, error=exc.to_error(), message=exc.message)
                except Exception as exc:  # the task fails; the daemon does not
                    log.exception("task call crashed")
                    run.exception = exc
                    error = {"code": INTERNAL_ERROR, "message": f"internal error: {exc}"}
                    run.outcome = Outcome(FAILED, error=error, message="internal error")
        finally:
            if run.task_id is not None:
                self._scopes.pop(run.task_id, None)
            run.done.set()
        if run.outcome is not None and run.task_id is not None:
            with anyio.CancelScope(shield=True):
                await self._finish(run.task_id, run.outcome)

    async def _finish(self, task_id: str, outcome: Outcome) -> None:
        async with self._transition:
            current = await self.store.get(task_id)
            if current is None or current.terminal:
                return  # cancelled (sticky) or expired meanwhile
            done = current.move(
                outcome.status, now_ms(), message=outcome.message, result=outcome.result, error=outcome.error
            )
            try:
                await self._save(done)
            except StoreError as exc:
                log.error("task %s: could not record its outcome: %s", task_id, exc)

    async def _save(self, task: Task) -> None:
        await self.store.put(task)
        event = self._changed.pop(task.id, None)
        if event is not None:
            event.set()
        if self.on_change is not None:
            try:
                await self.on_change(task)
            except Exception:  # a listener (a host's stream) must not undo a committed change
                log.warning("task %s: change listener failed", task.id, exc_info=True)

    async def get(self, task_id: str) -> Task | None:
        task = await self.store.get(task_id)
        expires = task.expires_ms() if task is not None else None
        if expires is not None and expires <= now_ms():
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
        """Add these requests to the task's outstanding inputRequests (status input_required), wait
        until every one is answered, and return the answers under the upstream's own keys.
        Several asks may be outstanding at once; each key is unique for the task's whole life."""
        waiter = _Questions({})
        async with self._transition:
            task = await self.store.get(task_id)
            if task is None or task.terminal:
                raise InternalError(f"task {task_id} ended before its question could be asked")
            used = task.keys_used
            exposed: dict[str, Any] = {}
            for key, request in requests.items():
                used += 1
                out = f"{used}-{key}"  # unique for the task's whole life (tasks.md:350)
                exposed[out] = request
                waiter.originals[out] = key
                self._waiting[out] = waiter
            waiter.remaining = set(exposed)
            moved = task.move(INPUT_REQUIRED, now_ms(), message="waiting for input")
            await self._save(replace(moved, input_requests={**task.input_requests, **exposed}, keys_used=used))
        try:
            if waiter.remaining:
                await waiter.done.wait()
        finally:
            with anyio.CancelScope(shield=True):
                for key in exposed:
                    self._waiting.pop(key, None)
                await self._withdraw(task_id, set(exposed))
        return waiter.answers

    @contextlib.asynccontextmanager
    async def asking(self, task_id: str) -> AsyncIterator[None]:
        """A 2025 task shows input_required while mcpx asks its host something (tasks.mdx:447)."""
        await self._set(task_id, INPUT_REQUIRED)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self._set(task_id, WORKING)

    async def _set(self, task_id: str, status: Status) -> None:
        async with self._transition:
            current = await self.store.get(task_id)
            if current is not None and not current.terminal and current.status != status:
                await self._save(current.move(status, now_ms()))

    async def _withdraw(self, task_id: str, keys: set[str]) -> None:
        """These keys are settled (answered, or their asker gave up): no longer outstanding."""
        async with self._transition:
            current = await self.store.get(task_id)
            if current is None or current.terminal:
                return
            left = {k: v for k, v in current.input_requests.items() if k not in keys}
            if left == current.input_requests:
                return
            if left:
                await self._save(replace(current, input_requests=left, updated_ms=now_ms()))
            else:
                await self._save(current.move(WORKING, now_ms()))

    async def answer(self, task_id: str, responses: dict[str, Any]) -> None:
        """Record answers for outstanding keys; others are ignored (tasks.md:379)."""
        settled: set[str] = set()
        async with self._transition:
            task = await self.store.get(task_id)
            if task is None or task.terminal:
                return
            for key, value in responses.items():
                waiter = self._waiting.get(key)
                if key not in task.input_requests or waiter is None or key not in waiter.remaining:
                    continue
                waiter.answers[waiter.originals[key]] = value
                waiter.remaining.discard(key)
                settled.add(key)
                if not waiter.remaining:
                    waiter.done.set()
        if settled:
            await self._withdraw(task_id, settled)

    async def list_owner(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[Task]:
        """Live tasks only; the store drops expired rows before its LIMIT (a full page stays full)."""
        return await self.store.list_owner(owner, after, limit, now_ms=now_ms())

    async def _expire_loop(self) -> None:
        while not self._closing.is_set():
            await anyio.sleep(EXPIRY_EVERY_S)
            try:
                for task_id in await self.store.expired(now_ms()):
                    self.stop_work(task_id)
                    await self.store.delete(task_id)
                    event = self._changed.pop(task_id, None)
                    if event is not None:
                        event.set()
            except Exception as exc:  # noqa: BLE001 - the sweep must outlive any one failure and retry
                if self._closing.is_set():
                    return  # the store closed under the sweep: a shutdown, not a failure
                log.warning("task expiry sweep failed: %s", str(exc) or type(exc).__name__)

    async def close(self) -> None:
        self._closing.set()
        for scope in list(self._scopes.values()):
            scope.cancel()
        await self.store.close()
