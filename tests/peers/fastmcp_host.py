"""MCP host (client) on FastMCP 4.1.4 + ``fastmcp-tasks`` 4.1.4: the 2026-07-28 tasks extension.

Run it with the ``fastmcp-tasks`` peer venv's python (see ``tests/peers/venvs.py``)::

    python fastmcp_host.py --url URL --script JSON [--stock] [--timeout S] [--log-http FILE]

The client is ``fastmcp.Client(url)`` (mode ``auto``: ``server/discover``, then 2026-07-28).
Importing ``fastmcp_tasks`` registers its client extension on every FastMCP ``Client``: each
request then declares ``io.modelcontextprotocol/tasks`` in its ``_meta`` client capabilities
and a ``resultType: "task"`` reply is claimed as a ``ClientCreateTaskResult``.

The task surface used here is fastmcp-tasks' own: ``ClientSession.call_tool(...,
allow_claimed=True)`` (what ``call_tool_task`` does inside, so an inline reply is kept instead of
raising ``ToolError``), ``ToolTask`` (``status()`` = one ``tasks/get``, ``result()`` = drive to a
terminal state and parse), and the ``tasks/cancel`` request model ``ToolTask.cancel()`` sends.

Spec shim (on unless ``--stock``): fastmcp-tasks 4.1.4 sends ``tasks/get``/``tasks/update``/
``tasks/cancel`` over Streamable HTTP *without* the ``Mcp-Name: <taskId>`` header that the
extension makes a client MUST (ext-tasks tasks.md:511; its own server tolerates the omission, a
conforming server answers ``-32020``). The shim sets ``name_param = "taskId"`` on those three
request models, so the SDK's ``send_request`` mirrors ``params.taskId`` into ``Mcp-Name``.

Steps (``--script @FILE`` reads the list from a file; an ``"id"`` is copied to the step's line)::

    {"op": "list_tools"}
    {"op": "call", "name": "fx__echo", "args": {"text": "hi"}}
    {"op": "call_auto", "name": "fx__slow", "args": {"seconds": 1}}   # FastMCP's Client.call_tool_mcp
    {"op": "call_task_then_wait", "name": "fx__slow", "args": {...}, "poll": 0.25, "timeout": 30}
    {"op": "call_task_then_cancel", "name": "fx__slow", "args": {...}, "after": 0.5, "poll": 0.1, "timeout": 10}
    {"op": "sleep", "seconds": 0.2}

Output: one JSON line for the connection, then exactly one per step::

    {"op":"connect","ok":true,"protocolVersion":"2026-07-28","serverInfo":{...},"capabilities":{...},"shim":true}
    {"op":"list_tools","ok":true,"tools":["fx__echo",...],"result":{...ListToolsResult...}}
    {"op":"call","ok":true,"kind":"inline","result":{...CallToolResult by alias...}}
    {"op":"call","ok":true,"kind":"task","handle":{...CreateTaskResult...},"statuses":[...],
     "final":{...DetailedTask...},"result":{...parsed CallToolResult...}}
    {"op":"call_auto","ok":true,"result":{...}}         # the task, if any, is invisible here
    {"op":"call_task_then_wait","ok":true,"kind":"task","handle":{...},"statuses":["working",...,"completed"],
     "final":{...},"result":{"content":[...],"structuredContent":...,"isError":false}}
    {"op":"call_task_then_cancel","ok":true,"kind":"task","handle":{...},"ack":{"resultType":"complete"},
     "statuses":[...],"final":{...},"finalStatus":"cancelled","resultError":"Task ... was cancelled"}
    {"op":"...","ok":false,"error":{"code":-32020,"message":"...","data":...}}     # MCPError
    {"op":"...","ok":false,"error":{"code":null,"message":"...","type":"ToolError"}} # anything else

``kind`` is ``"task"`` when the server answered ``tools/call`` with a ``CreateTaskResult`` and
``"inline"`` when it answered with the ``CallToolResult`` itself; the ``call_task_*`` ops report an
inline reply as ``ok: true, kind: "inline"`` with its ``result`` (no task to poll). ``statuses``
lists the ``status`` of every ``tasks/get`` the step made, in order (``poll`` seconds apart, or the
server's ``pollIntervalMs`` when ``poll`` is not given); ``final`` is the last DetailedTask.
``result`` of a task is ``ToolTask.result()`` (FastMCP's parsed result: ``content`` by alias,
``structuredContent``, ``isError``); for a task that did not complete, ``resultError`` is the
``ToolError`` text ``ToolTask.result()`` raised. Exit code 0 even when steps fail; 2 (after a
``{"op":"connect","ok":false,...}`` line) when it could not connect.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import fastmcp_tasks  # noqa: F401  (registers the tasks client extension on every Client)
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks.client import ToolTask
from fastmcp_tasks.client_models import (
    CancelTaskRequest,
    CancelTaskRequestParams,
    ClientCreateTaskResult,
    ClientGetTaskResult,
    GetTaskRequest,
    UpdateTaskRequest,
)
from mcp.shared.exceptions import MCPError
from peer_common import error_of, host_parser, http_request_logger, leaf, parse_cli, run_host, step_line
from pydantic import BaseModel, TypeAdapter

RAW_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
TERMINAL = ("completed", "failed", "cancelled")


def apply_mcp_name_shim() -> None:
    """Make tasks/get|update|cancel carry `Mcp-Name: <taskId>` (ext-tasks tasks.md:511)."""
    for model in (GetTaskRequest, UpdateTaskRequest, CancelTaskRequest):
        model.name_param = "taskId"


def dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def error(exc: BaseException) -> dict[str, Any]:
    return error_of(exc, MCPError)


def parsed(result: Any) -> dict[str, Any]:
    """FastMCP's parsed CallToolResult dataclass as JSON."""
    out: dict[str, Any] = {"content": [dump(c) for c in result.content], "isError": bool(result.is_error)}
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    return out


