"""Approval gates (#27): a call to a tool named in `approve` waits for an operator, is run only
once allowed, is denied (or times out) with an isError result naming who or what, and an allowance
lets one host's later calls through unasked. The host is never asked to approve its own call."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import ROOT, UNIT, Api, RawHost, read_jsonl, stdio_server, wait_until

from mcpx.connections import naming


def _config(tmp: Path, **top: Any) -> dict[str, Any]:
    return {"mcpServers": {"fx": stdio_server(tmp, approve=["echo"])}, **top}


def _echo_aside(d: Any, host: RawHost, text: str) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def call() -> None:
        with RawHost(d.url) as h:
            h.session_id, h.revision = host.session_id, host.revision
            box["frame"] = h.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": text}}).json()

    box["thread"] = threading.Thread(target=call, daemon=True)
    box["thread"].start()
    return box


def _echoes_upstream(tmp: Path) -> list[str]:
    log = read_jsonl(tmp / "fixture.log.jsonl")
    return [
        e["msg"]["params"]["arguments"]["text"]
        for e in log
        if e.get("msg", {}).get("method") == "tools/call" and e["msg"]["params"].get("name") == "echo"
    ]


def _cli(d: Any, *argv: str, ok: bool = True) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mcpx", *argv, "--state-dir", str(d.state_dir)],
        capture_output=True,
        text=True,
        timeout=30 * UNIT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode == 0) == ok, done
    return done.stdout + done.stderr


def _approval(api: Api) -> dict[str, Any]:
    [q] = wait_until(api.open_questions, 10, "the approval question")
    return q


def test_a_gated_call_waits_runs_once_allowed_and_the_audit_names_the_approver(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize(capabilities={"elicitation": {}})  # it could answer questions: never this one
    with Api(d) as api:
        box = _echo_aside(d, host, "ship it")
        q = _approval(api)
        assert q["hostCanAnswer"] is False and q["method"] == "elicitation/create"
        # mcpx's own gate asks (#39 item 6), naming the host: its clientInfo name, then its process.
        me = naming.shown_label(None, naming.process_label(os.getpid()), {"name": "pytest-raw"})
        assert q["params"]["message"] == f'mcpx asks: may {me} run fx__echo (on fx)? Arguments: {{"text": "ship it"}}'

        time.sleep(0.3)
        assert _echoes_upstream(tmp_path) == []  # waiting: not run yet
        row = api.get(f"/v1/tasks/{q['taskId']}").json()
        assert (row["kind"], row["tool"]) == ("call", "echo")  # shown as a waiting call
        assert q["why"] == "waiting for an operator: approval gate `echo`", q  # the daemon's why, on both
        assert row["why"] == "listed: waiting for an operator: approval gate `echo`", row
        assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
        box["thread"].join(10)
        assert box["frame"]["result"]["content"][0]["text"] == "ship it"
        assert _echoes_upstream(tmp_path) == ["ship it"]
        [answered] = [e for e in api.get("/v1/events").json()["events"] if e["kind"] == "question.answered"]
        assert answered["by"] == "operator:olga" and answered["data"]["answer"]["content"]["decision"] == "allow"


def test_denied_or_unanswered_the_host_gets_an_is_error_result_and_nothing_runs(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path, approveTimeoutMs=1500))
    host = raw_host(d.url)
    host.initialize()
    with Api(d) as api:
        box = _echo_aside(d, host, "drop tables")
        q = _approval(api)
        content = {"decision": "deny", "reason": "not on a Friday"}
        assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
        box["thread"].join(10)
        result = box["frame"]["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"] == "mcpx: the call to fx__echo was denied by operator olga: not on a Friday"
        started = time.monotonic()
        nobody = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "later"}}).json()["result"]
        assert 1.4 < time.monotonic() - started < 6
        assert nobody["isError"] is True and "nobody approved it within 1.5 s" in nobody["content"][0]["text"]
    assert _echoes_upstream(tmp_path) == []


def test_an_allowance_lets_that_host_through_unasked_and_not_another(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon(_config(tmp_path))
    a, b = raw_host(d.url), raw_host(d.url)
    a.initialize()
    b.initialize()
    with Api(d) as api:
        box = _echo_aside(d, a, "one")
        q = _approval(api)
        assert q["params"]["_meta"]["io.mcpx/approval"]["allowanceFor"] == "this 2025 session"  # what it covers
        content = {"decision": "allow-for-host", "minutes": 5}
        assert api.answer(q["id"], "accept", by="olga", content=content).status_code == 200
        box["thread"].join(10)
        assert box["frame"]["result"]["content"][0]["text"] == "one"
        again = a.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "two"}}).json()["result"]
        assert again["content"][0]["text"] == "two"  # unasked
        [allowance] = api.get("/v1/allowances").json()["allowances"]
        assert allowance["tool"] == "echo" and allowance["by"] == "operator:olga"
        listed = _cli(d, "allowances", "ls")
        assert allowance["id"] in listed and "fx/echo" in listed and "operator:olga" in listed
        other = _echo_aside(d, b, "three")
        q2 = _approval(api)  # another host is still asked
        assert q2["connectionId"] != q["connectionId"]
        assert api.answer(q2["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
        other["thread"].join(10)
        assert "revoked: fx/echo" in _cli(d, "allowances", "revoke", allowance["id"])
        assert "no allowance" in _cli(d, "allowances", "revoke", allowance["id"], ok=False)
        assert api.get("/v1/allowances").json()["allowances"] == []
        revoked = _echo_aside(d, a, "four")
        q3 = _approval(api)  # revoked: asked again
        assert api.answer(q3["id"], "accept", by="olga", content={"decision": "deny"}).status_code == 200
        revoked["thread"].join(10)
        assert revoked["frame"]["result"]["isError"] is True
    assert _echoes_upstream(tmp_path) == ["one", "two", "three"]


def test_a_task_waits_for_its_approval_saying_so(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon(_config(tmp_path))
    host = raw_host(d.url)
    host.initialize()
    frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "held"}, "task": {}}).json()
    tid = frame["result"]["task"]["taskId"]
    with Api(d) as api:
        q = _approval(api)
        assert q["taskId"] == tid
        # The fixture's echo declares no taskSupport: mcpx holds the task, the upstream sees a plain call.
        why = api.get(f"/v1/tasks/{tid}").json()["why"]
        assert why == "a task held by mcpx: fx has no taskSupport for echo, so it gets a plain call", why
        waiting = wait_until(lambda: host.legacy("tasks/get", {"taskId": tid}).json()["result"].get("statusMessage"))
        assert "waiting for an operator" in waiting
        assert api.answer(q["id"], "accept", by="olga", content={"decision": "allow"}).status_code == 200
    done = host.legacy("tasks/result", {"taskId": tid}).json()["result"]
    assert done["content"][0]["text"] == "held"
