"""mcpx.host.outbound: a host's bounded outbound channel. Senders never wait; progress and log are
dropped first when the host is behind; a reply or a question is never dropped: beyond the bounds,
or with one write stalled, the host is closed as a slow consumer; its writer ends mid-write."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcpx.host.outbound import Outbound

pytestmark = pytest.mark.anyio


def progress(n: int, token: str | int = "t") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n}}


def reply(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": {}}


async def test_frames_go_out_in_order_and_the_end_ends_the_writer() -> None:
    out = Outbound("h")
    sent: list[dict[str, Any]] = []

    async def write(frames: list[dict[str, Any]]) -> None:
        sent.extend(frames)

    for n in range(5):
        out.send_nowait(progress(n))
    out.send_nowait(reply(1))
    out.send_nowait(None)
    out.send_nowait(reply(2))  # after the end: never written
    with anyio.fail_after(2):
        await out.drain(write)
    assert sent == [progress(0), progress(1), progress(2), progress(3), progress(4), reply(1)]


async def test_behind_a_host_loses_log_and_superseded_progress_never_the_newest_or_a_reply() -> None:
    slow_reasons: list[str] = []
    out = Outbound("h", soft=3, hard=10, on_slow=slow_reasons.append)
    for n in range(3):
        out.send_nowait(reply(n))
    for n in range(100):
        out.send_nowait(progress(n))
    out.send_nowait(progress(1, token=7))
    out.send_nowait(progress(2, token=7))
    out.send_nowait({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    out.send_nowait({"jsonrpc": "2.0", "id": "mcpx-1", "method": "elicitation/create", "params": {}})
    out.send_nowait({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t"}})
    out.send_nowait(None)
    assert out.dropped == 99 + 1 + 1 and not slow_reasons
    sent: list[dict[str, Any]] = []

    async def write(frames: list[dict[str, Any]]) -> None:
        sent.extend(frames)

    with anyio.fail_after(2):
        await out.drain(write)
    # Each token's newest progress, where its first queued one stood; everything else in order.
    assert sent == [
        reply(0),
        reply(1),
        reply(2),
        progress(99),
        progress(2, token=7),
        {"jsonrpc": "2.0", "id": "mcpx-1", "method": "elicitation/create", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t"}},
    ]


async def test_progress_written_is_not_replaced_and_a_later_one_queues_again() -> None:
    out = Outbound("h", soft=1, hard=10)
    out.send_nowait(reply(0))
    out.send_nowait(progress(1))
    sent: list[dict[str, Any]] = []
    gate = anyio.Event()

    async def write(frames: list[dict[str, Any]]) -> None:
        sent.extend(frames)
        if progress(1) in frames:
            await gate.wait()  # progress 1 is being written: 2 and 3 queue behind it, 3 replacing 2

    async with anyio.create_task_group() as tg:
        tg.start_soon(out.drain, write)
        await wait_for(lambda: progress(1) in sent)
        out.send_nowait(reply(1))
        out.send_nowait(progress(2))
        out.send_nowait(progress(3))
        gate.set()
        out.send_nowait(None)
    assert sent == [reply(0), progress(1), reply(1), progress(3)] and out.dropped == 1


async def wait_for(pred: Any) -> None:
    with anyio.fail_after(2):
        while not pred():
            await anyio.sleep(0.001)


async def test_the_newest_progress_never_jumps_ahead_of_older_progress_queued_after_it() -> None:
    """Behind (one replaceable progress queued), then caught up a little (more queued plainly), then
    behind again: the newest goes last, never into the older replaceable one's place."""
    out = Outbound("h", soft=3, hard=10)
    for n in range(3):
        out.send_nowait(reply(n))
    out.send_nowait(progress(1))  # behind: queued replaceable
    sent: list[dict[str, Any]] = []

    async def write(frames: list[dict[str, Any]]) -> None:
        sent.extend(frames)

    taken = [out._queue.popleft(), out._queue.popleft()]  # the writer took two replies: below the soft bound
    assert taken == [reply(0), reply(1)]
    out.send_nowait(progress(2))  # queued plainly, behind progress 1
    out.send_nowait(progress(3))  # behind again: replaces nothing queued before progress 2
    out.send_nowait(None)
    with anyio.fail_after(2):
        await out.drain(write)
    numbers = [f["params"]["progress"] for f in sent if "method" in f]
    assert numbers == sorted(numbers) and numbers[-1] == 3, numbers


async def test_a_full_stream_drops_a_new_tokens_progress_and_stays_open() -> None:
    out = Outbound("h", soft=1, hard=2)
    out.send_nowait(reply(0))
    out.send_nowait(reply(1))
    out.send_nowait(progress(1, token="other"))
    assert not out.closed and out.dropped == 1 and len(out) == 2


async def test_beyond_the_hard_bound_the_host_is_a_slow_consumer() -> None:
    slow_reasons: list[str] = []
    out = Outbound("h", soft=2, hard=4, on_slow=slow_reasons.append)
    for n in range(5):
        out.send_nowait(reply(n))
    assert out.closed and out.slow is not None and "4 frames were waiting" in out.slow
    assert slow_reasons == [out.slow] and len(out) == 0  # what was queued is let go
    out.send_nowait(reply(9))  # closed: ignored, no error
    assert len(out) == 0


async def test_a_write_stalled_past_the_bound_closes_the_host_with_nothing_else_queued() -> None:
    """The host stopped reading after its last reply: no other frame comes to notice it."""
    slow_reasons: list[str] = []
    out = Outbound("h", stall_s=0.2, on_slow=slow_reasons.append)

    async def stuck(frames: list[dict[str, Any]]) -> None:
        await anyio.sleep_forever()  # a host that stopped reading: the send never completes

    out.send_nowait(reply(1))
    with anyio.fail_after(2):  # the stuck write was cancelled: the writer ended
        await out.drain(stuck)
    assert out.closed and out.slow is not None and "0.2 s" in out.slow and slow_reasons == [out.slow]


async def test_a_slow_write_within_the_bound_is_not_a_stall() -> None:
    out = Outbound("h", stall_s=0.3)
    sent: list[dict[str, Any]] = []

    async def slowish(frames: list[dict[str, Any]]) -> None:
        await anyio.sleep(0.1)  # each write takes a while; together far past the bound
        sent.extend(frames)

    async def produce() -> None:
        for n in range(5):
            out.send_nowait(reply(n))
            await anyio.sleep(0.12)
        out.send_nowait(None)

    with anyio.fail_after(3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            await out.drain(slowish)
    assert not out.closed and sent == [reply(n) for n in range(5)]


async def test_what_is_queued_goes_out_in_few_writes() -> None:
    """A write per batch of queued frames (a syscall each for a socket), not one per frame."""
    out = Outbound("h", soft=1000, hard=2000)
    writes: list[list[dict[str, Any]]] = []

    async def write(frames: list[dict[str, Any]]) -> None:
        writes.append(frames)

    for n in range(100):
        out.send_nowait(reply(n))
    out.send_nowait(None)
    with anyio.fail_after(2):
        await out.drain(write)
    assert [len(w) for w in writes] == [64, 36] and [f for w in writes for f in w] == [reply(n) for n in range(100)]


async def test_close_ends_a_stuck_writer_without_calling_the_host_slow() -> None:
    out = Outbound("h", stall_s=30)
    started = anyio.Event()

    async def stuck(frames: list[dict[str, Any]]) -> None:
        started.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(out.drain, stuck)
        out.send_nowait(reply(1))
        await started.wait()
        out.close()
    assert out.closed and out.slow is None
