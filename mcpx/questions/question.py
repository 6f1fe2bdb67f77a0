"""A question an upstream asked mid-call, and what counts as a valid answer to it. Pure.

Kinds: a form elicitation (`elicitation/create`, answered `accept` with content matching its
`requestedSchema`, `decline` or `cancel`), a URL elicitation (`accept` once the person is done,
`decline`, `cancel`), sampling (`sampling/createMessage`, answered with a CreateMessageResult) and
roots (`roots/list`, answered with a ListRootsResult). Operators' answers are checked here, so a
mistyped answer is refused (HTTP 422 naming the field) instead of breaking the upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from . import elicitation

QuestionStatus = Literal["open", "answered", "expired"]
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


class AnswerError(ValueError):
    """An operator's answer that does not fit its question; `fields` names what is wrong."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k or 'answer'}: {v}" for k, v in fields.items()))
        self.fields = fields


def operator_answer(
    question: Question, action: Action, content: object = None, result: object = None
) -> dict[str, Any] | tuple[int, str]:
    """What the upstream gets for an operator's answer: a result object, or (code, message) for a
    JSON-RPC error (a declined sampling or roots request has no result form). Raises AnswerError."""
    kind = question.kind
    if kind in ("elicitation", "url-elicitation"):
        if action != "accept":
            if content is not None:
                raise AnswerError({"content": f"a {action} carries no content"})
            return {"action": action}
        if kind == "url-elicitation":
            return {"action": "accept"}
        try:
            form = elicitation.parse_form(question.params.get("requestedSchema"))
        except elicitation.FormError as exc:
            raise AnswerError({"requestedSchema": f"the upstream's form cannot be answered: {exc}"}) from None
        errors = elicitation.validate(form, content)
        if errors:
            raise AnswerError({f"content.{k}" if k else "content": v for k, v in errors.items()})
        return {"action": "accept", "content": content if isinstance(content, dict) else {}}
    if action != "accept":
        if kind == "sampling":
            return (USER_REJECTED, f"the operator answered {action}: sampling request rejected")
        return (-32603, f"the operator answered {action}")
    if not isinstance(result, dict):
        raise AnswerError({"result": f"an accepted {kind} answer needs a result object"})
    errors = _check_sampling(result) if kind == "sampling" else _check_roots(result) if kind == "roots" else {}
    if errors:
        raise AnswerError(errors)
    return result


def _check_roots(result: dict[str, Any]) -> dict[str, str]:
    roots = result.get("roots")
    if not isinstance(roots, list):
        return {"result.roots": "must be a list of {uri, name?}"}
    errors: dict[str, str] = {}
    for i, root in enumerate(roots):
        if not isinstance(root, dict) or not isinstance(root.get("uri"), str):
            errors[f"result.roots[{i}].uri"] = "required, a string"
        elif not root["uri"].startswith("file://"):
            errors[f"result.roots[{i}].uri"] = "a root is a file:// URI"
        elif "name" in root and not isinstance(root["name"], str):
            errors[f"result.roots[{i}].name"] = "must be a string"
    extra = sorted(set(result) - {"roots", "_meta"})
    if extra:
        errors[f"result.{extra[0]}"] = "unknown key"
    return errors


def _check_sampling(result: dict[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    if result.get("role") != "assistant":
        errors["result.role"] = 'must be "assistant"'
    if not isinstance(result.get("model"), str) or not result["model"]:
        errors["result.model"] = "required, the model's name"
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    for i, block in enumerate(blocks):
        where = "result.content" if not isinstance(content, list) else f"result.content[{i}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            errors[where] = "a content block with a type"
        elif block["type"] == "text" and not isinstance(block.get("text"), str):
            errors[f"{where}.text"] = "required, a string"
    if "stopReason" in result and not isinstance(result["stopReason"], str):
        errors["result.stopReason"] = "must be a string"
    return errors
