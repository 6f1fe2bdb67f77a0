"""MCP host (client) on the official ``mcp`` SDK 2.3 ``mcp.Client`` that answers questions.

Run it with the SDK 2.3 peer venv's python (``peer_python("mcp-2.3")``)::

    python q_sdk2_host.py --url URL --mode legacy|auto|2026-07-28 --script JSON [--no-elicitation]
    python q_sdk2_host.py --stdio --mode MODE --script JSON [--env NAME=VALUE]... -- CMD ARGS...

Unless ``--no-elicitation``, the client gets an ``elicitation_callback``: the SDK then declares the
``elicitation`` capability (in ``initialize`` for ``legacy``, in every request's ``_meta`` at
2026-07-28) and uses the callback both for an ``elicitation/create`` server request (handshake
era) and for the ``elicitation/create`` input requests of an ``input_required`` result, which
``Client.call_tool`` answers by retrying with ``inputResponses`` + ``requestState`` (MRTR).

Steps (``--script @FILE`` reads the list from a file; an ``"id"`` is copied to the step's line)::

    {"op": "call", "name": "q2__ask", "args": {"message": "Who?"}, "answer": {"action": "accept", "content": {...}}}
    {"op": "sleep", "seconds": 0.2}

The callback answers with the ``answer`` of the step in progress (steps run one after another);
a step without ``answer`` declines. Output: one JSON line for the connection, then one per step::

    {"op":"connect","ok":true,"protocolVersion":"2025-11-25","era":"legacy"|"modern"}
    {"op":"call","ok":true,"result":{...CallToolResult by alias...},"asked":[{...ElicitRequestParams...}]}
    {"op":"call","ok":false,"error":{"code":-32602,"message":"...","data":...},"asked":[...]}

``asked`` lists the params of every elicitation the callback answered during the step. The exit
code is 0 even when steps fail, 2 when the connection could not be made.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp import Client
from mcp_types import ElicitResult, Implementation
from peer_common import Answerer as BaseAnswerer
from peer_common import host_parser, parse_cli, run_host, step_errors, step_line
from sdk2_host import dump, error, stdio_server

CLIENT_INFO = Implementation(name="q-sdk2-host", version="2.3-peer")


class Answerer(BaseAnswerer):
    """The elicitation callback: answers with the current step's `answer`, records what was asked."""

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(dump(params))
        if self.answer is None:
            return ElicitResult(action="decline")
        return ElicitResult.model_validate(self.answer)


async def _run_step(client: Client, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out = step_line(step)
    answerer.start(step)
    with step_errors(out, error):
        if op == "call":
            out["result"] = dump(
                await client.call_tool(step["name"], step.get("args") or {}, read_timeout_seconds=step.get("timeout"))
            )
        elif op == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            out["result"] = {}
        else:
            raise ValueError(f"unknown op {op!r}")
    out["asked"] = answerer.asked
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    server = stdio_server(args) if args.stdio else args.url
    answerer = Answerer()

    def connect() -> Client:
        return Client(
            server,
            mode=args.mode,
            client_info=CLIENT_INFO,
            read_timeout_seconds=args.timeout,
            elicitation_callback=None if args.no_elicitation else answerer,
            cache=None,
        )

    def connect_line(client: Client) -> dict[str, Any]:
        era = "modern" if client.session.discover_result is not None else "legacy"
        return {"op": "connect", "ok": True, "protocolVersion": client.protocol_version, "era": era}

    return await run_host(
        connect, connect_line, lambda client, step, _n: _run_step(client, answerer, step), steps, error
    )


def main(argv: list[str] | None = None) -> int:
    parser = host_parser(__doc__, stdio=True, answerer="callback")
    parser.add_argument("--mode", default="auto", help="legacy | auto | 2026-07-28")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the spawned command (stdio)")
    args, steps = parse_cli(parser, argv, command=True)
    return anyio.run(_main, args, steps)


if __name__ == "__main__":
    sys.exit(main())
