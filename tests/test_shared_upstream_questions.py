"""A question from a stdio server that several hosts share (#25): over stdio a server request names
no call, so mcpx puts it to a host only when it is certain which host's call asked: one call in
flight, or every call in flight is that host's. Otherwise it is an operator's alone (it may carry
another host's data), listed with every call that may have asked it; with no operator attached the
server gets a quick -32601 that says why and what fixes it.

The upstream is the demo server (mcpx/demo/upstream.py): 2025-11-25 only, over stdio, so its
questions are server requests; `confirm` waits a second, then asks; `watch` runs with progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from harness import ROOT, UNIT, Api, Daemon, RawHost, operator_attached, wait_until

pytestmark = [pytest.mark.sqlite_only("who is asked a shared server's question: routing"), pytest.mark.heavy]

DEMO = {"command": sys.executable, "args": ["-m", "mcpx.demo.upstream", "--tools", "watch,confirm"]}
ASKING = {"elicitation": {}}  # every host here could answer: where a question goes is mcpx's choice


class StreamedCall:
    """One legacy tools/call whose SSE reply is read frame by frame in a thread; a server request on
    it is answered with `answer` (if given) by POSTing the response, as a host does."""

    def __init__(self, host: RawHost, name: str, arguments: dict[str, Any], answer: dict[str, Any] | None = None):
        self.host = host
        self.frames: list[dict[str, Any]] = []
        self.progressed = threading.Event()
        self.answer = answer
        body = {
            "jsonrpc": "2.0",
            "id": host.next_id(),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": f"p-{name}"}},
        }
        self.thread = threading.Thread(target=self._run, args=(body,), daemon=True)
        self.thread.start()

    def _run(self, body: dict[str, Any]) -> None:
        headers = {"Accept": "application/json, text/event-stream", **self.host._legacy_headers()}
        with (
            httpx.Client(timeout=60 * UNIT) as client,
            client.stream("POST", self.host.url, json=body, headers=headers) as resp,
        ):
            if "text/event-stream" not in resp.headers.get("content-type", ""):
                self.frames.append(json.loads(resp.read()))  # nothing came before the reply: one JSON body
                return
            for frame in _sse(resp.iter_lines()):
                self.frames.append(frame)
                if frame.get("method") == "notifications/progress":
                    self.progressed.set()
                elif "method" in frame and "id" in frame and self.answer is not None:
                    reply = {"jsonrpc": "2.0", "id": frame["id"], "result": self.answer}
                    self.host.post(reply, self.host._legacy_headers())

    def result(self) -> dict[str, Any]:
        self.thread.join(60 * UNIT)
        assert not self.thread.is_alive(), "the call did not end"
        [final] = [f for f in self.frames if "result" in f or "error" in f]
        return final

    def asked(self) -> list[str]:
        return [str(f["method"]) for f in self.frames if "method" in f and "id" in f]


def _sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []
    if data:
        yield json.loads("\n".join(data))


def _host(d: Daemon) -> RawHost:
    host = RawHost(d.url)
    host.initialize(capabilities=ASKING)
    return host


def _watch(host: RawHost, seconds: float = 4) -> StreamedCall:
    """A long call of `host`'s, running upstream once its first progress arrived."""
    call = StreamedCall(host, "demo__watch", {"target": "db", "maxSeconds": seconds})
    assert call.progressed.wait(20 * UNIT), "the watch never reported progress"
    return call


