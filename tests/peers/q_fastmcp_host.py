"""MCP host on FastMCP 4.1.4 + ``fastmcp-tasks`` 4.1.4 that answers questions inside 2026 tasks.

Run it with the ``fastmcp-tasks`` peer venv's python (``peer_python("fastmcp-tasks")``)::

    python q_fastmcp_host.py --url URL --script JSON [--timeout S] [--no-elicitation]

``fastmcp.Client(url, elicitation_handler=...)`` in mode ``auto`` (``server/discover``, then
2026-07-28); importing ``fastmcp_tasks`` makes every request declare the
``io.modelcontextprotocol/tasks`` extension. Unless ``--no-elicitation`` (no handler: the
``elicitation`` capability is not declared), the elicitation handler answers with the current
step's ``answer`` (a step without one declines) and records what it was asked, and whether it was
asked inside a task (fastmcp-tasks calls it with request id ``task-<taskId>-<key>`` while driving a
task's ``input_required`` state, then sends ``tasks/update``) or for an inline MRTR round.

Steps::

    {"op": "call", "name": "q1__ask", "args": {...}, "answer": {"action": "accept", "content": {...}}, "timeout": 30}
    {"op": "call_wait", "name": "q1__ask", "args": {...}, "timeout": 10, "cancel": true}

``call`` is what ``Client.call_tool_mcp`` does, with the task claim kept visible: ``tools/call``
with claimed results and ``input_required`` allowed; MRTR rounds are answered by FastMCP's driver
(``Client._drive_input_required``, the same handler; ``mrtrRounds`` counts the retries); a
``CreateTaskResult`` is driven by ``ToolTask.result()`` -- ``tasks/get`` polls, ``input_required``
answered through the handler and ``tasks/update`` -- and reported with ``"kind": "task"``; a
``CallToolResult`` with ``"kind": "inline"``. ``call_wait`` is the same, except that a task is
only watched with ``ToolTask.wait()`` (``tasks/get`` polls that never answer ``input_required``:
someone else must) until it is terminal or ``timeout`` passes -- then, with ``"cancel": true``, it
sends ``tasks/cancel`` -- and ``finalStatus`` is reported (``result`` too when it completed)::

    {"op":"connect","ok":true,"protocolVersion":"2026-07-28","shim":true}
    {"op":"call","ok":true,"mrtrRounds":0,"kind":"task","taskId":"...","result":{"content":[...],"isError":false},
     "asked":[{"params":{...},"requestId":"task-<taskId>-<key>"}]}
    {"op":"call","ok":false,"error":{"code":...,"message":...},"asked":[...]}

The ``Mcp-Name`` shim of ``fastmcp_host.py`` is applied (``tasks/get|update|cancel`` carry
``Mcp-Name: <taskId>``, which fastmcp-tasks 4.1.4 omits). Exit code 0 even when steps fail, 2
when it could not connect.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import fastmcp_tasks  # noqa: F401  (registers the tasks client extension on every Client)
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_host import apply_mcp_name_shim, dump, error, parsed
from fastmcp_tasks.client import ToolTask
from fastmcp_tasks.client_models import ClientCreateTaskResult
from peer_common import Answerer as BaseAnswerer
from peer_common import host_parser, parse_cli, run_host, step_errors, step_line


class Answerer(BaseAnswerer):
    """The elicitation handler: answers with the current step's `answer`, records what was asked."""

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult[Any]:
        self.asked.append({"params": dump(params), "requestId": str(getattr(context, "request_id", ""))})
        if self.answer is None:
            return ElicitResult(action="decline")
        return ElicitResult(action=self.answer["action"], content=self.answer.get("content"))


async def _run_step(client: Client, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out = step_line(step)
    answerer.start(step)
    started = time.monotonic()
    timeout = float(step.get("timeout") or 30)
    with step_errors(out, error):
        if op in ("call", "call_wait"):
            calls = 0

            async def send(responses: Any, state: Any) -> Any:
                nonlocal calls
                calls += 1
                return await client.session.call_tool(
                    name=step["name"],
                    arguments=step.get("args") or {},
                    read_timeout_seconds=timeout,
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                    allow_claimed=True,
                )

            # What Client.call_tool_mcp does, with the task claim kept visible: MRTR rounds are
            # answered by the SDK's driver (the same callback), a CreateTaskResult is driven below.
            first = await client._await_with_session_monitoring(send(None, None))
            raw = await client._await_with_session_monitoring(client._drive_input_required(first, send))
            out["mrtrRounds"] = calls - 1
            if isinstance(raw, ClientCreateTaskResult):
                out["kind"] = "task"
                task = ToolTask(client, step["name"], raw)
                out["taskId"] = task.task_id
                if op == "call":
                    out["result"] = parsed(await asyncio.wait_for(task.result(), timeout))
                else:
                    try:
                        final = await task.wait(timeout=max(0.1, timeout - (time.monotonic() - started)))
                    except TimeoutError:
                        final = await task.status()
                        if step.get("cancel"):
                            await task.cancel()
                    out["finalStatus"] = final.status
                    if final.status == "completed":
                        out["result"] = parsed(await task.result())
            else:
                out["kind"] = "inline"
                out["result"] = dump(raw)
        else:
            raise ValueError(f"unknown op {op!r}")
    out["asked"] = answerer.asked
    out["elapsed"] = round(time.monotonic() - started, 3)
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    answerer = Answerer()
    handler = None if args.no_elicitation else answerer
    return await run_host(
        lambda: Client(StreamableHttpTransport(args.url), timeout=args.timeout, elicitation_handler=handler),
        lambda client: {"op": "connect", "ok": True, "protocolVersion": client.protocol_version, "shim": True},
        lambda client, step, _n: _run_step(client, answerer, step),
        steps,
        error,
    )


def main(argv: list[str] | None = None) -> int:
    args, steps = parse_cli(host_parser(__doc__, answerer="handler"), argv)
    apply_mcp_name_shim()  # see fastmcp_host.py
    return asyncio.run(_main(args, steps))


if __name__ == "__main__":
    sys.exit(main())
