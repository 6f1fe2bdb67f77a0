"""MCP host (client) on the official ``mcp`` SDK 1.30 ``ClientSession``, with its 2025-11-25 tasks API.

Run it with the SDK 1.30 peer venv's python (see ``tests/peers/venvs.py``)::

    python sdk1_host.py --url URL --script JSON [--timeout S] [--header 'Name: value']...
    python sdk1_host.py --stdio --script JSON [--env NAME=VALUE]... -- CMD ARGS...

SDK 1.30 speaks the handshake era only: it always asks for 2025-11-25 in ``initialize``. The
tasks calls go through ``session.experimental`` (``call_tool_as_task``, ``get_task``,
``poll_task``, ``get_task_result``, ``list_tasks``, ``cancel_task``), i.e. exactly the requests
the SDK itself builds and the result models it validates against.

The script is a JSON list of steps (``--script @FILE`` reads it from a file). Step N (counting
from 1) prints output line N (the connect line is line 0). A step may carry an ``"id"``,
copied to its line. A ``task`` value of ``"$N"`` (or ``"$<id>"``) names the taskId that step N
(or the step with that id) created with ``call_task``; any other string is sent as it is::

    {"op": "list_tools"}
    {"op": "call", "name": "echo", "args": {"text": "hi"}, "progress": true, "timeout": 5}
    {"op": "call_task", "name": "slow", "args": {"seconds": 1}, "ttl": 60000, "progress": true}
    {"op": "get", "task": "$3"}                     # tasks/get
    {"op": "poll", "task": "$3", "timeout": 30}     # poll_task until terminal
    {"op": "result", "task": "$3", "timeout": 30}   # tasks/result (blocks until terminal)
    {"op": "list_tasks"} / {"op": "list_tasks", "cursor": "..."} / {"op": "list_tasks", "all": true}
    {"op": "cancel", "task": "$3"}                  # tasks/cancel
    {"op": "notifications", "method": "notifications/tasks/status"}   # what arrived so far
    {"op": "sleep", "seconds": 0.2}
    {"op": "parallel", "steps": [STEP, ...]}       # runs the steps concurrently

Output lines::

    {"op":"connect","ok":true,"protocolVersion":"2025-11-25","serverInfo":{...},"capabilities":{...},"instructions":...}
    {"op":"call","ok":true,"result":{...CallToolResult...},"progress":[...]}
    {"op":"call_task","ok":true,"task":{...Task...},"result":{...CreateTaskResult...}}
    {"op":"get","ok":true,"result":{...GetTaskResult...}}
    {"op":"poll","ok":true,"statuses":["working",...,"completed"],"last":{...GetTaskResult...}}
    {"op":"result","ok":true,"result":{...CallToolResult, _meta with related-task...}}
    {"op":"list_tasks","ok":true,"result":{"tasks":[...],"nextCursor":...}}   ("all": "tasks" + "pages")
    {"op":"cancel","ok":true,"result":{...CancelTaskResult...}}
    {"op":"notifications","ok":true,"notifications":[{"method":...,"params":...}, ...]}
    {"op":"...","ok":false,"error":{"code":-32602,"message":"...","data":...}}   # JSON-RPC error (McpError)
    {"op":"...","ok":false,"error":{"code":null,"message":"...","type":"TimeoutError"}}   # anything else

Progress: ``"progress": true`` on ``call`` uses the SDK's own progress callback. On
``call_task`` the SDK's callback cannot be used: it is keyed by the request id and dropped as soon
as the ``CreateTaskResult`` arrives. The driver therefore puts its own ``progressToken``
(``"sdk1-task-<N>"``) in ``_meta`` and collects matching ``notifications/progress`` from the
session's message handler for the task's whole life; every later step that names that task
(``get``/``poll``/``result``/``cancel``) reports ``"progress"`` = everything received so far.

``call_task`` always sends ``params.task.ttl``: the SDK's ``call_tool_as_task`` has no way to
omit it (default 60000 ms). ``result`` validates the reply as ``CallToolResult`` (the SDK asks
the caller for the result type). The exit code is 0 even when steps fail, 2 when the connection
could not be made (the connect line then has ``ok: false``); if the connection dies mid-run a final
``{"op":"disconnect","ok":false,...}`` line is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from pydantic import BaseModel

# The experimental tasks API is deprecated in 1.30 (it warns on every use); that is the point here.
warnings.simplefilter("ignore", DeprecationWarning)

CLIENT_INFO = types.Implementation(name="sdk1-host", version="1.30-peer")


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _error(exc: BaseException) -> dict[str, Any]:
    exc = _leaf(exc)
    if isinstance(exc, McpError):
        err: dict[str, Any] = {"code": exc.error.code, "message": exc.error.message}
        if exc.error.data is not None:
            err["data"] = exc.error.data
        return err
    return {"code": None, "message": str(exc) or repr(exc), "type": type(exc).__name__}


class _Progress:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(_progress_item(progress, total, message))


def _progress_item(progress: float, total: float | None, message: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"progress": progress}
    if total is not None:
        item["total"] = total
    if message is not None:
        item["message"] = message
    return item


class Host:
    def __init__(self) -> None:
        self.session: ClientSession | None = None
        self.notifications: list[dict[str, Any]] = []
        self.task_ids: dict[str, str] = {}  # "N" / id -> taskId
        self.task_progress: dict[str, list[dict[str, Any]]] = {}  # progressToken -> items
        self.token_of_task: dict[str, str] = {}  # taskId -> progressToken

    # ---- incoming ------------------------------------------------------------------------
    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.notifications.append({"exception": repr(message)})
            return
        if isinstance(message, types.ServerNotification):
            root = message.root
            self.notifications.append(_dump(root))
            if isinstance(root, types.ProgressNotification):
                token = str(root.params.progressToken)
                if token in self.task_progress:
                    p = root.params
                    self.task_progress[token].append(_progress_item(p.progress, p.total, p.message))
        # Server requests (sampling, elicitation, roots) get the SDK defaults.

    # ---- steps ---------------------------------------------------------------------------
    def _task_ref(self, ref: Any) -> str:
        if isinstance(ref, str) and ref.startswith("$"):
            key = ref[1:]
            if key not in self.task_ids:
                raise ValueError(f"no call_task step {ref!r} created a task")
            return self.task_ids[key]
        if not isinstance(ref, str):
            raise ValueError(f"task must be a string, got {ref!r}")
        return ref

    async def run_step(self, step: dict[str, Any], index: int | None) -> dict[str, Any]:
        assert self.session is not None
        s = self.session
        op = step.get("op")
        out: dict[str, Any] = {"op": op, "ok": True}
        if "id" in step:
            out["id"] = step["id"]
        progress = _Progress()
        want_progress = bool(step.get("progress"))
        timeout = step.get("timeout")
        read_timeout = timedelta(seconds=float(timeout)) if timeout is not None else None
        task_id: str | None = None
        try:
            if op == "list_tools":
                out["result"] = _dump(await s.list_tools())
            elif op == "ping":
                out["result"] = _dump(await s.send_ping())
            elif op == "sleep":
                await anyio.sleep(float(step.get("seconds", 0)))
                out["result"] = {}
            elif op == "call":
                result = await s.call_tool(
                    step["name"],
                    step.get("args") or {},
                    read_timeout_seconds=read_timeout,
                    progress_callback=progress if want_progress else None,
                )
                out["result"] = _dump(result)
            elif op == "call_task":
                meta: dict[str, Any] | None = None
                token = None
                if want_progress:
                    token = str(step.get("token") or f"sdk1-task-{index if index is not None else id(step)}")
                    self.task_progress[token] = []
                    meta = {"progressToken": token}
                created = await s.experimental.call_tool_as_task(
                    step["name"], step.get("args") or {}, ttl=int(step.get("ttl", 60000)), meta=meta
                )
                task_id = created.task.taskId
                if index is not None:
                    self.task_ids[str(index)] = task_id
                if "id" in step:
                    self.task_ids[str(step["id"])] = task_id
                if token is not None:
                    self.token_of_task[task_id] = token
                out["task"] = _dump(created.task)
                out["result"] = _dump(created)
            elif op == "get":
                task_id = self._task_ref(step.get("task"))
                out["result"] = _dump(await s.experimental.get_task(task_id))
            elif op == "poll":
                task_id = self._task_ref(step.get("task"))
                statuses: list[str] = []
                last = None
                with anyio.fail_after(float(timeout) if timeout is not None else 30.0):
                    async for status in s.experimental.poll_task(task_id):
                        statuses.append(status.status)
                        last = status
                out["statuses"] = statuses
                out["last"] = _dump(last)
            elif op == "result":
                task_id = self._task_ref(step.get("task"))
                with anyio.fail_after(float(timeout) if timeout is not None else 30.0):
                    out["result"] = _dump(await s.experimental.get_task_result(task_id, types.CallToolResult))
            elif op == "list_tasks":
                if step.get("all"):
                    tasks: list[Any] = []
                    pages = 0
                    cursor = step.get("cursor")
                    while True:
                        page = await s.experimental.list_tasks(cursor)
                        pages += 1
                        tasks.extend(_dump(t) for t in page.tasks)
                        cursor = page.nextCursor
                        if not cursor or pages > 1000:
                            break
                    out["tasks"] = tasks
                    out["pages"] = pages
                else:
                    out["result"] = _dump(await s.experimental.list_tasks(step.get("cursor")))
            elif op == "cancel":
                task_id = self._task_ref(step.get("task"))
                out["result"] = _dump(await s.experimental.cancel_task(task_id))
            elif op == "notifications":
                method = step.get("method")
                out["notifications"] = [n for n in self.notifications if method is None or n.get("method") == method]
            elif op == "parallel":
                results: list[dict[str, Any] | None] = [None] * len(step.get("steps", []))

                async def run_one(i: int, sub: dict[str, Any]) -> None:
                    results[i] = await self.run_step(sub, None)

                async with anyio.create_task_group() as tg:
                    for i, sub in enumerate(step.get("steps", [])):
                        tg.start_soon(run_one, i, sub)
                out["results"] = results
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # every step failure is data, never a crash
            out["ok"] = False
            out["error"] = _error(exc)
        if op == "call" and want_progress:
            out["progress"] = progress.seen
        if task_id is not None and task_id in self.token_of_task and op != "call_task":
            out["progress"] = list(self.task_progress[self.token_of_task[task_id]])
        return out


def _http_client(args: argparse.Namespace) -> Any:
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {}
    for raw in args.headers:
        name, _, value = raw.partition(":")
        headers[name.strip()] = value.strip()
    return create_mcp_http_client(headers=headers or None)


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    host = Host()
    connected = False
    try:
        async with AsyncExitStack() as stack:
            if args.stdio:
                if not args.command:
                    raise SystemExit("--stdio needs a command after --")
                env = dict(item.partition("=")[::2] for item in args.env) or None
                params = StdioServerParameters(command=args.command[0], args=args.command[1:], env=env)
                read, write = await stack.enter_async_context(stdio_client(params))
            else:
                from mcp.client.streamable_http import streamable_http_client

                http = await stack.enter_async_context(_http_client(args))
                read, write, _sid = await stack.enter_async_context(streamable_http_client(args.url, http_client=http))
            session = await stack.enter_async_context(
                ClientSession(
                    read,
                    write,
                    read_timeout_seconds=timedelta(seconds=args.timeout),
                    message_handler=host.on_message,
                    client_info=CLIENT_INFO,
                )
            )
            init = await session.initialize()
            host.session = session
            connected = True
            _emit(
                {
                    "op": "connect",
                    "ok": True,
                    "protocolVersion": init.protocolVersion,
                    "serverInfo": _dump(init.serverInfo),
                    "capabilities": _dump(init.capabilities),
                    "instructions": init.instructions,
                }
            )
            for n, step in enumerate(steps, start=1):
                _emit(await host.run_step(step, n))
    except BaseException as exc:
        if isinstance(_leaf(exc), KeyboardInterrupt):
            raise
        if isinstance(exc, SystemExit):
            raise
        if not connected:
            _emit({"op": "connect", "ok": False, "error": _error(exc)})
            return 2
        _emit({"op": "disconnect", "ok": False, "error": _error(exc)})
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
    parser.add_argument("--script", default="[]", help="JSON list of steps, or @FILE")
    parser.add_argument("--timeout", type=float, default=30.0, help="default per-request read timeout (s)")
    parser.add_argument("--header", dest="headers", action="append", default=[], help="'Name: value' (HTTP)")
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
