"""A question an SDK 1.30 upstream asks inside its OWN task reaches the host through mcpx.

Upstream: the official SDK 1.30 low-level server (`tests/peers/sdk1_upstream.py`, stdio) with
2025-11-25 core tasks. Its `ask_task` tool (taskSupport "required") runs only as a task; the task's
work calls `task_ctx.elicit(...)`, which SDK 1.30 puts in the task's message queue and delivers on
the upstream `tasks/result` stream, tagged with the upstream task in
`_meta["io.modelcontextprotocol/related-task"]`. The tool returns exactly the ElicitResult it got.

Host: a raw 2025-11-25 session that declared `{"elicitation": {}}`. It calls the tool as an mcpx
task (`params.task`), so mcpx runs it as an upstream task, then opens `tasks/result` for its mcpx
task as an SSE stream and answers the `elicitation/create` it receives there by POSTing the
JSON-RPC response with its session headers. The question must be tagged with the MCPX task id (the
host never sees the upstream's), and the upstream must receive exactly the host's answer.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import RawHost, read_jsonl, wait_until
from peers.venvs import peer_python

SDK1_UPSTREAM = Path(__file__).resolve().parent / "peers" / "sdk1_upstream.py"
RELATED = "io.modelcontextprotocol/related-task"
ANSWER = {"action": "accept", "content": {"name": "Grace Hopper", "age": 85}}

pytestmark = [pytest.mark.timeout(60), pytest.mark.peers]  # slow tier (tests/conftest.py)


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return peer_python("mcp-1.30")


@pytest.fixture
def upstream_pids(tmp_path: Path) -> Iterator[None]:
    """Kill every SDK 1.30 upstream process the test started (found in its events) at teardown."""
    yield
    pids: set[int] = set()
    for path in tmp_path.glob("*.events.jsonl"):
        pids |= {e["pid"] for e in read_jsonl(path)}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _events(path: Path, event: str | None = None, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in read_jsonl(path)
        if (event is None or e["event"] == event) and all(e.get(k) == v for k, v in match.items())
    ]


def _result_answering(
    host: RawHost, tid: str, answer: dict[str, Any], deadline_s: float = 10.0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """POST tasks/result for `tid` as an SSE stream; answer every server request arriving on it."""
    return _answering(host, "tasks/result", {"taskId": tid}, answer, deadline_s)


def _answering(
    host: RawHost, method: str, params: dict[str, Any], answer: dict[str, Any], deadline_s: float = 10.0
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """POST a request as an SSE stream; answer every server request arriving on it."""
    rid = 7700
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **host._legacy_headers(),
    }
    asked: list[dict[str, Any]] = []
    deadline = time.monotonic() + deadline_s
    timeout = httpx.Timeout(10.0, read=deadline_s)
    try:
        with (
            httpx.Client(timeout=timeout) as c,
            c.stream("POST", host.url, content=json.dumps(body), headers=headers) as resp,
        ):
            assert resp.status_code == 200, resp.read()
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                return json.loads(resp.read()), asked  # a plain JSON reply: nothing was asked on a stream
            for line in resp.iter_lines():
                if time.monotonic() > deadline:
                    break
                if not line.startswith("data:"):
                    continue
                frame = json.loads(line[5:])
                if "method" in frame and "id" in frame:
                    asked.append(frame)
                    reply = {"jsonrpc": "2.0", "id": frame["id"], "result": answer}
                    assert host.post(reply, host._legacy_headers()).status_code == 202
                elif frame.get("id") == rid:
                    return frame, asked
    except httpx.ReadTimeout:
        pass
    raise AssertionError(f"no {method} reply within {deadline_s} s; asked on the stream: {asked}")


def test_a_plain_call_to_a_task_only_tool_follows_the_upstream_task_and_answers_inline(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: None
) -> None:
    """#25: a 2025 host that asks for no task still gets a task-only tool's answer; the upstream's
    question inside its task reaches the host on the call's own stream, untagged (it holds no task)."""
    events = tmp_path / "s1.events.jsonl"
    entry = {"command": str(sdk1_python), "args": [str(SDK1_UPSTREAM), "stdio", "--events", str(events)]}
    d = start_daemon({"mcpServers": {"s1": entry}, "tasks": {"pollIntervalMs": 100}}, name="utp")
    host = raw_host(d.url)
    host.initialize(capabilities={"elicitation": {}})
    params = {"name": "s1__ask_task", "arguments": {"message": "Who wrote the first compiler?"}}
    final, asked = _answering(host, "tools/call", params, ANSWER, deadline_s=30)
    assert "result" in final, final
    assert json.loads(final["result"]["content"][0]["text"]) == ANSWER
    assert RELATED not in (final["result"].get("_meta") or {})
    assert [a["method"] for a in asked] == ["elicitation/create"], asked
    assert RELATED not in (asked[0]["params"].get("_meta") or {})
    [call] = _events(events, "request", method="tools/call", name="ask_task")
    assert call["task"] is True  # the upstream ran it as its own task, as it must
    [created] = _events(events, "task_created", name="ask_task")
    assert _events(events, "request", method="tasks/result", taskId=created["taskId"])
    assert host.legacy("tasks/list").json()["result"]["tasks"] == []  # the host holds no task


