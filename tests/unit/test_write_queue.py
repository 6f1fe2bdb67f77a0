"""mcpx.store.queue: the writer's loop ends cleanly when the store closes under it."""

from __future__ import annotations

import gc
import warnings

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


def test_a_writer_cancelled_then_its_store_shut_closes_its_queue() -> None:
    """A store shut after its writer was cancelled (a daemon's task group, or a test's, torn down):
    the queue's receiving end is closed with it, not left for the garbage collector's
    ResourceWarning in whatever test runs next. (A cancelled writer alone leaves it open: the
    background rule starts the writer again, daemon/background.py.)"""

    async def main() -> WriteQueue:
        queue = WriteQueue()
        queue.open()

        async def commit(batch: list[Write]) -> None:
            raise AssertionError("nothing was queued")

        async with anyio.create_task_group() as tg:
            tg.start_soon(queue.drain, commit)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
        await queue.shut(wait_s=0.1)
        return queue

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        queue = anyio.run(main)
        del queue
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
