"""mcpx.tasks.changes: the events a task row change stands for. Every status change and every new
status message is exactly one task.status event; what the task waits on is a task.input_required
event; nothing else is one. Pure; every event's data fits its documented schema."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcpx.events.bus import Event, StoredEvent
from mcpx.records.task import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TERMINAL, WORKING, Status, Task
from mcpx.tasks import changes

from .storekit import NOW, check_event, task_record

T1 = NOW + 1_000

ALLOWED: list[tuple[Status, Status]] = [
    (WORKING, INPUT_REQUIRED),
    (WORKING, COMPLETED),
    (WORKING, FAILED),
    (WORKING, CANCELLED),
    (INPUT_REQUIRED, WORKING),
    (INPUT_REQUIRED, COMPLETED),
    (INPUT_REQUIRED, FAILED),
    (INPUT_REQUIRED, CANCELLED),
]


def base(status: Status = WORKING, **kw: object) -> Task:
    return task_record(status=status, connection="c-1", ttl_ms=60_000, **kw)  # type: ignore[arg-type]  # test fields


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def valid(events: list[Event]) -> list[Event]:
    for seq, event in enumerate(events, 1):
        check_event(StoredEvent(seq, NOW, event))
    return events


# ---- task.created ------------------------------------------------------------------------------


def test_a_new_row_is_one_created_event_with_what_the_feed_shows() -> None:
    task = base(arguments={"n": 1}, era="modern", status_message="starting")
    (event,) = valid(changes.transition(None, task, by="host:c-1"))
    assert (event.kind, event.task_id, event.connection_id, event.by) == ("task.created", task.id, "c-1", "host:c-1")
    assert event.data == {
        "kind": "task",
        "upstream": "up",
        "tool": "echo",
        "arguments": {"n": 1},
        "era": "modern",
        "owner": "conn",
        "status": WORKING,
        "statusMessage": "starting",
        "createdMs": 1_700_000_000_000,
        "ttlMs": 60_000,
        "pollIntervalMs": 1000,
        "why": None,
    }


def test_a_new_row_says_why_it_is_a_row() -> None:
    task = base(why="listed: ran longer than 500 ms")
    (event,) = valid(changes.transition(None, task, by="host:c-1"))
    assert event.data["why"] == "listed: ran longer than 500 ms"


def test_a_new_row_that_already_waits_for_input_also_says_what_it_waits_on() -> None:
    task = base(INPUT_REQUIRED, input_requests={"q-2": {"m": 2}, "q-1": {"m": 1}})
    created, waiting = valid(changes.transition(None, task))
    assert created.kind == "task.created" and waiting.kind == "task.input_required"
    assert waiting.data == {"requests": {"q-2": {"m": 2}, "q-1": {"m": 1}}, "added": ["q-1", "q-2"]}


@pytest.mark.parametrize(
    ("owner", "shown"),
    [("conn:secret-session-id", "conn"), ("principal:ann", "principal:ann"), ("modern", "modern")],
)
def test_the_created_event_names_what_binds_a_task_without_its_secret(owner: str, shown: str) -> None:
    assert changes.owner_kind(owner) == shown
    (event,) = changes.transition(None, base(owner=owner))
    assert event.data["owner"] == shown and "secret" not in str(event.data)


# ---- task.status -------------------------------------------------------------------------------


@pytest.mark.parametrize(("before", "after"), ALLOWED, ids=[f"{a}->{b}" for a, b in ALLOWED])
def test_every_status_change_is_exactly_one_status_event(before: Status, after: Status) -> None:
    old = base(before, input_requests={"q-1": {}} if before == INPUT_REQUIRED else {})
    new = old.move(after, T1, message=f"now {after}")
    events = valid(changes.transition(old, new, by="mcpx"))
    status = [e for e in events if e.kind == "task.status"]
    assert len(status) == 1 and status[0].by == "mcpx" and status[0].connection_id == "c-1"
    assert {k: status[0].data[k] for k in ("status", "previous", "statusMessage")} == {
        "status": after,
        "previous": before,
        "statusMessage": f"now {after}",
    }
    assert kinds(events) == ["task.status"]  # no question was added, and leaving one is said by the status


def test_a_new_status_message_within_a_status_is_one_status_event() -> None:
    old = base(status_message="step 1")
    (event,) = valid(changes.transition(old, replace(old, status_message="step 2", updated_ms=T1)))
    assert event.data == {"status": WORKING, "previous": WORKING, "statusMessage": "step 2"}
    (cleared,) = changes.transition(old, replace(old, status_message=None))
    assert cleared.data["statusMessage"] is None


def test_a_change_no_one_sees_is_no_event() -> None:
    old = base(status_message="step 1")
    assert changes.transition(old, replace(old, updated_ms=T1, upstream_task_id="up-1")) == []
    assert changes.transition(old, old) == []


def test_a_failed_task_carries_its_error_and_a_finished_one_whether_the_tool_reported_one() -> None:
    error = {"code": -32000, "message": "boom"}
    old = base()
    (failed,) = valid(changes.transition(old, old.move(FAILED, T1, error=error)))
    assert failed.data["error"] == error and "isError" not in failed.data
    (tool_error,) = valid(changes.transition(old, old.move(FAILED, T1, result={"content": [], "isError": True})))
    assert tool_error.data["isError"] is True and "error" not in tool_error.data
    (done,) = valid(changes.transition(old, old.move(COMPLETED, T1, result={"content": []})))
    assert done.data["isError"] is False
    (cancelled,) = valid(changes.transition(old, old.move(CANCELLED, T1)))
    assert "isError" not in cancelled.data and "error" not in cancelled.data


# ---- task.input_required -----------------------------------------------------------------------


def test_starting_to_wait_is_a_status_event_then_what_it_waits_on() -> None:
    old = base()
    new = replace(old.move(INPUT_REQUIRED, T1, message="waiting for input"), input_requests={"q-1": {"m": 1}})
    status, waiting = valid(changes.transition(old, new))
    assert status.kind == "task.status" and status.data["status"] == INPUT_REQUIRED
    assert waiting.kind == "task.input_required" and waiting.connection_id == "c-1"
    assert waiting.data == {"requests": {"q-1": {"m": 1}}, "added": ["q-1"]}


def test_a_question_added_while_waiting_is_one_input_event_naming_it() -> None:
    old = base(INPUT_REQUIRED, input_requests={"q-1": {}}, status_message="waiting for input")
    (event,) = valid(changes.transition(old, replace(old, input_requests={"q-1": {}, "q-2": {}})))
    assert event.kind == "task.input_required" and event.data == {"requests": {"q-1": {}, "q-2": {}}, "added": ["q-2"]}


def test_a_question_settled_while_others_wait_is_one_input_event_adding_nothing() -> None:
    old = base(INPUT_REQUIRED, input_requests={"q-1": {}, "q-2": {}})
    (event,) = valid(changes.transition(old, replace(old, input_requests={"q-2": {}})))
    assert event.kind == "task.input_required" and event.data == {"requests": {"q-2": {}}, "added": []}


@pytest.mark.parametrize("after", [WORKING, *sorted(TERMINAL)])
def test_leaving_input_required_is_no_input_event(after: Status) -> None:
    old = base(INPUT_REQUIRED, input_requests={"q-1": {}})
    new = old.move(after, T1)
    assert new.input_requests == {} and kinds(changes.transition(old, new)) == ["task.status"]


# ---- the other kinds ---------------------------------------------------------------------------


def test_a_cancel_request_names_who_asked_and_the_status_it_found() -> None:
    task = base(INPUT_REQUIRED)
    (event,) = valid([changes.cancel_requested(task, "operator:ann")])
    assert (event.kind, event.by, event.task_id, event.connection_id, event.data) == (
        "task.cancel_requested",
        "operator:ann",
        task.id,
        "c-1",
        {"status": INPUT_REQUIRED},
    )


def test_an_expiry_is_mcpxs_own_event_with_no_data() -> None:
    (event,) = valid([changes.expired("t-1", "c-1")])
    assert (event.kind, event.by, event.task_id, event.connection_id, event.data) == (
        "task.expired",
        "mcpx",
        "t-1",
        "c-1",
        {},
    )
