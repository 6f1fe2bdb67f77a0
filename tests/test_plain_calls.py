"""A host's plain tools/call (it asked for no task) is listed for operators once it runs long or
asks a question, and an operator may cancel it (#25): tasks/plain_calls.py.

Hosts here are raw HTTP ones asking for no task, in both eras, on the fixture's stdio server.
The official SDK hosts are in tests/test_plain_calls_sdk.py.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, Api, FeedClient, RawHost, operator_attached, read_jsonl, stdio_server, wait_until

SHOW_AFTER_MS = 300
QUESTIONS = ROOT / "tests" / "conformance" / "server.py"


def _config(tmp: Path) -> dict[str, Any]:
    return {
        "mcpServers": {
            "fx": stdio_server(tmp),
            "up": {"command": sys.executable, "args": [str(QUESTIONS), "stdio", "--legacy-only"]},
        },
        "calls": {"showAfterMs": SHOW_AFTER_MS},
    }


def _rows(api: Api, **params: Any) -> list[dict[str, Any]]:
    return [t for t in api.get("/v1/tasks", params=params).json()["tasks"] if t["kind"] == "call"]


def _call_in_thread(host: RawHost, name: str, arguments: dict[str, Any], *, modern: bool = False) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(host.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            if modern:
                resp = h.modern("tools/call", {"name": name, "arguments": arguments})
            else:
                resp = h.legacy("tools/call", {"name": name, "arguments": arguments})
            box["frame"] = resp.json()
            box["at"] = time.monotonic()

    box["thread"] = threading.Thread(target=call, daemon=True)
    box["thread"].start()
    return box


def _upstream_events(tmp: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(tmp / "fixture.log.jsonl") if e.get("event") == kind]


def test_a_long_plain_call_is_listed_with_its_progress_and_outcome(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    feed = FeedClient(d)
    with Api(d) as api:
        [conn] = api.get("/v1/connections").json()["connections"]
        started = time.monotonic()
        box = _call_in_thread(host, "fx__slow", {"seconds": 2.4, "steps": 6})
        [row] = wait_until(lambda: _rows(api), what="the plain call listed")
        assert time.monotonic() - started < SHOW_AFTER_MS / 1000 + 1
        assert row["status"] == "working" and row["owner"] == "call" and row["era"] == "legacy"
        assert (row["connectionId"], row["upstream"], row["tool"]) == (conn["id"], "fx", "slow")
        detail = api.get(f"/v1/tasks/{row['id']}").json()
        assert detail["arguments"] == {"seconds": 2.4, "steps": 6}
        # The host asked for no progress; mcpx asked the upstream for it, for the operator.
        wait_until(lambda: (api.get(f"/v1/tasks/{row['id']}").json()["statusMessage"] or "").startswith("step "))
        box["thread"].join(10)
        assert box["frame"]["result"]["content"][0]["text"] == "slept 2.4"
        ended = api.get(f"/v1/tasks/{row['id']}").json()
        assert ended["status"] == "completed" and ended["result"]["content"][0]["text"] == "slept 2.4"
        assert ended["expiresMs"] is not None  # listed for tasks.ttlMs from its end
        [created] = [e for e in feed.events("task.created") if e["taskId"] == row["id"]]
        assert created["data"]["kind"] == "call" and created["connectionId"] == conn["id"]
        # A host's own tasks/list never shows it: it holds no task.
        assert host.legacy("tasks/list").json()["result"]["tasks"] == []
        assert "error" in host.legacy("tasks/get", {"taskId": row["id"]}).json()
    feed.close()


def test_a_quick_plain_call_is_never_listed(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    for i in range(20):
        assert host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": f"{i}"}}).status_code == 200
    assert host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 0.05, "steps": 1}}).json()
    time.sleep(SHOW_AFTER_MS / 1000 + 0.3)
    with Api(d) as api:
        assert _rows(api) == []


@pytest.mark.parametrize("modern", [False, True], ids=["2025-host", "2026-host"])
def test_an_operator_cancels_a_plain_call(start_daemon: Any, tmp_path: Path, raw_host: Any, modern: bool) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    if not modern:
        host.initialize()
    with Api(d) as api:
        box = _call_in_thread(host, "fx__slow", {"seconds": 30, "steps": 30}, modern=modern)
        [row] = wait_until(lambda: _rows(api), what="the plain call listed")
        assert row["era"] == ("modern" if modern else "legacy")
        asked = time.monotonic()
        resp = api.post(f"/v1/tasks/{row['id']}/cancel", json={"by": "alice"})
        assert resp.status_code == 200, resp.text
        assert resp.json()["status"] == "cancelled"
        box["thread"].join(5)
        assert box["at"] - asked < 1.0
        result = box["frame"]["result"]
        assert result["isError"] is True and "cancelled by operator alice" in result["content"][0]["text"]
        [ev] = wait_until(lambda: _upstream_events(tmp_path, "cancelled"), what="the upstream told")
        assert ev["tool"] == "slow"
        ended = api.get(f"/v1/tasks/{row['id']}").json()
        assert ended["status"] == "cancelled" and ended["statusMessage"] == "cancelled by operator alice"
        assert ended["expiresMs"] is not None
        audit = [(e["kind"], e.get("by")) for e in ended["events"]]
        assert ("task.cancel_requested", "operator:alice") in audit


def test_a_plain_call_the_host_cancels_ends_its_row_cancelled(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    with Api(d) as api:
        box = _call_in_thread(host, "fx__slow", {"seconds": 30, "steps": 30})
        [row] = wait_until(lambda: _rows(api), what="the plain call listed")
        # The thread's request has id 1 on its own RawHost: the same session cancels it.
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert host.post(note, host._legacy_headers()).status_code == 202
        ended = wait_until(
            lambda: (r := api.get(f"/v1/tasks/{row['id']}").json())["status"] == "cancelled" and r,
            what="the row cancelled",
        )
        assert ended["statusMessage"] == "cancelled by the host"
        box["thread"].join(5)


def test_a_plain_call_that_asks_is_listed_at_once_with_its_question(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    config = _config(tmp_path)
    config["calls"] = {"showAfterMs": 60_000}  # only the question can list it
    d = start_daemon(config)
    host = raw_host(d.url)
    host.initialize()  # no elicitation: an operator answers
    feed = operator_attached(d, "olga")
    with Api(d) as api:
        box = _call_in_thread(host, "up__test_elicitation", {"message": "Deploy?"})
        [q] = wait_until(api.open_questions, what="the question")
        [row] = _rows(api)
        assert q["taskId"] == row["id"] and row["tool"] == "test_elicitation" and row["needsInput"] is True
        content = {"username": "ada", "email": "ada@example.com"}
        assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
        box["thread"].join(10)
        assert "ada@example.com" in box["frame"]["result"]["content"][0]["text"]
        assert wait_until(lambda: api.get(f"/v1/tasks/{row['id']}").json()["status"] == "completed")
    feed.close()
