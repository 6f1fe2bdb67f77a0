"""The 2025-11-25 task rules: params.task, tasks/get|result|list|cancel replies. Pure.

Only sessions negotiated at 2025-11-25 have tasks (they did not exist before). A task belongs to
the host connection that created it (its principal when auth is on); any other owner, and any
task past its TTL, gets exactly what an unknown id gets.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from . import jsonrpc
from .errors import INTERNAL_ERROR, InvalidParams, MethodNotFound
from .revisions import LEGACY_LATEST, META_RELATED_TASK, Era
from .task_facts import T, TaskFacts, expired, is_terminal
from .task_wire import legacy_task

PAGE = 50
TASK_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
TASK_SUPPORT = ("forbidden", "optional", "required")


class TaskErrorReply(Exception):
    """tasks/result of a failed task: the stored JSON-RPC error is the reply."""

    def __init__(self, error: dict[str, Any], related: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error
        self.related = related


def enabled(era: Era, revision: str) -> bool:
    return era == "legacy" and revision == LEGACY_LATEST


def not_enabled(revision: str) -> MethodNotFound:
    return MethodNotFound(f"Method not found: tasks exist only in 2025-11-25 sessions (this one is {revision})")


def owner_key(principal: str | None, connection_id: str) -> str:
    """Principal when authenticated (so it survives reconnects), else the connection itself."""
    return f"principal:{principal}" if principal else f"conn:{connection_id}"


def task_support(override: str | None) -> str:
    """What hosts are told of a tool: the config override, else `optional`, whatever the upstream
    declared. mcpx holds a task for any tool (a `forbidden` or silent upstream sees a plain call;
    the TypeScript SDK declares `forbidden` on every tool), and answers a plain call to an
    upstream's `required` tool inline by following the upstream task (host/upstream_call.py)."""
    return override or "optional"


def check_support(support: str, params: dict[str, Any]) -> None:
    """Whether this tools/call may (or must) carry params.task."""
    if "task" in params and support == "forbidden":
        raise MethodNotFound("This tool cannot run as a task (taskSupport: forbidden)")
    if "task" not in params and support == "required":
        # L1: -32601 (tasks.mdx:117) rather than the MAY -32600 of tasks.mdx:775.
        raise MethodNotFound("This tool must be called as a task (taskSupport: required): add params.task")


def task_ttl(params: dict[str, Any], default_ms: int, max_ms: int) -> int:
    """The TTL a task-augmented call gets: the host's ask, honoured up to the configured maximum."""
    meta = params.get("task")
    if not isinstance(meta, dict):
        raise InvalidParams("tools/call: params.task must be an object")
    ttl = meta.get("ttl", default_ms)
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        raise InvalidParams("tools/call: params.task.ttl must be a positive integer (ms)")
    return min(ttl or default_ms, max_ms)


def owned(task: T | None, task_id: object, owner: str, now_ms: int) -> T:
    """The task a tasks/* request names, if this owner may see it; the same error for foreign,
    expired and missing ids."""
    if task is None or task.owner != owner or expired(task, now_ms):
        raise InvalidParams(f"Unknown task: {task_id}")
    return task


def created_reply(task: TaskFacts) -> dict[str, Any]:
    """CreateTaskResult of a task-augmented tools/call."""
    return {"task": legacy_task(task)}


def get_reply(task: TaskFacts) -> dict[str, Any]:
    return legacy_task(task)


def result_reply(task: TaskFacts | None, task_id: str) -> dict[str, Any]:
    """tasks/result once the task is terminal (None: it expired while the host waited). A result
    carries the related-task _meta; a failure is the underlying request's JSON-RPC error
    (DIGEST 2.6, L3), raised as TaskErrorReply with the related-task key in its data."""
    if task is None:
        raise InvalidParams(f"Unknown task: {task_id} (expired)")
    related = {META_RELATED_TASK: {"taskId": task.id}}
    if task.result is not None:
        out = dict(task.result)
        out["_meta"] = {**(out.get("_meta") or {}), **related}
        return out
    message = "task cancelled" if task.status == "cancelled" else "task failed"
    error = dict(task.error or {"code": INTERNAL_ERROR, "message": message})
    data = error.get("data")
    if data is None or isinstance(data, dict):  # an error object has no _meta: it rides in data
        error["data"] = {**(data or {}), "_meta": related}
    raise TaskErrorReply(error, related)


def list_reply(tasks: Sequence[TaskFacts], page: int = PAGE) -> dict[str, Any]:
    """One page of tasks/list from up to `page + 1` tasks in (created, id) order; the extra one
    only says that there is a next page."""
    res: dict[str, Any] = {"tasks": [legacy_task(t) for t in tasks[:page]]}
    if len(tasks) > page:
        last = tasks[page - 1]
        res["nextCursor"] = encode_cursor(last.created_ms, last.id)
    return res


def check_cancellable(task: TaskFacts) -> None:
    """A legacy tasks/cancel of a terminal task is an error (-32602), not an ack."""
    if is_terminal(task):
        raise InvalidParams(f"Task {task.id} is already {task.status} and cannot be cancelled")


def cancel_reply(task_id: str, cancelled: TaskFacts | None) -> dict[str, Any]:
    """The cancelled task; None means it finished while the cancel was on its way: too late."""
    if cancelled is None:
        raise InvalidParams(f"Task {task_id} has already finished and cannot be cancelled")
    return legacy_task(cancelled)


def status_notification(task: TaskFacts) -> dict[str, Any]:
    """notifications/tasks/status, sent to the owning session on every change."""
    return jsonrpc.notification("notifications/tasks/status", legacy_task(task))


def related_meta(task_id: str) -> dict[str, Any]:
    """A question asked inside a task is tagged with it (tasks.mdx:448,470)."""
    return {META_RELATED_TASK: {"taskId": task_id}}


def encode_cursor(created_ms: int, task_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["tasks", created_ms, task_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        if not isinstance(cursor, str):
            raise ValueError
        kind, created, task_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if kind != "tasks" or not isinstance(created, int) or isinstance(created, bool) or not isinstance(task_id, str):
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParams("Invalid cursor for tasks/list") from None
    return created, task_id
