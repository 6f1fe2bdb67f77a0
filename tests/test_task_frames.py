"""`GET /v1/tasks/{id}/frames` for real tasks: the JSON-RPC frames mcpx exchanged for a task, on
the host side and the upstream side, in time order (docs/api.md). A 2025-11-25 task whose upstream
asks its host something: the host's requests and their replies, the question mcpx put to the host
on the task's stream and the host's answer, the status notifications on the session's stream, and
the upstream's call, its server request and mcpx's answer to it. A 2026-07-28 task: its tasks/update
and the notifications/tasks of the listen stream that follows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import (
    MODERN,
    Api,
    Daemon,
    RawHost,
    SseStream,
    conformance_server,
    modern_meta,
    reply_of,
    stdio_server,
    wait_until,
)

RELATED = "io.modelcontextprotocol/related-task"
ANSWER = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
TASKS_EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _daemon(start_daemon: Any, *extra: str) -> Daemon:
    return start_daemon({"mcpServers": {"up": conformance_server(*extra)}, "tasks": {"taskAfterMs": 200}})


def _frames(d: Daemon, tid: str) -> list[dict[str, Any]]:
    with Api(d) as api:
        frames: list[dict[str, Any]] = api.get(f"/v1/tasks/{tid}/frames").json()["frames"]
    assert all("frame" in f and not f.get("truncated") for f in frames), frames
    return frames


def _of(frames: list[dict[str, Any]], side: str, direction: str) -> list[dict[str, Any]]:
    return [f["frame"] for f in frames if (f["side"], f["direction"]) == (side, direction)]


def _methods(frames: list[dict[str, Any]]) -> list[str]:
    return [f["method"] for f in frames if "method" in f]


def _session_stream(host: RawHost) -> SseStream:
    """A 2025 session's GET stream: where mcpx sends its notifications/tasks/status."""
    return SseStream("GET", host.url, {"Accept": "text/event-stream", **host._legacy_headers()})


