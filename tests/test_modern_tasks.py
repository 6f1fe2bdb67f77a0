"""The 2026-07-28 tasks extension through the real daemon (raw frames, schema-checked)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import MODERN, RawHost, modern_meta, read_jsonl, stdio_server, wait_until

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


@pytest.fixture
def daemon(start_daemon: Any, tmp_path: Path) -> Any:
    return start_daemon(
        {
            "mcpServers": {
                "fx": stdio_server(
                    tmp_path, tools={"fail": {"taskSupport": "required"}, "whoami": {"taskSupport": "forbidden"}}
                )
            },
            "tasks": {"taskAfterMs": 200},
        }
    )


def _get(host: RawHost, tid: str, meta: dict[str, Any] | None = EXT) -> httpx.Response:
    return host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid})


def test_fast_call_answers_inline_and_slow_call_becomes_a_task(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    fast = host.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "now"}}, meta=EXT).json()["result"]
    assert fast["resultType"] == "complete" and fast["content"][0]["text"] == "now"
    handle = host.modern(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": 1, "steps": 2}, "task": {"ttl": 5}}, meta=EXT
    ).json()["result"]
    assert handle["resultType"] == "task" and handle["status"] == "working" and "task" not in handle
    assert handle["ttlMs"] > 5  # params.task is ignored in 2026
    first = _get(host, handle["taskId"]).json()["result"]  # durable: readable at once
    assert first["status"] in ("working", "completed") and first["resultType"] == "complete"
    done = wait_until(
        lambda: (r := _get(host, handle["taskId"]).json()["result"])["status"] == "completed" and r,
        what="task completion",
    )
    assert done["result"]["content"][0]["text"] == "slept 1" and done["result"]["resultType"] == "complete"


def test_client_without_the_extension_never_gets_a_task(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    res = host.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 0.6, "steps": 1}}).json()["result"]
    assert res["resultType"] == "complete" and res["content"][0]["text"] == "slept 0.6"
    required = host.modern("tools/call", {"name": "fx__fail", "arguments": {}})
    assert required.status_code == 400
    err = required.json()["error"]
    assert err["code"] == -32021 and err["data"]["requiredCapabilities"] == {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }


def test_task_methods_need_the_extension_and_a_matching_mcp_name(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    tid = host.modern("tools/call", {"name": "fx__fail", "arguments": {}}, meta=EXT).json()["result"]["taskId"]
    for method in ("tasks/get", "tasks/cancel"):
        resp = host.modern(method, {"taskId": tid}, headers={"Mcp-Name": tid})
        assert resp.status_code == 400 and resp.json()["error"]["code"] == -32021
        bad = host.modern(method, {"taskId": tid}, meta=EXT, headers={"Mcp-Name": "other"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == -32020
        missing = host.modern(method, {"taskId": tid}, meta=EXT)
        assert missing.status_code == 400 and missing.json()["error"]["code"] == -32020
    for method in ("tasks/result", "tasks/list"):
        resp = host.modern(method, {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid})
        assert resp.status_code == 404 and resp.json()["error"]["code"] == -32601


def test_is_error_result_is_completed_not_failed(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    tid = host.modern("tools/call", {"name": "fx__fail", "arguments": {}}, meta=EXT).json()["result"]["taskId"]
    done = wait_until(lambda: (r := _get(host, tid).json()["result"])["status"] != "working" and r, what="fail task")
    assert done["status"] == "completed" and done["result"]["isError"] is True and "error" not in done


def test_forbidden_tool_never_becomes_a_task(daemon: Any, raw_host: Any) -> None:
    res = raw_host(daemon.url).modern("tools/call", {"name": "fx__whoami", "arguments": {}}, meta=EXT).json()["result"]
    assert res["resultType"] == "complete"


def test_unknown_task_is_invalid_params(daemon: Any, raw_host: Any) -> None:
    resp = _get(raw_host(daemon.url), "no-such-task")
    assert resp.status_code == 200 and resp.json()["error"]["code"] == -32602


def test_cancel_is_acked_stops_the_upstream_and_is_idempotent(daemon: Any, raw_host: Any, tmp_path: Path) -> None:
    host = raw_host(daemon.url)
    tid = host.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 30, "steps": 30}}, meta=EXT).json()[
        "result"
    ]["taskId"]
    for _ in range(2):  # the second cancel hits a terminal task: still an ack, not an error
        ack = host.modern("tasks/cancel", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()["result"]
        assert ack["resultType"] == "complete" and set(ack) <= {"resultType", "_meta"}
    assert _get(host, tid).json()["result"]["status"] == "cancelled"
    wait_until(
        lambda: [e for e in read_jsonl(tmp_path / "fixture.log.jsonl") if e.get("event") == "cancelled"],
        what="upstream saw the cancel",
    )


def test_update_is_acked_and_unknown_keys_are_ignored(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    tid = host.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 2, "steps": 2}}, meta=EXT).json()[
        "result"
    ]["taskId"]
    ack = host.modern(
        "tasks/update",
        {"taskId": tid, "inputResponses": {"nope": {"action": "accept", "content": {}}}},
        meta=EXT,
        headers={"Mcp-Name": tid},
    )
    assert ack.status_code == 200 and ack.json()["result"]["resultType"] == "complete"
    assert _get(host, tid).json()["result"]["status"] == "working"


def test_host_that_disconnects_collects_the_result_from_a_new_connection(daemon: Any) -> None:
    """The point of tasks: the HTTP connection that made the call is gone; the work is not."""
    with RawHost(daemon.url) as first:
        tid = first.modern(
            "tools/call", {"name": "fx__slow", "arguments": {"seconds": 1.5, "steps": 3}}, meta=EXT
        ).json()["result"]["taskId"]
    with RawHost(daemon.url) as second:
        done = wait_until(
            lambda: (r := _get(second, tid).json()["result"])["status"] == "completed" and r,
            what="completion seen from a new connection",
        )
    assert done["result"]["content"][0]["text"] == "slept 1.5"


def test_listen_with_task_ids_pushes_the_state_at_once_and_on_change(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    tid = host.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 1, "steps": 2}}, meta=EXT).json()[
        "result"
    ]["taskId"]
    body = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "subscriptions/listen",
        "params": {"_meta": {**modern_meta(), **EXT}, "notifications": {"taskIds": [tid]}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    seen: list[dict[str, Any]] = []
    with httpx.Client(timeout=10) as c, c.stream("POST", daemon.url, content=json.dumps(body), headers=headers) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                if seen[-1].get("params", {}).get("status") == "completed":
                    break
    assert seen[0]["method"] == "notifications/subscriptions/acknowledged"
    assert (
        seen[0]["params"]["notifications"]["taskIds"] == [tid]
        and seen[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 41
    )
    states = [f["params"] for f in seen[1:]]
    assert all(f["method"] == "notifications/tasks" for f in seen[1:])
    assert states[0]["status"] == "working" and states[-1]["status"] == "completed"
    assert states[-1]["result"]["content"][0]["text"] == "slept 1"
    assert all(s["_meta"]["io.modelcontextprotocol/subscriptionId"] == 41 for s in states)


def test_listen_for_task_ids_without_the_extension_is_refused(daemon: Any, raw_host: Any) -> None:
    resp = raw_host(daemon.url).modern("subscriptions/listen", {"notifications": {"taskIds": ["x"]}})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == -32021


def test_legacy_session_never_sees_the_extension(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    caps = host.initialize()["capabilities"]
    assert "extensions" not in caps and "tasks" in caps


def test_cancelling_the_stream_before_the_task_decision_cancels_upstream(daemon: Any, tmp_path: Path) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "fx__slow",
            "arguments": {"seconds": 30, "steps": 300},
            "_meta": {**modern_meta(progressToken="p"), **EXT},
        },
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "fx__slow",
    }
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(10, read=0.05)) as c:
                box["resp"] = c.post(daemon.url, content=json.dumps(body), headers=headers)
        except httpx.HTTPError as exc:
            box["err"] = exc

    t = threading.Thread(target=go)
    t.start()
    t.join(5)
    wait_until(
        lambda: [e for e in read_jsonl(tmp_path / "fixture.log.jsonl") if e.get("event") == "cancelled"],
        what="upstream cancel",
    )
    assert "err" in box  # the host gave up before any handle existed
