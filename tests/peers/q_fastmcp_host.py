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
import json
import sys
import time
from typing import Any

import fastmcp_tasks  # noqa: F401  (registers the tasks client extension on every Client)
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks.client import ToolTask
from fastmcp_tasks.client_models import CancelTaskRequest, ClientCreateTaskResult, GetTaskRequest, UpdateTaskRequest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel


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
    if isinstance(exc, MCPError):
        err: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    return {"code": None, "message": str(exc) or repr(exc), "type": type(exc).__name__}


class Answerer:
    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, message: str, response_type: Any, params: Any, context: Any) -> ElicitResult[Any]:
        self.asked.append({"params": _dump(params), "requestId": str(getattr(context, "request_id", ""))})
        if self.answer is None:
            return ElicitResult(action="decline")
        return ElicitResult(action=self.answer["action"], content=self.answer.get("content"))


def _parsed(result: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [_dump(c) for c in result.content], "isError": bool(result.is_error)}
    if result.structured_content is not None:
        out["structuredContent"] = result.structured_content
    return out


async def _run_step(client: Client, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out: dict[str, Any] = {"op": op, "ok": True}
    if "id" in step:
        out["id"] = step["id"]
    answerer.answer, answerer.asked = step.get("answer"), []
    started = time.monotonic()
    timeout = float(step.get("timeout") or 30)
    try:
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
                    out["result"] = _parsed(await asyncio.wait_for(task.result(), timeout))
                else:
                    try:
                        final = await task.wait(timeout=max(0.1, timeout - (time.monotonic() - started)))
                    except TimeoutError:
                        final = await task.status()
                        if step.get("cancel"):
                            await task.cancel()
                    out["finalStatus"] = final.status
                    if final.status == "completed":
                        out["result"] = _parsed(await task.result())
            else:
                out["kind"] = "inline"
                out["result"] = _dump(raw)
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:
        out["ok"] = False
        out["error"] = _error(exc)
    out["asked"] = answerer.asked
    out["elapsed"] = round(time.monotonic() - started, 3)
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    answerer = Answerer()
    connected = False
    try:
        handler = None if args.no_elicitation else answerer
        client = Client(StreamableHttpTransport(args.url), timeout=args.timeout, elicitation_handler=handler)
        async with client:
            connected = True
            _emit({"op": "connect", "ok": True, "protocolVersion": client.protocol_version, "shim": True})
            for step in steps:
                _emit(await _run_step(client, answerer, step))
    except BaseException as exc:
        if isinstance(_leaf(exc), KeyboardInterrupt):
            raise
        if not connected:
            _emit({"op": "connect", "ok": False, "error": _error(exc)})
            return 2
        _emit({"op": "disconnect", "ok": False, "error": _error(exc)})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--script", default="[]", help="JSON list of steps, or @FILE")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--no-elicitation", action="store_true", help="no elicitation handler (capability not declared)"
    )
    args = parser.parse_args(argv)
    script = args.script
    if script.startswith("@"):
        with open(script[1:], encoding="utf-8") as f:
            script = f.read()
    steps = json.loads(script)
    if not isinstance(steps, list):
        parser.error("--script must be a JSON list of steps")
    for model in (GetTaskRequest, UpdateTaskRequest, CancelTaskRequest):  # Mcp-Name shim (see fastmcp_host.py)
        model.name_param = "taskId"
    return asyncio.run(_main(args, steps))


if __name__ == "__main__":
    sys.exit(main())
