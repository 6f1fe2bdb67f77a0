"""tasks/active.py: the unfinished-task counts behind tasks.maxActivePerOwner and tasks.maxActive."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcpx.protocol.errors import LimitReached
from mcpx.records.task import CANCELLED, WORKING, Task
from mcpx.tasks.active import ActiveTasks


def _task(tid: str, owner: str) -> Task:
    return Task(tid, WORKING, 0, 0, None, 1000, owner, "fx", "slow", {}, "legacy")


def test_the_per_owner_limit_names_itself_and_frees_a_place_when_a_task_ends() -> None:
    active = ActiveTasks(per_owner=2, total=10)
    active.reserve("a", "t1")
    active.reserve("a", "t2")
    with pytest.raises(LimitReached) as refused:
        active.reserve("a", "t3")
    err = refused.value.to_error()
    assert err["code"] == -32600 and "tasks.maxActivePerOwner (2)" in err["message"]
    assert err["data"] == {"limit": "tasks.maxActivePerOwner", "value": 2}
    active.reserve("b", "t4")  # another owner is not held back by a's tasks
    active.track(replace(_task("t1", "a"), status=CANCELLED))
    assert active.count("a") == 1 and active.count() == 2
    active.reserve("a", "t5")


def test_the_total_limit_counts_every_owner() -> None:
    active = ActiveTasks(per_owner=5, total=2)
    active.reserve("a", "t1")
    active.reserve("b", "t2")
    refused = active.refusal("c")
    assert refused is not None and "tasks.maxActive (2)" in refused.message
    active.forget("t2")  # an expired row
    assert active.refusal("c") is None


def test_tracking_a_written_row_counts_it_once_and_forgetting_twice_is_harmless() -> None:
    active = ActiveTasks(per_owner=3, total=3)
    active.reserve("a", "t1")
    active.track(_task("t1", "a"))  # the row the reservation stood for
    active.track(_task("t9", "a"))  # a row read back at start
    assert active.count("a") == 2 and active.count() == 2
    active.forget("t9")
    active.forget("t9")
    assert active.count("a") == 1 and active.count("nobody") == 0
