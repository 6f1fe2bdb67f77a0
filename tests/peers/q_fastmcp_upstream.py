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

import argparse
import json
import os
import sys
import time
from typing import Any

import anyio
import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

_events_path: str | None = None

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "subscribed": {"type": "boolean"}},
    "required": ["name", "age", "subscribed"],
}


def _event(event: str, **fields: Any) -> None:
    if _events_path is None:
        return
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
    with open(_events_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


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


async def run_http(mcp: FastMCP, port: int, ready_file: str | None) -> None:
    import socket

    import uvicorn

    app = mcp.http_app(path="/mcp")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.02)
        if ready_file:
            tmp = ready_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(bound))
            os.replace(tmp, ready_file)


def main() -> None:
    global _events_path
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    parser.add_argument("--events")
    args = parser.parse_args()
    _events_path = args.events
    mcp = build_server()
    if args.mode == "stdio":
        anyio.run(lambda: mcp.run_stdio_async(show_banner=False, log_level="WARNING"))
    else:
        anyio.run(run_http, mcp, args.port, args.ready_file)


if __name__ == "__main__":
    sys.exit(main())
