"""One bounded outbound channel per host stream, drained by its own writer task.

What mcpx sends a host (a reply, a question, a task status, progress, a log line) is queued here
and never awaited by whoever sends it: an upstream session's reader relaying progress, or a task
change announced under the task's lock, must not wait for a host that stopped reading. A host
that falls behind loses log notifications and superseded progress first (counted): the progress
of one token still waiting to be written is replaced by the newest, so the newest always arrives. A
reply, a request or another notification is never dropped: a host that cannot take them within the
bounds, or that takes no byte of one write within `stall_s` (whether or not more is queued), is a
slow consumer, and its stream is closed (the caller decides what that means for the connection).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..upstream.fair_share import FairShare

log = logging.getLogger("mcpx.host")

# Advisory frames, dropped first when a host falls behind.
PROGRESS = "notifications/progress"
DROPPABLE = frozenset({PROGRESS, "notifications/message"})
SOFT_FRAMES = 256  # queued beyond this, log notifications are dropped and progress is coalesced per token
HARD_FRAMES = 4096  # queued beyond this, the host is a slow consumer
STALL_S = 30.0  # one write pending this long: the host is a slow consumer

Write = Callable[[list[dict[str, Any]]], Awaitable[None]]  # frames in order, written at once
BATCH = 64  # frames a write takes at most (one syscall where the carrier allows)


class _Latest:
    """A queued progress notification that a newer one of its token may replace before it is sent."""

    __slots__ = ("frame",)

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame


Item = dict[str, Any] | _Latest | None  # None: the stream is over (its writer ends once it got there)


class Outbound:
    def __init__(
        self,
        name: str,
        *,
        on_slow: Callable[[str], None] | None = None,
        soft: int = SOFT_FRAMES,
        hard: int = HARD_FRAMES,
        stall_s: float = STALL_S,
    ) -> None:
        self.name = name  # for the log: whose stream this is
        self.on_slow = on_slow
        self.soft, self.hard, self.stall_s = soft, hard, stall_s
        self.dropped = 0  # log and superseded progress notifications not sent: the host was behind
        self.slow: str | None = None  # why it was closed as a slow consumer
        self.closed = False
        self._queue: deque[Item] = deque()
        self._latest: dict[str, _Latest] = {}  # progress token -> its queued, replaceable notification
        self._wake = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def send_nowait(self, item: dict[str, Any] | None) -> None:
        """Queue a frame (or the end); never waits, never raises."""
        if self.closed:
            return
        if item is not None and len(self._queue) >= self.soft and item.get("method") in DROPPABLE:
            if self._coalesced(item):
                return
            if item.get("method") != PROGRESS:
                self._drop()
                return
        if len(self._queue) >= self.hard:
            self._close_slow(f"{len(self._queue)} frames were waiting for it")
            return
        if self._latest and item is not None and item.get("method") == PROGRESS:
            # Queued behind its token's replaceable one, which must not now jump ahead of it.
            self._latest.pop(_token_key(item) or "", None)
        self._queue.append(item)
        self._wake.set()

    def _coalesced(self, frame: dict[str, Any]) -> bool:
        """Behind: a progress notification replaces its token's one still queued (that one is
        dropped), or is queued as replaceable itself. True when handled; other frames are not."""
        if frame.get("method") != PROGRESS:
            return False
        key = _token_key(frame)
        if key is None:
            self._drop()
            return True
        queued = self._latest.get(key)
        if queued is not None:
            queued.frame = frame
            self._drop()
            return True
        if len(self._queue) >= self.hard:
            self._drop()  # a new token's progress, with the stream full: dropped, never a reason to close
            return True
        self._latest[key] = latest = _Latest(frame)
        self._queue.append(latest)
        self._wake.set()
        return True

    def _drop(self) -> None:
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 1000 == 0:
            log.info("host stream %s is behind: %d progress/log notifications dropped", self.name, self.dropped)

    async def send(self, frame: dict[str, Any]) -> None:
        """`send_nowait` as a host connection's Send."""
        self.send_nowait(frame)

    def close(self) -> None:
        """No more frames; the writer ends (at once, even in the middle of a write)."""
        self.closed = True
        self._queue.clear()
        self._latest.clear()
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
        """The writer: sends queued frames in order, as many as are queued (up to BATCH) in one
        write, until the end item or until closed. A write that is not done within `stall_s` (the
        host takes nothing) is cancelled, and the host is a slow consumer, even when nothing else
        is queued behind it."""
        fair = FairShare()
        ended = False
        with anyio.CancelScope() as scope:
            self._scope = scope
            while not ended:
                while not self._queue:
                    if self.closed:
                        return
                    self._wake = anyio.Event()
                    await self._wake.wait()
                batch: list[dict[str, Any]] = []
                while self._queue and len(batch) < BATCH:
                    item = self._queue.popleft()
                    if item is None:
                        ended = True
                        break
                    if isinstance(item, _Latest):
                        self._forget_latest(item.frame, item)
                        item = item.frame
                    batch.append(item)
                if batch:
                    scope.deadline = anyio.current_time() + self.stall_s
                    await write(batch)
                    scope.deadline = math.inf
                    await fair.turn()
        if scope.cancelled_caught and not self.closed:
            self._close_slow(f"a write took nothing for {self.stall_s:g} s")

    def _forget_latest(self, frame: dict[str, Any], item: _Latest) -> None:
        key = _token_key(frame)
        if key is not None and self._latest.get(key) is item:
            del self._latest[key]


def _token_key(frame: dict[str, Any]) -> str | None:
    """A progress notification's token, as a key (a string and a number of the same text differ)."""
    params = frame.get("params")
    token = params.get("progressToken") if isinstance(params, dict) else None
    if not isinstance(token, (str, int, float)) or isinstance(token, bool):
        return None
    return f"{type(token).__name__}:{token}"
