"""MCP upstream (server) on the official ``mcp`` SDK 2.3 ``MCPServer`` whose tool asks a question.

Run it with the SDK 2.3 peer venv's python (``peer_python("mcp-2.3")``)::

    python q_sdk2_upstream.py stdio [--events FILE] [--legacy-only]

Tool ``ask(message, delay=0)``: its parameter ``answer`` is filled by a resolver that returns
``Elicit(message, Person)`` (after sleeping ``delay`` s, on the first round only) -- the SDK's own
way for a tool to ask for input. The SDK picks the transport from the request's negotiated
revision: at 2026-07-28 the call answers ``resultType: "input_required"`` (``InputRequiredResult``, one ``elicitation/create`` input request)
and the tool body runs on the client's retry carrying ``inputResponses`` + ``requestState``; on a
2025 session it sends ``elicitation/create`` mid-call and waits for the answer.

The result is one text block: ``json.dumps({"action": ..., "content": ...}, sort_keys=True)``,
exactly what the upstream received (``Person`` is strict and forbids extra keys, so the dumped
model is the received content itself; ``content`` is null for decline/cancel).

``--legacy-only`` serves stdio with the SDK's handshake-only loop (``mcp.server.runner.serve_loop``,
what its streamable-HTTP manager uses for handshake sessions) instead of ``Server.run``'s dual-era
loop (where the first request decides the era for good, so a 2026 probe would lock the connection),
and drops the ``server/discover`` handler: a gateway's 2026 probe fails, it falls back to
``initialize``, and on that 2025-11-25 session the same tool asks by pushing ``elicitation/create``.

``--events FILE`` appends JSON lines: ``{"event": "resolver", "protocolVersion": ..., "message": ...}``
each time the resolver runs (every MRTR round at 2026) and ``{"event": "answered", "message": ...,
"action": ..., "content": ..., "protocolVersion": ...}`` when the tool body runs with the answer.
"""

# No `from __future__ import annotations`: the SDK evaluates the tool's `Annotated[..., Resolve(ask_person)]`
# in module globals, where the closure `ask_person` does not exist; real annotations avoid that.
import argparse
import json
import sys
from typing import Annotated

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from peer_common import Events
from pydantic import BaseModel, ConfigDict

_event = Events()  # --events FILE


class Person(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    name: str
    age: int
    subscribed: bool


def build_server() -> MCPServer:
    server = MCPServer("q-sdk2-upstream", version="2.3-peer", log_level="WARNING")

    async def ask_person(message: str, delay: float, ctx: Context) -> Elicit[Person]:
        _event("resolver", message=message, protocolVersion=ctx.protocol_version)
        if delay > 0 and not ctx.input_responses:  # work first, then ask (first round only)
            await anyio.sleep(delay)
        return Elicit(message, Person)

    @server.tool()
    def ask(
        message: str,
        ctx: Context,
        answer: Annotated[ElicitationResult[Person], Resolve(ask_person)],
        delay: float = 0.0,
    ) -> str:
        """Ask the user for a person (elicitation), then echo exactly what came back."""
        content = answer.data.model_dump(mode="json") if isinstance(answer, AcceptedElicitation) else None
        _event("answered", message=message, action=answer.action, content=content, protocolVersion=ctx.protocol_version)
        return json.dumps({"action": answer.action, "content": content}, sort_keys=True)

    return server


async def _run_legacy_stdio(server: MCPServer) -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    low._request_handlers.pop("server/discover", None)
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("transport", choices=["stdio"])
    parser.add_argument("--events", default=None)
    parser.add_argument("--legacy-only", action="store_true", help="no server/discover: handshake sessions only")
    args = parser.parse_args(argv)
    _event.path = args.events
    server = build_server()
    if args.legacy_only:
        anyio.run(_run_legacy_stdio, server)
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
