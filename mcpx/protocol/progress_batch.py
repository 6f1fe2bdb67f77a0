"""Progress an upstream sent faster than mcpx relays it: within one batch of messages read at once,
a progress notification that a later one of the same token supersedes is dropped before anything
else is done with it (docs/daemon-behavior.md "A flooding upstream").

Upstream tokens are mcpx's own, one per request (upstream/session.py), so a token names one call.
What is kept keeps its place: each token's newest progress, and every other message, in the order
read. A batch holds one message per token when mcpx keeps up; only a backlog (an upstream that
floods) has anything to drop, so a stdio upstream's other replies do not queue behind thousands
of notifications nobody will see. Pure.
"""

from __future__ import annotations

from typing import Any

PROGRESS = "notifications/progress"


def without_superseded(batch: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(the batch less superseded progress notifications, how many were dropped)."""
    if len(batch) < 2:
        return batch, 0
    newest: dict[object, int] = {}
    for at, msg in enumerate(batch):
        token = _token(msg)
        if token is not None:
            newest[token] = at
    if len(newest) == sum(1 for msg in batch if _token(msg) is not None):
        return batch, 0
    kept = [msg for at, msg in enumerate(batch) if (token := _token(msg)) is None or newest[token] == at]
    return kept, len(batch) - len(kept)


def _token(msg: dict[str, Any]) -> object:
    """The progress token of a progress notification (typed: "1" and 1 differ), else None."""
    if msg.get("method") != PROGRESS or "id" in msg:
        return None
    params = msg.get("params")
    token = params.get("progressToken") if isinstance(params, dict) else None
    if isinstance(token, (str, int, float)) and not isinstance(token, bool):
        return (type(token).__name__, token)
    return None