def test_with_two_hosts_calls_in_flight_the_question_is_an_operators_listing_both_calls(start_daemon: Any) -> None:
    d = start_daemon({"mcpServers": {"demo": DEMO}})
    feed = operator_attached(d, "olga")
    try:
        a, b = _host(d), _host(d)
        watching = _watch(a)
        confirming = StreamedCall(b, "demo__confirm", {"question": "Ship it?"}, answer={"action": "accept"})
        with Api(d) as api:
            [q] = wait_until(api.open_questions, 20, "the operator's question")
            assert q["hostCanAnswer"] is False and q["connectionId"] is None and q["method"] == "elicitation/create"
            callers = {(c["connectionId"], c["name"]) for c in q["candidates"]}
            conns = {c["id"]: c for c in api.get("/v1/connections").json()["connections"]}
            # The why line, from the daemon: unattributable, naming the hosts whose calls were in flight.
            hosts_shown = [conns[c["connectionId"]]["label"] or "pytest-raw 0" for c in q["candidates"]]
            assert q["why"] in (
                f"waiting for an operator: 2 calls were in flight on this stdio server (hosts {', '.join(names)})"
                for names in (hosts_shown, hosts_shown[::-1])
            ), q["why"]
            assert {name for _, name in callers} == {"demo__watch", "demo__confirm"} and len(callers) == 2
            assert {cid for cid, _ in callers} <= set(conns) and len({cid for cid, _ in callers}) == 2
            shown = subprocess.run(
                [sys.executable, "-m", "mcpx", "questions", "show", q["id"][:8], "--state-dir", str(d.state_dir)],
                capture_output=True,
                text=True,
                timeout=30 * UNIT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            assert "asked by   one of 2 calls in flight" in shown.stdout, shown
            assert "demo__watch of connection" in shown.stdout and "demo__confirm of connection" in shown.stdout
            answer = {"action": "accept", "content": {"ok": True}, "by": "olga"}
            assert api.post(f"/v1/questions/{q['id']}/answer", json=answer).status_code == 200
        assert confirming.result()["result"]["content"][0]["text"] == "Ship it? — yes"
        assert "result" in watching.result()
        assert watching.asked() == [] and confirming.asked() == []  # neither host was asked
    finally:
        feed.close()


@pytest.mark.long  # a 10 s watch call runs beside it
def test_with_only_one_hosts_calls_in_flight_that_host_is_asked(start_daemon: Any) -> None:
    d = start_daemon({"mcpServers": {"demo": DEMO}})
    b = _host(d)
    watching = _watch(b, seconds=10)  # in flight all through the demo's retries of a refusal
    confirming = StreamedCall(
        b, "demo__confirm", {"question": "Ship it?"}, answer={"action": "accept", "content": {"ok": False}}
    )
    assert confirming.result()["result"]["content"][0]["text"] == "Ship it? — no"
    assert "elicitation/create" in confirming.asked() + watching.asked()  # asked on one of its own calls
    assert "result" in watching.result()
    with Api(d) as api:
        [q] = api.history()
        assert q["answeredBy"].startswith("host:") and q["candidates"] == []
        assert q["why"] == "asked of the host (it declared elicitation)"


def test_a_host_without_elicitation_leaves_the_question_to_the_attached_operator_saying_why(
    start_daemon: Any,
) -> None:
    d = start_daemon({"mcpServers": {"demo": DEMO}})
    feed = operator_attached(d, "olga")
    try:
        host = RawHost(d.url)
        host.initialize(capabilities={})  # no elicitation declared
        confirming = StreamedCall(host, "demo__confirm", {"question": "Ship it?"})
        with Api(d) as api:
            [q] = wait_until(api.open_questions, 20, "the operator's question")
            assert q["why"] == "waiting for an operator: the host did not declare elicitation", q
            assert q["hostCanAnswer"] is False and q["candidates"] == []
            # The plain call is listed for it, saying why (the demo asks after a second).
            row = api.get(f"/v1/tasks/{q['taskId']}").json()
            assert row["kind"] == "call" and row["why"] == "listed: ran longer than 500 ms", row
            answer = {"action": "accept", "content": {"ok": True}, "by": "olga"}
            assert api.post(f"/v1/questions/{q['id']}/answer", json=answer).status_code == 200
        assert confirming.result()["result"]["content"][0]["text"] == "Ship it? — yes"
        assert confirming.asked() == []
    finally:
        feed.close()


@pytest.mark.long  # a 10 s watch call runs beside it
def test_with_no_operator_attached_the_server_is_told_why_at_once(start_daemon: Any) -> None:
    d = start_daemon({"mcpServers": {"demo": DEMO}, "questions": {"operatorGraceMs": 200}})
    a, b = _host(d), _host(d)
    # Long enough to outlast the demo's own retries of a -32601 (10 within about 5 s here).
    watching = _watch(a, seconds=10)
    confirming = StreamedCall(b, "demo__confirm", {"question": "Ship it?"})
    text = confirming.result()["result"]["content"][0]["text"]
    assert "nobody could answer 'Ship it?'" in text and "cannot tell which of the 2 calls" in text, text
    assert "attach one (mcpx console)" in text and "mcpServers.demo.mcpx.scope: host" in text
    assert "result" in watching.result()
    with Api(d) as api:
        asked = api.history()
    assert asked and all(q["status"] == "expired" and len(q["candidates"]) == 2 for q in asked)


def _own_processes(d: Daemon) -> list[int]:
    """The demo server processes the daemon started itself: with keepers on, the shared one runs
    under its keeper, so these are the hosts' own (`scope: host`)."""
    assert d.proc is not None
    daemon_pid = d.proc.pid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if ppid == daemon_pid and b"mcpx.demo.upstream" in cmdline:
            found.append(int(entry))
    return found


def test_with_scope_host_each_host_has_its_own_process_and_answers_its_own_question(start_daemon: Any) -> None:
    """No operator attached: host B's own elicitation handler answers, in B's process; A's call
    completes in A's. A host's process stops when its connection closes."""
    server = {**DEMO, "mcpx": {"scope": "host"}}
    d = start_daemon({"mcpServers": {"demo": server}, "questions": {"operatorGraceMs": 200}})
    a, b = _host(d), _host(d)
    watching = _watch(a, seconds=3)
    yes = {"action": "accept", "content": {"ok": True}}
    confirming = StreamedCall(b, "demo__confirm", {"question": "Ship it?"}, answer=yes)
    assert confirming.result()["result"]["content"][0]["text"] == "Ship it? — yes"
    assert confirming.asked() == ["elicitation/create"]  # B was asked, by its own process
    assert len(_own_processes(d)) == 2
    assert "result" in watching.result() and watching.asked() == []
    logs = sorted(p.name for p in (d.state_dir / "logs").glob("demo.*.stderr.log"))
    conns = {c["id"] for c in Api(d).get("/v1/connections").json()["connections"]}
    assert {name.split(".")[1] for name in logs} == conns and len(logs) == 2
    with Api(d) as api:
        [q] = api.history()
        assert q["answeredBy"].startswith("host:") and q["candidates"] == []
    assert b.client.delete(d.url, headers=b._legacy_headers()).status_code in (200, 204)
    wait_until(lambda: len(_own_processes(d)) == 1, 10, "B's process to stop")


def test_scope_host_is_bounded_by_max_instances(start_daemon: Any) -> None:
    server = {**DEMO, "mcpx": {"scope": "host", "maxInstances": 1, "roomWaitS": 1}}
    d = start_daemon({"mcpServers": {"demo": server}})
    a, b = _host(d), _host(d)
    watching = _watch(a, seconds=30)
    refused = b.legacy("tools/call", {"name": "demo__watch", "arguments": {"target": "x", "maxSeconds": 1}}).json()
    assert refused["error"]["code"] == -32600, refused
    assert "mcpServers.demo.mcpx.maxInstances" in refused["error"]["message"], refused
    assert "none stopped within 1 s (roomWaitS" in refused["error"]["message"], refused
    assert a.client.delete(d.url, headers=a._legacy_headers()).status_code in (200, 204)
    watching.thread.join(10)
    again = b.legacy("tools/call", {"name": "demo__watch", "arguments": {"target": "x", "maxSeconds": 1}}).json()
    assert "result" in again, again
