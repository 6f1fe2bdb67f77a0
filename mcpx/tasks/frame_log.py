"""The JSON-RPC frames mcpx exchanged for each task, host side and upstream side, kept bounded.

Served by `/v1/tasks/{id}/frames` (the console's protocol view, per task). Held in memory only:
a daemon restart starts them afresh. Each frame is kept as its JSON text, cut at `max_bytes`.
"""

from __future__ import annotations

import collections
import contextvars
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Side = Literal["host", "upstream"]
Direction = Literal["in", "out"]  # as mcpx sees it: "in" arrived at mcpx, "out" left it


@dataclass(frozen=True)
class Frame:
    ts_ms: int
    side: Side
    direction: Direction
    text: str
    truncated: bool

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ts": self.ts_ms, "side": self.side, "direction": self.direction}
        if self.truncated:
            out["text"], out["truncated"] = self.text, True
        else:
            out["frame"] = json.loads(self.text)
        return out


# Where the code running a task's upstream call records its frames (set by the engine per run).
FrameSink = Callable[[Side, Direction, dict[str, Any]], None]
current_sink: contextvars.ContextVar[FrameSink | None] = contextvars.ContextVar("mcpx_frame_sink", default=None)


def make_frame(
    side: Side, direction: Direction, frame: dict[str, Any], max_bytes: int, ts_ms: int | None = None
) -> Frame:
    try:
        text = json.dumps(frame, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(frame)
    cut = len(text) > max_bytes
    ts = int(time.time() * 1000) if ts_ms is None else ts_ms
    return Frame(ts, side, direction, text[:max_bytes] if cut else text, cut)


class FrameLog:
    def __init__(
        self, max_tasks: int = 2000, per_task: int = 200, max_bytes: int = 32 * 1024, budget: int = 32 * 1024 * 1024
    ) -> None:
        self.max_tasks = max_tasks
        self.per_task = per_task
        self.max_bytes = max_bytes
        self.budget = budget  # all frames together, in characters; the least recently active go first
        self.size = 0
        self._by_task: collections.OrderedDict[str, collections.deque[Frame]] = collections.OrderedDict()

    def record(
        self, task_id: str, side: Side, direction: Direction, frame: dict[str, Any], ts_ms: int | None = None
    ) -> None:
        self.add(task_id, [make_frame(side, direction, frame, self.max_bytes, ts_ms)])

    def recorder(self, task_id: str, side: Side) -> Callable[[Direction, dict[str, Any]], None]:
        """Records one side's frames of a task as they go."""

        def record(direction: Direction, frame: dict[str, Any]) -> None:
            self.record(task_id, side, direction, frame)

        return record

    def add(self, task_id: str, frames: list[Frame]) -> None:
        ring = self._by_task.get(task_id)
        if ring is None:
            ring = self._by_task[task_id] = collections.deque()
        else:
            self._by_task.move_to_end(task_id)
        for frame in frames:
            if len(ring) >= self.per_task:
                self.size -= len(ring.popleft().text)
            ring.append(frame)
            self.size += len(frame.text)
        while len(self._by_task) > 1 and (len(self._by_task) > self.max_tasks or self.size > self.budget):
            _, dropped = self._by_task.popitem(last=False)  # the least recently active task's frames go
            self.size -= sum(len(f.text) for f in dropped)

    def usage(self) -> dict[str, int]:
        """How full the log is (for /v1/status)."""
        return {"tasks": len(self._by_task), "bytes": self.size, "budgetBytes": self.budget}

    def frames(self, task_id: str) -> list[Frame]:
        """In time order (a host's request is stamped when it arrived, recorded after its reply)."""
        return sorted(self._by_task.get(task_id, ()), key=lambda f: f.ts_ms)

    def forget(self, task_id: str) -> None:
        dropped = self._by_task.pop(task_id, None)
        if dropped is not None:
            self.size -= sum(len(f.text) for f in dropped)
