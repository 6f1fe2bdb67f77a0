"""MCP upstream (server) built with the official ``mcp`` SDK 2.3 ``MCPServer`` API.

Run it with the SDK 2.3 peer venv's python (see ``tests/peers/venvs.py``)::

    python sdk2_upstream.py stdio [--events FILE]
    python sdk2_upstream.py http --port N [--events FILE]

``http`` serves Streamable HTTP at ``http://127.0.0.1:N/mcp``; the SDK answers
2025-06-18 / 2025-11-25 (``initialize`` handshake, ``Mcp-Session-Id``) and
2026-07-28 (``server/discover``, per-request ``_meta``) on the same endpoint.

Tools:
  echo(text)            -> text content ``text``
  slow(seconds, steps)  -> reports progress ``i/steps`` every ``seconds/steps`` s, then "done after N steps"
  fail()                -> raises ToolError, so the result has ``isError: true`` and text
                           "Error executing tool fail: fail tool failed on purpose"
  rpc_error(code=-32000, message=...) -> a real JSON-RPC error response with that code/message
                           (MCPServer turns every other tool failure, even an unknown tool
                           or bad arguments, into an isError result)

``--events FILE`` appends one JSON line per tool event (``{"event": "slow_start"|"slow_done"|
"slow_cancelled"|"echo"|"fail", ...}``) so a test can see whether a cancellation
really reached the upstream.
"""

from __future__ import annotations

import argparse
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from peer_common import Events

_event = Events()  # --events FILE


def build_server() -> MCPServer:
    server = MCPServer("sdk2-upstream", version="2.3-peer", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        _event("echo", text=text)
        return text

    @server.tool()
    async def slow(ctx: Context, seconds: float = 1.0, steps: int = 1, text: str = "done") -> str:
        """Sleep `seconds` in total, reporting progress after each of `steps` steps; say `text`."""
        steps = max(1, int(steps))
        _event("slow_start", seconds=seconds, steps=steps)
        try:
            for i in range(steps):
                await anyio.sleep(seconds / steps)
                await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
        except anyio.get_cancelled_exc_class():
            _event("slow_cancelled", seconds=seconds, steps=steps)
            raise
        _event("slow_done", seconds=seconds, steps=steps)
        return f"{text} after {steps} steps"

    @server.tool()
    def fail() -> str:
        """Always fails: the result comes back with isError true."""
        _event("fail")
        # ToolError is the SDK's "anticipated failure": isError result carrying this text,
        # logged at INFO without a traceback (any other exception becomes a generic
        # "Error executing tool fail" and an ERROR traceback on stderr).
        raise ToolError("fail tool failed on purpose")

    @server.tool()
    def rpc_error(code: int = -32000, message: str = "rpc_error tool raised") -> str:
        """Answer with a real JSON-RPC error (MCPError escapes MCPServer as a protocol error)."""
        _event("rpc_error", code=code)
        raise MCPError(code=code, message=message)

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (http only)")
    parser.add_argument("--events", default=None, help="append JSON event lines to this file")
    args = parser.parse_args(argv)
    _event.path = args.events

    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        if not args.port:
            parser.error("http needs --port N")
        server.run("streamable-http", host="127.0.0.1", port=args.port, streamable_http_path="/mcp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
