"""Questions inside a task: the task's outstanding `inputRequests` (2026) or its `input_required`
status while its 2025 host is asked something.

Keys are chosen by the caller (mcpx uses the broker's question ids, unique for the task's whole
life as tasks.md:350 asks); a host answers any subset with `tasks/update`, unknown or settled keys
are ignored (tasks.md:379). The task is `input_required` exactly while something is outstanding.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio

from ..protocol.errors import InternalError
from ..records.task import INPUT_REQUIRED, WORKING, Status, Task

# The engine's compare-and-set of a task row (TaskEngine.change), and a read of the committed row.
Change = Callable[[str, Callable[[Task], Task | None]], Awaitable[Task | None]]
GetTask = Callable[[str], Awaitable[Task | None]]
WAITING_FOR_INPUT = "waiting for input"


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Waiter:
    def __init__(self, keys: set[str]) -> None:
        self.remaining = set(keys)
        self.answers: dict[str, Any] = {}
        self.done = anyio.Event()


class TaskInputs:
    def __init__(self, change: Change, get_task: GetTask) -> None:
        self._change = change
        self._get_task = get_task
        self._waiting: dict[str, _Waiter] = {}  # outstanding key -> its asker

    async def ask(self, task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        """Add `requests` (key -> input request) to the task's outstanding inputRequests, wait until
        every one is answered, and return the answers by the same keys."""
        waiter = _Waiter(set(requests))
        for key in requests:  # before the row is visible, so no answer can arrive unheard
            self._waiting[key] = waiter

        def add(current: Task) -> Task | None:
            if current.terminal:
                return None
            moved = current.move(INPUT_REQUIRED, _now_ms(), message=WAITING_FOR_INPUT)
            return replace(moved, input_requests={**current.input_requests, **requests})

        try:
            if await self._change(task_id, add) is None:
                raise InternalError(f"task {task_id} ended before its question could be asked")
            if waiter.remaining:
                await waiter.done.wait()
        finally:
            with anyio.CancelScope(shield=True):
                for key in requests:
                    self._waiting.pop(key, None)
                await self._withdraw(task_id, set(requests))
        return waiter.answers

    async def answer(self, task_id: str, responses: dict[str, Any]) -> set[str]:
        """Record answers for outstanding keys; returns the keys it settled."""
        task = await self._get_task(task_id)
        if task is None or task.terminal:
            return set()
        settled: set[str] = set()
        for key, value in responses.items():
            waiter = self._waiting.get(key)
            if key not in task.input_requests or waiter is None or key not in waiter.remaining:
                continue
            waiter.answers[key] = value
            waiter.remaining.discard(key)
            settled.add(key)
            if not waiter.remaining:
                waiter.done.set()
        if settled:
            await self._withdraw(task_id, settled)
        return settled

    def outstanding(self, key: str) -> bool:
        return key in self._waiting

    async def _withdraw(self, task_id: str, keys: set[str]) -> None:
        """These keys are settled (answered, or their asker gave up): no longer outstanding."""

        def remove(current: Task) -> Task | None:
            if current.terminal:
                return None
            left = {k: v for k, v in current.input_requests.items() if k not in keys}
            if left == current.input_requests:
                return None
            if left:
                return replace(current, input_requests=left, updated_ms=_now_ms())
            return current.move(WORKING, _now_ms())

        await self._change(task_id, remove)

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
        def update(current: Task) -> Task | None:
            if current.terminal or current.status == status:
                return None
            return current.move(status, _now_ms(), message=WAITING_FOR_INPUT if status == INPUT_REQUIRED else None)

        await self._change(task_id, update)
