"""One bounded outbound channel per host stream, drained by its own writer task.

What mcpx sends a host (a reply, a question, a task status, progress, a log line) is queued here
and never awaited by whoever sends it: an upstream session's reader relaying progress, or a task
change announced under the task's lock, must not wait for a host that stopped reading. A host
that falls behind loses progress and log notifications first (counted); a reply, a request or
another notification is never dropped: a host that cannot take them within the bounds is a slow
consumer, and its stream is closed (the caller decides what that means for the connection).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

log = logging.getLogger("mcpx.host")

# Advisory frames, dropped first when a host falls behind.
DROPPABLE = frozenset({"notifications/progress", "notifications/message"})
SOFT_FRAMES = 256  # queued beyond this, progress and log notifications are dropped
HARD_FRAMES = 4096  # queued beyond this, the host is a slow consumer
STALL_S = 30.0  # one write pending this long: the host is a slow consumer

Item = dict[str, Any] | None  # None: the stream is over (its writer ends once it got there)
Write = Callable[[dict[str, Any]], Awaitable[None]]


class Outbound:
    def __init__(
        self,
        name: str,
        *,
        on_slow: Callable[[str], None] | None = None,
        soft: int = SOFT_FRAMES,
        hard: int = HARD_FRAMES,
        stall_s: float = STALL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name  # for the log: whose stream this is
        self.on_slow = on_slow
        self.soft, self.hard, self.stall_s = soft, hard, stall_s
        self.clock = clock
        self.dropped = 0  # progress and log notifications not sent: the host was behind
        self.slow: str | None = None  # why it was closed as a slow consumer
        self.closed = False
        self._queue: deque[Item] = deque()
        self._wake = anyio.Event()
        self._writing_since: float | None = None
        self._scope: anyio.CancelScope | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def send_nowait(self, item: Item) -> None:
        """Queue a frame (or the end); never waits, never raises."""
        if self.closed:
            return
        since = self._writing_since
        if since is not None and self.clock() - since >= self.stall_s:
            self._close_slow(f"it took no frame for {self.stall_s:g} s")
            return
        if item is not None and len(self._queue) >= self.soft and item.get("method") in DROPPABLE:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.info("host stream %s is behind: %d progress/log notifications dropped", self.name, self.dropped)
            return
        if len(self._queue) >= self.hard:
            self._close_slow(f"{len(self._queue)} frames were waiting for it")
            return
        self._queue.append(item)
        self._wake.set()

    async def send(self, frame: dict[str, Any]) -> None:
        """`send_nowait` as a host connection's Send."""
        self.send_nowait(frame)

    def close(self) -> None:
        """No more frames; the writer ends (at once, even in the middle of a write)."""
        self.closed = True
        self._queue.clear()
        self._wake.set()
        if self._scope is not None:
            self._scope.cancel()

    def _close_slow(self, why: str) -> None:
        self.slow = f"slow consumer: {why}"
        log.warning(
            "host stream %s closed as a %s (%d notifications dropped before)", self.name, self.slow, self.dropped
        )
        self.close()
        if self.on_slow is not None:
            self.on_slow(self.slow)

    async def drain(self, write: Write) -> None:
        """The writer: sends queued frames in order until the end item, or until closed."""
        with anyio.CancelScope() as self._scope:
            while True:
                while not self._queue:
                    if self.closed:
                        return
                    self._wake = anyio.Event()
                    await self._wake.wait()
                item = self._queue.popleft()
                if item is None:
                    return
                self._writing_since = self.clock()
                await write(item)
                self._writing_since = None
