"""Several daemons on one store: a task another daemon runs changes in rows this one did not write,
yet the hosts listening here (a 2026 listen stream that asked for the task, the 2025 session that owns
it) must hear of it as they hear of local changes. The bus carries every daemon's events in sequence;
for a task someone here listens to, the relay reads the row and announces it. `Announced` keeps each
task's last announced state, so a change this daemon made (announced at once by the engine) is not
announced a second time when its own event comes round."""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable

from ..events.bus import EventBus, EventFilter, Subscriber
from ..records.task import Task
from .subscriptions import Hub

KINDS = frozenset({"task.status", "task.input_required"})  # the events of what hosts are told
REMEMBERED = 4096  # tasks whose last announced state is kept; an older one may be announced twice


class Announced:
    def __init__(self, size: int = REMEMBERED) -> None:
        self._last: collections.OrderedDict[str, tuple[object, ...]] = collections.OrderedDict()
        self._size = size

    def fresh(self, task: Task) -> bool:
        """True, and remembered, when hosts have not been told this state of the task yet."""
        state = task.shown
        if self._last.get(task.id) == state:
            self._last.move_to_end(task.id)
            return False
        self._last[task.id] = state
        self._last.move_to_end(task.id)
        while len(self._last) > self._size:
            self._last.popitem(last=False)
        return True


def _listened(hub: Hub, task_id: str, connection_id: str | None) -> bool:
    if any(task_id in listener.task_ids for listener in hub.listeners.values()):
        return True
    return connection_id is not None and any(
        conn.record_id == connection_id and conn.send is not None for conn in hub.legacy.values()
    )


async def relay(
    bus: EventBus,
    hub: Hub,
    read: Callable[[str], Awaitable[Task | None]],
    announce: Callable[[Task], Awaitable[None]],
) -> None:
    """Until cancelled: announce the changes of listened-to tasks, whichever daemon made them.
    Best effort, like every change notification: a subscriber that overflows skips ahead (hosts
    that must not miss a state poll `tasks/get`)."""
    sub = bus.subscribe(Subscriber(EventFilter(kinds=KINDS), internal=True))
    try:
        while True:
            await sub.wait()
            if sub.overflowed:
                sub.overflowed = False
                continue
            while sub.queue:
                event = sub.queue.popleft().event
                if event.task_id is not None and _listened(hub, event.task_id, event.connection_id):
                    task = await read(event.task_id)
                    if task is not None:
                        await announce(task)
    finally:
        bus.unsubscribe(sub)
