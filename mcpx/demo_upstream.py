"""The bundled example upstream for `mcpx demo`: a tiny 2025-11-25 stdio MCP server, no dependencies.

It speaks only the handshake era on purpose: the demo then shows a 2026-07-28 host reaching a
legacy server through mcpx.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the given text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "countdown",
        "description": "Count down from n, one step per 0.2 s, reporting progress.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 50}}},
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
]
_lock = threading.Lock()
_cancelled: set[str | int] = set()


def send(msg: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def call(rid: str | int, params: dict[str, Any]) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    result: dict[str, Any]
    if name == "echo":
        result = {"content": [{"type": "text", "text": str(args.get("text", ""))}]}
    elif name == "add":
        try:
            total = float(args["a"]) + float(args["b"])
        except (KeyError, TypeError, ValueError):
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "add needs numbers a and b"}})
            return
        result = {"content": [{"type": "text", "text": f"{total:g}"}], "structuredContent": {"sum": total}}
    elif name == "countdown":
        n = max(1, min(50, int(args.get("n", 5))))
        for i in range(n):
            if rid in _cancelled:
                return
            time.sleep(0.2)
            if token is not None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": i + 1,
                            "total": n,
                            "message": f"{n - i - 1} left",
                        },
                    }
                )
        result = {"content": [{"type": "text", "text": "liftoff"}]}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
        return
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "mcpx-demo", "version": "1.0"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(rid, params), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "notifications/cancelled" and isinstance(params.get("requestId"), (str, int)):
            _cancelled.add(params["requestId"])
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()
