"""One sink's bounded queue and its counts: the only place a sink's events wait.

`put` never blocks (it is called from the bus's publish): when the queue is full the oldest event
goes and is counted as dropped, so a receiver that is down costs memory that stays bounded.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import anyio

from ..events.bus import StoredEvent

QUEUE_MAX = 256


@dataclass
class SinkStats:
    delivered: int = 0
    failed: int = 0  # given up on after its attempts (webhooks) or its one run (commands)
    dropped: int = 0  # pushed out of a full queue before a delivery was tried
    retries: int = 0
    last_error: str | None = None
    last_error_ms: int | None = None


@dataclass(eq=False)
class Outbox:
    max_len: int = QUEUE_MAX
    stats: SinkStats = field(default_factory=SinkStats)
    queue: collections.deque[StoredEvent] = field(default_factory=collections.deque)
    _wake: anyio.Event = field(default_factory=anyio.Event)

    def put(self, stored: StoredEvent) -> None:
        if len(self.queue) >= self.max_len:
            self.queue.popleft()
            self.stats.dropped += 1
        self.queue.append(stored)
        self._wake.set()

    async def get(self) -> StoredEvent:
        """The oldest waiting event, waiting for one if there is none."""
        while not self.queue:
            self._wake = anyio.Event()
            await self._wake.wait()
        return self.queue.popleft()
