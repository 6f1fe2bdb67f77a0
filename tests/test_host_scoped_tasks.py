"""`scope: host` servers (#39 items 3 and 4): each host connection's own process of the server.

A task outlives its host: the host's process stays while that host's tasks run (up to their TTL) and
stops when the last one ends. A call mcpx cuts by stopping a process says so in mcpx's words, never
as the server's failure. A question the process asks with no call in flight (a roots/list at its
start) is still its host's: asked of that host when it declared the capability and has a stream to
be asked on, else left to an operator, never unattributed.

The upstream is the fixture (tests/fixtures/upstream_server.py) over stdio; `--ask-roots` makes it
ask roots/list as soon as it is initialized, as server-everything does. The SDK 1.30 host against
server-everything is tests/test_host_scoped_sdk1.py (slow tier).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
from harness import UNIT, Api, Daemon, RawHost, SseStream, read_jsonl, stdio_server, wait_until


def own_processes(d: Daemon) -> list[int]:
    """The fixture processes the daemon started itself: with keepers on, the shared (listing)
    process runs under its keeper, so these are the hosts' own."""
    assert d.proc is not None
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
        if ppid == d.proc.pid and b"upstream_server.py" in cmdline:
            found.append(int(entry))
    return found


def ended(api: Api, task_id: str) -> dict[str, Any] | None:
    row = api.get(f"/v1/tasks/{task_id}").json()
    return row if row["status"] not in ("working", "input_required") else None


def disconnect(host: RawHost, d: Daemon) -> None:
    assert host.client.delete(d.url, headers=host._legacy_headers()).status_code in (200, 204)


def test_a_task_outlives_its_host_on_the_hosts_own_process_which_stops_after_it(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, scope="host")}})
    host = RawHost(d.url)
    host.initialize()
    seconds = 1.5 * UNIT
    created = host.legacy(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": seconds, "steps": 2}, "task": {"ttl": 60_000}}
    ).json()
    task_id = created["result"]["task"]["taskId"]
    [pid] = own_processes(d)
    disconnect(host, d)
    with Api(d) as api:
        assert api.get(f"/v1/tasks/{task_id}").json()["status"] == "working"  # the host left mid-task
        assert own_processes(d) == [pid]  # its process stays for the task
        done = wait_until(lambda: ended(api, task_id), 30 * UNIT, "the task to end")
        assert done["status"] == "completed", done  # before #39: failed, "upstream 'fx' exited with code 0"
        assert done["result"]["content"][0]["text"] == f"slept {seconds}", done
    wait_until(lambda: not own_processes(d), 10 * UNIT, "the host's process to stop once its task ended")
    assert "its host connection closed and its last task ended" in d.stderr()


