#!/usr/bin/env python3
"""Conformance fixture upstream: the exact surface the official MCP conformance suite calls.

    python tests/conformance/server.py http --port N [--ready-file PATH]   # 127.0.0.1, /mcp
    python tests/conformance/server.py stdio

Both wires on each transport: 2025-11-25 (``initialize``, session, server->client requests) and
2026-07-28 (per-request ``_meta``, ``server/discover``, ``subscriptions/listen``, MRTR). The
surface is described in /work/shared/conformance/FIXTURES.md and implemented in
``fixture_surface.py``; protocol rules are in ``fixture_core.py``, Streamable HTTP in
``fixture_http.py``. Stdlib + starlette + uvicorn only. See README.md beside this file.

The fixture is a *plain* server: it does not implement the tasks extension. mcpx, fronting it,
owns task creation and the per-tool task policy listed in ``fixture_surface.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

# tests/fixtures/ for fixture_common.py (shared with upstream_server.py there), then this folder.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fixture_common import run_transport, stdin_lines, stdout_writer
from fixture_core import Call, RpcError, Server, Session, log_stderr
from fixture_http import run_http
from fixture_surface import Surface


async def run_stdio(server: Server) -> None:
    """Newline-delimited JSON-RPC on stdin/stdout. One legacy session (the process) plus any
    number of stateless modern requests; modern cancellation is ``notifications/cancelled``."""
    loop = asyncio.get_running_loop()
    write = stdout_writer()

    session = Session("stdio")  # session notifications start once `initialize` was seen
    server.sessions["stdio"] = session
    running: dict[Any, asyncio.Task] = {}  # request id -> task (both wires share the id space)

    async def serve(msg: dict[str, Any]) -> None:
        modern = Server.is_modern(msg)
        call = Call(server, msg, modern, None if modern else session, write)
        if modern and msg.get("method") == "subscriptions/listen":
            try:
                sub = await server.open_listen(call)
            except RpcError as e:
                await write(e.to_msg(call.id))
                return
            try:
                await asyncio.Event().wait()  # until notifications/cancelled or shutdown
            finally:
                server.close_listen(sub)
        response, _status = await server.respond(call)
        await write(response)

    def start(msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if msg.get("method") == "initialize" and not Server.is_modern(msg):
            session.standalone = write
        task = loop.create_task(serve(msg))
        running[rid] = task
        if not Server.is_modern(msg):
            session.running[rid] = task

        def done(t: asyncio.Task) -> None:
            if running.get(rid) is t:
                del running[rid]
            session.running.pop(rid, None)
            if not t.cancelled() and t.exception() is not None:
                log_stderr(f"request {rid!r} failed: {t.exception()!r}")

        task.add_done_callback(done)

    async for text in stdin_lines():
        try:
            msg = json.loads(text)
        except ValueError as e:
            await write(RpcError(-32700, f"Parse error: {e}").to_msg(None))
            continue
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            await write(
                RpcError(-32600, "Invalid Request: expected one JSON-RPC 2.0 object").to_msg(
                    msg.get("id") if isinstance(msg, dict) else None
                )
            )
            continue
        if "method" not in msg:
            session.on_response(msg)  # answer to one of our legacy server->client requests
        elif "id" not in msg:
            if msg["method"] == "notifications/cancelled":
                params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
                task = running.get(params.get("requestId"))
                if task is not None:
                    task.cancel()  # cancelled requests get no response
        else:
            start(msg)
    # stdin closed: end listen streams gracefully, give in-flight work a moment, then exit
    for task in list(running.values()):
        task.cancel()
    if running:
        await asyncio.wait(list(running.values()), timeout=1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="transport", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--ttl-ms", type=int, default=0, help="ttlMs on modern discover/list/read results (default 0)")
    common.add_argument(
        "--legacy-only",
        action="store_true",
        help="answer server/discover with -32601, so clients fall back to 2025-11-25",
    )
    sub.add_parser("stdio", parents=[common], help="newline-delimited JSON-RPC on stdin/stdout")
    http = sub.add_parser("http", parents=[common], help="Streamable HTTP on 127.0.0.1 at /mcp")
    http.add_argument("--port", type=int, default=0, help="0 picks a free port")
    http.add_argument("--ready-file", default=None, help="write the bound port here once listening")
    args = parser.parse_args(argv)
    server = Server(Surface(), ttl_ms=args.ttl_ms)
    server.legacy_only = args.legacy_only
    return run_transport(args, server, run_stdio, run_http)


if __name__ == "__main__":
    sys.exit(main())
