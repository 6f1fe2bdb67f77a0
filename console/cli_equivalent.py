"""What a row would be at a terminal without the console: the `mcpx` command that does the same
(`y` copies it). Pure: a task row, a question or a host in, one command line out."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from .state import Host, Question, TaskRow

_PLACEHOLDER = {"boolean": "true|false", "number": "N", "integer": "N"}


def question_command(q: Question) -> str:
    """`mcpx questions answer <id> --accept name=… …` with the form's fields as placeholders
    (a form that cannot be parsed, or a question that is not a form, gets `--decline` to edit)."""
    params: Mapping[str, Any] = q.wire.get("params") or {}
    schema = params.get("requestedSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if q.kind != "elicitation" or not isinstance(props, dict):
        return f"mcpx questions answer {q.id} --decline"
    values = []
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        enum = prop.get("enum")
        if isinstance(enum, list):
            hint = "|".join(map(str, enum))
        else:  # what to put there: a number, true|false, or the kind of text (EMAIL, URI, TEXT)
            hint = _PLACEHOLDER.get(str(prop.get("type")), str(prop.get("format") or "text").upper())
        values.append(shlex.quote(f"{name}={hint}"))
    return " ".join([f"mcpx questions answer {q.id} --accept", *values])


def task_command(row: TaskRow, questions: list[Question]) -> str:
    """A task waiting on a question: answer it; one still running: cancel it; one that ended: show it."""
    if questions:
        return question_command(questions[0])
    if not row.terminal:
        return f"mcpx tasks cancel {row.id}"
    return f"mcpx tasks show {row.id}"


def host_command(host: Host | None) -> str:
    """The host's tasks, or everyone's."""
    return "mcpx tasks ls" if host is None else f"mcpx tasks ls --connection {host.id}"
