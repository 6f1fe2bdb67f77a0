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
import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, Implementation
from pydantic import BaseModel

CLIENT_INFO = Implementation(name="q-sdk2-host", version="2.3-peer")


def _emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, exclude_unset=True, mode="json")
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
    """The elicitation callback: answers with the current step's `answer`, records what was asked."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(_dump(params))
        if self.answer is None:
            return ElicitResult(action="decline")
        return ElicitResult.model_validate(self.answer)


async def _run_step(client: Client, answerer: Answerer, step: dict[str, Any]) -> dict[str, Any]:
    op = step.get("op")
    out: dict[str, Any] = {"op": op, "ok": True}
    if "id" in step:
        out["id"] = step["id"]
    answerer.answer, answerer.asked = step.get("answer"), []
    try:
        if op == "call":
            out["result"] = _dump(
                await client.call_tool(step["name"], step.get("args") or {}, read_timeout_seconds=step.get("timeout"))
            )
        elif op == "sleep":
            await anyio.sleep(float(step.get("seconds", 0)))
            out["result"] = {}
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:  # every step failure is data
        out["ok"] = False
        out["error"] = _error(exc)
    out["asked"] = answerer.asked
    return out


async def _main(args: argparse.Namespace, steps: list[dict[str, Any]]) -> int:
    if args.stdio:
        if not args.command:
            raise SystemExit("--stdio needs a command after --")
        env = dict(item.partition("=")[::2] for item in args.env) or None
        server: Any = StdioServerParameters(command=args.command[0], args=args.command[1:], env=env)
    else:
        server = args.url
    answerer = Answerer()
    connected = False
    try:
        client = Client(
            server,
            mode=args.mode,
            client_info=CLIENT_INFO,
            read_timeout_seconds=args.timeout,
            elicitation_callback=None if args.no_elicitation else answerer,
            cache=None,
        )
        async with client:
            connected = True
            era = "modern" if client.session.discover_result is not None else "legacy"
            _emit({"op": "connect", "ok": True, "protocolVersion": client.protocol_version, "era": era})
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
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url")
    target.add_argument("--stdio", action="store_true")
    parser.add_argument("--mode", default="auto", help="legacy | auto | 2026-07-28")
    parser.add_argument("--script", default="[]", help="JSON list of steps, or @FILE")
    parser.add_argument("--timeout", type=float, default=30.0, help="default per-request read timeout (s)")
    parser.add_argument(
        "--no-elicitation", action="store_true", help="no elicitation callback (capability not declared)"
    )
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
