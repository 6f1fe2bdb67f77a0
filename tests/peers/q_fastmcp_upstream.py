"""MCP upstream on FastMCP 4.1.4 + ``fastmcp-tasks`` 4.1.4 whose task tool asks for input.

Run it with the ``fastmcp-tasks`` peer venv's python (``peer_python("fastmcp-tasks")``)::

    python q_fastmcp_upstream.py stdio [--events FILE]
    python q_fastmcp_upstream.py http --port N [--ready-file FILE] [--events FILE]   # /mcp

(Put it behind mcpx over HTTP: FastMCP imports slower than mcpx's 5 s stdio ``server/discover``
probe allows, and after a timed-out probe the SDK's stdio connection is already 2026-only.)

Tool ``ask(message, delay=0)`` is ``task=True`` (optional) and written in FastMCP's *guard*
pattern, the only way a FastMCP background task may ask (``ctx.elicit()`` is refused inside a
task): on its first leg it sleeps ``delay`` s and returns an ``InputRequiredResult`` with one
``elicitation/create`` input request (key ``person``); on the leg that has ``ctx.input_responses``
it answers one text block ``json.dumps({"action": ..., "content": ...}, sort_keys=True)``: exactly
the ``ElicitResult`` it received. Run as a task (the request declared the tasks extension) the task
goes ``input_required`` with that request in ``inputRequests`` and ``tasks/update`` re-enters it;
run inline (2026-07-28 without the extension) the same return is an MRTR ``input_required`` result.

``--events FILE`` appends JSON lines ``{"event": "leg", "message": ..., "answered": bool}`` for
every leg and ``{"event": "answered", "message": ..., "action": ..., "content": ...}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension
from fastmcp_upstream import main
from peer_common import Events

_event = Events()  # --events FILE

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "subscribed": {"type": "boolean"}},
    "required": ["name", "age", "subscribed"],
}


def _answer_of(value: Any) -> tuple[str, Any]:
    if isinstance(value, mcp_types.ElicitResult):
        return value.action, value.content
    if isinstance(value, dict):
        return str(value.get("action")), value.get("content")
    return "unexpected:" + type(value).__name__, None


def build_server() -> FastMCP:
    mcp = FastMCP("q-fastmcp-upstream")
    mcp.add_extension(TasksExtension(url="memory://"))

    @mcp.tool(task=True)
    async def ask(message: str, ctx: Context, delay: float = 0.0) -> mcp_types.InputRequiredResult | str:
        """Ask the user for a person (elicitation, guard pattern), then echo exactly what came back."""
        responses = ctx.input_responses
        _event("leg", message=message, answered=bool(responses))
        if not responses or "person" not in responses:
            if delay > 0:
                await anyio.sleep(delay)  # work first, then ask
            request = mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=SCHEMA)
            )
            return mcp_types.InputRequiredResult(input_requests={"person": request})
        action, content = _answer_of(responses["person"])
        _event("answered", message=message, action=action, content=content)
        return json.dumps({"action": action, "content": content}, sort_keys=True)

    return mcp


if __name__ == "__main__":
    sys.exit(main(build_server, _event))
