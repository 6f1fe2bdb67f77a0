"""A stdio upstream's output (or its keeper's), read a chunk at a time: the JSON messages each read
completes, as one batch (protocol/progress_batch.py drops superseded progress within a batch).

One split per read, not one per line (splitting line by line copied the rest of the buffer each
time, quadratic in a large read); a long line's pieces are joined once (line_split.py).
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol import fastjson, progress_batch
from ..fair_share import FairShare
from ..transport import Feed
from .line_split import LineSplitter, LineTooLong

__all__ = ["LineBatches", "LineTooLong", "feed_batch"]

log = logging.getLogger("mcpx.upstream")


class LineBatches:
    def __init__(self, name: str, max_line: int) -> None:
        self.name = name  # for the log: whose output this is
        self._lines = LineSplitter(max_line)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The messages the chunk completes; a line that is not a JSON object is logged and skipped.
        LineTooLong when a line passes the bound (it is let go)."""
        batch = []
        for line in self._lines.feed(chunk):
            if not line.strip():
                continue
            try:
                msg = fastjson.loads(line)
            except ValueError:
                log.warning("upstream %s wrote a non-JSON line: %.200r", self.name, line)
                continue
            if isinstance(msg, dict):
                batch.append(msg)
        return batch


async def feed_batch(name: str, batch: list[dict[str, Any]], feed: Feed, fair: FairShare) -> None:
    """One read's messages to the session, less superseded progress, yielding to the loop as due."""
    kept, dropped = progress_batch.without_superseded(batch)
    if dropped:
        log.debug("upstream %s: %d superseded progress notifications dropped", name, dropped)
    for msg in kept:
        await feed(msg, None)
        await fair.turn()
