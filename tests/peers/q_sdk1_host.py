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
import sys
import warnings
from datetime import timedelta
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession
from peer_common import Answerer as BaseAnswerer
from peer_common import host_parser, parse_cli, run_host, step_errors, step_line
from sdk1_host import dump, error, open_session

warnings.simplefilter("ignore", DeprecationWarning)  # session.experimental warns on every use

CLIENT_INFO = types.Implementation(name="q-sdk1-host", version="1.30-peer")


class Answerer(BaseAnswerer):
    """The elicitation callback: answers with the current step's `answer`, records what was asked."""

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(dump(params))
        if self.answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult.model_validate(self.answer)


async def _run_step(session: ClientSession, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out = step_line(step)
    answerer.start(step)
    timeout = float(step.get("timeout", 30))
    with step_errors(out, error):
        if op == "call":
            out["result"] = dump(
                await session.call_tool(
                    step["name"], step.get("args") or {}, read_timeout_seconds=timedelta(seconds=timeout)
                )
            )
        elif op == "call_task":
            created = await session.experimental.call_tool_as_task(
                step["name"], step.get("args") or {}, ttl=int(step.get("ttl", 60000))
            )
            out["task"] = dump(created.task)
            with anyio.fail_after(timeout):
                out["result"] = dump(
                    await session.experimental.get_task_result(created.task.taskId, types.CallToolResult)
                )
        elif op == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            out["result"] = {}
        else:
            raise ValueError(f"unknown op {op!r}")
    out["asked"] = answerer.asked
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    answerer = Answerer()

    def connect_line(opened: tuple[ClientSession, types.InitializeResult]) -> dict[str, Any]:
        init = opened[1]
        return {
            "op": "connect",
            "ok": True,
            "protocolVersion": init.protocolVersion,
            "capabilities": dump(init.capabilities),
        }

    return await run_host(
        lambda: open_session(
            args.url,
            timeout=args.timeout,
            elicitation_callback=None if args.no_elicitation else answerer,
            client_info=CLIENT_INFO,
        ),
        connect_line,
        lambda opened, step, _n: _run_step(opened[0], answerer, step),
        steps,
        error,
    )


def main(argv: list[str] | None = None) -> int:
    args, steps = parse_cli(host_parser(__doc__, answerer="callback"), argv)
    return anyio.run(_main, args, steps)


if __name__ == "__main__":
    sys.exit(main())
