"""MCP upstream (server) on FastMCP 4.1.4 + ``fastmcp-tasks`` 4.1.4: the 2026-07-28
``io.modelcontextprotocol/tasks`` extension (in-memory Docket backend).

Run it with the ``fastmcp-tasks`` peer venv's python (``peer_python("fastmcp-tasks")``)::

    python fastmcp_upstream.py stdio [--events FILE]
    python fastmcp_upstream.py http --port N [--ready-file FILE] [--events FILE]   # /mcp
    [--concurrency N]: tasks its worker runs at once (fastmcp-tasks' default: 10)

Tools:
  slow(seconds=1.0, steps=1, text="done", status="")  ``task=True`` (optional): as a task only
                       when the request declares the extension; returns ``"<text> after <seconds> s"``.
                       A ``status`` is set at once as the task's progress message, which the
                       extension's ``tasks/get`` shows as its ``statusMessage``.
  echo(text)           ``task=False``: the text.

``--events FILE`` appends JSON lines: ``{"event": "request", "method": "tasks/get"|"tasks/cancel"|
"tasks/update", "taskId": ...}`` for every task request, and tool events ``slow_start`` /
``slow_done`` / ``slow_cancelled``. Task ids are not bound to a session (the extension's model),
so a restarted gateway can keep polling a task the HTTP process still holds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.dependencies import Progress
from fastmcp_tasks import TasksExtension
from peer_common import Events, serve_uvicorn

_event = Events()  # --events FILE
PROGRESS = Progress()  # FastMCP's dependency marker (a stateless factory): the task's progress


class LoggedTasks(TasksExtension):
    """The stock extension, logging each task request before answering it."""

    async def _handle_get(self, ctx: Any, params: Any) -> Any:
        _event("request", method="tasks/get", taskId=params.task_id)
        return await super()._handle_get(ctx, params)

    async def _handle_cancel(self, ctx: Any, params: Any) -> Any:
        _event("request", method="tasks/cancel", taskId=params.task_id)
        return await super()._handle_cancel(ctx, params)

    async def _handle_update(self, ctx: Any, params: Any) -> Any:
        _event("request", method="tasks/update", taskId=params.task_id)
        return await super()._handle_update(ctx, params)


def build_server(concurrency: int | None = None) -> FastMCP:
    mcp = FastMCP("fastmcp-upstream")
    # concurrency: tasks its in-memory Docket worker runs at once (fastmcp-tasks' default is 10).
    mcp.add_extension(LoggedTasks(url="memory://", concurrency=concurrency))

    @mcp.tool(task=True)
    async def slow(
        seconds: float = 1.0, steps: int = 1, text: str = "done", status: str = "", progress: Progress = PROGRESS
    ) -> str:
        """Sleep, then say so."""
        _event("slow_start", seconds=seconds)
        if status:
            await progress.set_message(status)
        try:
            for _ in range(max(1, steps)):
                await anyio.sleep(seconds / max(1, steps))
        except anyio.get_cancelled_exc_class():
            _event("slow_cancelled")
            raise
        _event("slow_done")
        return f"{text} after {seconds:g} s"

    @mcp.tool(task=False)
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return mcp


async def run_http(mcp: FastMCP, port: int, ready_file: str | None) -> None:
    import uvicorn

    await serve_uvicorn(
        uvicorn.Server(uvicorn.Config(mcp.http_app(path="/mcp"), log_level="warning")), port, ready_file
    )


def main(build: Callable[..., FastMCP] = build_server, events: Events = _event) -> None:
    """The command line of this driver and of ``q_fastmcp_upstream.py`` (its own server and events)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file")
    parser.add_argument("--events")
    parser.add_argument("--concurrency", type=int, help="tasks run at once (build_server only)")
    args = parser.parse_args()
    events.path = args.events
    mcp = build(concurrency=args.concurrency) if args.concurrency else build()
    if args.mode == "stdio":
        anyio.run(lambda: mcp.run_stdio_async(show_banner=False, log_level="WARNING"))
    else:
        anyio.run(run_http, mcp, args.port, args.ready_file)


if __name__ == "__main__":
    sys.exit(main())
