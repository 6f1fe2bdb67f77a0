"""The kinds of event (docs/api.md): the one list the bus, /v1's schemas and the CLI's choices share.

Pure and tiny, so that anything may import it (mcpx/events/bus.py re-exports both names).
"""

from __future__ import annotations

from typing import Literal, get_args

EventKind = Literal[
    "connection.opened",
    "connection.updated",
    "connection.closed",
    "task.created",
    "task.status",
    "task.input_required",
    "task.cancel_requested",
    "task.expired",
    "question.opened",
    "question.answered",
    "question.expired",
    "question.abandoned",
    "config.reloaded",
    "config.refused",
    "daemon.background_failed",
    "upstream.needs_login",
    "upstream.signed_in",
    "upstream.signed_out",
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
# The kinds that close a question, however it ended.
QUESTION_CLOSED: tuple[EventKind, ...] = ("question.answered", "question.expired", "question.abandoned")
