"""Why a host's task is held where it is, for its row (tasks/why.py words it): mcpx follows the
upstream's own task when the upstream offers tasks for the tool, else mcpx holds the task itself
and the upstream sees a plain call."""

from __future__ import annotations

from ..tasks import why
from ..upstream.pool import UpstreamServer
from ..upstream.tasks import follow


def task_why(server: UpstreamServer, tool: str) -> str | None:
    """None while the upstream is not ready (nothing says yet what it offers)."""
    session = server.session
    if session is None:
        return None
    if follow.task_capable(session, follow.upstream_tool(server.lists.get("tools"), tool)):
        return why.followed_upstream(server.key)
    return why.held_by_mcpx(server.key, tool)
