"""Questions upstreams ask mid-call reach whoever can answer: the host in its own era, or an operator.

Upstream: the conformance fixture, either as a 2025-11-25-only server (its questions are server
requests inside the call) or dual-era (mcpx speaks 2026 to it: questions are MRTR rounds).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import httpx
import pytest
from harness import ROOT, Api, RawHost, operator_attached, wait_until

SERVER = ROOT / "tests" / "conformance" / "server.py"
ANSWER = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}


def _config(legacy_only: bool) -> dict[str, Any]:
    args = [str(SERVER), "stdio"] + (["--legacy-only"] if legacy_only else [])
    return {
        "mcpServers": {
            "up": {
                "command": sys.executable,
                "args": args,
                "mcpx": {"passthrough": True, "tools": {"confirm_delete": {"taskSupport": "optional"}}},
            }
        },
        "tasks": {"taskAfterMs": 200},
    }


@pytest.fixture(params=[True, False], ids=["upstream-2025", "upstream-2026"])
def daemon(request: Any, start_daemon: Any) -> Any:
    d = start_daemon(_config(request.param))
    d.legacy_upstream = request.param
    return d


def _legacy_call_answering(
    host: RawHost, name: str, args: dict[str, Any], answer: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """POST a tools/call on a 2025 session, answer every server request on its SSE stream."""
    body = {"jsonrpc": "2.0", "id": 900, "method": "tools/call", "params": {"name": name, "arguments": args}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **host._legacy_headers(),
    }
    asked: list[dict[str, Any]] = []
    with httpx.Client(timeout=30) as c, c.stream("POST", host.url, content=json.dumps(body), headers=headers) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            frame = json.loads(line[5:])
            if "method" in frame and "id" in frame:
                asked.append(frame)
                reply = {"jsonrpc": "2.0", "id": frame["id"], "result": answer}
                assert host.post(reply, host._legacy_headers()).status_code == 202
            elif frame.get("id") == 900:
                return frame, asked
    raise AssertionError("no reply")


def test_2025_host_answers_the_upstreams_question_on_the_calls_stream(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize(capabilities={"elicitation": {}})
    frame, asked = _legacy_call_answering(host, "test_elicitation", {"message": "Who are you?"}, ANSWER)
    assert [a["method"] for a in asked] == ["elicitation/create"]
    assert asked[0]["params"]["message"] == "Who are you?"
    text = frame["result"]["content"][0]["text"]
    assert "action=accept" in text and "ada@example.com" in text


def test_question_a_host_cannot_be_asked_waits_for_an_attached_operator(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()  # declares no elicitation: mcpx may not ask it
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(daemon.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["frame"] = h.legacy(
                "tools/call", {"name": "test_elicitation", "arguments": {"message": "Deploy?"}}
            ).json()

    feed = operator_attached(daemon, "olga")
    t = threading.Thread(target=call)
    t.start()
    with Api(daemon) as api:
        try:
            [q] = wait_until(api.open_questions, what="open question")
            assert q["kind"] == "elicitation" and q["upstream"] == "up" and q["params"]["message"] == "Deploy?"
            taken = api.answer(q["id"], "accept", by="olga", content=ANSWER["content"])
            assert taken.status_code == 200 and taken.json()["answeredBy"] == "operator:olga", taken.text
            again = api.answer(q["id"], "decline", by="late")
            assert again.status_code == 409  # first answer wins; the question is closed
            t.join(15)
            assert "ada@example.com" in box["frame"]["result"]["content"][0]["text"]
            [row] = [h for h in api.history() if h["id"] == q["id"]]
            assert row["answeredBy"] == "operator:olga" and row["status"] == "answered"
            bad = api.client.post(
                "/v1/questions/x/answer", json={"action": "cancel"}, headers={"Authorization": "Bearer wrong"}
            )
            assert bad.status_code == 401
            kinds = [e["kind"] for e in feed.events() if e.get("questionId") == q["id"]]
            assert kinds == ["question.opened", "question.answered"], kinds
        finally:
            feed.close()


def test_without_an_operator_a_question_the_host_cannot_answer_fails_at_once(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()  # no elicitation, and no console attached: nobody can answer
    frame = host.legacy("tools/call", {"name": "test_elicitation", "arguments": {"message": "Deploy?"}}).json()
    # The upstream was answered as a client without the capability answers (an error), so the call
    # ends now instead of hanging for the question's 10-minute expiry.
    text = json.dumps(frame)
    assert "elicitation" in text and ("error" in frame or frame["result"].get("isError")), frame
    with Api(daemon) as api:
        [row] = [h for h in api.history() if h["params"].get("message") == "Deploy?"]
        assert row["status"] == "expired" and "no operator is attached" in row["reason"]


def test_2026_host_answers_by_mrtr_retry_and_the_same_upstream_work_resumes(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    meta = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    first = host.modern(
        "tools/call", {"name": "test_elicitation", "arguments": {"message": "Name?"}}, meta=meta
    ).json()["result"]
    assert first["resultType"] == "input_required"
    [(key, request)] = first["inputRequests"].items()
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "Name?"
    tampered = host.modern(
        "tools/call",
        {
            "name": "test_elicitation",
            "arguments": {"message": "Name?"},
            "inputResponses": {key: ANSWER},
            "requestState": first["requestState"] + "x",
        },
        meta=meta,
    ).json()
    assert tampered["error"]["code"] == -32602
    other_args = host.modern(
        "tools/call",
        {
            "name": "test_elicitation",
            "arguments": {"message": "Other?"},
            "inputResponses": {key: ANSWER},
            "requestState": first["requestState"],
        },
        meta=meta,
    ).json()
    assert other_args["error"]["code"] == -32602  # the state is bound to the call it was issued for
    done = host.modern(
        "tools/call",
        {
            "name": "test_elicitation",
            "arguments": {"message": "Name?"},
            "inputResponses": {key: ANSWER},
            "requestState": first["requestState"],
        },
        meta=meta,
    ).json()["result"]
    assert done["resultType"] == "complete" and "ada@example.com" in done["content"][0]["text"]


def test_question_inside_a_2026_task_is_an_input_request_answered_by_update(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    meta = {
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        }
    }
    handle = host.modern(
        "tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, meta=meta
    ).json()["result"]
    assert handle["resultType"] == "task"
    tid = handle["taskId"]

    def get() -> dict[str, Any]:
        return host.modern("tasks/get", {"taskId": tid}, meta=meta, headers={"Mcp-Name": tid}).json()["result"]

    asked = wait_until(lambda: (r := get())["status"] == "input_required" and r, what="input_required")
    [(key, request)] = asked["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    ack = host.modern(
        "tasks/update",
        {"taskId": tid, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}},
        meta=meta,
        headers={"Mcp-Name": tid},
    )
    assert ack.json()["result"]["resultType"] == "complete"
    done = wait_until(lambda: (r := get())["status"] == "completed" and r, what="completion")
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"
