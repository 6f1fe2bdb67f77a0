"""The 2026-07-28 tasks extension through mcpx, end to end, with FastMCP + fastmcp-tasks as the host.

FastMCP 4.1.4 with `fastmcp-tasks` 4.1.4 is a third-party client of the
`io.modelcontextprotocol/tasks` extension; `tests/peers/fastmcp_host.py` drives it from the
`fastmcp-tasks` peer venv against a real daemon in front of the fixture upstream over stdio, with
`tasks.taskAfterMs: 200`. Covered: the client declares the extension and sees it advertised;
a fast call is answered inline; a slow call becomes a task that the client polls with `tasks/get`
to `completed` and collects the inline `result` from (also through FastMCP's transparent
`Client.call_tool`); a slow task is cancelled with `tasks/cancel` (an empty ack, the final status
`cancelled`, and the fixture upstream logs the cancellation of that very request).

fastmcp-tasks 4.1.4 sends `tasks/get|update|cancel` without the `Mcp-Name: <taskId>` header the
extension makes a MUST for clients over Streamable HTTP (ext-tasks tasks.md:511). The driver
fixes that by default (`name_param = "taskId"` on the request models); the last test runs the
client as shipped (`--stock`) and checks that mcpx refuses those requests with -32020 as the core
header rules require, instead of bending to the client; the one after it turns on the documented
switch for exactly that quirk (`tasks.requireMcpName: false`) and the shipped client works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import MODERN, read_jsonl, stdio_server, wait_until
from peers.run_host import run_host
from peers.venvs import peer_python

EXT = "io.modelcontextprotocol/tasks"
CAPS = "io.modelcontextprotocol/clientCapabilities"

# The first run builds the fastmcp-tasks peer venv (about 40 s); importing FastMCP takes a few
# seconds per host run on a busy machine.
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.peers,
    pytest.mark.sqlite_only("FastMCP's tasks client against mcpx: the wire"),
]  # slow tier (tests/conftest.py)


@pytest.fixture(scope="module")
def fastmcp_python() -> Path:
    return peer_python("fastmcp-tasks")


@pytest.fixture
def daemon(start_daemon: Any, tmp_path: Path) -> Any:
    return start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"taskAfterMs": 200}})


def run_fastmcp(
    py: Path, url: str, script: list[dict[str, Any]], *extra: str, timeout: float = 90
) -> list[dict[str, Any]]:
    """Run the FastMCP host once; one JSON line per step after the connect line."""
    lines = run_host(py, "fastmcp_host.py", ["--url", url, *extra], script, timeout=timeout)
    connect = lines[0]
    assert connect["protocolVersion"] == MODERN, connect
    assert connect["capabilities"]["extensions"] == {EXT: {}}, connect  # advertised; no legacy `tasks` capability
    assert "tasks" not in connect["capabilities"], connect
    return lines[1:]


def text_of(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def http_requests(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(path) if isinstance(r.get("body"), dict) and "method" in r["body"]]


def test_fastmcp_tasks_client_inline_task_and_cancel(daemon: Any, fastmcp_python: Path, tmp_path: Path) -> None:
    http_log = tmp_path / "fastmcp-http.jsonl"
    script = [
        {"op": "list_tools"},
        {"op": "call", "name": "fx__echo", "args": {"text": "inline please"}},
        {
            "op": "call_task_then_wait",
            "name": "fx__slow",
            "args": {"seconds": 1.5, "steps": 3},
            "poll": 0.25,
            "timeout": 30,
        },
        {"op": "call_auto", "name": "fx__slow", "args": {"seconds": 0.6, "steps": 1}, "timeout": 30},
        {
            "op": "call_task_then_cancel",
            "name": "fx__slow",
            "args": {"seconds": 30, "steps": 30},
            "after": 0.5,
            "poll": 0.1,
            "timeout": 10,
        },
    ]
    tools, echo, waited, auto, cancelled = run_fastmcp(fastmcp_python, daemon.url, script, "--log-http", str(http_log))
    assert tools["ok"] and {"fx__echo", "fx__slow"} <= set(tools["tools"]), tools

    # A call that finishes within taskAfterMs is answered inline, even to a declaring client.
    assert echo["ok"] and echo["kind"] == "inline", echo
    assert echo["result"]["resultType"] == "complete" and text_of(echo["result"]) == "inline please"

    # A slow call becomes a task: a flat CreateTaskResult, polled to completed, result inlined.
    assert waited["ok"] and waited["kind"] == "task", waited
    handle = waited["handle"]
    assert handle["resultType"] == "task" and handle["status"] == "working" and "task" not in handle
    assert isinstance(handle["taskId"], str) and handle["taskId"].isascii()
    assert handle["ttlMs"] is None or handle["ttlMs"] > 0
    assert not {"ttl", "pollInterval"} & set(handle)
    statuses = waited["statuses"]
    assert statuses[-1] == "completed" and len(statuses) >= 2 and set(statuses[:-1]) == {"working"}, statuses
    final = waited["final"]
    assert final["taskId"] == handle["taskId"] and final["resultType"] == "complete"
    assert text_of(final["result"]) == "slept 1.5" and final["result"]["isError"] is False
    assert waited["result"] == {
        "content": [{"type": "text", "text": "slept 1.5"}],
        "isError": False,
    }  # ToolTask.result()

    # FastMCP's transparent path (Client.call_tool resolves the task claim by polling tasks/get).
    assert auto["ok"] and text_of(auto["result"]) == "slept 0.6", auto

    # tasks/cancel: an empty ack, then the task reads cancelled and FastMCP reports it as such.
    assert cancelled["ok"] and cancelled["kind"] == "task", cancelled
    assert {k: v for k, v in cancelled["ack"].items() if k != "_meta"} == {"resultType": "complete"}
    assert cancelled["finalStatus"] == "cancelled" and cancelled["final"]["status"] == "cancelled"
    assert not {"result", "error", "inputRequests"} & set(cancelled["final"])
    assert "was cancelled" in cancelled["resultError"]

    # The cancellation reached the upstream: the fixture logs `cancelled` for that very request.
    log = tmp_path / "fixture.log.jsonl"

    def cancelled_ids() -> set[Any]:
        return {e.get("requestId") for e in read_jsonl(log) if e.get("event") == "cancelled"}

    wait_until(cancelled_ids, 10, "the fixture upstream logs the cancellation")
    long_calls = [
        e["msg"]["id"]
        for e in read_jsonl(log)
        if e.get("event") == "recv"
        and e["msg"].get("method") == "tools/call"
        and (e["msg"]["params"].get("arguments") or {}).get("seconds") == 30
    ]
    assert len(long_calls) == 1 and long_calls[0] in cancelled_ids(), read_jsonl(log)
    assert not [e for e in read_jsonl(log) if e.get("event") == "finished" and e.get("requestId") == long_calls[0]]

    # Every request declared the extension in its own _meta; tasks/* carried Mcp-Method and Mcp-Name.
    sent = http_requests(http_log)
    assert sent and all(EXT in r["body"]["params"]["_meta"][CAPS].get("extensions", {}) for r in sent)
    task_requests = [r for r in sent if r["body"]["method"].startswith("tasks/")]
    assert {r["body"]["method"] for r in task_requests} == {"tasks/get", "tasks/cancel"}
    for r in task_requests:
        assert (
            r["headers"]["mcp-method"] == r["body"]["method"]
            and r["headers"]["mcp-name"] == r["body"]["params"]["taskId"]
        ), r


def test_stock_fastmcp_tasks_client_omits_mcp_name_and_is_refused(
    daemon: Any, fastmcp_python: Path, tmp_path: Path
) -> None:
    """fastmcp-tasks as shipped breaks a client MUST (tasks.md:511); mcpx keeps the spec's -32020."""
    http_log = tmp_path / "fastmcp-stock-http.jsonl"
    script = [
        {
            "op": "call_task_then_wait",
            "name": "fx__slow",
            "args": {"seconds": 1, "steps": 1},
            "poll": 0.25,
            "timeout": 20,
        },
        {"op": "call_auto", "name": "fx__slow", "args": {"seconds": 0.6, "steps": 1}, "timeout": 20},
    ]
    waited, auto = run_fastmcp(fastmcp_python, daemon.url, script, "--stock", "--log-http", str(http_log))
    assert waited["kind"] == "task" and not waited["ok"] and waited["error"]["code"] == -32020, waited
    assert "Mcp-Name" in waited["error"]["message"] and "tasks.requireMcpName" in waited["error"]["message"]
    assert not auto["ok"] and auto["error"]["code"] == -32020, auto
    gets = [r for r in http_requests(http_log) if r["body"]["method"] == "tasks/get"]
    assert gets and all("mcp-name" not in r["headers"] for r in gets), gets


