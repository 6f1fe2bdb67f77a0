"""MCP upstream (server) on the official ``mcp`` SDK 1.30 low-level ``Server`` with its
2025-11-25 core tasks (``server.experimental.enable_tasks()``, ``run_task``).

Run it with the SDK 1.30 peer venv's python (``peer_python("mcp-1.30")``)::

    python sdk1_upstream.py stdio [--events FILE] [--unscoped]
    python sdk1_upstream.py http --port N [--ready-file FILE] [--events FILE] [--unscoped]

Tools (all but ``ask_task`` free of elicitation):
  slow(seconds=1.0, steps=1, text="done")  taskSupport "optional": sleeps ``seconds`` in ``steps``
                            steps, then returns text ``"<text> after <seconds> s"``. As a task it
                            stops early (event ``slow_cancelled``) once the task is cancelled.
  echo(text)                taskSupport "forbidden": the text, at once.
  boom(message="boom")      taskSupport "optional": raises; as a task the SDK ends it ``failed``.
  ask_task(message)         taskSupport "required": runs only as a task, whose work asks
                            ``task_ctx.elicit(message, {name, age})`` (SDK 1.30 queues it for the
                            ``tasks/result`` stream, tagged with the related task) and returns one
                            text block ``json.dumps({"action", "content"}, sort_keys=True)``: exactly
                            the ElicitResult it received. Events ``ask_asking`` / ``ask_answered``.

``--unscoped`` gives tasks explicit uuid4 ids (the SDK's deprecated ``task_id=``), which any
session may use: what a durable upstream looks like, so a restarted gateway (a new session) can
still poll a task. Without it ids are the SDK default ``<session scope>:<uuid4>``, visible only to
the session that created them (another session gets -32602).

``--events FILE`` appends one JSON line per event: ``{"event": "request", "method": ...,
"task": bool, "taskId": ...}`` for tools/call and every tasks/* request, and tool events
``slow_start`` / ``slow_done`` / ``slow_cancelled`` (with ``taskId`` when run as a task).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
import warnings
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from peer_common import Events, serve_uvicorn

warnings.filterwarnings("ignore", category=DeprecationWarning)

_event = Events()  # --events FILE


def _text(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=is_error)


def build_server(unscoped: bool) -> Server:
    server: Server = Server("sdk1-upstream", version="1.30-peer")
    support = server.experimental.enable_tasks()

    tools = [
        types.Tool(
            name="slow",
            description="Sleep, then say so.",
            inputSchema={
                "type": "object",
                "properties": {
                    "seconds": {"type": "number"},
                    "steps": {"type": "integer"},
                    "text": {"type": "string"},
                    "status": {"type": "string"},
                },
            },
            execution=types.ToolExecution(taskSupport="optional"),
        ),
        types.Tool(
            name="echo",
            description="Return the text unchanged.",
            inputSchema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            execution=types.ToolExecution(taskSupport="forbidden"),
        ),
        types.Tool(
            name="ask_task",
            description="As a task: ask the user (elicitation), then echo exactly the answer.",
            inputSchema={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
            execution=types.ToolExecution(taskSupport="required"),
        ),
        types.Tool(
            name="boom",
            description="Raise.",
            inputSchema={"type": "object", "properties": {"message": {"type": "string"}}},
            execution=types.ToolExecution(taskSupport="optional"),
        ),
    ]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return tools

    async def slow(args: dict[str, Any], task_id: str | None) -> types.CallToolResult:
        seconds = float(args.get("seconds", 1.0))
        steps = max(1, int(args.get("steps", 1)))
        _event("slow_start", taskId=task_id, seconds=seconds)
        for _ in range(steps):
            await anyio.sleep(seconds / steps)
            if task_id is not None:
                task = await support.store.get_task(task_id)
                if task is not None and task.status == "cancelled":
                    _event("slow_cancelled", taskId=task_id)
                    return _text("cancelled")
        _event("slow_done", taskId=task_id)
        return _text(f"{args.get('text', 'done')} after {seconds:g} s")

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        ctx = server.request_context
        exp = ctx.experimental
        _event("request", method="tools/call", name=name, task=exp.is_task)
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            return _text(f"Unknown tool: {name}", True)
        exp.validate_for_tool(tool)  # -32601 for a task on a forbidden tool
        if name == "echo":
            return _text(str(arguments.get("text", "")))
        if not exp.is_task:
            if name == "boom":
                raise RuntimeError(str(arguments.get("message", "boom")))
            return await slow(arguments, None)

        holder: dict[str, str] = {}

        async def work(task_ctx: Any) -> types.CallToolResult:
            if name == "ask_task":
                message = str(arguments.get("message", ""))
                schema = {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                    "required": ["name", "age"],
                }
                _event("ask_asking", taskId=task_ctx.task_id, message=message)
                answer = await task_ctx.elicit(message, schema)
                _event("ask_answered", taskId=task_ctx.task_id, action=answer.action, content=answer.content)
                return _text(json.dumps({"action": answer.action, "content": answer.content}, sort_keys=True))
            if name == "boom":
                raise RuntimeError(str(arguments.get("message", "boom")))
            if arguments.get("status"):  # a status message while it works (notified to the client)
                await task_ctx.update_status(str(arguments["status"]))
            return await slow(arguments, holder["id"])

        explicit = str(uuid.uuid4()) if unscoped else None
        created = await exp.run_task(work, task_id=explicit) if explicit else await exp.run_task(work)
        holder["id"] = created.task.taskId
        _event("task_created", taskId=created.task.taskId, name=name)
        return created

    # Log every tasks/* request (then let the SDK's default handler answer it).
    for req_type, method in (
        (types.GetTaskRequest, "tasks/get"),
        (types.GetTaskPayloadRequest, "tasks/result"),
        (types.ListTasksRequest, "tasks/list"),
        (types.CancelTaskRequest, "tasks/cancel"),
    ):
        inner = server.request_handlers[req_type]

        def wrap(inner: Any = inner, method: str = method) -> Any:
            async def handler(req: Any) -> Any:
                _event("request", method=method, taskId=getattr(req.params, "taskId", None))
                return await inner(req)

            return handler

        server.request_handlers[req_type] = wrap()
    return server


async def run_stdio(server: Server) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def run_http(server: Server, port: int, ready_file: str | None) -> None:
    import contextlib

    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=server, stateless=False)

    async def handle(scope: Any, receive: Any, send: Any) -> None:
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/", app=handle)], lifespan=lifespan)  # /mcp (Mount("/mcp") would redirect to /mcp/)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    anyio.run(serve_uvicorn, uv, port, ready_file)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    parser.add_argument("--events")
    parser.add_argument("--unscoped", action="store_true")
    args = parser.parse_args()
    _event.path = args.events
    server = build_server(args.unscoped)
    if args.mode == "stdio":
        anyio.run(run_stdio, server)
    else:
        run_http(server, args.port, args.ready_file)


if __name__ == "__main__":
    sys.exit(main())
