"""SEP-1034 through mcpx: a form's fields that an accepted answer leaves out reach the upstream with
their schema defaults, whoever answered (a 2025 host, a 2026 host, an operator through /v1 or the
answer page), and the answer page shows a fresh form with those defaults already filled in.

Upstream: the conformance fixture's `test_elicitation_sep1034_defaults` (string, integer, number,
enum and boolean fields, each with a default), as a 2025-11-25-only server and dual-era (mcpx
speaks 2026 to it: the question is an MRTR round)."""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import Any

import httpx
import pytest
from harness import ROOT, Api, RawHost, modern_meta, operator_attached, wait_until

SERVER = ROOT / "tests" / "conformance" / "server.py"
TOOL = "test_elicitation_sep1034_defaults"
DEFAULTS = {"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True}


def _config(legacy_only: bool) -> dict[str, Any]:
    args = [str(SERVER), "stdio"] + (["--legacy-only"] if legacy_only else [])
    return {"mcpServers": {"up": {"command": sys.executable, "args": args, "mcpx": {"passthrough": True}}}}


@pytest.fixture(params=[True, False], ids=["upstream-2025", "upstream-2026"])
def daemon(request: Any, start_daemon: Any) -> Any:
    return start_daemon(_config(request.param))


def _upstream_got(frame: dict[str, Any]) -> dict[str, Any]:
    """What the fixture says it was answered: `...: action=accept, content={...}`."""
    text = frame["result"]["content"][0]["text"]
    said = re.fullmatch(r".*: action=(\w+), content=(.*)", text, re.S)
    assert said is not None, text
    return {"action": said[1], "content": json.loads(said[2])}


def _legacy_call_answering(host: RawHost, answer: dict[str, Any]) -> dict[str, Any]:
    """A 2025 host's tools/call whose server request it answers with `answer` on the call's stream."""
    body = {"jsonrpc": "2.0", "id": 900, "method": "tools/call", "params": {"name": TOOL, "arguments": {}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers.update(host._legacy_headers())
    with httpx.Client(timeout=30) as c, c.stream("POST", host.url, content=json.dumps(body), headers=headers) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data:"):
                continue
            frame = json.loads(line[5:])
            if frame.get("method") == "elicitation/create":
                reply = {"jsonrpc": "2.0", "id": frame["id"], "result": answer}
                assert host.post(reply, host._legacy_headers()).status_code == 202
            elif frame.get("id") == 900:
                return frame
    raise AssertionError("no reply")


def test_a_2025_hosts_accept_that_leaves_fields_out_reaches_the_upstream_with_their_defaults(
    daemon: Any, raw_host: Any
) -> None:
    host = raw_host(daemon.url)
    host.initialize(capabilities={"elicitation": {}})
    frame = _legacy_call_answering(host, {"action": "accept", "content": {"name": "Ada", "verified": False}})
    assert _upstream_got(frame) == {"action": "accept", "content": {**DEFAULTS, "name": "Ada", "verified": False}}
    with Api(daemon) as api:  # what the question row says went upstream is what did
        [row] = [q for q in api.history() if q["method"] == "elicitation/create"]
    assert row["answer"]["content"] == {**DEFAULTS, "name": "Ada", "verified": False}


def test_an_accept_with_no_content_and_a_decline_are_answered_as_given(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize(capabilities={"elicitation": {}})
    assert _upstream_got(_legacy_call_answering(host, {"action": "accept"})) == {
        "action": "accept",
        "content": DEFAULTS,
    }
    declined = _upstream_got(_legacy_call_answering(host, {"action": "decline"}))
    assert declined == {"action": "decline", "content": None}


def test_a_2026_hosts_mrtr_answer_gets_the_defaults(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    caps = {"elicitation": {"form": {}}}
    meta = modern_meta() | {"io.modelcontextprotocol/clientCapabilities": caps}
    first = host.modern("tools/call", {"name": TOOL, "arguments": {}}, meta=meta).json()["result"]
    assert first["resultType"] == "input_required", first
    [key] = first["inputRequests"]
    retry = {
        "name": TOOL,
        "arguments": {},
        "inputResponses": {key: {"action": "accept", "content": {"age": 41}}},
        "requestState": first["requestState"],
    }
    frame = host.modern("tools/call", retry, meta=meta).json()
    assert _upstream_got(frame) == {"action": "accept", "content": {**DEFAULTS, "age": 41}}


def test_an_operators_accept_gets_the_defaults(daemon: Any, raw_host: Any) -> None:
    host = raw_host(daemon.url)
    host.initialize()  # no elicitation: the operator answers
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(daemon.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["frame"] = h.legacy("tools/call", {"name": TOOL, "arguments": {}}).json()

    feed = operator_attached(daemon, "olga")
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    try:
        with Api(daemon) as api:
            [q] = wait_until(api.open_questions, what="the question")
            taken = api.answer(q["id"], "accept", by="olga", content={"status": "pending"})
            assert taken.status_code == 200, taken.text
            thread.join(15)
    finally:
        feed.close()
    assert _upstream_got(box["frame"]) == {"action": "accept", "content": {**DEFAULTS, "status": "pending"}}
