"""What code that carries a task's upstream work on (upstream/tasks/, after a restart or a
take-over) may do to that task: the engine hands itself over as this narrow interface, never whole."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..records.task import Task


class TaskControl(Protocol):
    @property
    def closing(self) -> bool:
        """The daemon is stopping: leave upstream tasks running, the next daemon resumes them."""

    async def ask(self, task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        """Put questions to the task's host (its `inputRequests`) and wait for every answer."""

    async def set_status_message(self, task_id: str, message: str | None) -> str | None:
        """Show the upstream's status message on the task; returns the one it replaced."""

    async def store_upstream_task(self, task_id: str, upstream_task_id: str) -> None:
        """The task's cut call turned out to have become this upstream task: remember it."""

    async def store_upstream_request(self, task_id: str, ref: str) -> None:
        """The task's call, which its kept server never got, was sent again as `ref`: remember it."""


# Finishes a task a previous daemon (or a lost instance) left running: the CallToolResult shaped
# for the task's era, or an exception, exactly like the call a task runs.
CarryOn = Callable[[Task, TaskControl], Awaitable[dict[str, Any]]]