def test_question_asked_inside_an_sdk1_upstream_task_reaches_the_host_and_the_answer_goes_back(
    start_daemon: Any, tmp_path: Path, raw_host: Any, sdk1_python: Path, upstream_pids: None
) -> None:
    events = tmp_path / "s1.events.jsonl"
    entry = {"command": str(sdk1_python), "args": [str(SDK1_UPSTREAM), "stdio", "--events", str(events)]}
    d = start_daemon({"mcpServers": {"s1": entry}, "tasks": {"pollIntervalMs": 100}}, name="utq")
    host = raw_host(d.url)
    host.initialize(capabilities={"elicitation": {}})
    tools = {t["name"]: t for t in host.legacy("tools/list").json()["result"]["tools"]}
    # The upstream runs it only as a task; mcpx offers it either way (a plain call follows the upstream task).
    assert tools["s1__ask_task"]["execution"]["taskSupport"] == "optional"

    frame = host.legacy(
        "tools/call",
        {"name": "s1__ask_task", "arguments": {"message": "Who wrote the first compiler?"}, "task": {"ttl": 600000}},
    ).json()
    assert "result" in frame, frame
    tid = frame["result"]["task"]["taskId"]
    # The upstream ran it as its own task and is now waiting for the answer.
    created = wait_until(lambda: _events(events, "task_created", name="ask_task"), 20, "upstream task created")
    up_id = created[0]["taskId"]
    assert _events(events, "request", method="tools/call", name="ask_task")[0]["task"] is True
    wait_until(lambda: _events(events, "ask_asking", taskId=up_id), 20, "upstream asking")

    final, asked = _result_answering(host, tid, ANSWER)

    assert [a["method"] for a in asked] == ["elicitation/create"], asked
    params = asked[0]["params"]
    assert params["message"] == "Who wrote the first compiler?"
    assert params["_meta"][RELATED]["taskId"] == tid  # mcpx's task, not the upstream's
    assert "result" in final, final
    text = final["result"]["content"][0]["text"]
    assert json.loads(text) == ANSWER  # exactly what the host answered, nothing added or lost
    assert final["result"]["_meta"][RELATED] == {"taskId": tid}
    answered = _events(events, "ask_answered", taskId=up_id)
    assert len(answered) == 1 and {"action": answered[0]["action"], "content": answered[0]["content"]} == ANSWER
    # The upstream's own log: one upstream task, collected by mcpx with tasks/result.
    assert len(_events(events, "task_created")) == 1
    assert _events(events, "request", method="tasks/result", taskId=up_id), (
        "mcpx opened the upstream task's tasks/result stream"
    )
