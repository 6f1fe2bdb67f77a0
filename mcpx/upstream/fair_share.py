"""A loop that finds much work at once (a reader with hundreds of messages in one read, a writer
with hundreds of frames queued) lets the rest of the daemon run between them.

A stdio upstream that floods (40,000 progress notifications at full speed) hands the daemon a
buffer of hundreds of lines per read, and the host's writer as many frames; handled one after
another with no await that suspends, they kept every other host waiting for the whole batch at
each hop of its own call (bench/flood_latency.py: another host's echo went from 1 ms to tens of
ms). Such a loop now yields once it has worked `budget_s` without a pause, for one clock read per
item otherwise.
"""

from __future__ import annotations

import time

import anyio.lowlevel

BUDGET_S = 0.0005  # of uninterrupted work before the loop lets others run


class FairShare:
    def __init__(self, budget_s: float = BUDGET_S) -> None:
        self.budget_s = budget_s
        self._since = time.perf_counter()

    async def turn(self) -> None:
        """After each item: yield to the event loop once this loop has had its share."""
        now = time.perf_counter()
        if now - self._since >= self.budget_s:
            await anyio.lowlevel.cancel_shielded_checkpoint()
            self._since = time.perf_counter()
