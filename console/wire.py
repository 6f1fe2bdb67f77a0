"""What the console reads from the daemon's `/v1` and `/v1/events` (docs/api.md), typed: the fields
it uses, as the daemon's models (mcpx/api/models.py) send them. The feed's hosts, tasks and
questions become console/state.py's dataclasses (Host, TaskRow, Question) as they are folded in.

TypedDicts, not the daemon's pydantic models: the console types raw JSON (thousands of feed events
a second) and validates none of it. tests/unit/test_shapes.py holds every field here to the
daemon's JSON Schema for it (name, presence, type), so the two cannot drift apart.

`Json` marks what an upstream or host chose (a tool's arguments, an event's data, a frame): any
JSON value, checked where it is read.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, get_args, get_type_hints

Json: TypeAlias = Any  # a JSON value an upstream or host chose: any shape
JsonObject: TypeAlias = dict[str, Json]


class InputRequest(TypedDict):
    """What a task waits for (`inputRequests` of a task)."""

    questionId: str
    kind: str
    method: str
    upstream: str
    params: JsonObject


class TaskEvent(TypedDict):
    """One entry of a task's timeline (`events` of a task)."""

    seq: int
    kind: str
    by: NotRequired[str | None]
    data: JsonObject


class TaskDetail(TypedDict):
    """`GET /v1/tasks/{id}`: what the detail pane shows of it."""

    id: str
    kind: Literal["task", "call"]
    status: str
    statusMessage: str | None
    needsInput: bool
    connectionId: str | None
    owner: str
    tool: str
    upstream: str
    era: str
    upstreamTaskId: str | None
    why: NotRequired[str | None]  # why it is a row and who holds it (the daemon's line)
    createdMs: int
    ttlMs: int | None
    pollIntervalMs: int
    arguments: Json
    inputRequests: list[InputRequest]
    result: JsonObject | None  # a CallToolResult
    error: JsonObject | None  # a JSON-RPC error
    events: list[TaskEvent]


class Frame(TypedDict):
    """One frame of `GET /v1/tasks/{id}/frames`: `frame` as relayed, or `text` when cut to size."""

    side: Literal["host", "upstream"]
    direction: Literal["in", "out"]
    frame: NotRequired[Json | None]
    text: NotRequired[str | None]


class SnapshotMessage(TypedDict):
    type: Literal["snapshot"]
    seq: int
    connections: list[JsonObject]  # -> state.Host
    tasks: list[JsonObject]  # -> state.TaskRow
    questions: list[JsonObject]  # -> state.Question
    operators: list[str]


class EventMessage(TypedDict):
    type: Literal["event"]
    seq: int
    ts: int
    kind: str
    taskId: NotRequired[str]
    connectionId: NotRequired[str]
    questionId: NotRequired[str]
    by: NotRequired[str]
    data: JsonObject


class ResetMessage(TypedDict):
    """The feed could not resume from the sequence asked: a snapshot follows."""

    type: Literal["reset"]
    reason: NotRequired[str]


class HeartbeatMessage(TypedDict):
    """Nothing else to send (every 15 s, and once a resume has caught up); `seq`: the newest event."""

    type: Literal["heartbeat"]
    seq: int
    ts: int
    operators: NotRequired[list[str]]  # who is attached now (sent at once when that changes)


class GapMessage(TypedDict):
    """The console read too slowly; it is caught up from the store after `after`, in order."""

    type: Literal["gap"]
    after: int


FeedMessage: TypeAlias = SnapshotMessage | EventMessage | ResetMessage | HeartbeatMessage | GapMessage
# The `type` of each message above.
FEED_TYPES: frozenset[str] = frozenset(get_args(get_type_hints(m)["type"])[0] for m in get_args(FeedMessage))
