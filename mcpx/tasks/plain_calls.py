"""A host's plain tools/call, listed for operators once it runs long or asks a question.

Most hosts never ask for a task, yet their long calls are what an operator watches and may have
to stop. A plain call still running after `calls.showAfterMs`, or one whose upstream asks a
question, gets a row of kind "call" (owner `call:<connection>`, which no host's tasks/* ever
matches): listed wherever tasks are, cancellable by an operator, ended with the call's outcome.

A call that ends sooner costs a dict insert and delete: one sweeper, not a timer per call, turns
the calls still running into rows, oldest first.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..protocol.errors import INTERNAL_ERROR, UpstreamUnavailable
from ..protocol.revisions import Era
from ..records.task import CANCELLED, FAILED, WORKING, Task, new_task_id
from .engine import Outcome, TaskEngine, now_ms, outcome_of_error, outcome_of_result
from .why import asked_a_question, ran_long

log = logging.getLogger("mcpx.calls")

BY_HOST = "cancelled by the host"
STATUS_EVERY_MS = 250  # a call's progress reaches its row at most this often


@dataclass(frozen=True)
class CallInfo:
    """What the row of a plain call says about it."""

    connection: str  # the host connection's registry id
    upstream: str
    tool: str
    arguments: dict[str, Any]
    era: Era

    @property
    def owner(self) -> str:
        return f"call:{self.connection}"


class OperatorCancelled(Exception):
    """An operator cancelled the call; `message` says who (the row's status message)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LiveCall:
    """One plain call in flight."""

    __slots__ = ("_calls", "_told_ms", "info", "message", "row_id", "scope", "started_ms", "written")

    def __init__(self, info: CallInfo, calls: PlainCalls) -> None:
        self.info = info
        self.started_ms = now_ms()
        self.scope = anyio.CancelScope()  # an operator's cancel (engine.stop_work) cancels it
        self.row_id: str | None = None
        self.written: anyio.Event | None = None  # made when its row is being written; set once done
        self.message: str | None = None  # the latest progress message from the upstream
        self._told_ms = 0
        self._calls = calls

    async def row(self, why: str | None = None) -> str | None:
        """The call's row id, written now if it has none yet (e.g. a question is being asked);
        `why` says why it is listed (tasks/why.py; default: it asked a question)."""
        return await self._calls.list_now(self, why or asked_a_question())

    def progress(self, params: dict[str, Any]) -> None:
        """The upstream's progress: the row's status message (rate-limited)."""
        message = progress_text(params)
        if message is None or message == self.message:
            return
        self.message = message
        now = now_ms()
        if self.row_id is not None and now - self._told_ms >= STATUS_EVERY_MS:
            self._told_ms = now
            self._calls.engine.spawn(self._calls.tell_status, self.row_id, message)


def progress_text(params: dict[str, Any]) -> str | None:
    """A status line from notifications/progress params: its message, else `progress/total`."""
    message = params.get("message")
    if isinstance(message, str) and message:
        return message
    progress, total = params.get("progress"), params.get("total")
    if not isinstance(progress, (int, float)) or isinstance(progress, bool):
        return None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total:
        return f"progress {progress:g}/{total:g}"
    return f"progress {progress:g}"


class PlainCalls:
    def __init__(self, engine: TaskEngine, *, show_after_ms: int, poll_ms: int) -> None:
        self.engine = engine
        self.show_after_ms = show_after_ms
        self.poll_ms = poll_ms
        self._unlisted: dict[int, LiveCall] = {}  # in flight, no row yet; oldest first
        self._keys = itertools.count()
        self._wake = anyio.Event()
        self._idle = False  # the sweeper waits for a call (not for the oldest one to come due)
        self.stop_reason: str | None = None  # set when the daemon drains: calls cut from now on say so

    async def run(self, info: CallInfo, call: Callable[[LiveCall], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run `call`, listed if it runs long. Raises OperatorCancelled when an operator stopped it."""
        live = LiveCall(info, self)
        key = next(self._keys)
        self._unlisted[key] = live
        if self._idle:
            self._idle = False
            self._wake.set()
        try:
            with live.scope:
                result = await call(live)
        except BaseException as exc:
            self._unlisted.pop(key, None)
            if live.written is not None:
                outcome = outcome_of_error(exc) if isinstance(exc, Exception) else self._cut()
                with anyio.CancelScope(shield=True):
                    await self._end(live, outcome)
            raise
        self._unlisted.pop(key, None)
        if live.scope.cancelled_caught:
            await self._stopped(live)
        if live.written is not None:
            with anyio.CancelScope(shield=True):
                await self._end(live, outcome_of_result(info.era, result))
        return result

    def stopping(self, reason: str) -> None:
        """The daemon drains: the calls it cuts end their rows failed, saying why (not "cancelled by the host")."""
        self.stop_reason = reason

    def _cut(self) -> Outcome:
        if self.stop_reason is None:
            return Outcome(CANCELLED, message=BY_HOST)
        return Outcome(FAILED, error={"code": INTERNAL_ERROR, "message": self.stop_reason}, message=self.stop_reason)

    async def _stopped(self, live: LiveCall) -> None:
        """The call's scope was cancelled from its row: an operator's cancel, or the daemon stopping."""
        row = await self.engine.get(live.row_id) if live.row_id is not None else None
        if row is None or row.status != CANCELLED:
            # Left open: the next daemon fails the row, saying it restarted.
            raise UpstreamUnavailable("the mcpx daemon stopped while this call was running")
        with anyio.CancelScope(shield=True):
            await self._end(live, Outcome(CANCELLED, message=row.status_message))
        raise OperatorCancelled(row.status_message or "cancelled by an operator")

    async def _end(self, live: LiveCall, outcome: Outcome) -> None:
        assert live.written is not None
        await live.written.wait()
        if live.row_id is not None:
            await self.engine.finish_call(live.row_id, outcome)

    async def list_now(self, live: LiveCall, why: str) -> str | None:
        if live.written is not None:
            await live.written.wait()
            return live.row_id
        live.written = anyio.Event()
        info = live.info
        row = Task(
            new_task_id(),
            WORKING,
            live.started_ms,
            now_ms(),
            None,  # a running call is never swept; its lifetime starts when it ends (finish_call)
            self.poll_ms,
            info.owner,
            info.upstream,
            info.tool,
            info.arguments,
            info.era,
            status_message=live.message,
            connection=info.connection,
            kind="call",
            why=why,
        )
        try:
            await self.engine.open_call(row, live.scope, by=f"host:{info.connection}")
            live.row_id = row.id
        except Exception as exc:  # noqa: BLE001 - the call goes on unlisted; the log says why
            log.warning("could not list a plain call to %s on %s: %s", info.tool, info.upstream, exc)
        finally:
            live.written.set()
        return live.row_id

    async def tell_status(self, row_id: str, message: str) -> None:
        try:
            await self.engine.set_status_message(row_id, message)
        except Exception as exc:  # noqa: BLE001 - progress is advisory; the call goes on
            log.debug("call %s: status message not written: %s", row_id, exc)

    async def sweep(self) -> None:
        """For the daemon's life: list every call still running `show_after_ms` after it began."""
        while True:
            if not self._unlisted:
                self._wake = anyio.Event()
                self._idle = True
                await self._wake.wait()
                continue
            key, oldest = next(iter(self._unlisted.items()))
            wait_ms = oldest.started_ms + self.show_after_ms - now_ms()
            if wait_ms > 0:
                await anyio.sleep(wait_ms / 1000)
                continue
            del self._unlisted[key]
            await self.list_now(oldest, ran_long(self.show_after_ms))
