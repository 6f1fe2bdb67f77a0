"""Checks the fixture upstream server (tests/fixtures/upstream_server.py) itself, as a real process.

Raw JSON-RPC over stdio (one JSON object per line) and over Streamable HTTP (httpx).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import wait_until

FIXTURE = Path(__file__).parent / "fixtures" / "upstream_server.py"
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
MODERN_META = {
    PV: MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
}
INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_log(path: Path, pred: Callable[[dict], bool], timeout: float = 5.0) -> dict[str, Any]:
    try:
        found: dict[str, Any] = wait_until(
            lambda: next((ev for ev in read_log(path) if pred(ev)), None), timeout, "a matching log event"
        )
    except AssertionError:
        raise AssertionError(f"no matching log event in {read_log(path)!r}") from None
    return found


class Stdio:
    """The fixture as a stdio subprocess; a thread parses stdout lines into a queue."""

    def __init__(self, *args: str, log: Path | None = None):
        cmd = [sys.executable, str(FIXTURE), "stdio", *args]
        if log is not None:
            cmd += ["--log", str(log)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(json.loads(raw))
        self.lines.put(None)

    def send(self, obj: dict[str, Any] | str) -> None:
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.proc.stdin.write(data.encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = 5.0) -> dict[str, Any] | None:
        return self.lines.get(timeout=timeout)

    def until_response(self, rid: Any, timeout: float = 5.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read until the response with id ``rid``; return it and everything else seen before."""
        others: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.next(max(0.01, deadline - time.monotonic()))
            assert msg is not None, "fixture closed stdout"
            if msg.get("id") == rid and "method" not in msg:
                return msg, others
            others.append(msg)

    def request(self, rid: Any, method: str, params: dict | None = None) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.until_response(rid)[0]

    def initialize(self, version: str = "2025-11-25") -> dict[str, Any]:
        resp = self.request(0, "initialize", {**INIT_PARAMS, "protocolVersion": version})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return resp

    def close(self) -> None:
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        finally:
            self.thread.join(timeout=3)
            self.proc.stdout.close()


