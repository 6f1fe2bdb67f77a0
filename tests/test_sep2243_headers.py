"""SEP-2243 toward a 2026-07-28 HTTP upstream, through a real mcpx daemon (#36): a tool whose
`x-mcp-header` annotations are invalid is left out of what hosts list, logged once and shown with its
reason in /v1/status (the console's `:upstreams`, `mcpx status`); a call of a valid one mirrors its
annotated arguments as `Mcp-Param-*` headers, encoded as the SEP says. The conformance fixture over
HTTP validates those headers server-side (tests/conformance/fixture_http.py), and a scripted server
of ours records them byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.abc import ByteStream
from harness import ROOT, Api, reply_of, wait_until
from scripted_http import Request, in_thread, json_reply, reply

from mcpx.protocol.param_headers import encode, header_params, headers_for

CONFORMANCE = ROOT / "tests" / "conformance" / "server.py"
MODERN = "2026-07-28"


def _schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


VALID = {
    "name": "route",
    "inputSchema": _schema(
        region={"type": "string", "x-mcp-header": "Region"},
        priority={"type": "integer", "x-mcp-header": "Priority"},
        verbose={"type": ["boolean", "null"], "x-mcp-header": "Verbose"},
        where={"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
        query={"type": "string"},
    ),
}
INVALID = {
    "number_header": _schema(score={"type": "number", "x-mcp-header": "Score"}),
    "space_in_name": _schema(value={"type": "string", "x-mcp-header": "My Region"}),
    "duplicate": _schema(a={"type": "string", "x-mcp-header": "Same"}, b={"type": "string", "x-mcp-header": "same"}),
    "inside_items": _schema(xs={"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}),
    "empty": _schema(value={"type": "string", "x-mcp-header": ""}),
}


class ModernMcp:
    """A 2026-07-28 server (server/discover, no session) whose tools/call requests are kept with
    their headers; GET is 405."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools
        self.calls: list[tuple[dict[str, str], dict[str, Any]]] = []

    async def __call__(self, req: Request, stream: ByteStream) -> bool:
        if req.method != "POST":
            await stream.send(reply(405))
            return True
        msg = req.json()
        method = msg.get("method")
        if "id" not in msg:
            await stream.send(reply(202))
            return True
        if method == "server/discover":
            res: dict[str, Any] = {
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted-2026", "version": "0"}},
            }
        elif method == "tools/list":
            res = {"tools": self.tools}
        elif method == "tools/call":
            self.calls.append((req.headers, msg["params"]))
            res = {"content": [{"type": "text", "text": "ok"}]}
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            await stream.send(json_reply({"jsonrpc": "2.0", "id": msg["id"], "error": error}))
            return True
        await stream.send(json_reply({"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "complete", **res}}))
        return True


def _config(url: str) -> dict[str, Any]:
    return {"mcpServers": {"up": {"url": url, "mcpx": {"passthrough": True}}}}


def _params(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("mcp-param-")}


def test_tools_with_invalid_annotations_are_left_out_logged_once_and_shown_with_why(
    start_daemon: Any, raw_host: Any
) -> None:
    tools = [VALID, *({"name": n, "inputSchema": s} for n, s in INVALID.items())]
    with in_thread(ModernMcp(tools)) as port:
        d = start_daemon(_config(f"http://127.0.0.1:{port}/mcp"))
        host = raw_host(d.url)
        listed = [t["name"] for t in reply_of(host.modern("tools/list"))["result"]["tools"]]
        refused = reply_of(host.modern("tools/call", {"name": "number_header", "arguments": {"score": 1.5}}))
        with Api(d) as api:
            api.post("/v1/upstreams/up/restart", json={"by": "olga"})
        d.wait_upstreams()
        [up] = d.status()["upstreams"]
        stderr = d.stderr()
    assert listed == ["route"]
    assert "Unknown tool" in refused["error"]["message"]
    reasons = {t["name"]: t["reason"] for t in up["leftOutTools"]}
    assert sorted(reasons) == sorted(INVALID)
    assert "only a string, integer or boolean property" in reasons["number_header"]
    assert "letters, digits" in reasons["space_in_name"]
    assert "'same' on b: a has it already" in reasons["duplicate"]
    assert "only a property reached through `properties`" in reasons["inside_items"]
    assert "non-empty string" in reasons["empty"]
    for name in INVALID:  # once, although the restarted upstream listed it again
        assert stderr.count(f"tool {name!r} left out") == 1, (name, stderr)
    assert up["tools"] == 1


def test_a_call_mirrors_its_annotated_arguments_as_mcp_param_headers(start_daemon: Any, raw_host: Any) -> None:
    server = ModernMcp([VALID])
    calls = [
        {"region": "us-west1", "priority": 42, "verbose": False, "where": {"zone": "b"}, "query": "SELECT 1"},
        {"region": "Zürich", "priority": -7, "verbose": None, "query": "q"},  # null: no header
        {"region": " padded ", "priority": 1, "where": {}},
        {"region": "=?base64?literal?=", "priority": 2, "verbose": True},
    ]
    with in_thread(server) as port:
        d = start_daemon(_config(f"http://127.0.0.1:{port}/mcp"))
        host = raw_host(d.url)
        for arguments in calls:
            call = {"name": "route", "arguments": arguments}
            frame = reply_of(host.modern("tools/call", call, headers=_host_headers(VALID, arguments)))
            assert frame["result"]["content"][0]["text"] == "ok", frame
    sent = [_params(headers) for headers, _ in server.calls]
    assert sent == [
        {"mcp-param-region": "us-west1", "mcp-param-priority": "42", "mcp-param-verbose": "false",
         "mcp-param-zone": "b"},
        {"mcp-param-region": "=?base64?WsO8cmljaA==?=", "mcp-param-priority": "-7"},
        {"mcp-param-region": "=?base64?IHBhZGRlZCA=?=", "mcp-param-priority": "1"},
        {"mcp-param-region": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "mcp-param-priority": "2",
         "mcp-param-verbose": "true"},
    ]  # fmt: skip
    assert all(params["arguments"] == arguments for (_, params), arguments in zip(server.calls, calls, strict=True))


@pytest.fixture
def conformance_http(tmp_path: Path) -> Iterator[str]:
    ready = tmp_path / "conformance.port"
    with open(tmp_path / "conformance.stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(CONFORMANCE), "http", "--port", "0", "--ready-file", str(ready)],
            stdin=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        port = wait_until(lambda: ready.exists() and ready.read_text().strip(), what="the conformance fixture")
        yield f"http://127.0.0.1:{int(port)}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_server_that_checks_the_headers_accepts_the_calls(
    start_daemon: Any, raw_host: Any, conformance_http: str
) -> None:
    d = start_daemon(_config(conformance_http))
    host = raw_host(d.url)
    for region in ("eu-west1", "São Paulo", " spaced "):
        call = {"name": "test_header_param", "arguments": {"region": region}}
        frame = reply_of(host.modern("tools/call", call, headers={"Mcp-Param-Region": encode(region)}))
        assert "error" not in frame and not frame["result"].get("isError"), frame
        assert region in json.dumps(frame["result"], ensure_ascii=False), frame
    [up] = d.status()["upstreams"]
    assert up["era"] == "modern" and up["leftOutTools"] == []


def _host_headers(tool: dict[str, Any], arguments: dict[str, Any]) -> dict[str, str]:
    """What a 2026 host sends mcpx itself, which checks it too: the same mirroring (SEP-2243)."""
    return headers_for(header_params(tool["inputSchema"]), arguments)
