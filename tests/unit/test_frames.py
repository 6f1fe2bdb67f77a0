"""mcpx.tasks.frame_log: the per-task frame log behind /v1/tasks/{id}/frames, bounded by frames per task,
by tasks (the least recently active go first), by frame size and by a total byte budget, and
served in time order. Pure."""

from __future__ import annotations

import json
from typing import Any

from mcpx.tasks.frame_log import FrameLog, make_frame


def frame(n: int, pad: str = "") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "result": {"pad": pad}}


def ids(log: FrameLog, task_id: str) -> list[int]:
    return [json.loads(f.text)["id"] for f in log.frames(task_id)]


def total(log: FrameLog, *task_ids: str) -> int:
    return sum(len(f.text) for t in task_ids for f in log.frames(t))


def test_a_task_keeps_its_newest_frames_up_to_the_per_task_cap() -> None:
    log = FrameLog(per_task=3)
    for n in range(5):
        log.record("t1", "upstream", "out", frame(n), ts_ms=n)
    assert ids(log, "t1") == [2, 3, 4]
    assert log.size == total(log, "t1")  # what was dropped no longer counts


def test_past_the_task_cap_the_least_recently_active_task_goes_first() -> None:
    log = FrameLog(max_tasks=2)
    log.record("t1", "host", "in", frame(1), ts_ms=1)
    log.record("t2", "host", "in", frame(2), ts_ms=2)
    log.record("t1", "host", "out", frame(3), ts_ms=3)  # t1 is the more recently active now
    log.record("t3", "host", "in", frame(4), ts_ms=4)
    assert (ids(log, "t1"), ids(log, "t2"), ids(log, "t3")) == ([1, 3], [], [4])
    assert log.size == total(log, "t1", "t3")


def test_past_the_byte_budget_the_least_recently_active_tasks_go_until_it_fits() -> None:
    one = len(make_frame("host", "in", frame(0, "x" * 100), 10_000).text)
    log = FrameLog(budget=3 * one)
    for n, task_id in enumerate(("t1", "t2", "t3")):
        log.record(task_id, "host", "in", frame(n, "x" * 100), ts_ms=n)
    assert log.size == 3 * one  # exactly at the budget: everything stays
    log.record("t4", "host", "in", frame(3, "x" * 100), ts_ms=3)
    assert [ids(log, t) for t in ("t1", "t2", "t3", "t4")] == [[], [1], [2], [3]]
    assert log.size == 3 * one


def test_the_only_task_left_keeps_its_frames_even_beyond_the_budget() -> None:
    log = FrameLog(budget=10)
    log.record("t1", "upstream", "in", frame(1, "x" * 50), ts_ms=1)
    log.record("t1", "upstream", "in", frame(2, "x" * 50), ts_ms=2)
    assert ids(log, "t1") == [1, 2]  # bounded by per_task and max_bytes instead


def test_a_frame_longer_than_max_bytes_is_cut_and_marked() -> None:
    log = FrameLog(max_bytes=40)
    log.record("t1", "upstream", "in", frame(1, "x" * 100), ts_ms=1)
    log.record("t1", "upstream", "out", {"id": 2}, ts_ms=2)
    cut, whole = log.frames("t1")
    assert cut.truncated and len(cut.text) == 40 and log.size == 40 + len(whole.text)
    assert cut.wire() == {"ts": 1, "side": "upstream", "direction": "in", "text": cut.text, "truncated": True}
    assert whole.wire() == {"ts": 2, "side": "upstream", "direction": "out", "frame": {"id": 2}}


def test_frames_are_served_in_time_order_whatever_order_they_were_recorded_in() -> None:
    log = FrameLog()
    log.record("t1", "host", "out", frame(2), ts_ms=20)  # the reply is recorded first...
    log.record("t1", "host", "in", frame(1), ts_ms=10)  # ...its request, stamped on arrival, after it
    log.record("t1", "upstream", "in", frame(3), ts_ms=15)
    assert [(f.ts_ms, f.side, f.direction) for f in log.frames("t1")] == [
        (10, "host", "in"),
        (15, "upstream", "in"),
        (20, "host", "out"),
    ]


def test_add_keeps_frames_recorded_before_a_run_became_a_task() -> None:
    log = FrameLog(per_task=2)
    pending = [make_frame("upstream", "out", frame(n), log.max_bytes, ts_ms=n) for n in range(3)]
    log.add("t1", pending)
    assert ids(log, "t1") == [1, 2] and log.size == total(log, "t1")


def test_forget_drops_a_tasks_frames_and_their_bytes() -> None:
    log = FrameLog()
    log.record("t1", "host", "in", frame(1), ts_ms=1)
    log.record("t2", "host", "in", frame(2), ts_ms=2)
    log.forget("t1")
    log.forget("never-recorded")
    assert log.frames("t1") == [] and ids(log, "t2") == [2] and log.size == total(log, "t2")


def test_a_frame_that_is_not_json_is_kept_as_its_repr() -> None:
    odd = {"id": 1, "raw": b"\x00"}
    kept = make_frame("upstream", "in", odd, 1000, ts_ms=5)
    assert kept.text == repr(odd) and not kept.truncated and kept.ts_ms == 5
