"""The events a task row change stands for. Pure: (before, after) in, events out.

The engine writes these with the row in one transaction (events.py), so the feed and the audit
log see every transition, every status message and every question a task waits on.
"""

from __future__ import annotations

from typing import Any

from ..events.bus import Event
from ..records.task import FAILED, INPUT_REQUIRED, Task


def created(task: Task, by: str | None) -> Event:
    return Event(
        "task.created",
        {
            "kind": task.kind,
            "upstream": task.upstream,
            "tool": task.tool,
            "arguments": task.arguments,
            "era": task.era,
            "owner": owner_kind(task.owner),
            "status": task.status,
            "statusMessage": task.status_message,
            "createdMs": task.created_ms,
            "ttlMs": task.ttl_ms,
            "pollIntervalMs": task.poll_ms,
            "why": task.why,
        },
        task_id=task.id,
        connection_id=task.connection,
        by=by,
    )


def owner_kind(owner: str) -> str:
    """What binds a task, without the secret part (a legacy session id is a bearer credential)."""
    kind, _, name = owner.partition(":")
    return f"principal:{name}" if kind == "principal" else kind


def transition(before: Task | None, after: Task, by: str | None = None) -> list[Event]:
    """task.created for a new row; task.status when the status or its message changed;
    task.input_required when questions were added to (or withdrawn from) what it waits on."""
    events: list[Event] = []
    if before is None:
        events.append(created(after, by))
        if after.input_requests:
            events.append(_input(after, sorted(after.input_requests)))
        return events
    if after.status != before.status or after.status_message != before.status_message:
        data: dict[str, Any] = {
            "status": after.status,
            "previous": before.status,
            "statusMessage": after.status_message,
        }
        if after.status == FAILED and after.error is not None:
            data["error"] = after.error
        if after.terminal and after.result is not None:
            data["isError"] = after.result.get("isError") is True
        events.append(Event("task.status", data, task_id=after.id, connection_id=after.connection, by=by))
    added = sorted(set(after.input_requests) - set(before.input_requests))
    if after.status == INPUT_REQUIRED and (added or after.input_requests != before.input_requests):
        events.append(_input(after, added))
    return events


def _input(task: Task, added: list[str]) -> Event:
    return Event(
        "task.input_required",
        {"requests": dict(task.input_requests), "added": added},
        task_id=task.id,
        connection_id=task.connection,
    )


def cancel_requested(task: Task, by: str) -> Event:
    return Event(
        "task.cancel_requested", {"status": task.status}, task_id=task.id, connection_id=task.connection, by=by
    )


def expired(task_id: str, connection_id: str | None) -> Event:
    # Written after the task's own events are deleted with its row, so this one outlives them.
    return Event("task.expired", {}, task_id=task_id, connection_id=connection_id, by="mcpx")