def call(name: str, arguments: dict | None = None, meta: dict | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta is not None:
        params["_meta"] = meta
    return params


# ---------------------------------------------------------------------------------------------
# stdio
# ---------------------------------------------------------------------------------------------
def test_stdio_legacy_basics(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    s = Stdio("--name", "alpha", log=log)
    try:
        init = s.initialize("2025-06-18")["result"]
        assert init["protocolVersion"] == "2025-06-18"
        assert init["capabilities"] == {"tools": {"listChanged": True}, "logging": {}}
        assert init["serverInfo"]["name"] == "alpha"
        assert s.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}

        tools = s.request(2, "tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == ["echo", "slow", "fail", "protocol_error", "crash", "whoami"]
        assert all(t["inputSchema"]["type"] == "object" for t in tools)

        echo = s.request(3, "tools/call", call("echo", {"text": "hi"}))["result"]
        assert echo == {
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"text": "hi"},
            "_meta": {"fixture/echo": True},
            "x-fixture-extra": {"kept": True},
            "isError": False,
        }
        assert "resultType" not in echo

        who = s.request(4, "tools/call", call("whoami", meta={"traceparent": "00-x", "progressToken": 7}))
        assert who["result"]["structuredContent"] == {"traceparent": "00-x", "progressToken": 7}
        assert json.loads(who["result"]["content"][0]["text"]) == {"traceparent": "00-x", "progressToken": 7}

        fail = s.request(5, "tools/call", call("fail"))["result"]
        assert fail == {"content": [{"type": "text", "text": "it failed"}], "isError": True}

        err = s.request(6, "tools/call", call("protocol_error", {"code": -32001, "message": "boom"}))
        assert err["error"] == {"code": -32001, "message": "boom", "data": {"fixture": True}}
        assert s.request(7, "tools/call", call("protocol_error"))["error"]["code"] == -32603

        assert s.request(8, "tools/call", call("nope"))["error"]["code"] == -32602
        assert s.request(9, "no/such/method")["error"]["code"] == -32601

        s.send("{not json")
        bad = s.next()
        assert bad["id"] is None and bad["error"]["code"] == -32700
        assert s.request(10, "ping")["result"] == {}  # still running

        events = read_log(log)
        assert events[0] == {
            "event": "recv",
            "msg": {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {**INIT_PARAMS, "protocolVersion": "2025-06-18"},
            },
            "transport": "stdio",
        }
        assert any(e.get("msg", {}).get("method") == "notifications/initialized" for e in events)
    finally:
        s.close()


def test_stdio_slow_progress_concurrency_and_cancel(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    s = Stdio(log=log)
    try:
        s.initialize()
        s.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": call("slow", {"seconds": 0.2, "steps": 4}, {"progressToken": "tok"}),
            }
        )
        resp, notes = s.until_response(1)
        assert resp["result"]["content"] == [{"type": "text", "text": "slept 0.2"}]
        assert notes[0]["method"] == "notifications/message"
        assert notes[0]["params"]["level"] == "info" and notes[0]["params"]["logger"] == "fixture"
        progress = [n["params"] for n in notes if n["method"] == "notifications/progress"]
        assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [
            ("tok", i, 4) for i in range(1, 5)
        ]
        wait_for_log(log, lambda e: e == {"event": "finished", "requestId": 1})

        # a long call does not block an echo, and a cancel stops it without a response
        s.send({"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": call("slow", {"seconds": 30})})
        t0 = time.monotonic()
        assert s.request(2, "tools/call", call("echo", {"text": "x"}))["result"]["structuredContent"] == {"text": "x"}
        assert time.monotonic() - t0 < 2
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}})
        ev = wait_for_log(log, lambda e: e.get("event") == "cancelled")
        assert ev["requestId"] == "long" and ev["tool"] == "slow" and ev["reason"] == "notification"
        s.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        _, seen = s.until_response(3)
        assert not any(m.get("id") == "long" for m in seen)
        assert not any(e.get("event") == "finished" and e["requestId"] == "long" for e in read_log(log))
    finally:
        s.close()


def test_stdio_modern_requests() -> None:
    s = Stdio()
    try:
        disc = s.request(1, "server/discover", {"_meta": MODERN_META})["result"]
        assert disc["supportedVersions"] == [MODERN] and disc["resultType"] == "complete"
        assert disc["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "fixture"
        assert "ttlMs" in disc and disc["cacheScope"] in ("public", "private")

        lst = s.request(2, "tools/list", {"_meta": MODERN_META})["result"]
        assert lst["resultType"] == "complete" and "ttlMs" in lst and "cacheScope" in lst

        echo = s.request(3, "tools/call", call("echo", {"text": "m"}, MODERN_META))["result"]
        assert echo["resultType"] == "complete" and echo["x-fixture-extra"] == {"kept": True}

        bad = s.request(4, "tools/list", {"_meta": {**MODERN_META, PV: "2030-01-01"}})["error"]
        assert bad["code"] == -32022 and bad["data"] == {"supported": [MODERN], "requested": "2030-01-01"}

        # modern logging only with an explicit logLevel
        s.send(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": call("slow", {"seconds": 0.02, "steps": 1}, {**MODERN_META, "progressToken": 1}),
            }
        )
        resp, notes = s.until_response(5)
        assert resp["result"]["resultType"] == "complete"
        assert [n["method"] for n in notes] == ["notifications/progress"]
        s.send(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "tools/call",
                "params": call(
                    "slow", {"seconds": 0.02, "steps": 1}, {**MODERN_META, "io.modelcontextprotocol/logLevel": "debug"}
                ),
            }
        )
        _, notes = s.until_response(6)
        assert [n["method"] for n in notes] == ["notifications/message"]
    finally:
        s.close()


