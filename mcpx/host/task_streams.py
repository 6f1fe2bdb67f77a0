"""Where a 2025-11-25 task talks to its host: an open tasks/result stream, else the session's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

from ..tasks.frame_log import FrameLog
from .connection import HostConnection, RequestContext, Send
from .waiting import first_of


@dataclass(frozen=True)
class Channel:
    """Where a task's host is asked something: a stream, and the connection whose answers come back
    for it (a tasks/result stream may be another session's than the one that made the task)."""

    send: Send
    conn: HostConnection


class TaskStreams:
    def __init__(self, frames: FrameLog) -> None:
        self.streams: dict[str, list[Channel]] = {}  # task id -> open tasks/result streams
        self._stream_opened: dict[str, anyio.Event] = {}  # task id -> set when one opens
        self._waiters: dict[str, int] = {}  # task id -> questions waiting on that event
        self.frames = frames  # what was sent goes into the task's frames

    def sender(self, task_ctx: RequestContext) -> Send:
        """Best effort (progress): an open tasks/result stream of the task, else the GET stream."""

        async def send(msg: dict[str, Any]) -> None:
            streams = self.streams.get(task_ctx.task_id or "")
            target = streams[-1].send if streams else task_ctx.conn.send
            if target is not None:
                await target(msg)
                if task_ctx.task_id is not None:
                    self.frames.record(task_ctx.task_id, "host", "out", msg)

        return send

    async def question_channel(self, task_id: str, conn: HostConnection) -> Channel:
        """Where to ask the host a question inside this task: wait until it has a stream open
        (it sees `input_required` meanwhile and should call tasks/result, tasks.mdx:449). The
        newest tasks/result stream wins, whichever session of the task's owner opened it (its
        host may have left: the task outlives it); else `conn`'s own session stream."""
        while True:
            streams = self.streams.get(task_id)
            if streams:
                return streams[-1]
            if conn.send is not None:
                return Channel(conn.send, conn)
            stream_opened = self._stream_opened.setdefault(task_id, anyio.Event())
            self._waiters[task_id] = self._waiters.get(task_id, 0) + 1
            try:
                await first_of(stream_opened, conn.channel_opened)
            finally:
                self._stop_waiting(task_id, stream_opened)

    def _stop_waiting(self, task_id: str, stream_opened: anyio.Event) -> None:
        """The last question waiting for this task's stream is done waiting (a stream opened, the
        session's did, or the question ended): its event goes, so none is kept for a task forever."""
        left = self._waiters.get(task_id, 1) - 1
        if left > 0:
            self._waiters[task_id] = left
            return
        self._waiters.pop(task_id, None)
        if self._stream_opened.get(task_id) is stream_opened:
            del self._stream_opened[task_id]

    def open(self, task_id: str, send: Send, conn: HostConnection) -> None:
        """A tasks/result stream of `conn` is open: the task's questions and progress go there
        (tasks.mdx:435-449), and the answers to them come back on `conn`."""
        self.streams.setdefault(task_id, []).append(Channel(send, conn))
        opened = self._stream_opened.pop(task_id, None)
        if opened is not None:
            opened.set()

    def close(self, task_id: str, send: Send) -> None:
        streams = self.streams.get(task_id)
        if streams is not None:
            streams[:] = [channel for channel in streams if channel.send is not send]
            if not streams:
                self.streams.pop(task_id, None)
