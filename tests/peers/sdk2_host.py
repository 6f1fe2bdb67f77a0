"""MCP host (client) driven by the official ``mcp`` SDK 2.3 ``mcp.Client`` API.

Run it with the SDK 2.3 peer venv's python (see ``tests/peers/venvs.py``)::

    python sdk2_host.py --url URL --mode legacy|auto|2026-07-28 --script JSON
    python sdk2_host.py --stdio --mode MODE --script JSON -- CMD ARGS...

Options: ``--header 'Name: value'`` (repeatable, HTTP only) adds a header to every
HTTP request; ``--log-http FILE`` appends one JSON line per outgoing HTTP request
(``{"method","url","headers","body"}``, HTTP only); ``--env NAME=VALUE`` (repeatable,
stdio only) sets a variable for the spawned command, which otherwise gets only the SDK's
short list of safe variables (HOME, PATH, ...); ``--timeout S`` is the default
per-request read timeout.

The script is a JSON list of steps (``--script @FILE`` reads it from a file)::

    {"op": "list_tools"}
    {"op": "call", "name": "echo", "args": {"text": "hi"}, "progress": true, "timeout": 5}
    {"op": "call_cancel", "name": "slow", "args": {"seconds": 10}, "after": 0.5, "settle": 0.1}
    {"op": "ping"}                                  # handshake era only (removed at 2026-07-28)
    {"op": "list_resources"} / {"op": "list_prompts"}
    {"op": "sleep", "seconds": 0.2}
    {"op": "parallel", "steps": [STEP, ...]}       # runs the steps concurrently

Output: one JSON line on stdout for the connection, then one per step::

    {"op":"connect","ok":true,"protocolVersion":"2026-07-28","era":"modern","serverInfo":{...}|null,
     "capabilities":{...},"instructions":...}
    {"op":"call","ok":true,"result":{...CallToolResult by alias...},"progress":[{"progress":1.0,"total":3.0,"message":"..."}]}
    {"op":"call","ok":false,"error":{"code":-32602,"message":"...","data":...}}
    {"op":"call_cancel","ok":true,"cancelled":true,"elapsed":0.5,"progress":[...]}
        (or "cancelled":false plus "result" when the call finished before ``after``)
    {"op":"parallel","ok":true,"results":[<step line>, ...]}

A step that fails with an ``MCPError`` reports its JSON-RPC ``code``/``message``/``data``; any
other exception reports ``code: null`` and ``type``.  The exit code is 0 even when steps fail,
2 when the connection could not be made at all (the connect line then has ``ok: false``).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation
from peer_common import (
    Progress,
    error_of,
    host_parser,
    http_request_logger,
    parse_cli,
    parse_headers,
    run_host,
    run_parallel,
    stdio_command,
    step_errors,
    step_line,
)
from pydantic import BaseModel

CLIENT_INFO = Implementation(name="sdk2-host", version="2.3-peer")


def dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, exclude_unset=True, mode="json")
    return value


def error(exc: BaseException) -> dict[str, Any]:
    return error_of(exc, MCPError)


async def _run_step(client: Client, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out = step_line(step)
    progress = Progress()
    want_progress = bool(step.get("progress")) or op == "call_cancel"
    with step_errors(out, error):
        if op == "list_tools":
            out["result"] = dump(await client.list_tools())
        elif op == "list_resources":
            out["result"] = dump(await client.list_resources())
        elif op == "list_prompts":
            out["result"] = dump(await client.list_prompts())
        elif op == "ping":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ping is deprecated (removed at 2026-07-28)
                out["result"] = dump(await client.send_ping())
        elif op == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            out["result"] = {}
        elif op == "call":
            result = await client.call_tool(
                step["name"],
                step.get("args") or {},
                read_timeout_seconds=step.get("timeout"),
                progress_callback=progress if want_progress else None,
            )
            out["result"] = dump(result)
            out["ended"] = time.time()  # wall clock: a test times the call's end against its own acts
        elif op == "call_cancel":
            after = float(step.get("after", 0.5))
            started = time.monotonic()
            result = None
            # The SDK's cancellation is structural: cancelling the scope around the awaiting
            # call makes the dispatcher send `notifications/cancelled` (stdio, and HTTP on the
            # handshake era) or abort the request's POST (HTTP at 2026-07-28).
            with anyio.move_on_after(after) as scope:
                result = await client.call_tool(
                    step["name"],
                    step.get("args") or {},
                    read_timeout_seconds=step.get("timeout"),
                    progress_callback=progress,
                )
            out["cancelled"] = scope.cancelled_caught
            out["elapsed"] = round(time.monotonic() - started, 3)
            if result is not None:
                out["result"] = dump(result)
            # Give the courtesy cancel a moment to reach the peer before the next step.
            await anyio.sleep(float(step.get("settle", 0.1)))
        elif op == "parallel":
            out["results"] = await run_parallel(
                step.get("steps", []), lambda sub: _run_step(client, sub), anyio.create_task_group
            )
        else:
            raise ValueError(f"unknown op {op!r}")
    if want_progress:
        out["progress"] = progress.seen
    return out


def stdio_server(args: argparse.Namespace) -> StdioServerParameters:
    """``--stdio``: the server command after ``--``, with the ``--env`` variables."""
    program, program_args, env = stdio_command(args)
    return StdioServerParameters(command=program, args=program_args, env=env)


def _build_server(args: argparse.Namespace) -> Any:
    if args.stdio:
        return stdio_server(args)
    if not args.headers and not args.log_http:
        return args.url
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http_client = create_mcp_http_client(headers=parse_headers(args.headers) or None)
    if args.log_http:
        http_client.event_hooks["request"].append(http_request_logger(args.log_http))
    # The transport does not own a client passed to it; close it with the run.
    args._owned_http_client = http_client
    return streamable_http_client(args.url, http_client=http_client)


def _connect_line(client: Client) -> dict[str, Any]:
    return {
        "op": "connect",
        "ok": True,
        "protocolVersion": client.protocol_version,
        "era": "modern" if client.session.discover_result is not None else "legacy",
        "serverInfo": dump(client.server_info),
        "capabilities": dump(client.server_capabilities),
        "instructions": client.instructions,
    }


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    server = _build_server(args)
    owned = getattr(args, "_owned_http_client", None)

    @asynccontextmanager
    async def connect() -> AsyncIterator[Client]:
        if owned is not None:
            await owned.__aenter__()
        # cache=None: every list goes to the wire
        async with Client(
            server, mode=args.mode, client_info=CLIENT_INFO, read_timeout_seconds=args.timeout, cache=None
        ) as client:
            yield client

    try:
        return await run_host(connect, _connect_line, lambda client, step, _n: _run_step(client, step), steps, error)
    finally:
        if owned is not None:
            with anyio.CancelScope(shield=True):
                await owned.__aexit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    parser = host_parser(__doc__, stdio=True)
    parser.add_argument("--mode", default="auto", help="legacy | auto | 2026-07-28")
    parser.add_argument("--header", dest="headers", action="append", default=[], help="'Name: value' (HTTP)")
    parser.add_argument("--log-http", default=None, help="append outgoing HTTP requests as JSON lines (HTTP)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the spawned command (stdio)")
    args, steps = parse_cli(parser, argv, command=True)
    return anyio.run(_main, args, steps)


if __name__ == "__main__":
    sys.exit(main())
