"""A minimal 2025-11-25 MCP server over stdio that serves every request on a thread of its own.

bench/flood_latency.py runs it beside the test fixture (tests/fixtures/upstream_server.py, one
asyncio loop that answers one request at a time between its own writes), to tell the upstream's
share of another host's latency under a flood from mcpx's. Two tools, as the fixture's:
`echo {text}` and `slow {seconds, steps}` (a progress notification per step, at full speed when
`seconds` is 0).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

_write_lock = threading.Lock()
_log_path: str | None = None  # --log: a JSON line as each slow call starts and ends (the fixture logs both)
_TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {
        "name": "slow",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "steps": {"type": "integer"}}},
    },
]


def _send(msg: dict[str, Any]) -> None:
    data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    with _write_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _log(event: str) -> None:
    if _log_path is not None:
        with _write_lock, open(_log_path, "a") as log:
            log.write(json.dumps({"event": event}) + "\n")


def _result(msg: dict[str, Any]) -> dict[str, Any]:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "threaded", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": _TOOLS}
    if method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text"))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    if method == "tools/call" and params.get("name") == "slow":
        args = params.get("arguments") or {}
        seconds, steps = float(args.get("seconds", 1)), int(args.get("steps", 4))
        token = (params.get("_meta") or {}).get("progressToken")
        _log("started")
        for i in range(1, steps + 1):
            if seconds:
                time.sleep(seconds / steps)
            if token is not None:
                note = {"progressToken": token, "progress": i, "total": steps}
                _send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        _log("finished")
        return {"content": [{"type": "text", "text": f"slept {seconds:g}"}], "isError": False}
    if method == "ping":
        return {}
    raise LookupError(f"unknown method {method!r}")


def _serve(msg: dict[str, Any]) -> None:
    try:
        _send({"jsonrpc": "2.0", "id": msg["id"], "result": _result(msg)})
    except LookupError as exc:
        _send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": str(exc)}})


def main() -> None:
    global _log_path
    ap = argparse.ArgumentParser()
    ap.add_argument("--log")
    _log_path = ap.parse_args().log
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        msg = json.loads(line)
        if isinstance(msg, dict) and "id" in msg and "method" in msg:
            threading.Thread(target=_serve, args=(msg,), daemon=True).start()


if __name__ == "__main__":
    main()
