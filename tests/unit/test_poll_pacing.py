"""mcpx.tasks.pacing: a task polled again sooner than the floor is answered when the gap has
passed, or at once when it changes; never refused, never paced when the floor is 0."""

from __future__ import annotations

import anyio
import pytest

from mcpx.records.task import COMPLETED
from mcpx.tasks.pacing import TRACKED, PollPacer, poll_wait_ms

from .storekit import task_record

pytestmark = pytest.mark.anyio


def test_the_wait_is_the_rest_of_the_floor_since_the_last_answer() -> None:
    assert poll_wait_ms(None, 1_000, 100) == 0  # the first poll
    assert poll_wait_ms(1_000, 1_030, 100) == 70
    assert poll_wait_ms(1_000, 1_100, 100) == 0
    assert poll_wait_ms(1_000, 5_000, 100) == 0
    assert poll_wait_ms(1_000, 1_001, 0) == 0  # off


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class Changes:
    """The engine's wait_change: a test wakes a task's waiters with `change`."""

    def __init__(self) -> None:
        self.events: dict[str, anyio.Event] = {}

    async def wait(self, task_id: str) -> None:
        await self.events.setdefault(task_id, anyio.Event()).wait()

    def change(self, task_id: str) -> None:
        self.events.pop(task_id, anyio.Event()).set()


async def test_a_tight_loop_is_slowed_to_one_answer_per_floor() -> None:
    clock, changes = Clock(), Changes()
    pacer = PollPacer(50, clock, changes.wait)
    task = task_record()
    assert await pacer.pace(task) is False
    started = anyio.current_time()
    assert await pacer.pace(task) is True  # same instant: waits the whole 50 ms
    assert anyio.current_time() - started >= 0.045
    clock.now += 50  # answered at 1,050; the next poll at 1,100 is on time
    clock.now += 50
    assert await pacer.pace(task) is False
    assert pacer.paced == 1


async def test_a_change_answers_a_paced_poll_at_once() -> None:
    clock, changes = Clock(), Changes()
    pacer = PollPacer(10_000, clock, changes.wait)
    task = task_record()
    await pacer.pace(task)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pacer.pace, task)
        await anyio.wait_all_tasks_blocked()
        started = anyio.current_time()
        changes.change(task.id)
    assert anyio.current_time() - started < 1  # not the 10 s floor


async def test_a_finished_task_is_paced_by_time_alone_and_others_not_at_all() -> None:
    clock, changes = Clock(), Changes()
    pacer = PollPacer(30, clock, changes.wait)
    done, other = task_record(status=COMPLETED), task_record()
    await pacer.pace(done)
    with anyio.fail_after(1):
        assert await pacer.pace(done) is True  # no change will come: the gap ends it
    assert await pacer.pace(other) is False  # each task has its own gap


async def test_only_the_most_recently_polled_tasks_are_remembered() -> None:
    clock, changes = Clock(), Changes()
    pacer = PollPacer(0, clock, changes.wait)
    first = task_record()
    await pacer.pace(first)
    for _ in range(TRACKED):
        await pacer.pace(task_record())
    pacer.floor_ms = 10_000
    assert await pacer.pace(first) is False  # forgotten: treated as a first poll
