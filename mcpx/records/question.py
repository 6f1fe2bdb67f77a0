"""A question an upstream (or an approval gate) asked mid-call, as the store keeps it. Pure.

Kinds: a form elicitation (`elicitation/create`, answered `accept` with content matching its
`requestedSchema`, `decline` or `cancel`), a URL elicitation (`accept` once the person is done,
`decline`, `cancel`), sampling (`sampling/createMessage`, answered with a CreateMessageResult) and
roots (`roots/list`, answered with a ListRootsResult). What counts as a valid answer is
questions/answers.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# abandoned: left open by a daemon that ended without closing it (killed, crashed); closed at the next start
QuestionStatus = Literal["open", "answered", "expired", "abandoned"]
QuestionKind = Literal["elicitation", "url-elicitation", "sampling", "roots", "other"]
Action = Literal["accept", "decline", "cancel"]
_KIND: dict[str, QuestionKind] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
CAPABILITY_FOR = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
# Sampling declined by a person: the code the client spec suggests for a user rejection.
USER_REJECTED = -1


@dataclass
class Question:
    id: str
    upstream: str
    method: str
    params: dict[str, Any]
    created_ms: int
    expires_ms: int
    task_id: str | None = None  # the mcpx task it belongs to, only when certain
    connection: str | None = None  # registry id of the host connection whose call asked it
    input_key: str | None = None  # its key among a 2026 task's inputRequests
    host_can_answer: bool = False  # the host was asked too (it declared the capability)
    status: QuestionStatus = "open"
    answered_by: str | None = None  # "host:<connection>" | "operator:<name>" | "mcpx"
    answer: dict[str, Any] | None = None  # what the upstream was given (a result object)
    error: dict[str, Any] | None = None  # or the JSON-RPC error it was given instead
    closed_ms: int | None = None
    reason: str | None = None  # why it expired
    # When it could not be tied to one call (a shared stdio server, calls of several hosts in flight):
    # every call that may have asked it, for the operator it goes to (session.Caller.wire).
    candidates: list[dict[str, Any]] = field(default_factory=list)
    # Who was asked and why, in one line (questions/routing.py words it where the route is chosen).
    why: str | None = None
    # The daemon that asked it, when daemons share a store (its `store.instance`): after it is gone,
    # its open questions are abandoned by whoever takes its work over. Stored, not shown.
    instance: str | None = None

    @property
    def kind(self) -> QuestionKind:
        if self.method == "elicitation/create" and self.params.get("mode") == "url":
            return "url-elicitation"
        return _KIND.get(self.method, "other")

    def wire(self) -> dict[str, Any]:
        """The question as /v1 and the feed show it."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "method": self.method,
            "upstream": self.upstream,
            "params": self.params,
            "status": self.status,
            "createdMs": self.created_ms,
            "expiresMs": self.expires_ms,
            "taskId": self.task_id,
            "connectionId": self.connection,
            "inputKey": self.input_key,
            "hostCanAnswer": self.host_can_answer,
            "answeredBy": self.answered_by,
            "answer": self.answer,
            "error": self.error,
            "closedMs": self.closed_ms,
            "reason": self.reason,
            "candidates": self.candidates,
            "why": self.why,
        }
        return out
