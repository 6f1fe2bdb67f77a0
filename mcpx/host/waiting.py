"""Small waiting helpers on top of anyio events."""

from __future__ import annotations

import anyio


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real failure inside a task group's exception group (cancellations aside)."""
    cancelled = anyio.get_cancelled_exc_class()
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return first_error(exc)
        if not isinstance(exc, cancelled):
            return exc
    return group


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
