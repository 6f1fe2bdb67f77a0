"""Questions a crash leaves open (#37 item 6): closed as `abandoned` when the daemon starts again.

A question lives with the daemon that asked it: its asker waits in memory, so after a SIGKILL
nothing waits for its answer, and nothing takes the row up again (a call that carries on after the
restart is handled afresh: what its server asks again is new). At the next start the row is closed with a
`question.abandoned` event; answering it is refused (409) instead of "answered" with nothing
behind it, and the audit log records no approval. On a shared store a daemon closes only what its
own previous run, or a daemon whose work it took over, left: another live daemon's question stays.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import Api, RawHost, postgres_only, read_jsonl, stdio_server, wait_until


def _config(tmp: Path, **top: Any) -> dict[str, Any]:
    return {"mcpServers": {"fx": stdio_server(tmp, approve=["echo"])}, **top}


def _call_aside(url: str, session: RawHost, text: str) -> threading.Thread:
    def call() -> None:
        with RawHost(url) as h:
            h.session_id, h.revision = session.session_id, session.revision
            try:
                h.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": text}})
            except httpx.HTTPError:
                pass  # the daemon was killed under it

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


def _echoes(tmp: Path) -> list[str]:
    return [
        e["msg"]["params"]["arguments"]["text"]
        for e in read_jsonl(tmp / "fixture.log.jsonl")
        if e.get("msg", {}).get("method") == "tools/call" and e["msg"]["params"].get("name") == "echo"
    ]


def test_an_approval_left_open_by_a_sigkill_is_abandoned_at_restart_and_takes_no_answer(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    thread = _call_aside(d.url, host, "drop tables")
    with Api(d) as api:
        [q] = wait_until(api.open_questions, 10, "the approval")
    d.stop(signal.SIGKILL)
    thread.join(10)
    d.start()
    with Api(d) as api:
        row = api.get(f"/v1/questions/{q['id']}").json()
        assert row["status"] == "abandoned", row
        assert row["answeredBy"] is None and row["answer"] is None
        assert "ended without closing it" in row["reason"]
        assert api.open_questions() == []
        late = api.answer(q["id"], "accept", by="olga", content={"decision": "allow"})
        assert late.status_code == 409, late.text
        assert f"question {q['id']} is already abandoned" in late.json()["error"]
        assert "it takes no answer" in late.json()["error"]
        # The audit log is true: opened, then abandoned; never answered.
        events = [e for e in api.get("/v1/events").json()["events"] if e.get("questionId") == q["id"]]
        assert [e["kind"] for e in events] == ["question.opened", "question.abandoned"], events
        assert events[1]["by"] == "mcpx" and events[1]["data"]["reason"] == row["reason"]
        # Its call was cut by the restart, and says so.
        call = api.get(f"/v1/tasks/{q['taskId']}").json()
        assert call["status"] == "failed" and "restarted" in (call["statusMessage"] or ""), call
    assert _echoes(tmp_path) == []


@postgres_only
@pytest.mark.stress  # two daemons on one PostgreSQL database: the slow tier
def test_on_a_shared_store_another_live_daemons_question_stays_open(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: Any
) -> None:
    url = pg_cluster.database()

    def config(name: str) -> dict[str, Any]:
        return {
            "mcpServers": {"fx": stdio_server(tmp_path, name=f"fx-{name}", approve=["echo"])},
            "keepers": {"enabled": False},
            "store": {"url": url, "instance": name, "leaseMs": 1000},
        }

    a = start_daemon(config("a"), name="inst-a")
    host = raw_host(a.url)
    host.initialize()
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(a.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["frame"] = h.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "on a"}}).json()

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    with Api(a) as api_a:
        [q] = wait_until(api_a.open_questions, 10, "a's approval")
        b = start_daemon(config("b"), name="inst-b")  # starts while a's question waits
        with Api(b) as api_b:
            assert api_b.get(f"/v1/questions/{q['id']}").json()["status"] == "open"
        assert api_a.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
    thread.join(10)
    assert box["frame"]["result"]["content"][0]["text"] == "on a"
    assert b.status()["phase"] == "serving"
