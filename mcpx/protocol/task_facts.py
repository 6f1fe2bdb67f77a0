"""What the task rules read of a task: plain, read-only fields (records/task.py's Task has them all).

A structural type, so protocol/ needs nothing from tasks/ and a unit test can feed any plain record.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from .revisions import Era

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})


class TaskFacts(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def created_ms(self) -> int: ...
    @property
    def updated_ms(self) -> int: ...
    @property
    def ttl_ms(self) -> int | None: ...
    @property
    def poll_ms(self) -> int: ...
    @property
    def owner(self) -> str: ...
    @property
    def era(self) -> Era: ...
    @property
    def status_message(self) -> str | None: ...
    @property
    def result(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...
    @property
    def input_requests(self) -> dict[str, Any]: ...


T = TypeVar("T", bound=TaskFacts)


def is_terminal(task: TaskFacts) -> bool:
    return task.status in TERMINAL_STATUSES


def expired(task: TaskFacts, now_ms: int) -> bool:
    """Past its TTL: gone for every host, even before the sweeper removes the row."""
    return task.ttl_ms is not None and task.created_ms + task.ttl_ms <= now_ms
