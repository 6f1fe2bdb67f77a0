"""The conformance fixture over stdio (the transport mcpx uses for it; the suite itself only speaks
HTTP). Every frame the fixture writes is checked against the schema of the wire it belongs to."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from wire_schema import check_frame

SERVER = Path(__file__).resolve().parent / "server.py"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "fixture-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": CAPS if caps is None else caps,
        **extra,
    }


class Peer:
    """The fixture as a stdio subprocess; frames are schema-checked as they arrive."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.frames: queue.Queue = queue.Queue()
        self.methods: dict[Any, tuple[str, str]] = {}  # request id -> (method, revision)
        self._ids = iter(range(1, 10_000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.frames.put(json.loads(line))

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def start(self, method: str, params: dict[str, Any], revision: str = MODERN) -> int:
        rid = next(self._ids)
        self.methods[rid] = (method, revision)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def next(self, timeout: float = 5.0, revision: str = MODERN) -> dict[str, Any]:
        frame = self.frames.get(timeout=timeout)
        method, rev = self.methods.get(frame.get("id"), (None, revision)) if "method" not in frame else (None, revision)
        check_frame(frame, rev, request_method=method)
        return frame

    def until_response(self, rid: int, revision: str = MODERN) -> tuple[dict[str, Any], list[dict]]:
        seen = []
        while True:
            frame = self.next(revision=revision)
            if frame.get("id") == rid and "method" not in frame:
                return frame, seen
            seen.append(frame)

    def call(self, method: str, params: dict[str, Any], revision: str = MODERN) -> dict[str, Any]:
        frame, _ = self.until_response(self.start(method, params, revision), revision)
        return frame

    def quiet(self, seconds: float) -> list[dict[str, Any]]:
        got = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(self.next(timeout=left))
            except queue.Empty:
                break
        return got

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def peer():
    p = Peer()
    yield p
    p.close()


def tool_call(name: str, args: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": extra.pop("_meta", meta())}
    if args is not None:
        params["arguments"] = args
    return {**params, **extra}


def test_modern_surface_and_mrtr(peer: Peer) -> None:
    discover = peer.call("server/discover", {"_meta": meta()})["result"]
    assert discover["supportedVersions"] == [MODERN] and "tasks" not in discover["capabilities"]
    tools = peer.call("tools/list", {"_meta": meta()})["result"]
    assert tools["tools"][0]["name"] == "test_simple_text" and tools["cacheScope"] == "public"
    assert "execution" not in json.dumps(tools)  # no task support advertised by the fixture itself
    first = peer.call("resources/list", {"_meta": meta()})["result"]["resources"][0]
    assert first["uri"] == "test://static-text"

    text = peer.call("tools/call", tool_call("test_simple_text"))["result"]  # no `arguments`
    assert text["content"][0]["text"] == "This is a simple text response for testing."

    # multi-round MRTR: state carries the first answer, a tampered state is refused
    r1 = peer.call("tools/call", tool_call("test_input_required_result_multi_round", {}))["result"]
    assert r1["resultType"] == "input_required" and list(r1["inputRequests"]) == ["step1"]
    tampered = peer.call(
        "tools/call",
        tool_call(
            "test_input_required_result_multi_round", {}, inputResponses={}, requestState=r1["requestState"] + "x"
        ),
    )
    assert tampered["error"]["code"] == -32602
    r2 = peer.call(
        "tools/call",
        tool_call(
            "test_input_required_result_multi_round",
            {},
            requestState=r1["requestState"],
            inputResponses={"step1": {"action": "accept", "content": {"name": "Ada"}}},
        ),
    )["result"]
    assert list(r2["inputRequests"]) == ["step2"] and r2["requestState"] != r1["requestState"]
    r3 = peer.call(
        "tools/call",
        tool_call(
            "test_input_required_result_multi_round",
            {},
            requestState=r2["requestState"],
            inputResponses={"step2": {"action": "accept", "content": {"color": "teal"}}},
        ),
    )["result"]
    assert r3["content"][0]["text"] == "Multi-round complete for Ada who likes teal"

    # multi_input: both questions at once; a partial answer leaves only the other one
    m1 = peer.call("tools/call", tool_call("multi_input", {}))["result"]
    assert sorted(m1["inputRequests"]) == ["first", "second"]
    m2 = peer.call(
        "tools/call",
        tool_call(
            "multi_input",
            {},
            requestState=m1["requestState"],
            inputResponses={"first": {"action": "accept", "content": {"name": "partial-1", "confirm": True}}},
        ),
    )["result"]
    assert list(m2["inputRequests"]) == ["second"]

    # capabilities come from this request's _meta only
    missing = peer.call("tools/call", tool_call("test_missing_capability", {}, _meta=meta({})))
    assert missing["error"]["code"] == -32021
    assert missing["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    caps = peer.call(
        "tools/call", tool_call("test_input_required_result_capabilities", {}, _meta=meta({"sampling": {}}))
    )["result"]
    assert [r["method"] for r in caps["inputRequests"].values()] == ["sampling/createMessage"]

    # progress before the result; logs only with a logLevel
    rid = peer.start("tools/call", tool_call("test_tool_with_progress", {}, _meta=meta(progressToken="p1")))
    _, before = peer.until_response(rid)
    assert [f["params"]["progress"] for f in before] == [0, 50, 100]
    _, before = peer.until_response(peer.start("tools/call", tool_call("test_logging_tool", {})))
    assert before == []
    _, before = peer.until_response(
        peer.start(
            "tools/call",
            tool_call("test_tool_with_logging", {}, _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"})),
        )
    )
    assert [f["method"] for f in before] == ["notifications/message"] * 3


def test_modern_listen_and_cancel(peer: Peer) -> None:
    tools_sub = peer.start("subscriptions/listen", {"_meta": meta(), "notifications": {"toolsListChanged": True}})
    prompts_sub = peer.start("subscriptions/listen", {"_meta": meta(), "notifications": {"promptsListChanged": True}})
    acks = [peer.next(), peer.next()]
    assert {a["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] for a in acks} == {tools_sub, prompts_sub}
    assert all(a["method"] == "notifications/subscriptions/acknowledged" for a in acks)
    _, before = peer.until_response(peer.start("tools/call", tool_call("test_trigger_tool_change", {})))
    after = peer.quiet(0.3)
    changed = [f for f in before + after if f.get("method") == "notifications/tools/list_changed"]
    assert len(changed) == 1
    assert changed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == tools_sub
    names = [t["name"] for t in peer.call("tools/list", {"_meta": meta()})["result"]["tools"]]
    assert names[-1] == "test_dynamic_tool"

    # cancelling a long call (and a listen) ends it without a response
    slow = peer.start("tools/call", tool_call("slow_compute", {"seconds": 60, "label": "x"}))
    # The fixture reads stdin in order and starts each request's task in turn: once a request sent
    # after the call is answered, the call is under way.
    assert "result" in peer.call("server/discover", {"_meta": meta()})
    for rid in (slow, tools_sub):
        peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
    assert peer.call("tools/call", tool_call("greet", {"name": "sep"}))["result"]["content"][0]["text"] == "Hello, sep!"
    assert [f for f in peer.quiet(0.5) if f.get("id") in (slow, tools_sub)] == []


def test_legacy_session(peer: Peer) -> None:
    init = peer.call(
        "initialize",
        {"protocolVersion": LEGACY, "capabilities": CAPS, "clientInfo": {"name": "fixture-test", "version": "0"}},
        LEGACY,
    )
    assert init["result"]["protocolVersion"] == LEGACY
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = peer.call("tools/list", {}, LEGACY)["result"]["tools"]
    assert tools[0]["name"] == "test_simple_text" and all("execution" not in t for t in tools)

    # a real server->client request on the call's stream, answered by the client
    rid = peer.start("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}, LEGACY)
    ask = peer.next(revision=LEGACY)
    assert ask["method"] == "elicitation/create" and ask["params"]["message"] == "Delete a.txt?"
    peer.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": True}}})
    done, _ = peer.until_response(rid, LEGACY)
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"

    # two questions outstanding at the same time
    rid = peer.start("tools/call", {"name": "multi_input", "arguments": {}}, LEGACY)
    asks = [peer.next(revision=LEGACY), peer.next(revision=LEGACY)]
    assert [a["method"] for a in asks] == ["elicitation/create"] * 2
    for i, a in enumerate(asks):
        peer.send({"jsonrpc": "2.0", "id": a["id"], "result": {"action": "accept", "content": {"name": f"p{i}"}}})
    assert "first=p0, second=p1" in peer.until_response(rid, LEGACY)[0]["result"]["content"][0]["text"]

    # logging/setLevel filters; subscribe sees one update; notifications/cancelled stops a call
    assert peer.call("logging/setLevel", {"level": "warning"}, LEGACY)["result"] == {}
    _, before = peer.until_response(peer.start("tools/call", {"name": "test_tool_with_logging"}, LEGACY), LEGACY)
    assert before == []
    assert peer.call("resources/subscribe", {"uri": "test://watched-resource"}, LEGACY)["result"] == {}
    updated = peer.next(revision=LEGACY)
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://watched-resource"},
    }
    slow = peer.start("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}, LEGACY)
    peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": slow}})
    assert peer.call("ping", {}, LEGACY)["result"] == {}
    assert [f for f in peer.quiet(0.3) if f.get("id") == slow] == []