def test_stdio_era_flags_and_crash() -> None:
    legacy = Stdio("--era", "legacy", "--legacy-version", "2025-06-18")
    modern = Stdio("--era", "modern")
    try:
        assert legacy.request(1, "server/discover", {"_meta": MODERN_META})["error"]["code"] == -32601
        assert legacy.initialize("2025-11-25")["result"]["protocolVersion"] == "2025-06-18"

        err = modern.request(1, "initialize", INIT_PARAMS)["error"]
        assert err["code"] == -32022 and MODERN in err["data"]["supported"]
        assert modern.request(2, "server/discover", {"_meta": MODERN_META})["result"]["supportedVersions"] == [MODERN]

        legacy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call("crash")})
        assert legacy.proc.wait(timeout=5) == 3
        assert legacy.next() is None  # no reply, stdout closed
    finally:
        legacy.close()
        modern.close()


def test_stdio_unknown_legacy_version_gets_latest() -> None:
    s = Stdio()
    try:
        assert s.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"
    finally:
        s.close()


# ---------------------------------------------------------------------------------------------
# Streamable HTTP
# ---------------------------------------------------------------------------------------------
class Http:
    def __init__(self, tmp_path: Path, *args: str, log: Path | None = None):
        ready = tmp_path / f"ready-{time.monotonic_ns()}"
        cmd = [sys.executable, str(FIXTURE), "http", "--port", "0", "--ready-file", str(ready), *args]
        if log is not None:
            cmd += ["--log", str(log)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_until(lambda: ready.exists() or self.proc.poll() is not None, 10, "the fixture to become ready")
            assert self.proc.poll() is None, "fixture exited early"
            self.url = f"http://127.0.0.1:{int(ready.read_text())}/mcp"
        except BaseException:
            self.close()
            raise
        self.client = httpx.Client(timeout=10, headers={"Accept": "application/json, text/event-stream"})

    def post(self, msg: dict, **headers: str) -> httpx.Response:
        return self.client.post(self.url, json=msg, headers=headers)

    def close(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def sse_messages(resp: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in resp.iter_lines() if line.startswith("data:")]


def rpc(rid: Any, method: str, params: dict | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def test_http_legacy_session_flow(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    h = Http(tmp_path, log=log)
    try:
        r = h.post(rpc(1, "initialize", INIT_PARAMS))
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        sid = r.headers["mcp-session-id"]
        assert r.json()["result"]["protocolVersion"] == "2025-11-25"
        hdr = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        assert h.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, **hdr).status_code == 202

        assert h.post(rpc(2, "tools/list")).status_code == 400  # no session
        assert h.post(rpc(2, "tools/list"), **{"Mcp-Session-Id": "nope"}).status_code == 404
        assert h.client.get(h.url, headers=hdr).status_code == 405

        tools = h.post(rpc(3, "tools/list"), **hdr).json()["result"]["tools"]
        assert [t["name"] for t in tools][:2] == ["echo", "slow"]
        echo = h.post(rpc(4, "tools/call", call("echo", {"text": "yo"})), **hdr).json()["result"]
        assert echo["x-fixture-extra"] == {"kept": True} and echo["_meta"] == {"fixture/echo": True}

        with h.client.stream(
            "POST",
            h.url,
            headers=hdr,
            json=rpc(5, "tools/call", call("slow", {"seconds": 0.1, "steps": 2}, {"progressToken": "p"})),
        ) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            msgs = sse_messages(resp)
        assert [m.get("method") for m in msgs] == [
            "notifications/message",
            "notifications/progress",
            "notifications/progress",
            None,
        ]
        assert msgs[-1]["id"] == 5 and msgs[-1]["result"]["content"][0]["text"] == "slept 0.1"

        # cancel a streaming call with notifications/cancelled: the stream ends without a response
        result: list[list[dict]] = []
        streaming = threading.Event()

        def run() -> None:
            with h.client.stream(
                "POST", h.url, headers=hdr, json=rpc(6, "tools/call", call("slow", {"seconds": 20}))
            ) as resp:
                streaming.set()  # the fixture registers the call before it starts the response
                result.append(sse_messages(resp))

        t = threading.Thread(target=run)
        t.start()
        assert streaming.wait(5), "the call's stream did not start"
        r = h.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}}, **hdr)
        assert r.status_code == 202
        t.join(timeout=5)
        assert not t.is_alive()
        assert not any("id" in m for m in result[0])
        ev = wait_for_log(log, lambda e: e.get("event") == "cancelled")
        assert ev == {"event": "cancelled", "requestId": 6, "tool": "slow", "reason": "notification"}
        assert read_log(log)[-2]["headers"]["mcp-session-id"] == sid

        assert h.client.delete(h.url, headers=hdr).status_code == 200
        assert h.post(rpc(7, "ping"), **hdr).status_code == 404
    finally:
        h.close()