def test_a_task_keeps_its_gone_hosts_process_only_up_to_its_ttl(start_daemon: Any, tmp_path: Path) -> None:
    """A task that runs past its TTL is ended by its expiry, and the process it kept goes with it."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, scope="host")}})
    host = RawHost(d.url)
    host.initialize()
    ttl_ms = int(2_000 * UNIT)
    created = host.legacy(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": 120}, "task": {"ttl": ttl_ms}}
    ).json()
    task_id = created["result"]["task"]["taskId"]
    [pid] = own_processes(d)
    disconnect(host, d)
    assert own_processes(d) == [pid]  # kept for the task
    with Api(d) as api:
        wait_until(lambda: api.get(f"/v1/tasks/{task_id}").status_code == 404, 20 * UNIT, "the task to expire")
    wait_until(lambda: not own_processes(d), 10 * UNIT, "the process to stop with its expired task")
    assert "its host connection closed and its last task ended" in d.stderr()


TASKS_EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def test_a_2026_task_outlives_its_stateless_host_closed_as_idle(start_daemon: Any, tmp_path: Path) -> None:
    """A 2026-07-28 host has no session to delete: it is closed once quiet for idleCloseS, which
    its task is meant to outlast (it polls, or comes back later). Its process stays for the task."""
    config = {
        "mcpServers": {"fx": stdio_server(tmp_path, scope="host")},
        "tasks": {"taskAfterMs": 100},
        "connections": {"idleCloseS": 1},
    }
    d = start_daemon(config)
    host = RawHost(d.url)
    seconds = 3 * UNIT
    handle = host.modern(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": seconds, "steps": 3}}, meta=TASKS_EXT
    ).json()["result"]
    assert handle["resultType"] == "task", handle
    with Api(d) as api:

        def closed() -> list[str]:
            return [c["closeReason"] for c in api.get("/v1/connections").json()["connections"] if c["closedMs"]]

        assert wait_until(closed, 10 * UNIT, "the quiet host closed") == ["idle for 1 s"]
        assert api.get(f"/v1/tasks/{handle['taskId']}").json()["status"] == "working"
        done = wait_until(lambda: ended(api, handle["taskId"]), 30 * UNIT, "the task to end")
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == f"slept {seconds}", done
    wait_until(lambda: not own_processes(d), 10 * UNIT, "the host's process to stop once its task ended")


def test_a_call_cut_because_mcpx_stopped_the_hosts_process_says_so_in_mcpxs_words(
    start_daemon: Any, tmp_path: Path
) -> None:
    """A plain call holds no task: its host's disconnect stops the process under it. The operator's
    row says mcpx stopped it and why, not that the server exited."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, scope="host")}})
    host = RawHost(d.url)
    host.initialize()
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "fx__slow", "arguments": {"seconds": 60}},
    }
    headers = {"Accept": "application/json, text/event-stream", **host._legacy_headers()}

    def call() -> None:
        with httpx.Client(timeout=30 * UNIT) as client:
            try:
                client.post(d.url, json=body, headers=headers)
            except httpx.HTTPError:
                pass  # its stream may end without a reply: the host is gone

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    with Api(d) as api:

        def listed() -> list[dict[str, Any]]:
            return [t for t in api.get("/v1/tasks").json()["tasks"] if t["kind"] == "call" and t["tool"] == "slow"]

        [row] = wait_until(listed, 20 * UNIT, "the long call listed")
        disconnect(host, d)
        done = wait_until(lambda: ended(api, row["id"]), 20 * UNIT, "the call to end")
    assert done["status"] == "failed", done
    assert done["statusMessage"] == "mcpx stopped this host's process of upstream 'fx': its host connection closed", (
        done
    )
    caller.join(10 * UNIT)


def roots_replies(log: Path) -> list[dict[str, Any]]:
    """The replies the fixture processes got to their `--ask-roots` request, as they came."""
    return [e["msg"] for e in read_jsonl(log) if e.get("event") == "recv" and e["msg"].get("id") == "fixture-roots-1"]


def test_a_hosts_own_process_asks_that_host_what_no_call_explains(start_daemon: Any, tmp_path: Path) -> None:
    """Each host's process asks roots/list at its start, before any call: host A declared roots and
    has its GET stream open, so it is asked there and its answer reaches its process; host B did not
    declare roots, so its question is left to an operator (none attached: the server hears why). Both
    questions are stored under their own host's connection, neither unattributed. (The shared process,
    which lists the tools and carries no host's call, has no host to ask.)"""
    fx = stdio_server(tmp_path, "--era", "legacy", "--ask-roots", scope="host")  # asks once initialized
    d = start_daemon({"mcpServers": {"fx": fx}, "questions": {"operatorGraceMs": 200}})
    log = tmp_path / "fixture.log.jsonl"
    a = RawHost(d.url)
    a.initialize(capabilities={"roots": {}})
    stream = SseStream("GET", d.url, {"Accept": "text/event-stream", **a._legacy_headers()})
    assert "result" in a.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "hi"}}).json()
    [asked] = wait_until(
        lambda: [f for f in stream.frames if f.get("method") == "roots/list"], 20 * UNIT, "A asked on its GET stream"
    )
    roots = [{"uri": "file:///work/a", "name": "a"}]
    a.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": roots}}, a._legacy_headers())
    wait_until(
        lambda: any(r.get("result") == {"roots": roots} for r in roots_replies(log)), 20 * UNIT, "A's roots upstream"
    )

    b = RawHost(d.url)
    b.initialize()  # no roots
    assert "result" in b.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "hi"}}).json()

    def refused() -> list[str]:
        return [str(r["error"]["message"]) for r in roots_replies(log) if "error" in r and "declare" in str(r["error"])]

    [message] = wait_until(refused, 20 * UNIT, "B's process told why nobody answered")
    assert message == "Method not found: roots/list (the host did not declare roots and no operator is attached)"
    lister = "mcpx cannot tell which call asked roots/list (no call was in flight); nobody can answer it"
    lister += " (this process only lists the server's tools; each host's calls run on its own)"
    assert lister in [r["error"]["message"] for r in roots_replies(log) if "error" in r]  # no host's to ask
    with Api(d) as api:
        asked_rows = {q["connectionId"]: q for q in api.history() if q["method"] == "roots/list"}
    conns = {c["id"] for c in Api(d).get("/v1/connections").json()["connections"]}
    assert len(asked_rows) == 2 and set(asked_rows) <= conns, asked_rows
    by_a = next(q for q in asked_rows.values() if q["status"] == "answered")
    by_b = next(q for q in asked_rows.values() if q["status"] == "expired")
    assert (
        by_a["answeredBy"] == f"host:{by_a['connectionId']}" and by_a["why"] == "asked of the host (it declared roots)"
    )
    assert by_b["why"] == "waiting for an operator: the host did not declare roots", by_b
    assert by_a["candidates"] == by_b["candidates"] == [] and by_a["taskId"] is None
    stream.close()


