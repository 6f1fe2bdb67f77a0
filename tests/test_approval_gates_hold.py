"""Approval gates hold against what a host puts in `requestState` (#37 item 1).

Only a round whose envelope mcpx signed for this very call and host skips the gate, and only once.
Anything else in `requestState` (any JSON type, a forged envelope, one replayed from another call
or by another host) is ignored by the gate, on every path: a 2025 session, a 2026 host, `mcpx
serve`, a 2025 task and a 2026 task. With no operator to answer, a gated call ends "nobody approved
it", and the upstream never sees it.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, Api, ShimHost, read_jsonl, stdio_server, wait_until

pytestmark = [pytest.mark.sqlite_only("what skips a gate: requestState, never storage")]

TIMEOUT_MS = 250  # how long an unanswered approval waits here
NOBODY = "nobody approved it within"
STATES: list[Any] = ["x", 0, 1.5, True, {}, [], None, {"mcpxPark": "p"}]
STATE_IDS = ["string", "zero", "number", "true", "object", "array", "null", "park-lookalike"]
TASKS_EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def _forged() -> str:
    """An envelope of mcpx's shape, signed with a key that is not the daemon's."""
    payload = json.dumps({"u": None, "b": "0" * 64, "r": 1, "x": 2**53, "n": "n"}).encode()
    enc = base64.urlsafe_b64encode
    return enc(payload).decode().rstrip("=") + "." + enc(b"\0" * 32).decode().rstrip("=")


def _fixture_config(tmp: Path) -> dict[str, Any]:
    return {
        "mcpServers": {"fx": stdio_server(tmp, approve=["echo"], tools={"echo": {"taskSupport": "optional"}})},
        "approveTimeoutMs": TIMEOUT_MS,
        "tasks": {"taskAfterMs": 50},  # a 2026 call that waits for its approval becomes a task
    }


def _echoes(tmp: Path) -> list[str]:
    return [
        e["msg"]["params"]["arguments"]["text"]
        for e in read_jsonl(tmp / "fixture.log.jsonl")
        if e.get("msg", {}).get("method") == "tools/call" and e["msg"]["params"].get("name") == "echo"
    ]


def _not_run(result: dict[str, Any]) -> None:
    assert result.get("isError") is True and NOBODY in result["content"][0]["text"], result


def _finished(host: Any, result: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A 2026 call's result: inline, or its task's once it ended."""
    if result.get("resultType") != "task":
        return result
    tid = result["task"]["taskId"] if "task" in result else result["taskId"]

    def ended() -> dict[str, Any] | None:
        got: dict[str, Any] = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()[
            "result"
        ]
        return got if got.get("status") != "working" else None

    return wait_until(ended, what="the task to end")["result"]


@pytest.fixture
def gated(start_daemon: Any, tmp_path: Path) -> Any:
    return start_daemon(_fixture_config(tmp_path))


def test_no_request_state_of_any_type_skips_the_gate_on_any_path(gated: Any, raw_host: Any, tmp_path: Path) -> None:
    host = raw_host(gated.url)
    host.initialize()
    states = [*STATES, _forged()]
    for state in states:  # a 2025 session's plain call
        params = {"name": "fx__echo", "arguments": {"text": "plain"}, "requestState": state}
        _not_run(host.legacy("tools/call", params).json()["result"])
    # A 2025 task: the task is created, and ends without running.
    for state in states:
        call = {"name": "fx__echo", "arguments": {"text": "task"}, "requestState": state, "task": {}}
        tid = host.legacy("tools/call", call).json()["result"]["task"]["taskId"]
        _not_run(host.legacy("tasks/result", {"taskId": tid}).json()["result"])
    # A 2026 host, inline and as a task: mcpx refuses an envelope it did not sign (-32602), and a
    # null state is no envelope, so the gate asks.
    for meta in ({}, TASKS_EXT):
        for state in states:
            params = {"name": "fx__echo", "arguments": {"text": "modern"}, "requestState": state}
            frame = host.modern("tools/call", params, meta=meta).json()
            if state is None:
                assert (frame["result"].get("resultType") == "task") == (meta == TASKS_EXT), frame
                _not_run(_finished(host, frame["result"], meta))
            else:
                assert frame["error"]["code"] == -32602, frame
    # `mcpx serve`: a 2025 host over the shim socket.
    shim = ShimHost(gated)
    try:
        for state in states:
            params = {"name": "fx__echo", "arguments": {"text": "shim"}, "requestState": state}
            _not_run(shim.request("tools/call", params)["result"])
    finally:
        shim.close()
    assert _echoes(tmp_path) == []


# ---- a real envelope, replayed -------------------------------------------------------------------

CONFORMANCE = ROOT / "tests" / "conformance" / "server.py"
ANSWER = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
ASKS = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


def _as(name: str) -> dict[str, Any]:
    return {**ASKS, "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"}}


def test_a_signed_envelope_continues_its_own_call_once_and_nothing_else(start_daemon: Any, raw_host: Any) -> None:
    """The conformance fixture speaks 2026: its question is an MRTR round, whose envelope mcpx signs."""
    d = start_daemon(
        {
            "mcpServers": {
                "up": {
                    "command": sys.executable,
                    "args": [str(CONFORMANCE), "stdio"],
                    "mcpx": {"passthrough": True, "approve": ["test_elicitation"]},
                }
            },
            "approveTimeoutMs": 1500,
        }
    )
    host = raw_host(d.url)
    call = {"name": "test_elicitation", "arguments": {"message": "Name?"}}
    with Api(d) as api:
        first: dict[str, Any] = {}

        def ask() -> None:
            first.update(host.modern("tools/call", call, meta=_as("agent-a")).json()["result"])

        t = threading.Thread(target=ask)
        t.start()
        [q] = wait_until(api.open_questions, what="the approval")
        assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
        t.join(10)
        assert first["resultType"] == "input_required", first
        [(key, _)] = first["inputRequests"].items()
        retry = {**call, "inputResponses": {key: ANSWER}, "requestState": first["requestState"]}

        other_call = {**retry, "arguments": {"message": "Other?"}}
        assert host.modern("tools/call", other_call, meta=_as("agent-a")).json()["error"]["code"] == -32602
        other_host = host.modern("tools/call", retry, meta=_as("agent-b")).json()
        assert other_host["error"]["code"] == -32602, other_host  # issued to agent-a, not to agent-b
        session = raw_host(d.url)
        session.initialize()
        _not_run(session.legacy("tools/call", retry).json()["result"])  # a 2025 session: the gate asks

        done = host.modern("tools/call", retry, meta=_as("agent-a")).json()["result"]
        assert done["resultType"] == "complete" and "ada@example.com" in done["content"][0]["text"], done
        asked = len(api.history())
        started = time.monotonic()
        again = host.modern("tools/call", retry, meta=_as("agent-a")).json()["result"]
        _not_run(again)  # the same envelope a second time: asked again, and nobody answered
        assert time.monotonic() - started >= 1.4
        assert len(api.history()) == asked + 1
