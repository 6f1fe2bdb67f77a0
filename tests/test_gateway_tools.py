"""Tools through the real daemon: aggregation, namespacing, verbatim results, both eras, both upstream transports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import LEGACY, RawHost, reply_of, sse_frames, stdio_server

pytestmark = [pytest.mark.sqlite_only("naming and listing tools: the wire"), pytest.mark.heavy]


@pytest.fixture(params=["stdio", "http"], ids=["upstream-stdio", "upstream-http"])
def upstream(request: Any, tmp_path: Path, fixture_http: Any) -> dict[str, Any]:
    if request.param == "stdio":
        return stdio_server(tmp_path)
    return {"url": fixture_http().url}


@pytest.fixture
def gateway(start_daemon: Any, upstream: dict[str, Any]) -> RawHost:
    d = start_daemon({"mcpServers": {"fx": upstream}})
    host = RawHost(d.url)
    yield host
    host.close()


def test_modern_tools_list_is_namespaced_cacheable_and_names_the_server(gateway: RawHost) -> None:
    resp = gateway.modern("tools/list")
    assert resp.status_code == 200
    res = resp.json()["result"]
    assert [t["name"] for t in res["tools"]] == [
        "fx__echo",
        "fx__slow",
        "fx__fail",
        "fx__protocol_error",
        "fx__crash",
        "fx__whoami",
    ]
    assert res["resultType"] == "complete" and "ttlMs" in res and res["cacheScope"] in ("private", "public")
    assert res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpx"


def test_legacy_tools_list_matches_modern_order(gateway: RawHost) -> None:
    gateway.initialize()
    res = gateway.legacy("tools/list").json()["result"]
    assert [t["name"] for t in res["tools"]][:2] == ["fx__echo", "fx__slow"]
    assert "resultType" not in res


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_echo_result_is_forwarded_verbatim(gateway: RawHost, era: str) -> None:
    if era == "legacy":
        gateway.initialize()
        resp = gateway.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "héllo"}})
    else:
        resp = gateway.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "héllo"}})
    res = reply_of(resp)["result"]
    assert res["content"] == [{"type": "text", "text": "héllo"}]
    assert res["structuredContent"] == {"text": "héllo"}
    assert res["x-fixture-extra"] == {"kept": True}
    assert res["_meta"]["fixture/echo"] is True
    assert res["isError"] is False
    assert ("resultType" in res) == (era == "modern")


def test_is_error_result_stays_a_result(gateway: RawHost) -> None:
    res = reply_of(gateway.modern("tools/call", {"name": "fx__fail", "arguments": {}}))
    assert res["result"]["isError"] is True


def test_upstream_protocol_error_is_forwarded_as_error(gateway: RawHost) -> None:
    gateway.initialize()
    frame = reply_of(
        gateway.legacy("tools/call", {"name": "fx__protocol_error", "arguments": {"code": -32099, "message": "nope"}})
    )
    assert frame["error"]["code"] == -32099 and frame["error"]["message"] == "nope"


def test_upstream_error_code_reserved_in_2026_is_made_legal_for_modern_hosts(gateway: RawHost) -> None:
    frame = reply_of(
        gateway.modern("tools/call", {"name": "fx__protocol_error", "arguments": {"code": -32042, "message": "old"}})
    )
    assert frame["error"]["code"] == -32603 and frame["error"]["message"] == "old"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_unknown_tool_is_invalid_params(gateway: RawHost, era: str) -> None:
    if era == "legacy":
        gateway.initialize()
        resp = gateway.legacy("tools/call", {"name": "fx__nope", "arguments": {}})
    else:
        resp = gateway.modern("tools/call", {"name": "fx__nope", "arguments": {}})
    assert resp.status_code == 200
    assert resp.json()["error"]["code"] == -32602


def test_progress_reaches_the_host_under_its_own_token(gateway: RawHost) -> None:
    resp = gateway.modern(
        "tools/call",
        {"name": "fx__slow", "arguments": {"seconds": 0.3, "steps": 3}, "_meta": {"progressToken": "tok-1"}},
    )
    frames = sse_frames(resp)
    progress = [f["params"] for f in frames if f.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {p["progressToken"] for p in progress} == {"tok-1"}
    assert reply_of(resp)["result"]["content"][0]["text"] == "slept 0.3"


def test_modern_log_messages_only_when_the_request_asked_for_a_level(gateway: RawHost) -> None:
    quiet = sse_frames(gateway.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 0.1, "steps": 1}}))
    assert not [f for f in quiet if f.get("method") == "notifications/message"]


def test_legacy_version_is_negotiated_down(gateway: RawHost) -> None:
    assert gateway.initialize("2025-06-18")["protocolVersion"] == "2025-06-18"
    res = reply_of(gateway.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}}))["result"]
    assert res["content"][0]["text"] == "x"
    gateway2 = RawHost(gateway.url)
    assert gateway2.initialize("2024-01-01")["protocolVersion"] == LEGACY
    gateway2.close()


def test_2025_03_26_host_does_not_get_structured_content(gateway: RawHost) -> None:
    gateway.initialize("2025-03-26")
    res = reply_of(gateway.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}}))["result"]
    assert "structuredContent" not in res and res["x-fixture-extra"] == {"kept": True}