def test_http_modern_requests(tmp_path: Path) -> None:
    log = tmp_path / "fx.log"
    h = Http(tmp_path, "--name", "beta", log=log)
    try:
        mh = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"}
        r = h.post(rpc(1, "server/discover", {"_meta": MODERN_META}), **mh)
        assert r.status_code == 200 and "mcp-session-id" not in r.headers
        disc = r.json()["result"]
        assert disc["supportedVersions"] == [MODERN] and disc["resultType"] == "complete"
        assert disc["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "beta"

        meta = {**MODERN_META, "traceparent": "00-abc"}
        r = h.post(
            rpc(2, "tools/call", call("echo", {"text": "q"}, meta)),
            **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
        )
        echo = r.json()["result"]
        assert echo["resultType"] == "complete" and echo["structuredContent"] == {"text": "q"}
        who = h.post(rpc(3, "tools/call", call("whoami", meta=meta))).json()["result"]
        assert who["structuredContent"] == meta

        r = h.post(rpc(4, "tools/list", {"_meta": {**MODERN_META, PV: "2031-01-01"}}))
        assert r.status_code == 400 and r.json()["error"]["code"] == -32022
        assert h.post(rpc(5, "no/such", {"_meta": MODERN_META})).status_code == 404
        r = h.post(rpc(5, "tools/call", call("slow", {}, {**MODERN_META, PV: "2031-01-01"})))
        assert r.status_code == 400 and r.json()["error"]["code"] == -32022

        # closing the response stream of a modern call is a cancellation
        with h.client.stream(
            "POST",
            h.url,
            json=rpc(6, "tools/call", call("slow", {"seconds": 20, "steps": 100}, {**MODERN_META, "progressToken": 9})),
        ) as resp:
            for line in resp.iter_lines():
                if line.startswith("data:"):
                    assert json.loads(line[5:])["method"] == "notifications/progress"
                    break
        ev = wait_for_log(log, lambda e: e.get("event") == "cancelled")
        assert ev == {"event": "cancelled", "requestId": 6, "tool": "slow", "reason": "disconnect"}
    finally:
        h.close()


def test_http_era_flags(tmp_path: Path) -> None:
    legacy = Http(tmp_path, "--era", "legacy")
    modern = Http(tmp_path, "--era", "modern")
    try:
        r = legacy.post(rpc(1, "server/discover", {"_meta": MODERN_META}))
        assert r.status_code == 400 and r.json()["error"]["code"] == -32601
        r = modern.post(rpc(1, "initialize", INIT_PARAMS))
        assert r.status_code == 400 and r.json()["error"]["data"]["supported"] == [MODERN]
        assert "mcp-session-id" not in r.headers
        assert modern.client.delete(modern.url).status_code == 405
        r = legacy.post(rpc(2, "initialize", INIT_PARAMS))
        sid = r.headers["mcp-session-id"]
        with pytest.raises(httpx.TransportError):
            legacy.post(rpc(3, "tools/call", call("crash")), **{"Mcp-Session-Id": sid})
        assert legacy.proc.wait(timeout=5) == 3
    finally:
        legacy.close()
        modern.close()
