"""Watching the config file: its inode, size and modification time, looked at once a second.

Polling needs no dependency and sees every way an editor saves (in place, or a new file renamed over
the old one, which changes the inode). A stamp that is still moving is let settle first, so a file
caught half-written is not read; a file that is gone (mid-rename) is waited for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

log = logging.getLogger("mcpx.daemon")

POLL_S = 1.0
SETTLE_S = 0.1

Stamp = tuple[int, int, int]


def stamp(path: Path) -> Stamp | None:
    """(inode, size, mtime in ns), or None while the file is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


async def watch(path: Path, changed: Callable[[], Awaitable[object]], every_s: float = POLL_S) -> None:
    """Until cancelled: call `changed` after each change to the file at `path` has settled."""
    last = stamp(path)
    while True:
        await anyio.sleep(every_s)
        now = stamp(path)
        if now == last or now is None:
            continue
        await anyio.sleep(SETTLE_S)
        if stamp(path) != now:
            continue  # still being written: looked at again next time
        last = now
        try:
            await changed()
        except Exception:  # a failed reload must not end the watching
            log.exception("config %s: reloading after a change failed", path)
