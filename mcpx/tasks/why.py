"""The one line on a task or a listed call that says why it is a row at all, and who holds it.
Worded where that is decided (tasks/plain_calls.py, the task methods of each era). Pure."""

from __future__ import annotations


def ran_long(show_after_ms: int) -> str:
    return f"listed: ran longer than {show_after_ms} ms"


def asked_a_question() -> str:
    return "listed: it asked a question"


def held_by_mcpx(upstream: str, tool: str) -> str:
    return f"a task held by mcpx: {upstream} has no taskSupport for {tool}, so it gets a plain call"


def followed_upstream(upstream: str) -> str:
    return f"a task on {upstream} too: mcpx follows the upstream's own task"
