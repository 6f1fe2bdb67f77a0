"""When the garbage collector walks the console's heap: not while the operator is typing.

At 10,000 tasks the console holds a few hundred thousand objects (rows, cells, the state). A full
collection walks every one the collector tracks (20-50 ms each, while nothing is drawn), and left
to itself Python starts one every second or so under a busy feed: a keypress that lands on one
waits for it. So while the console runs, Python's own full collections are held back (the young
generations are still collected as usual) and the console settles the heap itself: after a big
rebuild of the table, and when no key was pressed for a while (at the latest every
`SETTLE_MAX_S`, keys or not, so cyclic garbage never piles up). Settling = collect everything,
then freeze what survives (gc.freeze): the next full collection walks only what came since.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

IDLE_S = 1.0  # no key for this long: a good moment to settle
SETTLE_EVERY_S = 10.0  # settle at most this often while idle...
SETTLE_MAX_S = 30.0  # ...and at least this often, idle or not (then only what came since: see tick)
NEVER = 1_000_000  # a gen-2 threshold Python never reaches (counts gen-1 collections; default 10)


def settle() -> None:
    """Collect all garbage there is, then keep every object alive now out of later full passes.
    Unfrozen first, so that what the last settle kept and has died since is collected now."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class HeapKeeper:
    """Holds back Python's full collections from `hold()` to `release()` and settles the heap at
    quiet moments: `key()` on each keypress, `tick()` often (each flush)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._saved: tuple[int, int, int] | None = None
        self.last_key = 0.0
        self.last_settle = clock()
        self.settles = 0  # whole-heap settles
        self.collects = 0  # young-only collections forced by keys all along

    def hold(self) -> None:
        if self._saved is None:
            self._saved = gc.get_threshold()
            gc.set_threshold(self._saved[0], self._saved[1], NEVER)

    def release(self) -> None:
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        if self.settles or self.collects:
            gc.unfreeze()  # the process (a test run, say) collects as usual again

    def key(self) -> None:
        self.last_key = self.clock()

    def settle_now(self) -> None:
        settle()
        self.settles += 1
        self.last_settle = self.clock()

    def tick(self) -> None:
        now = self.clock()
        since = now - self.last_settle
        if since >= SETTLE_EVERY_S and now - self.last_key >= IDLE_S:
            self.settle_now()
        elif since >= SETTLE_MAX_S:
            # Keys all along: collect only what came since the last freeze (the young objects,
            # ~20 ms, not the whole heap); what was frozen and died since waits for a quiet moment.
            gc.collect()
            gc.freeze()
            self.collects += 1
            self.last_settle = now
