"""The task record and its allowed transitions (its wire shapes: protocol/task_wire.py). Pure: no clock reads.

Transitions (2025-11-25 tasks.mdx:403-407; ext-tasks tasks.md:232-252): working <-> input_required,
either -> completed | failed | cancelled; a terminal status never changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..protocol.ids import opaque_id
from ..protocol.revisions import Era

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
# "task": a host asked for (or was handed) a task handle. "call": a host's plain tools/call that ran
# long or asked a question, listed for operators only (tasks/plain_calls.py); no host polls it.
Kind = Literal["task", "call"]
WORKING: Status = "working"
INPUT_REQUIRED: Status = "input_required"
COMPLETED: Status = "completed"
FAILED: Status = "failed"
CANCELLED: Status = "cancelled"
TERMINAL: frozenset[Status] = frozenset({COMPLETED, FAILED, CANCELLED})
_ALLOWED: dict[Status, set[Status]] = {
    WORKING: {INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED},
    INPUT_REQUIRED: {WORKING, COMPLETED, FAILED, CANCELLED},
}


class TransitionError(ValueError):
    pass


def new_task_id() -> str:
    """256 random bits: unguessable, as the spec asks where tasks are not bound to a principal."""
    return opaque_id(32)


@dataclass(frozen=True)
class Task:
    id: str
    status: Status
    created_ms: int
    updated_ms: int
    ttl_ms: int | None
    poll_ms: int
    owner: str  # the owning host connection's key; isolation compares this
    upstream: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    era: Era = "legacy"  # the era of the host that created it: its wire rules apply
    status_message: str | None = None
    result: dict[str, Any] | None = None  # the CallToolResult, as the upstream sent it
    error: dict[str, Any] | None = None  # a JSON-RPC error object
    upstream_task_id: str | None = None
    # The 2025-11-25 HTTP session (Mcp-Session-Id) that upstream task was made in: some servers
    # scope task ids to it, so whichever daemon follows the task later asks in that session.
    upstream_session: str | None = None
    # "<server run>/<request id>" of a plain call to a kept stdio server: a restarted daemon
    # claims that request's reply from the same server process (upstream/reclaim.py).
    upstream_request: str | None = None
    connection: str | None = None  # the registry id of the host connection that created it
    # Outstanding questions while input_required, by a key unique for the task's whole life.
    input_requests: dict[str, Any] = field(default_factory=dict)
    kind: Kind = "task"
    why: str | None = None  # why it is a row and who holds it, in one line (tasks/why.py)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def shown(self) -> tuple[object, ...]:
        """What hosts are told of in status notifications: a change of it is announced."""
        return (self.status, self.status_message, tuple(self.input_requests))

    def expires_ms(self) -> int | None:
        return None if self.ttl_ms is None else self.created_ms + self.ttl_ms

    def move(
        self,
        status: Status,
        now_ms: int,
        *,
        message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> Task:
        if status == self.status and status not in TERMINAL:
            return replace(
                self, updated_ms=now_ms, status_message=message if message is not None else self.status_message
            )
        if status != INPUT_REQUIRED and self.input_requests:
            self = replace(self, input_requests={})  # leaving input_required: nothing is asked any more
        if status not in _ALLOWED.get(self.status, set()):
            raise TransitionError(f"task {self.id}: {self.status} -> {status} is not allowed")
        return replace(
            self,
            status=status,
            updated_ms=now_ms,
            status_message=message,
            result=result if result is not None else self.result,
            error=error if error is not None else self.error,
        )


def legacy_status_for_result(result: dict[str, Any]) -> Status:
    """2025-11-25: a CallToolResult with isError puts the task in `failed` (tasks.mdx:721,839)."""
    return FAILED if result.get("isError") is True else COMPLETED
