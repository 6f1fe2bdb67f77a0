"""Cancellation of ordinary calls reaches the upstream, by each era's own rule.

2025-11-25: `notifications/cancelled` cancels; a dropped connection does not (transports.mdx:128-129).
2026-07-28: a closed response stream is the cancellation (streamable-http.mdx:235-240).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
from harness import MODERN, RawHost, modern_meta, read_jsonl, stdio_server, wait_until


def _events(tmp: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(tmp / "fixture.log.jsonl") if e.get("event") == kind]


def _slow_started(tmp: Path) -> bool:
    return any(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(tmp / "fixture.log.jsonl"))


def test_legacy_cancel_notification_reaches_the_upstream(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(d.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["resp"] = h.post(
                {
                    "jsonrpc": "2.0",
                    "id": 77,
                    "method": "tools/call",
                    "params": {"name": "fx__slow", "arguments": {"seconds": 30, "steps": 30}},
                },
                h._legacy_headers(),
            )

    t = threading.Thread(target=call)
    t.start()
    wait_until(lambda: _slow_started(tmp_path), what="slow call upstream")
    resp = host.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77, "reason": "user"}},
        host._legacy_headers(),
    )
    assert resp.status_code == 202
    [ev] = wait_until(lambda: _events(tmp_path, "cancelled"), what="upstream cancelled event")
    assert ev["tool"] == "slow"
    t.join(10)
    assert not t.is_alive()


def test_legacy_disconnect_is_not_a_cancellation(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "fx__slow", "arguments": {"seconds": 1.0, "steps": 10}, "_meta": {"progressToken": "p"}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **host._legacy_headers(),
    }
    with httpx.Client(timeout=10) as c, c.stream("POST", d.url, content=json.dumps(body), headers=headers) as resp:
        next(resp.iter_lines())  # the stream is open: the call is running upstream; now drop it
    wait_until(lambda: _events(tmp_path, "finished"), what="slow call to finish upstream")
    assert not _events(tmp_path, "cancelled")


def test_modern_closed_stream_cancels_the_upstream_call(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {
            "name": "fx__slow",
            "arguments": {"seconds": 30, "steps": 60},
            "_meta": modern_meta(progressToken="p"),
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "fx__slow",
    }
    with httpx.Client(timeout=10) as c, c.stream("POST", d.url, content=json.dumps(body), headers=headers) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        next(resp.iter_lines())
    [ev] = wait_until(lambda: _events(tmp_path, "cancelled"), what="upstream cancelled event")
    assert ev["tool"] == "slow"


def test_modern_stdio_host_cancels_with_a_notification(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert shim.stdin is not None and shim.stdout is not None
        call = {
            "jsonrpc": "2.0",
            "id": "c1",
            "method": "tools/call",
            "params": {"name": "fx__slow", "arguments": {"seconds": 30, "steps": 30}, "_meta": modern_meta()},
        }
        shim.stdin.write((json.dumps(call) + "\n").encode())
        shim.stdin.flush()
        wait_until(lambda: _slow_started(tmp_path), what="slow call upstream")
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "c1", "_meta": modern_meta()},
        }
        shim.stdin.write((json.dumps(cancel) + "\n").encode())
        shim.stdin.flush()
        wait_until(lambda: _events(tmp_path, "cancelled"), what="upstream cancelled event")
        # The cancelled request gets no reply; the next one still does.
        ping = {"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {"_meta": modern_meta()}}
        shim.stdin.write((json.dumps(ping) + "\n").encode())
        shim.stdin.flush()
        reply = json.loads(shim.stdout.readline())
        assert reply["id"] == "d1" and "2026-07-28" in reply["result"]["supportedVersions"]
    finally:
        shim.stdin.close() if shim.stdin else None
        shim.wait(10)
        shim.stdout.close() if shim.stdout else None
