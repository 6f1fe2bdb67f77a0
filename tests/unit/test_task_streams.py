"""mcpx.host.task_streams: where a 2025-11-25 task's questions go, and that waiting for a stream
leaves nothing behind once nobody waits."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcpx.host.connection import HostConnection
from mcpx.host.task_streams import Channel, TaskStreams
from mcpx.tasks.frame_log import FrameLog

pytestmark = pytest.mark.anyio


async def _send(msg: dict[str, Any]) -> None:
    return None


async def test_a_question_that_stops_waiting_for_a_stream_leaves_no_event_behind() -> None:
    streams = TaskStreams(FrameLog())
    conn = HostConnection("http")  # no session stream either: the question waits
    with anyio.move_on_after(0.05):
        await streams.question_channel("t-1", conn)
    assert streams._stream_opened == {} and streams._waiters == {}


async def test_two_questions_wait_and_one_gives_up_the_other_still_gets_the_stream() -> None:
    streams = TaskStreams(FrameLog())
    conn = HostConnection("http")
    got: list[object] = []

    async def ask(give_up: anyio.Event | None) -> None:
        with anyio.CancelScope() as scope:
            if give_up is not None:
                async with anyio.create_task_group() as tg:

                    async def cancel_when_told() -> None:
                        await give_up.wait()
                        scope.cancel()

                    tg.start_soon(cancel_when_told)
                    got.append(await streams.question_channel("t-1", conn))
                    tg.cancel_scope.cancel()
            else:
                got.append(await streams.question_channel("t-1", conn))

    give_up = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, give_up)
            tg.start_soon(ask, None)
            while streams._waiters.get("t-1") != 2:
                await anyio.sleep(0.01)  # bounded by fail_after: both are waiting
            give_up.set()
            while streams._waiters.get("t-1") != 1:
                await anyio.sleep(0.01)
            streams.open("t-1", _send, conn)  # the one still waiting is woken by it
    assert got == [Channel(_send, conn)]
    assert streams._stream_opened == {} and streams._waiters == {}


async def test_a_question_goes_to_the_newest_tasks_result_stream_with_the_connection_it_came_on() -> None:
    """The task's host may have left; another session of its owner collects it: that session's
    stream asks, and its answer comes back on that session (not the one that made the task)."""
    streams = TaskStreams(FrameLog())
    maker, collector = HostConnection("http"), HostConnection("http")
    streams.open("t-1", _send, collector)
    channel = await streams.question_channel("t-1", maker)
    assert channel.send is _send and channel.conn is collector
    streams.close("t-1", _send)
    assert streams.streams == {}
