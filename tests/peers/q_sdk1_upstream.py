"""MCP upstream (server) on the official ``mcp`` SDK 1.30 ``FastMCP`` whose tool asks mid-call.

Run it with the SDK 1.30 peer venv's python (``peer_python("mcp-1.30")``)::

    python q_sdk1_upstream.py stdio [--events FILE]

Tool ``ask(message, delay=0)``: sleeps ``delay`` s, then ``await ctx.elicit(message, Person)`` -- a
2025-11-25 ``elicitation/create`` server request inside the ``tools/call`` -- then one text block
``json.dumps({"action": ..., "content": ...}, sort_keys=True)``: exactly what the upstream received
(``Person`` is strict and forbids extra keys, so the dumped model is the received content itself;
``content`` is null for decline/cancel).

``--events FILE`` appends JSON lines ``{"event": "start", "message": ...}`` when the tool starts
(once per upstream call: a resumed call does not start again) and ``{"event": "answered",
"message": ..., "action": ..., "content": ...}`` when the answer arrived.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP
from peer_common import Events
from pydantic import BaseModel, ConfigDict

_event = Events()  # --events FILE


class Person(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    name: str
    age: int
    subscribed: bool


def build_server() -> FastMCP:
    server = FastMCP("q-sdk1-upstream", log_level="WARNING")

    @server.tool()
    async def ask(message: str, ctx: Context, delay: float = 0.0) -> str:
        """Ask the user for a person (elicitation), then echo exactly what came back."""
        _event("start", message=message)
        if delay > 0:
            await anyio.sleep(delay)  # work first, then ask
        answer = await ctx.elicit(message, Person)
        content = answer.data.model_dump(mode="json") if answer.action == "accept" else None
        _event("answered", message=message, action=answer.action, content=content)
        return json.dumps({"action": answer.action, "content": content}, sort_keys=True)

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("transport", choices=["stdio"])
    parser.add_argument("--events", default=None)
    args = parser.parse_args(argv)
    _event.path = args.events
    build_server().run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
