"""Records to stored rows and back: the part of a store every backend shares. Pure."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..events.bus import Event, StoredEvent
from ..records.connection_record import ConnectionRecord
from ..records.question import Question
from ..records.task import Task

_TASK_NAMES = tuple(f.name for f in dataclasses.fields(Task))
_QUESTION_NAMES = tuple(f.name for f in dataclasses.fields(Question))
_CONNECTION_NAMES = tuple(f.name for f in dataclasses.fields(ConnectionRecord))
_TASK_FIELDS = frozenset(_TASK_NAMES)
_QUESTION_FIELDS = frozenset(_QUESTION_NAMES)
_CONNECTION_FIELDS = frozenset(_CONNECTION_NAMES)


def _fields(record: object, names: tuple[str, ...]) -> dict[str, object]:
    """A record's fields, shallow: its values are JSON already (dataclasses.asdict deep-copied
    every argument and result on each write, a sixth of a task's CPU in the daemon)."""
    return {name: getattr(record, name) for name in names}


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def task_body(task: Task) -> str:
    return dumps(_fields(task, _TASK_NAMES))


def task_columns(task: Task) -> tuple[object, ...]:
    """A task as the columns of its row, in sql.TASK_COLS order (the body last)."""
    return (
        task.id,
        task.status,
        task.created_ms,
        task.updated_ms,
        task.ttl_ms,
        task.expires_ms(),
        task.poll_ms,
        task.owner,
        task.upstream,
        task.tool,
        task.era,
        task.connection,
        task_body(task),
    )


def task_from(body: str) -> Task:
    # Fields a newer or older mcpx wrote that this one does not know are left behind.
    data = {k: v for k, v in json.loads(body).items() if k in _TASK_FIELDS}
    return Task(**data)


def question_body(q: Question) -> str:
    return dumps(_fields(q, _QUESTION_NAMES))


def question_from(body: str) -> Question:
    data = {k: v for k, v in json.loads(body).items() if k in _QUESTION_FIELDS}
    return Question(**data)


def connection_body(c: ConnectionRecord) -> str:
    return dumps(_fields(c, _CONNECTION_NAMES))


def connection_from(body: str) -> ConnectionRecord:
    data = {k: v for k, v in json.loads(body).items() if k in _CONNECTION_FIELDS}
    return ConnectionRecord(**data)


def event_row(event: Event) -> tuple[str, str | None, str | None, str | None, str | None, str]:
    return (event.kind, event.task_id, event.connection_id, event.question_id, event.by, dumps(event.data))


def event_from(
    seq: int,
    ts_ms: int,
    kind: str,
    task_id: str | None,
    connection_id: str | None,
    question_id: str | None,
    by: str | None,
    body: str,
) -> StoredEvent:
    data: dict[str, Any] = json.loads(body)
    event = Event(kind, data, task_id=task_id, connection_id=connection_id, question_id=question_id, by=by)  # type: ignore[arg-type]  # a stored kind is one we wrote
    return StoredEvent(seq, ts_ms, event)
