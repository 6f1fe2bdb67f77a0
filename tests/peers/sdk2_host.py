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
import json
import sys
import time
import warnings
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation
from pydantic import BaseModel

CLIENT_INFO = Implementation(name="sdk2-host", version="2.3-peer")


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, exclude_unset=True, mode="json")
    return value


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _error(exc: BaseException) -> dict[str, Any]:
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        err: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    return {"code": None, "message": str(exc) or repr(exc), "type": type(exc).__name__}


class _Progress:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        item: dict[str, Any] = {"progress": progress}
        if total is not None:
            item["total"] = total
        if message is not None:
            item["message"] = message
        self.seen.append(item)


async def _run_step(client: Client, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out: dict[str, Any] = {"op": op, "ok": True}  # "ok" stays the second key
    if "id" in step:
        out["id"] = step["id"]
    progress = _Progress()
    want_progress = bool(step.get("progress")) or op == "call_cancel"
    try:
        if op == "list_tools":
            out["result"] = _dump(await client.list_tools())
        elif op == "list_resources":
            out["result"] = _dump(await client.list_resources())
        elif op == "list_prompts":
            out["result"] = _dump(await client.list_prompts())
        elif op == "ping":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ping is deprecated (removed at 2026-07-28)
                out["result"] = _dump(await client.send_ping())
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
            out["result"] = _dump(result)
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
                out["result"] = _dump(result)
            # Give the courtesy cancel a moment to reach the peer before the next step.
            await anyio.sleep(float(step.get("settle", 0.1)))
        elif op == "parallel":
            results: list[dict[str, Any] | None] = [None] * len(step.get("steps", []))

            async def run_one(i: int, sub: dict[str, Any]) -> None:
                results[i] = await _run_step(client, sub)

            async with anyio.create_task_group() as tg:
                for i, sub in enumerate(step.get("steps", [])):
                    tg.start_soon(run_one, i, sub)
            out["results"] = results
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:  # report every step failure as data, never crash the run
        out["ok"] = False
        out["error"] = _error(exc)
        if want_progress:
            out["progress"] = progress.seen
        return out
    if want_progress:
        out["progress"] = progress.seen
    return out


def _build_server(args: argparse.Namespace) -> Any:
    if args.stdio:
        if not args.command:
            raise SystemExit("--stdio needs a command after --")
        env = dict(item.partition("=")[::2] for item in args.env) or None
        return StdioServerParameters(command=args.command[0], args=args.command[1:], env=env)
    if not args.headers and not args.log_http:
        return args.url
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {}
    for raw in args.headers:
        name, _, value = raw.partition(":")
        headers[name.strip()] = value.strip()
    http_client = create_mcp_http_client(headers=headers or None)
    if args.log_http:
        log_path = args.log_http

        async def log_request(request: Any) -> None:
            line: dict[str, Any] = {"method": request.method, "url": str(request.url), "headers": dict(request.headers)}
            try:
                body = request.content
            except Exception:  # a streaming body is not readable here
                body = b""
            if body:
                try:
                    line["body"] = json.loads(body)
                except ValueError:
                    line["body"] = body.decode("utf-8", "replace")
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")

        http_client.event_hooks["request"].append(log_request)
    # The transport does not own a client passed to it; close it with the run.
    args._owned_http_client = http_client
    return streamable_http_client(args.url, http_client=http_client)


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    server = _build_server(args)
    owned = getattr(args, "_owned_http_client", None)
    connected = False
    try:
        if owned is not None:
            await owned.__aenter__()
        client = Client(
            server,
            mode=args.mode,
            client_info=CLIENT_INFO,
            read_timeout_seconds=args.timeout,
            cache=None,  # every list goes to the wire
        )
        async with client:
            session = client.session
            connected = True
            _emit(
                {
                    "op": "connect",
                    "ok": True,
                    "protocolVersion": client.protocol_version,
                    "era": "modern" if session.discover_result is not None else "legacy",
                    "serverInfo": _dump(client.server_info),
                    "capabilities": _dump(client.server_capabilities),
                    "instructions": client.instructions,
                }
            )
            for step in steps:
                _emit(await _run_step(client, step))
    except BaseException as exc:
        if isinstance(_leaf(exc), KeyboardInterrupt):
            raise
        if not connected:
            _emit({"op": "connect", "ok": False, "error": _error(exc)})
            return 2
        # The connection broke mid-run (or on close): report it, the steps already printed stand.
        _emit({"op": "disconnect", "ok": False, "error": _error(exc)})
    finally:
        if owned is not None:
            with anyio.CancelScope(shield=True):
                await owned.__aexit__(None, None, None)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp")
    target.add_argument("--stdio", action="store_true", help="spawn the server given after --")
    parser.add_argument("--mode", default="auto", help="legacy | auto | 2026-07-28")
    parser.add_argument("--script", default="[]", help="JSON list of steps, or @FILE")
    parser.add_argument("--timeout", type=float, default=30.0, help="default per-request read timeout (s)")
    parser.add_argument("--header", dest="headers", action="append", default=[], help="'Name: value' (HTTP)")
    parser.add_argument("--log-http", default=None, help="append outgoing HTTP requests as JSON lines (HTTP)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the spawned command (stdio)")
    args = parser.parse_args(argv)
    args.command = command
    script = args.script
    if script.startswith("@"):
        with open(script[1:], encoding="utf-8") as f:
            script = f.read()
    steps = json.loads(script)
    if not isinstance(steps, list):
        parser.error("--script must be a JSON list of steps")
    return anyio.run(_main, args, steps)


if __name__ == "__main__":
    sys.exit(main())
