"""Reloading the config and approval gates (#37 item 10, #39 item 9).

Top-level `approve` and `approveTimeoutMs` apply at the reload, as a server's own `approve` does.
A call that waits for approval while a reload changes its server runs, once allowed, on the server
as reloaded (it used to fail: the old process had stopped under it); one whose server the reload
removed is not run, and its host is told why.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from harness import Api, Daemon, RawHost, read_jsonl, sqlite_only, stdio_server, wait_until

pytestmark = sqlite_only  # nothing here is about the store


def _write(d: Daemon, config: dict[str, Any]) -> None:
    spare = d.config_path.with_suffix(".tmp")
    spare.write_text(json.dumps(config))
    spare.replace(d.config_path)


def _reload(api: Api, d: Daemon, config: dict[str, Any]) -> dict[str, Any]:
    _write(d, config)
    outcome: dict[str, Any] = api.post("/v1/config/reload", json={"by": "olga"}).json()
    assert outcome["result"] == "applied", outcome
    return outcome


def _echoes(path: Path) -> list[str]:
    return [
        e["msg"]["params"]["arguments"]["text"]
        for e in read_jsonl(path)
        if e.get("msg", {}).get("method") == "tools/call" and e["msg"]["params"].get("name") == "echo"
    ]


def _echo(host: RawHost, text: str) -> dict[str, Any]:
    frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": text}}).json()
    result: dict[str, Any] = frame.get("result") or {"protocolError": frame.get("error")}
    return result


def _echo_aside(d: Daemon, host: RawHost, text: str) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(d.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["result"] = _echo(h, text)

    box["thread"] = threading.Thread(target=call, daemon=True)
    box["thread"].start()
    return box


def test_top_level_approve_and_its_timeout_apply_at_the_reload(start_daemon: Any, tmp_path: Path) -> None:
    plain = {"mcpServers": {"fx": stdio_server(tmp_path)}}
    d = start_daemon(plain)
    host = RawHost(d.url)
    host.initialize()
    try:
        with Api(d) as api:
            assert _echo(host, "before")["content"][0]["text"] == "before"  # not gated yet
            outcome = _reload(api, d, {**plain, "approve": ["*__echo"], "approveTimeoutMs": 600})
            assert outcome["needsRestart"] == [], outcome
            unasked = _echo(host, "gated")  # nobody answers: the reloaded timeout ends it
            assert unasked["isError"] is True
            assert "nobody approved it within 0.6 s" in unasked["content"][0]["text"], unasked
            box = _echo_aside(d, host, "allowed")
            [q] = wait_until(api.open_questions, 10, "the approval the reload added")
            assert q["why"] == "waiting for an operator: approval gate `*__echo`"
            assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
            box["thread"].join(10)
            assert box["result"]["content"][0]["text"] == "allowed"
            assert _reload(api, d, plain)["needsRestart"] == []
            assert _echo(host, "after")["content"][0]["text"] == "after"  # the gate is gone again
    finally:
        host.close()
    assert _echoes(tmp_path / "fixture.log.jsonl") == ["before", "allowed", "after"]


def test_a_call_waiting_for_approval_runs_on_its_server_as_reloaded(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, approve=["echo"])}})
    host = RawHost(d.url)
    host.initialize()
    try:
        with Api(d) as api:
            box = _echo_aside(d, host, "across the reload")
            [q] = wait_until(api.open_questions, 10, "the approval")
            # The entry changes (its log, so the new process is told apart): the old process stops.
            outcome = _reload(api, d, {"mcpServers": {"fx": stdio_server(tmp_path, name="reloaded", approve=["echo"])}})
            assert outcome["changed"] == ["fx"], outcome
            wait_until(lambda: (tmp_path / "reloaded.log.jsonl").exists(), 20, "the reloaded process")
            assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
            box["thread"].join(20)
            assert box["result"].get("isError") is not True, box["result"]
            assert box["result"]["content"][0]["text"] == "across the reload"
    finally:
        host.close()
    assert _echoes(tmp_path / "reloaded.log.jsonl") == ["across the reload"]
    assert _echoes(tmp_path / "fixture.log.jsonl") == []


def test_a_call_whose_server_a_reload_removed_is_not_run_and_its_host_is_told(
    start_daemon: Any, tmp_path: Path
) -> None:
    other = {"other": stdio_server(tmp_path, name="other")}
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, approve=["echo"]), **other}})
    host = RawHost(d.url)
    host.initialize()
    try:
        with Api(d) as api:
            box = _echo_aside(d, host, "orphan")
            [q] = wait_until(api.open_questions, 10, "the approval")
            assert _reload(api, d, {"mcpServers": other})["removed"] == ["fx"]
            assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
            box["thread"].join(20)
            result = box["result"]
            assert result["isError"] is True
            assert result["content"][0]["text"] == (
                "mcpx: the call to fx__echo was not run: while it waited for approval, a config reload"
                " removed fx from the config."
            )
    finally:
        host.close()
    assert _echoes(tmp_path / "fixture.log.jsonl") == []
