"""Retention: closed history does not pile up in the store (`store.keepClosedS`).

Tasks go at their TTL and the event log at `events.maxRows` (tasks/engine.py); this sweep takes
what nothing else would: legacy sessions whose connection closed, closed connections that own no
task any more, and closed questions, once they are older than the retention time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from .base import Store

log = logging.getLogger("mcpx.store")

SWEEP_EVERY_S = 60.0


async def sweep_forever(
    store: Store, keep_closed_ms: int, *, every_s: float = SWEEP_EVERY_S, clock: Callable[[], float] = time.time
) -> None:
    """Under the daemon's task group: one sweep at once, then one every `every_s` (or every
    retention time, when that is shorter)."""
    every_s = min(every_s, keep_closed_ms / 1000)
    while True:
        try:
            await store.sweep_closed(int(clock() * 1000) - keep_closed_ms)
        except Exception as exc:  # noqa: BLE001 - the sweep must outlive any one failure and retry
            log.warning("retention sweep failed: %s", str(exc) or type(exc).__name__)
        await anyio.sleep(every_s)