TOKEN = "ana-" + "t" * 28
DEMO = {"command": sys.executable, "args": ["-m", "mcpx.demo.upstream", "--tools", "confirm"]}


class AnaHost(RawHost):
    """A 2025 session of the principal `ana` (her bearer token on every request)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.client.headers["Authorization"] = f"Bearer {TOKEN}"


def collect_answering(host: AnaHost, task_id: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A blocking tasks/result, read frame by frame: a question on its stream is answered with
    `answer` (POSTed back on the same session, as a host does); every frame, the result last."""
    frames: list[dict[str, Any]] = []
    body = {"jsonrpc": "2.0", "id": host.next_id(), "method": "tasks/result", "params": {"taskId": task_id}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {TOKEN}"}
    with (
        httpx.Client(timeout=60 * UNIT) as client,
        client.stream("POST", host.url, json=body, headers={**headers, **host._legacy_headers()}) as resp,
    ):
        assert "text/event-stream" in resp.headers.get("content-type", ""), resp.read()
        data: list[str] = []
        for line in resp.iter_lines():
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
                continue
            if line or not data:
                continue
            frame = json.loads("\n".join(data))
            data = []
            frames.append(frame)
            if "method" in frame and "id" in frame:
                host.post({"jsonrpc": "2.0", "id": frame["id"], "result": answer}, host._legacy_headers())
            elif "result" in frame or "error" in frame:
                break
    return frames


def test_a_question_of_a_task_whose_host_left_is_asked_of_the_next_connection_of_its_principal(
    start_daemon: Any,
) -> None:
    """The demo's `confirm` asks after a second; by then the host that started the task has gone.
    The task waits (input_required) until another session of the same principal opens its
    tasks/result stream: the question is asked there, that session's answer reaches the server,
    and the result comes on the same stream."""
    config = {
        "auth": {"tokens": [{"principal": "ana", "token": TOKEN}]},
        "mcpServers": {"demo": {**DEMO, "mcpx": {"scope": "host"}}},
    }
    d = start_daemon(config)
    first = AnaHost(d.url)
    first.initialize(capabilities={"elicitation": {}})
    created = first.legacy(
        "tools/call", {"name": "demo__confirm", "arguments": {"question": "Ship it?"}, "task": {"ttl": 60_000}}
    ).json()
    task_id = created["result"]["task"]["taskId"]
    disconnect(first, d)
    with Api(d) as api:
        wait_until(
            lambda: api.get(f"/v1/tasks/{task_id}").json()["status"] == "input_required",
            20 * UNIT,
            "the task to ask, its host gone",
        )
    second = AnaHost(d.url)
    second.initialize(capabilities={"elicitation": {}})
    frames = collect_answering(second, task_id, {"action": "accept", "content": {"ok": True}})
    asked = [f for f in frames if f.get("method") == "elicitation/create"]
    assert len(asked) == 1, frames
    assert frames[-1]["result"]["content"][0]["text"] == "Ship it? — yes", frames
    with Api(d) as api:
        [q] = api.history()
        assert q["answeredBy"] == f"host:{q['connectionId']}", q  # the first host's question, answered by ana