def test_stock_fastmcp_tasks_client_works_when_the_mcp_name_rule_is_relaxed(
    start_daemon: Any, fastmcp_python: Path, tmp_path: Path
) -> None:
    """`tasks.requireMcpName: false`: the shipped client's tasks/* without Mcp-Name are accepted, the
    daemon logs that once for that client, and a wrong Mcp-Name is still -32020 (unit-tested)."""
    config = {"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"taskAfterMs": 200, "requireMcpName": False}}
    d = start_daemon(config)
    http_log = tmp_path / "fastmcp-relaxed-http.jsonl"
    script = [
        {"op": "call_task_then_wait", "name": "fx__slow", "args": {"seconds": 1, "steps": 2}, "poll": 0.2, "timeout": 20},
        {"op": "call_auto", "name": "fx__slow", "args": {"seconds": 0.6, "steps": 1}, "timeout": 20},
        {"op": "call_task_then_cancel", "name": "fx__slow", "args": {"seconds": 30, "steps": 30}, "after": 0.5,
         "poll": 0.1, "timeout": 10},
    ]  # fmt: skip
    waited, auto, cancelled = run_fastmcp(fastmcp_python, d.url, script, "--stock", "--log-http", str(http_log))
    assert waited["ok"] and waited["statuses"][-1] == "completed", waited
    assert text_of(waited["final"]["result"]) == "slept 1"
    assert auto["ok"] and text_of(auto["result"]) == "slept 0.6", auto
    assert cancelled["ok"] and cancelled["finalStatus"] == "cancelled", cancelled
    task_requests = [r for r in http_requests(http_log) if r["body"]["method"].startswith("tasks/")]
    assert task_requests and all("mcp-name" not in r["headers"] for r in task_requests), task_requests
    relaxed = [line for line in d.stderr().splitlines() if "tasks.requireMcpName is false" in line]
    assert len(relaxed) == 1, relaxed  # once per client, however many requests
