"""Stopping a stdio server that leads its own process group: bounded and staged, polite first
(EOF on its stdin), then SIGTERM and SIGKILL to the whole group. Used by the daemon's own stdio
transport and by keepers."""

from __future__ import annotations

import logging
import os
import signal

import anyio
from anyio.abc import Process

log = logging.getLogger("mcpx.upstream")
STOP_GRACE_S = 2.0


async def stop_group(proc: Process, name: str, grace_s: float = STOP_GRACE_S) -> None:
    if proc.returncode is not None:
        return
    with anyio.CancelScope(shield=True):
        if proc.stdin is not None:
            try:
                await proc.stdin.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                log.debug("upstream %s: stdin already broken (%s); going on to signals", name, exc)
        if await wait(proc, grace_s):
            return
        killpg(proc.pid, signal.SIGTERM)
        if await wait(proc, grace_s):
            return
        killpg(proc.pid, signal.SIGKILL)
        await wait(proc, grace_s)


async def wait(proc: Process, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await proc.wait()
        return True
    return False


def killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