def _listen_stream(host: RawHost, tid: str, meta: dict[str, Any]) -> SseStream:
    """A 2026 subscriptions/listen stream for one task."""
    body = {
        "jsonrpc": "2.0",
        "id": host.next_id(),
        "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(**meta), "notifications": {"taskIds": [tid]}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    return SseStream("POST", host.url, headers, body)


def _asked(stream: SseStream) -> dict[str, Any] | None:
    return next((f for f in stream.frames if f.get("method") == "elicitation/create"), None)


def _notes(stream: SseStream, method: str, tid: str) -> list[dict[str, Any]]:
    return [f for f in stream.frames if f.get("method") == method and f["params"].get("taskId") == tid]


def test_a_2025_tasks_frames_show_both_sides_with_the_question_asked_of_the_host(
    start_daemon: Any, raw_host: Any
) -> None:
    d = _daemon(start_daemon, "--legacy-only")  # its question is a server request inside the call
    host = raw_host(d.url)
    host.initialize(capabilities={"elicitation": {}})
    stream = _session_stream(host)
    try:
        call = {"name": "test_elicitation", "arguments": {"message": "Frames?"}, "task": {}}
        tid = host.legacy("tools/call", call).json()["result"]["task"]["taskId"]
        # No tasks/result is open yet: mcpx asks on the session's stream.
        question = wait_until(lambda: _asked(stream), 15, "the question on the session's stream")
        assert host.post({"jsonrpc": "2.0", "id": question["id"], "result": ANSWER}, host._legacy_headers()).is_success
        reply = reply_of(host.legacy("tasks/result", {"taskId": tid}))
        assert "ada@example.com" in reply["result"]["content"][0]["text"]
        wait_until(lambda: any(n.get("params", {}).get("status") == "completed" for n in stream.frames), 10, "the end")
    finally:
        stream.close()
    frames = _frames(d, tid)
    host_in, host_out = _of(frames, "host", "in"), _of(frames, "host", "out")
    up_in, up_out = _of(frames, "upstream", "in"), _of(frames, "upstream", "out")
    # Host side: its requests and mcpx's replies ...
    assert _methods(host_in) == ["tools/call", "tasks/result"], host_in
    assert host_out[-1] == reply and any(f.get("result", {}).get("task", {}).get("taskId") == tid for f in host_out)
    # ... the question mcpx put to the host for the task, and the host's answer to it ...
    assert question in host_out and question["params"]["_meta"][RELATED] == {"taskId": tid}
    assert {"jsonrpc": "2.0", "id": question["id"], "result": ANSWER} in host_in
    # ... and every status notification the session's stream was sent for this task.
    statuses = [f for f in host_out if f.get("method") == "notifications/tasks/status"]
    assert statuses == _notes(stream, "notifications/tasks/status", tid) and statuses, stream.frames
    # Upstream side: the call, the upstream's question, mcpx's answer with the host's content, the result.
    assert _methods(up_out)[0] == "tools/call" and _methods(up_in) == ["elicitation/create"]
    [asked_up] = [f for f in up_in if "method" in f]
    assert {"jsonrpc": "2.0", "id": asked_up["id"], "result": ANSWER} in up_out
    assert "ada@example.com" in json.dumps(up_in[-1]["result"])


def test_a_2025_tasks_progress_is_in_its_frames(start_daemon: Any, raw_host: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    stream = _session_stream(host)  # where a task's progress goes while no tasks/result is open
    try:
        call = {
            "name": "fx__slow",
            "arguments": {"seconds": 0.3, "steps": 3},
            "task": {},
            "_meta": {"progressToken": 7},
        }
        tid = host.legacy("tools/call", call).json()["result"]["task"]["taskId"]
        wait_until(lambda: any(n.get("params", {}).get("status") == "completed" for n in stream.frames), 10, "the end")
    finally:
        stream.close()
    progress = [f for f in _of(_frames(d, tid), "host", "out") if f.get("method") == "notifications/progress"]
    assert len(progress) == 3 and progress == [f for f in stream.frames if f.get("method") == "notifications/progress"]


def test_a_2026_tasks_frames_show_its_update_and_its_listen_notifications(start_daemon: Any, raw_host: Any) -> None:
    d = _daemon(start_daemon)
    host = raw_host(d.url)
    meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, **TASKS_EXT}}
    handle = host.modern("tools/call", {"name": "confirm_delete", "arguments": {"filename": "f.txt"}}, meta=meta)
    tid = handle.json()["result"]["taskId"]
    listen = _listen_stream(host, tid, meta)
    try:

        def get() -> dict[str, Any]:
            r = host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()
            return r["result"]

        asked = wait_until(lambda: (t := get())["status"] == "input_required" and t, 15, "input_required")
        [key] = asked["inputRequests"]
        update = {"taskId": tid, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
        assert host.modern("tasks/update", update, meta=meta, headers={"Mcp-Name": tid}).status_code == 200
        wait_until(lambda: get()["status"] == "completed", 15, "completion")

        def notes() -> list[dict[str, Any]]:
            return _notes(listen, "notifications/tasks", tid)

        wait_until(lambda: any(n["params"]["status"] == "completed" for n in notes()), 10, "the last note")
    finally:
        listen.close()
    frames = _frames(d, tid)
    host_in, host_out = _of(frames, "host", "in"), _of(frames, "host", "out")
    assert "tasks/update" in _methods(host_in) and "tools/call" in _methods(host_in)
    assert [f for f in host_out if f.get("method") == "notifications/tasks"] == notes() and notes()
    assert _methods(_of(frames, "upstream", "out"))[0] == "tools/call" and _of(frames, "upstream", "in")


def test_the_frame_log_keeps_within_its_configured_budget_and_status_says_how_full(
    start_daemon: Any, raw_host: Any, tmp_path: Path
) -> None:
    """The frame log is a bounded in-memory cache (`frames` in the config): past `budgetBytes` the
    least recently active tasks' frames go, the newest task's stay, and /v1/status reports it."""
    budget = 6000
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "frames": {"budgetBytes": budget}})
    host = raw_host(d.url)
    host.initialize()
    ids = []
    for i in range(30):
        call = {"name": "fx__echo", "arguments": {"text": f"frame {i} " + "x" * 100}, "task": {}}
        tid = reply_of(host.legacy("tools/call", call))["result"]["task"]["taskId"]
        assert "result" in reply_of(host.legacy("tasks/result", {"taskId": tid}))
        ids.append(tid)
    with Api(d) as api:
        usage = api.get("/v1/status").json()["frames"]
        first = api.get(f"/v1/tasks/{ids[0]}/frames").json()["frames"]
    assert usage["budgetBytes"] == budget
    assert 0 < usage["bytes"] <= budget and 1 < usage["tasks"] < 30, usage
    assert first == []  # the least recently active went first
    assert _methods(_of(_frames(d, ids[-1]), "host", "in")) == ["tools/call", "tasks/result"]
