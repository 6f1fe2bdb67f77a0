"""The daemon's long-lived background work, under one rule (docs/daemon-behavior.md, "Background work").

Every loop the daemon root starts (the notifier, metrics, retention, the registry's upkeep, the config
watcher, signals, the store's writer, task expiry, the upstreams' supervisors, ...) runs under
`Background.keep`. An exception that escapes one is logged at ERROR with its traceback, recorded as a
`daemon.background_failed` event, and counted in `/v1/status` (`background`); then the loop is started
again after a pause (0.5 s, doubling to 30 s while it keeps failing, back to 0.5 s once it ran a minute),
or, for one-shot work (`restart=False`), dropped. Nothing of it reaches the daemon's task group, so
serving goes on.

Tests inject a fault into a named loop while it runs (MCPX_TEST_BACKGROUND_FAULT=<folder>, read by
cli/main.py as MCPX_TEST_COMMIT_FAULT is): a file named after the loop in that folder makes the loop
fail once, as an exception of its own would (it is interrupted where it waits, the file removed).
Without the variable there is no hook at all.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ..events.bus import Event

log = logging.getLogger("mcpx.daemon")

FAULT_ENV = "MCPX_TEST_BACKGROUND_FAULT"
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 30.0
HEALTHY_AFTER_S = 60.0  # a loop that ran this long before failing starts again at the first pause
_FAULT_POLL_S = 0.05

Record = Callable[[Sequence[Event]], Awaitable[object]]  # the store's append


class InjectedFault(RuntimeError):
    """The test-only fault (FAULT_ENV)."""


@dataclass
class Failures:
    """One piece of background work that failed at least once, as /v1/status shows it."""

    task: str
    failures: int = 0
    last_error: str = ""
    last_failed_ms: int = 0
    state: str = "restarting"  # restarting | running | dropped

    def wire(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "failures": self.failures,
            "lastError": self.last_error,
            "lastFailedMs": self.last_failed_ms,
            "state": self.state,
        }


class Background:
    def __init__(
        self,
        record: Record,
        *,
        fault_folder: Path | None = None,
        clock: Callable[[], float] = time.time,
        first_pause_s: float = FIRST_PAUSE_S,
    ) -> None:
        self._record = record
        self._faults = fault_folder
        self._clock = clock
        self._first_pause = first_pause_s
        self._tg: TaskGroup | None = None
        self.failed: dict[str, Failures] = {}

    @classmethod
    def fault_folder_from_env(cls) -> Path | None:
        folder = os.environ.get(FAULT_ENV)
        return Path(folder) if folder else None

    def run_under(self, tg: TaskGroup) -> None:
        """Work is started on the daemon's task group from now on."""
        self._tg = tg

    def keep(self, name: str, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, restart: bool = True) -> None:
        """Run `fn(*args)` under the rule above (mcpx/events/keep.py)."""
        assert self._tg is not None, "background not started"
        self._tg.start_soon(self._supervise, name, fn, args, restart, name=name)

    async def keep_started(self, name: str, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """As `keep`, for work that says when it is ready (`task_status.started()`): returns then."""
        assert self._tg is not None, "background not started"
        await self._tg.start(self._supervise, name, fn, args, True, True, name=name)

    def report(self, name: str, exc: BaseException) -> None:
        """A failure that work caught itself and went on from, dropping what it was doing (a
        notification sink's event): logged and recorded under the same rule."""
        self._failed(name, _cause(exc), None)

    async def _supervise(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, Any]],
        args: tuple[Any, ...],
        restart: bool,
        says_started: bool = False,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        pause = self._first_pause
        pending = [task_status] if says_started else []  # told once, by the first run (or its failure)

        def started(value: object = None) -> None:
            while pending:
                pending.pop().started()

        relay = _Started(started)
        while True:
            began = time.monotonic()
            try:
                if says_started:
                    await self._run(name, fn, (*args,), {"task_status": relay})
                else:
                    await self._run(name, fn, args, {})
                return  # it ended of itself: nothing more to do
            except Exception as exc:  # noqa: BLE001 - the rule: no background failure ends serving
                started()
                cause = _cause(exc)
                if time.monotonic() - began >= HEALTHY_AFTER_S:
                    pause = self._first_pause
                self._failed(name, cause, pause if restart else None)
            if not restart:
                return
            await anyio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
            self.failed[name].state = "running"

    async def _run(
        self, name: str, fn: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...], kw: dict[str, Any]
    ) -> None:
        if self._faults is None:
            await fn(*args, **kw)
            return
        async with anyio.create_task_group() as tg:  # tests only: a fault injected while it runs
            tg.start_soon(self._fault_point, name)
            await fn(*args, **kw)
            tg.cancel_scope.cancel()

    async def _fault_point(self, name: str) -> None:
        assert self._faults is not None
        trigger = self._faults / name.replace("/", "_")
        while True:
            await anyio.sleep(_FAULT_POLL_S)
            try:
                trigger.unlink()
            except FileNotFoundError:
                continue
            raise InjectedFault(f"a fault injected into {name} through {FAULT_ENV}")

    def _failed(self, name: str, exc: BaseException, pause: float | None) -> None:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        then = f"starting it again in {pause:g} s" if pause is not None else "what it was doing is dropped"
        log.error("background work %s failed: %s; %s", name, error, then, exc_info=exc)
        entry = self.failed.setdefault(name, Failures(name))
        entry.failures += 1
        entry.last_error = error
        entry.last_failed_ms = int(self._clock() * 1000)
        entry.state = "restarting" if pause is not None else "dropped"
        data = {"task": name, "error": error, "failures": entry.failures, "action": entry.state}
        if pause is not None:
            data["retryInS"] = pause
        # Recorded aside: the failed work may be the store's own writer, which this waits for.
        if self._tg is not None:
            self._tg.start_soon(self._record_event, Event("daemon.background_failed", data, by="mcpx"))

    async def _record_event(self, event: Event) -> None:
        try:
            with anyio.fail_after(30):
                await self._record([event])
        except Exception as exc:  # noqa: BLE001 - the log line above already says it; the store may be what failed
            log.error("background failure event not recorded: %s", str(exc) or type(exc).__name__)

    def status(self) -> list[dict[str, Any]]:
        """Each piece of background work that failed since the daemon started (/v1/status `background`)."""
        return [f.wire() for f in self.failed.values()]


class _Started:
    """A TaskStatus for one run of restartable work: the first run's `started()` reaches the caller."""

    def __init__(self, started: Callable[[object], None]) -> None:
        self.started = started


def _cause(exc: BaseException) -> BaseException:
    """The exception itself, out of the task groups that wrapped it one by one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
