"""Polls of one task faster than `tasks.pollFloorMs` are slowed, never refused: the extension lets
a server slow a host that polls sooner than `pollIntervalMs`, and a refusal (a 429, an error)
would break hosts that poll in a tight loop. A paced poll is answered when the gap has passed,
or at once when the task changes meanwhile, so pacing never hides news."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

import anyio

from ..records.task import Task

TRACKED = 10_000  # tasks whose last poll is remembered (the least recently polled go first)


def poll_wait_ms(last_ms: int | None, now_ms: int, floor_ms: int) -> int:
    """How long a poll at `now_ms` waits, the last one of the same task having been answered at
    `last_ms`: the rest of the floor, or nothing."""
    if last_ms is None or floor_ms <= 0:
        return 0
    return max(0, last_ms + floor_ms - now_ms)


class PollPacer:
    def __init__(
        self, floor_ms: int, clock_ms: Callable[[], int], wait_change: Callable[[str], Awaitable[None]]
    ) -> None:
        self.floor_ms = floor_ms
        self._clock_ms = clock_ms
        self._wait_change = wait_change
        self._last: OrderedDict[str, int] = OrderedDict()  # task id -> when its last poll is answered
        self.paced = 0  # polls slowed so far (for tests and status)

    async def pace(self, task: Task) -> bool:
        """Wait as this poll of `task` must; True when it waited (the caller reads the task again)."""
        now = self._clock_ms()
        wait = poll_wait_ms(self._last.get(task.id), now, self.floor_ms)
        self._last[task.id] = now + wait
        self._last.move_to_end(task.id)
        while len(self._last) > TRACKED:
            self._last.popitem(last=False)
        if not wait:
            return False
        self.paced += 1
        with anyio.move_on_after(wait / 1000):
            if task.terminal:
                await anyio.sleep_forever()  # nothing more will change
            await self._wait_change(task.id)
        return True
