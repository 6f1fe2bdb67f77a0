"""Small waiting helpers on top of anyio events."""

from __future__ import annotations

import anyio


async def first_of(*events: anyio.Event) -> None:
    """Return as soon as any one of `events` is set."""
    if any(e.is_set() for e in events):
        return
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)
