"""Runs upstream calls as tasks under the daemon's task group: durable, expiring, cancellable.

The engine knows nothing of wire formats: the dispatcher hands it a `call` coroutine and renders
records for each era. Status rules that differ by era (isError -> failed in 2025-11-25, completed
in the extension) are decided here from the record's era. Every row change is written with the
events it stands for (tasks/changes.py), in one transaction.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..events.bus import Event
from ..events.keep import Keep, start_kept
from ..protocol.errors import INTERNAL_ERROR, McpError, UpstreamError
from ..protocol.revisions import Era
from ..records.task import (
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
from ..store import Claim, Store, StoreError
from ..telemetry import tracing
from . import changes, frame_log
from .active import ActiveTasks
from .control import CarryOn
from .frame_log import Frame, FrameLog
from .inputs import TaskInputs
from .keyed_lock import KeyedLock
from .pacing import PollPacer

log = logging.getLogger("mcpx.tasks")

Call = Callable[[Task], Awaitable[dict[str, Any]]]
OnChange = Callable[[Task], Awaitable[None]]
OnClaimed = Callable[[list[Claim]], Awaitable[None]]  # tasks this daemon now answers for (start, take-over)
EXPIRY_EVERY_S = 1.0
TRIM_EVERY = 60  # expiry sweeps between two trims of the events table
CLOSE_GRACE_S = 2.0  # how long close() lets cancelled runs finish their clean-up
RESTARTED = "the mcpx daemon restarted while this call was running; its result is lost"
LOST = "the mcpx instance {instance} was lost while this call was running; its result is lost"
STOPPED = "the mcpx instance {instance} stopped while this call was running; its result is lost"
# A task handle waits this long at most for its call to reach the upstream durably (Run.anchored):
# usually a millisecond or two; a slow upstream only delays the handle by this much.
ANCHOR_WAIT_S = 1.0
FINISH_RETRY_S, FINISH_RETRY_MAX_S = 0.5, 10.0  # an outcome the store refused is written again


def now_ms() -> int:
    return int(time.time() * 1000)


_CURRENT_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("mcpx_task_run", default=None)


def current_run() -> Run | None:
    """The engine Run the calling code executes under (an mcpx task, or a 2026 call that may
    become one), or None for an ordinary call."""
    return _CURRENT_RUN.get()


@dataclass(frozen=True)
class Outcome:
    """How a run ended, to be written into its task row."""

    status: Status
    result: dict[str, Any] | None = None  # the CallToolResult
    error: dict[str, Any] | None = None  # a JSON-RPC error object
    message: str | None = None  # the task's status message


def outcome_of_result(era: Era, result: dict[str, Any]) -> Outcome:
    status = legacy_status_for_result(result) if era == "legacy" else COMPLETED
    return Outcome(status, result=result, message="the tool reported an error" if status == FAILED else None)


def outcome_of_error(exc: Exception) -> Outcome:
    """How a call that raised ends its row."""
    if isinstance(exc, UpstreamError):
        return Outcome(FAILED, error=exc.error, message=str(exc.error.get("message", "upstream error")))
    if isinstance(exc, McpError):
        return Outcome(FAILED, error=exc.to_error(), message=exc.message)
    log.error("task call crashed", exc_info=exc)
    return Outcome(
        FAILED, error={"code": INTERNAL_ERROR, "message": f"internal error: {exc}"}, message="internal error"
    )


class Run:
    """One upstream call under the engine: becomes a task when `task_id` is set."""

    def __init__(self, era: Era) -> None:
        self.era = era
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.written = anyio.Event()  # set once its outcome is in its row (or it has none to write)
        self.task_id: str | None = None
        self.adopted = anyio.Event()  # set once `task_id` names a committed row
        # Set once a restarted daemon could carry the upstream work on (its request or upstream
        # task is on the row), once nothing could (a plain call to a server that dies with the
        # daemon), or when the run ends: a legacy task's handle waits for it (create()).
        self.anchored = anyio.Event()
        self.upstream_task_id: str | None = None  # the upstream's own task, when the call is one
        self.upstream_session: str | None = None  # the upstream HTTP session it was made in (Task.upstream_session)
        self.upstream_request: str | None = None  # a plain call to a kept server (Task.upstream_request)
        self.outcome: Outcome | None = None
        self.result: dict[str, Any] | None = None
        self.exception: BaseException | None = None
        self.taskable = True  # False for a 2026 call that may never become a task
        self.pending_frames: list[Frame] = []  # frames recorded before the run became a task
        self.status_message: str | None = None  # an upstream task's, heard before the run was adopted
        # Also set when the run ends: lets one waiter sleep on a single event for "done or
        # something else happened" (host/parking.py) instead of a task per thing it waits for.
        self.also_wake: anyio.Event | None = None
        self.span: Any = None  # tracing (telemetry/tracing.py): the task's span, once it is a task
        self.started_ns = 0  # tracing: when the call began, where a call becomes a task later


class TaskEngine:
    def __init__(
        self,
        store: Store,
        *,
        frames: FrameLog | None = None,
        events_cap: int = 200_000,
        active: ActiveTasks | None = None,
        poll_floor_ms: int = 0,
        lease_ms: int | None = None,
        on_change: OnChange | None = None,
        resume: CarryOn | None = None,
        reclaim: CarryOn | None = None,
        calls_keep_ms: int = 600_000,
        on_claimed: OnClaimed | None = None,
    ) -> None:
        """`active` bounds running tasks (unbounded by default); `poll_floor_ms` slows polls of one
        task that come sooner (tasks/pacing.py); `lease_ms`, when daemons share the store, is the
        lease this one renews and after which it takes another's tasks over. `on_change` hears
        every change hosts are told of. After a restart or a take-over, `resume` follows a task's
        upstream task again and `reclaim` collects a plain call's reply from a kept stdio server.
        `on_claimed` hears the tasks settled (at start and at each take-over): the questions their
        previous daemon left open have nobody waiting for them."""
        self.store = store
        self.frames = frames or FrameLog()
        self.events_cap = events_cap
        self.tg: TaskGroup | None = None
        self.on_change = on_change
        self.resume = resume
        self.reclaim = reclaim
        self.on_claimed = on_claimed
        self.lease_ms = lease_ms
        self.calls_keep_ms = calls_keep_ms  # how long an ended plain call stays listed
        self._closing = anyio.Event()  # set by close(): upstream tasks are left running, to be resumed
        self._lease_ended = anyio.Event()  # another daemon stopped cleanly: claim without waiting
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._runs: set[Run] = set()
        self._changed: dict[str, anyio.Event] = {}
        # Every change of a task re-reads its row and writes under the task's lock: a cancel and a
        # completion racing each other leave exactly one terminal status (compare-and-set).
        # One lock per task, not one for all: changes of different tasks share a store batch.
        self._transition = KeyedLock()
        self.inputs = TaskInputs(self.change, store.get_task)
        self.active = active or ActiveTasks()
        self.pacer = PollPacer(poll_floor_ms, now_ms, self.wait_change)  # tasks/get pacing

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    @property
    def shares_store(self) -> bool:
        """Other daemons use the same store (PostgreSQL): some tasks and questions are theirs."""
        return self.lease_ms is not None

    async def start(self, tg: TaskGroup, keep: Keep | None = None) -> None:
        """Open the store, settle tasks a previous daemon left running, start writer and expiry
        (under `keep`, the daemon's rule for background work, when given)."""
        await self.store.open()
        self.tg = tg
        start_kept(tg, keep, "store-writer", self.store.run_writer)
        if self.lease_ms is not None:  # alive in `instances` before taking anything over
            await self.store.renew_lease(now_ms(), self.lease_ms)
        await self._settle(await self.store.claim_open(now_ms(), own=True))
        start_kept(tg, keep, "task-expiry", self._expire_loop)
        if self.lease_ms is not None:
            start_kept(tg, keep, "lease", self._lease_loop, self.lease_ms)

    async def _settle(self, claims: list[Claim]) -> None:
        """Carry on the tasks this daemon now answers for (its own after a restart, or a lost
        daemon's): an upstream task is polled again, a kept call's reply collected; a plain call
        that was cut fails, saying why."""
        for claim in claims:
            task = claim.task
            self.active.track(task)
            if task.upstream_task_id is not None and self.resume is not None:
                how, follow = "resuming upstream task", self.resume
            elif task.upstream_request is not None and self.reclaim is not None and claim.lost is None:
                how, follow = "collecting the reply to upstream request", self.reclaim
            else:
                if claim.lost is None:
                    reason = RESTARTED
                else:
                    reason = (STOPPED if claim.stopped else LOST).format(instance=claim.lost)
                error = {"code": INTERNAL_ERROR, "message": reason}
                log.warning("task %s: failed at start: %s", task.id, reason)
                failed = task.move(FAILED, now_ms(), message=reason, error=error)
                if failed.ttl_ms is None and failed.kind == "call":  # listed from its end, as any ended call
                    failed = replace(failed, ttl_ms=failed.updated_ms - failed.created_ms + self.calls_keep_ms)
                await self._save(task, failed, by="mcpx")
                continue
            if task.status == INPUT_REQUIRED:  # the previous daemon's questions died with it
                moved = task.move(WORKING, now_ms())
                await self._save(task, moved, by="mcpx")
                task = moved
            self._resume(task, how, follow)
        if claims and self.on_claimed is not None:
            await self.on_claimed(claims)

    async def _lease_loop(self, lease_ms: int) -> None:
        """Several daemons on one store: renew this one's lease, take over those that ran out."""
        while not self._closing.is_set():
            with anyio.move_on_after(lease_ms / 3000):
                await self._lease_ended.wait()
            self._lease_ended = anyio.Event()
            try:
                await self.store.renew_lease(now_ms(), lease_ms)
                await self._settle(await self.store.claim_open(now_ms(), own=False))
            except Exception as exc:  # noqa: BLE001 - the lease must outlive any one failure and retry
                if self._closing.is_set():
                    return
                log.warning("lease renewal or take-over failed: %s", str(exc) or type(exc).__name__)

    def lease_ended(self, instance: str) -> None:
        """Another daemon on the store stopped cleanly: take over its tasks now, not at the next renewal."""
        log.info("instance %s stopped: claiming its unfinished tasks", instance)
        self._lease_ended.set()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: object) -> None:
        """Run `fn(*args)` in the background under the daemon's task group."""
        assert self.tg is not None, "engine not started"
        self.tg.start_soon(fn, *args)

    # ---- rows and their events -----------------------------------------------------------
    async def _save(
        self, before: Task | None, after: Task, *, by: str | None = None, extra: Sequence[Event] = ()
    ) -> None:
        await self.store.put_task(after, [*extra, *changes.transition(before, after, by)])
        self.active.track(after)
        event = self._changed.pop(after.id, None)
        if event is not None:
            event.set()
        # Hosts hear of changes, not of a task's creation (its handle told them that).
        if self.on_change is not None and before is not None and before.shown != after.shown:
            try:
                await self.on_change(after)
            except Exception:  # a listener (a host's stream) must not undo a committed change
                log.warning("task %s: change listener failed", after.id, exc_info=True)

    async def change(
        self, task_id: str, update: Callable[[Task], Task | None], *, by: str | None = None, extra: Sequence[Event] = ()
    ) -> Task | None:
        """Compare-and-set: `update` sees the committed row and returns the new one (or None to
        leave it). Returns the row written, or None when nothing was."""
        async with self._transition.hold(task_id):
            current = await self.store.get_task(task_id)
            if current is None:
                return None
            new = update(current)
            if new is None or new == current:
                return None
            await self._save(current, new, by=by, extra=extra)
            return new

    # ---- creating tasks ------------------------------------------------------------------
    def _resume(self, task: Task, how: str, follow: CarryOn) -> None:
        """Keep following the upstream work this row names; its outcome lands as usual. The
        callback waits for the upstream to be ready (the pool starts after the engine)."""
        run = Run(task.era)
        run.task_id = task.id
        run.upstream_task_id = task.upstream_task_id
        run.upstream_request = task.upstream_request
        log.info("task %s: %s %s on %s", task.id, how, task.upstream_task_id or task.upstream_request, task.upstream)

        async def carry_on() -> dict[str, Any]:
            try:
                return await follow(task, self)
            except (UpstreamError, McpError) as exc:  # the task fails as usual; the log says why
                reason = exc.error.get("message") if isinstance(exc, UpstreamError) else exc.message
                log.warning("task %s: could not carry on after the restart (%s): %s", task.id, how, reason)
                raise

        self._start(run, carry_on, task)

    async def set_upstream_task(self, run: Run, upstream_task_id: str, session: str | None = None) -> None:
        """The call under `run` became an upstream task (made in upstream HTTP session `session`,
        if any): remember its id, durably once the run is a task (so a restarted daemon, or another
        one sharing the store, resumes it instead of failing it)."""
        run.upstream_task_id = upstream_task_id
        run.upstream_session = session
        try:
            if run.task_id is not None:
                await self._store_upstream_id(run.task_id, upstream_task_id, session)
        finally:
            run.anchored.set()

    async def set_upstream_request(self, run: Run, ref: str) -> None:
        """A plain call under `run` went to a kept server as request `ref`: remembered on the row,
        so a restarted daemon collects its reply instead of failing the task. Never raises: the
        call goes on whether or not the row took it."""
        run.upstream_request = ref
        if run.task_id is None:
            run.anchored.set()
            return  # adopt() copies it

        def update(current: Task) -> Task | None:
            return None if current.terminal else replace(current, upstream_request=ref)

        try:
            await self.change(run.task_id, update)
        except Exception as exc:  # noqa: BLE001 - only a restart could lose the reply; the call runs on
            log.warning("task %s: could not record its upstream request: %s", run.task_id, exc)
        finally:
            run.anchored.set()

    async def store_upstream_task(self, task_id: str, upstream_task_id: str) -> None:
        """A task's cut call turned out (after a restart) to have become this upstream task."""
        await self._store_upstream_id(task_id, upstream_task_id)

    async def store_upstream_request(self, task_id: str, ref: str) -> None:
        """A carried-on task's call, which its kept server never got, went out again as `ref`."""

        def update(current: Task) -> Task | None:
            return None if current.terminal else replace(current, upstream_request=ref)

        await self.change(task_id, update)

    async def _store_upstream_id(self, task_id: str, upstream_task_id: str, session: str | None = None) -> None:
        def update(current: Task) -> Task | None:
            if current.terminal:
                return None
            return replace(current, upstream_task_id=upstream_task_id, upstream_session=session)

        await self.change(task_id, update)

    async def create(
        self,
        *,
        owner: str,
        connection: str | None,
        upstream: str,
        tool: str,
        arguments: dict[str, Any],
        era: Era,
        ttl_ms: int | None,
        poll_ms: int,
        call: Call,
        by: str | None = None,
        anchor_wait_s: float = 0.0,
        why: str | None = None,
    ) -> Task:
        """The row is committed before this returns; only then does the work start. With
        `anchor_wait_s`, it also waits (that long at most) until a restarted daemon could carry the
        work on (Run.anchored): a handle given out earlier would name work a SIGKILL could cut
        before it reached the upstream, which the next daemon can only fail."""
        task = self.new_record(
            owner=owner,
            connection=connection,
            upstream=upstream,
            tool=tool,
            arguments=arguments,
            era=era,
            ttl_ms=ttl_ms,
            poll_ms=poll_ms,
            why=why,
        )
        self.active.reserve(owner, task.id)
        try:
            await self._save(None, task, by=by)
        except BaseException:
            self.active.forget(task.id)
            raise
        run = Run(task.era)
        run.task_id = task.id
        self._start(run, lambda: call(task), task)
        if anchor_wait_s > 0:
            with anyio.move_on_after(anchor_wait_s):
                await run.anchored.wait()
        return task

    def new_record(
        self,
        *,
        owner: str,
        connection: str | None,
        upstream: str,
        tool: str,
        arguments: dict[str, Any],
        era: Era,
        ttl_ms: int | None,
        poll_ms: int,
        why: str | None = None,
    ) -> Task:
        t = now_ms()
        return Task(
            new_task_id(),
            WORKING,
            t,
            t,
            ttl_ms,
            poll_ms,
            owner,
            upstream,
            tool,
            arguments,
            era,
            connection=connection,
            why=why,
        )

    def begin(self, era: Era, call: Callable[[], Awaitable[dict[str, Any]]]) -> Run:
        """Start a call that may or may not become a task (2026: the server decides, later)."""
        run = Run(era)
        self._start(run, call)
        return run

    async def adopt(self, run: Run, task: Task, *, by: str | None = None) -> Task:
        """Turn a running call into a task: commit the row, then let the outcome land in it."""
        if run.upstream_task_id is not None:
            task = replace(task, upstream_task_id=run.upstream_task_id, upstream_session=run.upstream_session)
        if run.upstream_request is not None:
            task = replace(task, upstream_request=run.upstream_request)
        if run.status_message is not None:
            task = replace(task, status_message=run.status_message)
        await self._save(None, task, by=by)
        run.task_id = task.id
        run.adopted.set()
        if tracing.tracer is not None:  # the task's life began with its call
            run.span = tracing.task_span(task, run.started_ns or None)
            if run.done.is_set():
                tracing.end_task(run.span, run.outcome)
        if not run.done.is_set():  # a run that ended while the row was written has nothing to cancel
            self._scopes[task.id] = run.scope
        self.frames.add(task.id, run.pending_frames)
        run.pending_frames = []
        if run.upstream_task_id is not None and run.upstream_task_id != task.upstream_task_id:
            # It arrived during the put.
            await self._store_upstream_id(task.id, run.upstream_task_id, run.upstream_session)
        if run.upstream_request is not None and run.upstream_request != task.upstream_request:
            await self.set_upstream_request(run, run.upstream_request)  # likewise
        if run.done.is_set() and run.outcome is not None:  # it finished while the row was written
            await self._finish(task.id, run.outcome)
        return task

    # ---- running -------------------------------------------------------------------------
    def _start(self, run: Run, call: Callable[[], Awaitable[dict[str, Any]]], task: Task | None = None) -> None:
        assert self.tg is not None
        if run.task_id is not None:
            self._scopes[run.task_id] = run.scope
            run.adopted.set()
        if tracing.tracer is not None:
            if task is None:
                run.started_ns = tracing.now_ns()
            else:  # a task from the start: its span is the parent of its upstream calls
                run.span = tracing.task_span(task)
                with tracing.current(run.span):
                    self._spawn_run(run, call)
                return
        self._spawn_run(run, call)

    def _spawn_run(self, run: Run, call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        assert self.tg is not None
        # The call sees its Run (current_run()): that is how the dispatcher knows a call runs
        # under the engine and may become an upstream task. The new task copies this context.
        token = _CURRENT_RUN.set(run)
        sink = frame_log.current_sink.set(self._sink(run))
        try:
            self.tg.start_soon(self._run, run, call)
        finally:
            frame_log.current_sink.reset(sink)
            _CURRENT_RUN.reset(token)

    def _sink(self, run: Run) -> frame_log.FrameSink | None:
        """Where the run's upstream frames go: its task's frame log (held back until adopted)."""
        log_ = self.frames

        def record(side: frame_log.Side, direction: frame_log.Direction, frame: dict[str, Any]) -> None:
            if not run.taskable:
                return
            if run.task_id is not None:
                log_.record(run.task_id, side, direction, frame)
            elif len(run.pending_frames) < log_.per_task:
                run.pending_frames.append(frame_log.make_frame(side, direction, frame, log_.max_bytes))

        return record

    async def _run(self, run: Run, call: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._runs.add(run)
        try:
            with run.scope:
                try:
                    result = await call()
                    run.result = result
                    run.outcome = outcome_of_result(run.era, result)
                except Exception as exc:  # noqa: BLE001 - the task fails; the daemon does not
                    run.exception = exc
                    run.outcome = outcome_of_error(exc)
        finally:
            if run.task_id is not None:
                self._scopes.pop(run.task_id, None)
            run.done.set()
            if run.span is not None:
                tracing.end_task(run.span, run.outcome)
            run.anchored.set()
            if run.also_wake is not None:
                run.also_wake.set()
        try:
            if run.outcome is not None and run.task_id is not None:
                with anyio.CancelScope(shield=True):
                    await self._finish(run.task_id, run.outcome)
        finally:
            # Only now: close() waits for the runs it finds here, their outcomes written included
            # (a result the upstream gave as the daemon stops must reach the row, not be "lost").
            self._runs.discard(run)
            run.written.set()

    async def _finish(self, task_id: str, outcome: Outcome) -> None:
        def update(current: Task) -> Task | None:
            if current.terminal:
                return None  # cancelled (sticky) meanwhile
            return current.move(
                outcome.status, now_ms(), message=outcome.message, result=outcome.result, error=outcome.error
            )

        await self._write_outcome(task_id, update)

    async def _write_outcome(self, task_id: str, update: Callable[[Task], Task | None]) -> None:
        # A full disk or a locked database must not lose an outcome the upstream gave: it is
        # written again until it lands (or the daemon stops; then the next one settles the task).
        delay = FINISH_RETRY_S
        while True:
            try:
                await self.change(task_id, update)
                return
            except StoreError as exc:
                if self.closing:
                    log.error("task %s: could not record its outcome before the daemon stopped: %s", task_id, exc)
                    return
                log.error("task %s: could not record its outcome (%s); trying again in %g s", task_id, exc, delay)
            with anyio.move_on_after(delay):
                await self._closing.wait()
            delay = min(delay * 2, FINISH_RETRY_MAX_S)

    # ---- a host's plain calls, listed for operators (tasks/plain_calls.py) ----------------
    async def open_call(self, row: Task, scope: anyio.CancelScope, *, by: str | None) -> None:
        """A plain call still running is listed: its row, and its scope for an operator's cancel."""
        await self._save(None, row, by=by)
        self._scopes[row.id] = scope

    async def finish_call(self, row_id: str, outcome: Outcome) -> None:
        """A listed plain call ended: its outcome, unless an operator's cancel came first, and the
        row's lifetime, which runs from now (a running call never expires from the list)."""
        self._scopes.pop(row_id, None)

        def update(current: Task) -> Task | None:
            ended = current
            if not current.terminal:
                ended = current.move(
                    outcome.status, now_ms(), message=outcome.message, result=outcome.result, error=outcome.error
                )
            if ended.ttl_ms is None:
                ended = replace(ended, ttl_ms=ended.updated_ms - ended.created_ms + self.calls_keep_ms)
            return ended

        await self._write_outcome(row_id, update)

    async def set_status_message(self, task_id: str, message: str | None) -> str | None:
        """A running task's status message changed (an upstream task's own, or mcpx's); returns
        the message it had before."""
        return await self._status_message(task_id, message, lambda _: True)

    async def restore_status_message(self, task_id: str, told: str, before: str | None) -> None:
        """Put back what a running task said `before` mcpx told its host `told`, unless its
        message changed meanwhile (that one stands)."""
        await self._status_message(task_id, before, lambda current: current == told)

    async def _status_message(
        self, task_id: str, message: str | None, when: Callable[[str | None], bool]
    ) -> str | None:
        before: list[str | None] = []

        def update(current: Task) -> Task | None:
            before.append(current.status_message)
            if current.terminal or current.status_message == message or not when(current.status_message):
                return None
            return replace(current, status_message=message, updated_ms=now_ms())

        await self.change(task_id, update)
        return before[-1] if before else None

    # ---- reading -------------------------------------------------------------------------
    async def get(self, task_id: str) -> Task | None:
        task = await self.store.get_task(task_id)
        expires = task.expires_ms() if task is not None else None
        if expires is not None and expires <= now_ms():
            return None  # past its TTL: gone, even if the sweeper has not run yet
        return task

    async def wait_change(self, task_id: str) -> None:
        event = self._changed.setdefault(task_id, anyio.Event())
        await event.wait()

    async def wait_terminal(self, task_id: str) -> Task | None:
        while True:
            # Registered before the read, so a change committed while the row is read is not missed.
            changed = self._changed.setdefault(task_id, anyio.Event())
            task = await self.get(task_id)
            if task is None or task.terminal:
                ended = self._changed.pop(task_id, None)  # nothing more will change: keep no event for it
                if ended is not None:
                    ended.set()  # (any other waiter re-reads and sees the same)
                return task
            with anyio.move_on_after(1.0):  # a periodic re-read also catches expiry
                await changed.wait()

    async def list_owner(self, owner: str, after: tuple[int, str] | None, limit: int) -> list[Task]:
        return await self.store.list_owner(owner, after, limit, now_ms=now_ms())

    # ---- cancelling ----------------------------------------------------------------------
    async def cancel(self, task: Task, message: str = "cancelled by the host", *, by: str | None = None) -> Task | None:
        """The record is `cancelled` (and stays so) before this returns, and the work is stopped;
        None when the task had already ended (the caller's era decides what that means).
        (2026 allows any honest end state; here the stop always succeeds, so it is `cancelled`.)"""
        requested = [changes.cancel_requested(task, by)] if by is not None else []

        def update(current: Task) -> Task | None:
            return None if current.terminal else current.move(CANCELLED, now_ms(), message=message)

        done = await self.change(task.id, update, by=by, extra=requested)
        if done is None:
            if requested:
                await self.store.append(requested)  # asked, even if too late: the audit log says so
            return None
        self.stop_work(task.id)
        await self.store.forward(task.id, "cancel")  # the work may be running on another daemon
        return done

    def stop_work(self, task_id: str) -> None:
        scope = self._scopes.get(task_id)
        if scope is not None:
            scope.cancel()  # the upstream call is cancelled upstream by the session

    # ---- questions inside a task (delegated: tasks/inputs.py) ----------------------------
    async def ask(self, task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        return await self.inputs.ask(task_id, requests)

    async def answer(self, task_id: str, responses: dict[str, Any]) -> set[str]:
        return await self.inputs.answer(task_id, responses)

    def asking(self, task_id: str) -> AbstractAsyncContextManager[None]:
        return self.inputs.asking(task_id)

    # ---- expiry and shutdown -------------------------------------------------------------
    async def _expire_loop(self) -> None:
        sweeps = 0
        while not self._closing.is_set():
            await anyio.sleep(EXPIRY_EVERY_S)
            try:
                for task in await self.store.expired(now_ms()):
                    # Under the task's lock, as every change is: a change racing the sweep would
                    # otherwise write the row back (put_task replaces) after it was deleted.
                    async with self._transition.hold(task.id):
                        self.stop_work(task.id)
                        await self.store.delete_task(task.id, [changes.expired(task.id, task.connection)])
                    self.active.forget(task.id)
                    event = self._changed.pop(task.id, None)
                    if event is not None:
                        event.set()
                if sweeps % TRIM_EVERY == 0:  # the first sweep too: a lowered cap holds from the start
                    await self.store.trim_events(self.events_cap)
                sweeps += 1
            except Exception as exc:  # noqa: BLE001 - the sweep must outlive any one failure and retry
                if self._closing.is_set():
                    return  # the store closed under the sweep: a shutdown, not a failure
                log.warning("task expiry sweep failed: %s", str(exc) or type(exc).__name__)

    async def close(self, *, hand_over: bool = True) -> None:
        """Stop every run, let it finish its clean-up (bounded), then close the store. A run cut
        here stays unfinished in its row: the next daemon resumes it or reports the restart. On a
        shared store, `hand_over` ends the lease so another daemon takes the rows at once; without
        it (kept upstreams wait for this instance's next run) the lease runs out as after a crash."""
        self._closing.set()
        for scope in list(self._scopes.values()):
            scope.cancel()
        for run in list(self._runs):
            run.scope.cancel()
        with anyio.move_on_after(CLOSE_GRACE_S, shield=True):
            for run in list(self._runs):
                await run.written.wait()
        if self.shares_store and hand_over:
            with anyio.CancelScope(shield=True):
                try:
                    await self.store.end_lease(now_ms())
                except Exception as exc:  # noqa: BLE001 - then the lease runs out as after a crash
                    log.warning("could not end the lease: %s", str(exc) or type(exc).__name__)
        await self.store.close()
