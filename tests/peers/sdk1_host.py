"""MCP host (client) on the official ``mcp`` SDK 1.30 ``ClientSession``, with its 2025-11-25 tasks API.

Run it with the SDK 1.30 peer venv's python (see ``tests/peers/venvs.py``)::

    python sdk1_host.py --url URL --script JSON [--timeout S] [--header 'Name: value']... [--root URI]...
    python sdk1_host.py --stdio --script JSON [--env NAME=VALUE]... -- CMD ARGS...

With ``--root`` (repeatable) the session gets a ``list_roots_callback`` (so ``initialize`` declares
``roots``) answering those URIs; step ``{"op": "roots_asked"}`` prints how often it was asked
(``"count"``). Without it the host declares no roots (the SDK's default).

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
import sys
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from peer_common import (
    Progress,
    error_of,
    host_parser,
    parse_cli,
    parse_headers,
    progress_item,
    run_host,
    run_parallel,
    stdio_command,
    step_errors,
    step_line,
)
from pydantic import BaseModel

# The experimental tasks API is deprecated in 1.30 (it warns on every use); that is the point here.
warnings.simplefilter("ignore", DeprecationWarning)

CLIENT_INFO = types.Implementation(name="sdk1-host", version="1.30-peer")


def dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def error(exc: BaseException) -> dict[str, Any]:
    return error_of(exc, McpError, lambda e: e.error)


class Host:
    def __init__(self) -> None:
        self.session: ClientSession | None = None
        self.notifications: list[dict[str, Any]] = []
        self.task_ids: dict[str, str] = {}  # "N" / id -> taskId
        self.task_progress: dict[str, list[dict[str, Any]]] = {}  # progressToken -> items
        self.token_of_task: dict[str, str] = {}  # taskId -> progressToken
        self.roots: list[str] = []  # --root: what roots/list answers (declared only when given)
        self.roots_asked = 0

    async def list_roots(self, context: Any) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=uri.rsplit("/", 1)[-1]) for uri in self.roots])

    # ---- incoming ------------------------------------------------------------------------
    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.notifications.append({"exception": repr(message)})
            return
        if isinstance(message, types.ServerNotification):
            root = message.root
            self.notifications.append(dump(root))
            if isinstance(root, types.ProgressNotification):
                token = str(root.params.progressToken)
                if token in self.task_progress:
                    p = root.params
                    self.task_progress[token].append(progress_item(p.progress, p.total, p.message))
        # Server requests (sampling, elicitation; roots unless --root) get the SDK defaults.

    def connected(self, opened: tuple[ClientSession, types.InitializeResult]) -> dict[str, Any]:
        """Keep the session :func:`open_session` opened; the connect line."""
        self.session, init = opened
        return {
            "op": "connect",
            "ok": True,
            "protocolVersion": init.protocolVersion,
            "serverInfo": dump(init.serverInfo),
            "capabilities": dump(init.capabilities),
            "instructions": init.instructions,
        }

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
        out = step_line(step)
        progress = Progress()
        want_progress = bool(step.get("progress"))
        timeout = step.get("timeout")
        read_timeout = timedelta(seconds=float(timeout)) if timeout is not None else None
        task_id: str | None = None
        with step_errors(out, error):
            if op == "list_tools":
                out["result"] = dump(await s.list_tools())
            elif op == "ping":
                out["result"] = dump(await s.send_ping())
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
                out["result"] = dump(result)
                out["ended"] = time.time()  # wall clock: a test times the call's end against its own acts
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
                out["task"] = dump(created.task)
                out["result"] = dump(created)
            elif op == "get":
                task_id = self._task_ref(step.get("task"))
                out["result"] = dump(await s.experimental.get_task(task_id))
            elif op == "poll":
                task_id = self._task_ref(step.get("task"))
                statuses: list[str] = []
                last = None
                with anyio.fail_after(float(timeout) if timeout is not None else 30.0):
                    async for status in s.experimental.poll_task(task_id):
                        statuses.append(status.status)
                        last = status
                out["statuses"] = statuses
                out["last"] = dump(last)
            elif op == "result":
                task_id = self._task_ref(step.get("task"))
                with anyio.fail_after(float(timeout) if timeout is not None else 30.0):
                    out["result"] = dump(await s.experimental.get_task_result(task_id, types.CallToolResult))
            elif op == "list_tasks":
                if step.get("all"):
                    tasks: list[Any] = []
                    pages = 0
                    cursor = step.get("cursor")
                    while True:
                        page = await s.experimental.list_tasks(cursor)
                        pages += 1
                        tasks.extend(dump(t) for t in page.tasks)
                        cursor = page.nextCursor
                        if not cursor or pages > 1000:
                            break
                    out["tasks"] = tasks
                    out["pages"] = pages
                else:
                    out["result"] = dump(await s.experimental.list_tasks(step.get("cursor")))
            elif op == "cancel":
                task_id = self._task_ref(step.get("task"))
                out["result"] = dump(await s.experimental.cancel_task(task_id))
            elif op == "roots_asked":
                out["count"] = self.roots_asked
            elif op == "notifications":
                method = step.get("method")
                out["notifications"] = [n for n in self.notifications if method is None or n.get("method") == method]
            elif op == "parallel":
                out["results"] = await run_parallel(
                    step.get("steps", []), lambda sub: self.run_step(sub, None), anyio.create_task_group
                )
            else:
                raise ValueError(f"unknown op {op!r}")
        if op == "call" and want_progress:
            out["progress"] = progress.seen
        if task_id is not None and task_id in self.token_of_task and op != "call_task":
            out["progress"] = list(self.task_progress[self.token_of_task[task_id]])
        return out


@asynccontextmanager
async def open_session(
    url: str | None,
    *,
    command: tuple[str, list[str], dict[str, str] | None] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float,
    **session_options: Any,
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """An initialized ``ClientSession`` over Streamable HTTP at ``url`` (or, with ``url`` None, over
    stdio to ``command`` = (program, args, env)) and its ``InitializeResult``."""
    async with AsyncExitStack() as stack:
        if url is None:
            assert command is not None
            program, program_args, env = command
            params = StdioServerParameters(command=program, args=program_args, env=env)
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
            read, write, _sid = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        session = await stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=timedelta(seconds=timeout), **session_options)
        )
        yield session, await session.initialize()


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    host = Host()
    host.roots = list(args.roots)
    roots = {"list_roots_callback": host.list_roots} if host.roots else {}
    return await run_host(
        lambda: open_session(
            None if args.stdio else args.url,
            command=stdio_command(args) if args.stdio else None,
            headers=parse_headers(args.headers),
            timeout=args.timeout,
            message_handler=host.on_message,
            client_info=CLIENT_INFO,
            **roots,
        ),
        host.connected,
        lambda _opened, step, n: host.run_step(step, n),
        steps,
        error,
    )


def main(argv: list[str] | None = None) -> int:
    parser = host_parser(__doc__, stdio=True)
    parser.add_argument("--header", dest="headers", action="append", default=[], help="'Name: value' (HTTP)")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the spawned command (stdio)")
    parser.add_argument("--root", dest="roots", action="append", default=[], help="a root URI roots/list answers")
    args, steps = parse_cli(parser, argv, command=True)
    return anyio.run(_main, args, steps)


if __name__ == "__main__":
    sys.exit(main())
