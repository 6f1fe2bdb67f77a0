"""The 2026-07-28 `io.modelcontextprotocol/tasks` extension rules. Pure.

The server decides per request: for a client whose own request declares the extension, a call
still running after `tasks.taskAfterMs` (at once for `required` tools) becomes a task; `forbidden`
never does; `params.task` is ignored. Task ids are reachable by id alone unless auth binds them to
a principal (the extension's model).
"""

from __future__ import annotations

from typing import Any

from . import jsonrpc
from .errors import INTERNAL_ERROR, InvalidParams, MissingClientCapability
from .jsonrpc import Id
from .revisions import META_SUBSCRIPTION, TASKS_EXTENSION
from .task_facts import T, TaskFacts, expired, is_terminal
from .task_wire import modern_task

REQUIRED: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}


def declares(client_caps: dict[str, Any]) -> bool:
    ext = client_caps.get("extensions")
    return isinstance(ext, dict) and TASKS_EXTENSION in ext


def require(client_caps: dict[str, Any]) -> None:
    if not declares(client_caps):
        raise MissingClientCapability(
            "Missing required client capability: the io.modelcontextprotocol/tasks extension",
            {"requiredCapabilities": REQUIRED},
        )


def owner_key(principal: str | None, connection_id: str) -> str:
    return f"principal:{principal}" if principal else f"modern:{connection_id}"


def taskable(client_caps: dict[str, Any], support: str) -> bool:
    """Whether this tools/call may become a task; a `required` tool refuses a client that cannot."""
    declaring = declares(client_caps)
    if not declaring and support == "required":
        raise MissingClientCapability(
            "This tool runs only as a task: declare the io.modelcontextprotocol/tasks extension",
            {"requiredCapabilities": REQUIRED},
        )
    return declaring and support != "forbidden"


def visible(task: T | None, task_id: object, owner: str, now_ms: int) -> T:
    """A modern task by id: bound to a principal only when one exists (otherwise the id is the
    capability); legacy, expired and missing ids are all unknown."""
    if (
        task is None
        or task.era != "modern"
        or (task.owner.startswith("principal:") and task.owner != owner)
        or expired(task, now_ms)
    ):
        raise InvalidParams(f"Unknown task: {task_id}")
    return task


def detailed(task: TaskFacts) -> dict[str, Any]:
    """DetailedTask: what tasks/get returns and notifications/tasks carry (X4)."""
    out = modern_task(task)
    if task.status == "completed" and task.result is not None:
        # X10: the inlined CallToolResult carries its own resultType.
        out["result"] = {**task.result, "resultType": "complete"}
    elif task.status == "failed":
        out["error"] = task.error or {"code": INTERNAL_ERROR, "message": task.status_message or "failed"}
    elif task.status == "input_required":
        out["inputRequests"] = dict(task.input_requests)  # every request still outstanding
    return out


def task_handle(task: TaskFacts) -> dict[str, Any]:
    """A tools/call that became a task answers with the task itself."""
    return {**modern_task(task), "resultType": "task"}


def input_round(outstanding: dict[str, Any], park_id: str) -> dict[str, Any]:
    """An MRTR round for questions asked before there is a task; the retry names the park."""
    return {"resultType": "input_required", "inputRequests": dict(outstanding), "requestState": {"mcpxPark": park_id}}


def update_responses(params: dict[str, Any]) -> dict[str, Any]:
    """tasks/update's answers; keys that are not outstanding are ignored later (tasks.md:379)."""
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams("tasks/update: params.inputResponses must be an object")
    return responses


def cancel_needed(task: TaskFacts) -> bool:
    """A modern tasks/cancel is an ack whatever the state (cooperative); only a live task is cancelled."""
    return not is_terminal(task)


def listen_ids(ids: object) -> list[str]:
    """subscriptions/listen notifications.taskIds, checked for shape (unknown ids are left out later)."""
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InvalidParams("subscriptions/listen: notifications.taskIds must be a list of strings")
    return list(ids)


def task_notification(task: TaskFacts, subscription_id: Id) -> dict[str, Any]:
    """notifications/tasks on a listen stream: the DetailedTask, tagged with the subscription."""
    return jsonrpc.notification(
        "notifications/tasks", {**detailed(task), "_meta": {META_SUBSCRIPTION: subscription_id}}
    )
