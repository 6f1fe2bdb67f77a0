"""2025-11-25 host (client) on the official ``mcp`` SDK 1.30 ``ClientSession`` that answers questions.

Run it with the SDK 1.30 peer venv's python (``peer_python("mcp-1.30")``)::

    python q_sdk1_host.py --url URL --script JSON [--no-elicitation] [--timeout S]

Unless ``--no-elicitation`` the session gets an ``elicitation_callback``, so ``initialize``
declares the ``elicitation`` capability and every ``elicitation/create`` server request (on a call's
stream, or on a ``tasks/result`` stream for a task) is answered by it. Steps::

    {"op": "call", "name": "q1__ask", "args": {"message": "Who?"}, "answer": {"action": "accept", "content": {...}}}
    {"op": "call_task", "name": "q1__ask", "args": {...}, "answer": {...}, "ttl": 60000, "timeout": 30}
    {"op": "sleep", "seconds": 0.2}

``call_task`` is ``session.experimental.call_tool_as_task`` followed by ``get_task_result`` (a
blocking ``tasks/result``, on whose stream the question arrives). The callback answers with the
``answer`` of the step in progress; a step without one declines. Output lines::

    {"op":"connect","ok":true,"protocolVersion":"2025-11-25","capabilities":{...}}
    {"op":"call","ok":true,"result":{...CallToolResult...},"asked":[{...ElicitRequestParams...}]}
    {"op":"call_task","ok":true,"task":{...},"result":{...CallToolResult...},"asked":[...]}
    {"op":"...","ok":false,"error":{"code":...,"message":...},"asked":[...]}

The exit code is 0 even when steps fail, 2 when the connection could not be made.
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
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from pydantic import BaseModel

warnings.simplefilter("ignore", DeprecationWarning)  # session.experimental warns on every use

CLIENT_INFO = types.Implementation(name="q-sdk1-host", version="1.30-peer")


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


class Answerer:
    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(_dump(params))
        if self.answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult.model_validate(self.answer)


async def _run_step(session: ClientSession, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out: dict[str, Any] = {"op": op, "ok": True}
    if "id" in step:
        out["id"] = step["id"]
    answerer.answer, answerer.asked = step.get("answer"), []
    timeout = float(step.get("timeout", 30))
    try:
        if op == "call":
            out["result"] = _dump(
                await session.call_tool(
                    step["name"], step.get("args") or {}, read_timeout_seconds=timedelta(seconds=timeout)
                )
            )
        elif op == "call_task":
            created = await session.experimental.call_tool_as_task(
                step["name"], step.get("args") or {}, ttl=int(step.get("ttl", 60000))
            )
            out["task"] = _dump(created.task)
            with anyio.fail_after(timeout):
                out["result"] = _dump(
                    await session.experimental.get_task_result(created.task.taskId, types.CallToolResult)
                )
        elif op == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            out["result"] = {}
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:
        out["ok"] = False
        out["error"] = _error(exc)
    out["asked"] = answerer.asked
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    answerer = Answerer()
    connected = False
    try:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(create_mcp_http_client())
            read, write, _sid = await stack.enter_async_context(streamable_http_client(args.url, http_client=http))
            session = await stack.enter_async_context(
                ClientSession(
                    read,
                    write,
                    read_timeout_seconds=timedelta(seconds=args.timeout),
                    elicitation_callback=None if args.no_elicitation else answerer,
                    client_info=CLIENT_INFO,
                )
            )
            init = await session.initialize()
            connected = True
            _emit(
                {
                    "op": "connect",
                    "ok": True,
                    "protocolVersion": init.protocolVersion,
                    "capabilities": _dump(init.capabilities),
                }
            )
            for step in steps:
                _emit(await _run_step(session, answerer, step))
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
        "--no-elicitation", action="store_true", help="no elicitation callback (capability not declared)"
    )
    args = parser.parse_args(argv)
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
