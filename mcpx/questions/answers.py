"""What counts as a valid operator's answer to a question, and what the upstream then gets. Pure.

Operators' answers are checked here, so a mistyped answer is refused (HTTP 422 naming the field)
instead of breaking the upstream.
"""

from __future__ import annotations

from typing import Any

from ..records.question import USER_REJECTED, Action, Question
from . import elicitation


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