async def _submit(client: Client, step: dict[str, Any]) -> Any:
    """tools/call with claimed results allowed: a ClientCreateTaskResult or a CallToolResult."""
    return await client._await_with_session_monitoring(
        client.session.call_tool(
            name=step["name"],
            arguments=step.get("args") or {},
            read_timeout_seconds=step.get("timeout"),
            allow_claimed=True,
        )
    )


async def _poll(task: ToolTask, step: dict[str, Any], out: dict[str, Any], until: float) -> ClientGetTaskResult:
    """`ToolTask.status()` until terminal; every status seen goes to out["statuses"]."""
    statuses: list[str] = out.setdefault("statuses", [])
    while True:
        current = await task.status()
        statuses.append(current.status)
        out["final"] = dump(current)
        if current.status in TERMINAL:
            return current
        if time.monotonic() >= until:
            raise TimeoutError(f"task {task.task_id} still {current.status} after the step's timeout")
        poll = step.get("poll")
        delay = float(poll) if poll is not None else (current.poll_interval_ms or 1000) / 1000
        await asyncio.sleep(max(0.01, min(delay, until - time.monotonic())))


async def _finish(task: ToolTask, out: dict[str, Any]) -> None:
    """ToolTask.result(): the parsed result, or the ToolError it raises for failed/cancelled."""
    try:
        out["result"] = parsed(await task.result())
    except Exception as exc:  # ToolError for a failed or cancelled task
        out["resultError"] = str(leaf(exc))


async def _run_step(client: Client, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out = step_line(step)
    started = time.monotonic()
    until = started + float(step.get("timeout") or 30)
    try:
        if op == "list_tools":
            result = await client.list_tools_mcp()
            out["tools"] = [t.name for t in result.tools]
            out["result"] = dump(result)
        elif op == "sleep":
            await asyncio.sleep(float(step.get("seconds", 0)))
        elif op == "call_auto":
            result = await client.call_tool_mcp(step["name"], step.get("args") or {}, timeout=step.get("timeout"))
            out["result"] = dump(result)
        elif op in ("call", "call_task_then_wait", "call_task_then_cancel"):
            raw = await _submit(client, step)
            if not isinstance(raw, ClientCreateTaskResult):
                out["kind"] = "inline"
                out["result"] = dump(raw)
                return out
            out["kind"] = "task"
            out["handle"] = dump(raw)
            task = ToolTask(client, step["name"], raw)
            if op == "call_task_then_cancel":
                await asyncio.sleep(max(0.0, float(step.get("after", 0.5)) - (time.monotonic() - started)))
                # Exactly the request ToolTask.cancel() sends, with the ack kept (as the raw JSON
                # object: mcp_types.Result, which ToolTask.cancel() parses into, drops resultType).
                ack = await client.session.send_request(
                    CancelTaskRequest(params=CancelTaskRequestParams(task_id=task.task_id)), RAW_RESULT
                )
                out["ack"] = ack
                out["cancelledAfter"] = round(time.monotonic() - started, 3)
            final = await _poll(task, step, out, until)
            out["finalStatus"] = final.status
            await _finish(task, out)
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:  # report every step failure as data, never crash the run
        out["ok"] = False
        out["error"] = error(exc)
    finally:
        out["elapsed"] = round(time.monotonic() - started, 3)
    return out


def _transport(args: argparse.Namespace) -> StreamableHttpTransport:
    if not args.log_http:
        return StreamableHttpTransport(args.url)
    import httpx2
    from mcp.shared._httpx_utils import create_mcp_http_client

    log_request = http_request_logger(args.log_http)

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None, **_: Any
    ) -> Any:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks["request"].append(log_request)
        return client

    return StreamableHttpTransport(args.url, httpx_client_factory=factory)


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    def connect_line(client: Client) -> dict[str, Any]:
        return {
            "op": "connect",
            "ok": True,
            "protocolVersion": client.protocol_version,
            "serverInfo": dump(client.server_info),
            "capabilities": dump(client.server_capabilities),
            "shim": not args.stock,
        }

    return await run_host(
        lambda: Client(_transport(args), timeout=args.timeout),
        connect_line,
        lambda client, step, _n: _run_step(client, step),
        steps,
        error,
    )


def main(argv: list[str] | None = None) -> int:
    parser = host_parser(__doc__)
    parser.add_argument("--stock", action="store_true", help="no Mcp-Name shim on tasks/* (fastmcp-tasks as shipped)")
    parser.add_argument("--log-http", default=None, help="append outgoing HTTP requests as JSON lines")
    args, steps = parse_cli(parser, argv)
    if not args.stock:
        apply_mcp_name_shim()
    return asyncio.run(_main(args, steps))


if __name__ == "__main__":
    sys.exit(main())
