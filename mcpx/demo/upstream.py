"""The bundled example upstream for `mcpx demo` and `mcpx console --demo`: a tiny 2025-11-25 stdio
MCP server, no dependencies. The tools are in demo_tools.py; this is the wire.

It speaks only the handshake era on purpose: the demos then show 2026-07-28 hosts reaching a legacy
server through mcpx. One JSON line each way; each tools/call runs in its own thread, so slow tools
overlap and `notifications/cancelled` reaches them; server requests (`elicitation/create`) go out
with ids this process allocates, and mcpx's replies to them come back on stdin.

`--tools a,b` serves only those tools (default: all of them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, TextIO

from .tools import TOOLS, Call, Cancelled, Id, PeerError, ToolError

SERVER_INFO = {"name": "mcpx-demo", "version": "1.1"}


@dataclass
class _Reply:
    done: threading.Event = field(default_factory=threading.Event)
    msg: dict[str, Any] = field(default_factory=dict)


class Peer:
    """Our side of the connection: writes lines, tracks calls in flight and our own requests."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._replies: dict[str, _Reply] = {}
        self.calls: dict[Id, threading.Event] = {}  # in flight -> set when cancelled

    def send(self, msg: dict[str, Any]) -> None:
        line = json.dumps(msg) + "\n"
        with self._lock:
            self._out.write(line)
            self._out.flush()

    def request(self, method: str, params: dict[str, Any], cancelled: threading.Event) -> dict[str, Any]:
        """Send a server request and wait for its reply (or for the call that asks to be cancelled)."""
        rid = f"demo-{next(self._ids)}"
        reply = self._replies[rid] = _Reply()
        try:
            self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            while not reply.done.wait(0.1):
                if cancelled.is_set():
                    raise Cancelled
        finally:
            self._replies.pop(rid, None)
        if "error" in reply.msg:
            error = reply.msg["error"]
            raise PeerError(error if isinstance(error, dict) else {"code": -32603, "message": str(error)})
        result = reply.msg.get("result")
        return result if isinstance(result, dict) else {}

    def resolve(self, msg: dict[str, Any]) -> None:
        """A reply to one of our requests; one we no longer wait for is dropped."""
        reply = self._replies.get(str(msg.get("id")))
        if reply is not None:
            reply.msg = msg
            reply.done.set()


def run_call(peer: Peer, rid: Id, params: dict[str, Any], served: dict[str, Any]) -> None:
    cancelled = peer.calls[rid]
    name = params.get("name")
    args = params.get("arguments")
    token = (params.get("_meta") or {}).get("progressToken")
    try:
        tool = TOOLS.get(name) if isinstance(name, str) and name in served else None
        if tool is None:
            raise ToolError(-32602, f"Unknown tool: {name}")
        result = tool.run(Call(peer, rid, args if isinstance(args, dict) else {}, token, cancelled))
    except Cancelled:
        return  # a cancelled request gets no reply
    except ToolError as exc:
        peer.send({"jsonrpc": "2.0", "id": rid, "error": {"code": exc.code, "message": exc.message}})
    except Exception as exc:  # noqa: BLE001 - a broken tool answers its call instead of leaving it hanging
        peer.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": f"{name} failed: {exc}"}})
    else:
        if not cancelled.is_set():
            peer.send({"jsonrpc": "2.0", "id": rid, "result": result})
    finally:
        peer.calls.pop(rid, None)


def handle(peer: Peer, msg: dict[str, Any], served: dict[str, Any]) -> None:
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None:
        if rid is not None:
            peer.resolve(msg)  # mcpx's answer to one of our questions
        return
    if method == "initialize":
        caps = {"tools": {"listChanged": False}, "logging": {}}
        result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": SERVER_INFO}
        peer.send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/list":
        peer.send({"jsonrpc": "2.0", "id": rid, "result": {"tools": list(served.values())}})
    elif method == "tools/call" and isinstance(rid, (str, int)):
        # Tracked here, on the reader, so a cancel that follows the call is never missed.
        peer.calls[rid] = threading.Event()
        threading.Thread(target=run_call, args=(peer, rid, params, served), daemon=True).start()
    elif method in ("ping", "logging/setLevel"):
        peer.send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "notifications/cancelled":
        target = params.get("requestId")
        event = peer.calls.get(target) if isinstance(target, (str, int)) else None
        if event is not None:
            event.set()
    elif rid is not None:
        peer.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mcpx.demo.upstream", description=__doc__.split("\n")[0])
    parser.add_argument("--tools", help=f"comma-separated tools to serve (default: all: {', '.join(TOOLS)})")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.tools.split(",") if n.strip()] if args.tools else list(TOOLS)
    unknown = [n for n in names if n not in TOOLS]
    if unknown:
        parser.error(f"unknown tools: {', '.join(unknown)}")
    served = {n: TOOLS[n].declaration for n in names}
    peer = Peer(sys.stdout)
    for line in sys.stdin:  # EOF (mcpx closed our stdin, or died): the calls' threads die with us
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(peer, msg, served)


if __name__ == "__main__":
    main()
