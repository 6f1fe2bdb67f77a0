"""mcpx.host.outbound: a host's bounded outbound channel. Senders never wait; progress and log are
dropped first when the host is behind; a reply or a question is never dropped: beyond the bounds,
or with one write stalled, the host is closed as a slow consumer; its writer ends mid-write."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcpx.host.outbound import Outbound

pytestmark = pytest.mark.anyio


def progress(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": n}}


def reply(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": {}}


async def test_frames_go_out_in_order_and_the_end_ends_the_writer() -> None:
    out = Outbound("h")
    sent: list[dict[str, Any]] = []

    async def write(frame: dict[str, Any]) -> None:
        sent.append(frame)

    for n in range(5):
        out.send_nowait(progress(n))
    out.send_nowait(reply(1))
    out.send_nowait(None)
    out.send_nowait(reply(2))  # after the end: never written
    with anyio.fail_after(2):
        await out.drain(write)
    assert sent == [progress(0), progress(1), progress(2), progress(3), progress(4), reply(1)]


async def test_behind_a_host_loses_progress_and_log_first_never_a_reply() -> None:
    slow_reasons: list[str] = []
    out = Outbound("h", soft=3, hard=10, on_slow=slow_reasons.append)
    for n in range(3):
        out.send_nowait(reply(n))
    for n in range(100):
        out.send_nowait(progress(n))
    out.send_nowait({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    out.send_nowait({"jsonrpc": "2.0", "id": "mcpx-1", "method": "elicitation/create", "params": {}})
    out.send_nowait({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t"}})
    assert out.dropped == 101 and len(out) == 5 and not slow_reasons


async def test_beyond_the_hard_bound_the_host_is_a_slow_consumer() -> None:
    slow_reasons: list[str] = []
    out = Outbound("h", soft=2, hard=4, on_slow=slow_reasons.append)
    for n in range(5):
        out.send_nowait(reply(n))
    assert out.closed and out.slow is not None and "4 frames were waiting" in out.slow
    assert slow_reasons == [out.slow] and len(out) == 0  # what was queued is let go
    out.send_nowait(reply(9))  # closed: ignored, no error
    assert len(out) == 0


async def test_a_write_stalled_past_the_bound_closes_the_host_and_ends_its_writer() -> None:
    now = [0.0]
    out = Outbound("h", stall_s=30, clock=lambda: now[0])
    started = anyio.Event()

    async def stuck(frame: dict[str, Any]) -> None:
        started.set()
        await anyio.sleep_forever()  # a host that stopped reading: the send never completes

    ended = anyio.Event()

    async def writer() -> None:
        await out.drain(stuck)
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        out.send_nowait(reply(1))
        await started.wait()
        now[0] = 10.0
        out.send_nowait(progress(1))  # 10 s: still waiting for it
        assert not out.closed
        now[0] = 31.0
        out.send_nowait(progress(2))
        assert out.closed and out.slow is not None and "30 s" in out.slow
        with anyio.fail_after(2):  # the stuck write was cancelled: the writer ended
            await ended.wait()
