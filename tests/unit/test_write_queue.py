"""mcpx.store.queue: the writer's loop ends cleanly when the store closes under it."""

from __future__ import annotations

import anyio
import pytest

from mcpx.store.queue import Write, WriteQueue

pytestmark = pytest.mark.anyio


async def test_a_queue_closed_right_after_a_write_drains_it_and_ends_without_an_error() -> None:
    """Closing while the writer holds a write and looks for more: before, receive_nowait raised
    EndOfStream out of the writer, the daemon's task group failed at shutdown and the process hung."""
    queue = WriteQueue()
    queue.open()
    batches: list[list[Write]] = []

    async def commit(batch: list[Write]) -> None:
        batches.append(batch)
        for write in batch:
            write.done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(queue.submit, [("SELECT 1", ())])
        await anyio.wait_all_tasks_blocked()  # the write is queued, its submitter waits
        queue.close()
        with anyio.fail_after(5):
            await queue.drain(commit)
    assert [len(b) for b in batches] == [1]
