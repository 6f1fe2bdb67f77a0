"""mcpx.tasks.keyed_lock: one key's holders go one at a time, other keys do not wait, and no lock
outlives its last user."""

from __future__ import annotations

import anyio
import pytest

from mcpx.tasks.keyed_lock import KeyedLock

pytestmark = pytest.mark.anyio


async def test_holders_of_one_key_go_one_at_a_time_in_arrival_order() -> None:
    locks, order, inside = KeyedLock(), [], []

    async def hold(i: int) -> None:
        async with locks.hold("t"):
            inside.append(i)
            assert len(inside) == 1, inside
            await anyio.sleep(0.001)
            order.append(i)
            inside.remove(i)

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(hold, i)
            await anyio.wait_all_tasks_blocked()
    assert order == [0, 1, 2, 3, 4]
    assert len(locks) == 0


async def test_another_key_is_not_held_up_by_a_held_one() -> None:
    locks, release = KeyedLock(), anyio.Event()
    got_b = anyio.Event()

    async def hold_a() -> None:
        async with locks.hold("a"):
            await release.wait()

    async def hold_b() -> None:
        async with locks.hold("b"):
            got_b.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold_a)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(hold_b)
        with anyio.fail_after(1):
            await got_b.wait()
        assert len(locks) == 1  # a's lock, still held; b's gone with its holder
        release.set()
    assert len(locks) == 0


async def test_a_waiter_cancelled_in_line_leaves_no_lock_behind() -> None:
    locks, release = KeyedLock(), anyio.Event()

    async def hold() -> None:
        async with locks.hold("t"):
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0.01):
            async with locks.hold("t"):
                raise AssertionError("got a held lock")
        release.set()
    assert len(locks) == 0
