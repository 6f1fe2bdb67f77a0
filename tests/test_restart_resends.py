"""After a restart, a kept server's call is never lost for want of knowing whether it arrived (#37
item 11): the keeper says which request ids it forwarded, so a call the dying daemon remembered but
never sent is sent again (once), and one whose reply the keeper could not hold is failed saying so.

The daemon is made to die at the worst moment by MCPX_TEST_SEND_FAULT (upstream/stdio/send_fault.py):
the task row names the request, committed, and the daemon is SIGKILLed before the keeper gets it.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import Api, read_jsonl, stdio_server, wait_until

from mcpx.upstream.stdio.send_fault import ENV


def _slow_calls(tmp: Path) -> int:
    return sum(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(tmp / "fixture.log.jsonl"))


def _ended(api: Api, tid: str) -> dict[str, Any] | None:
    row: dict[str, Any] = api.get(f"/v1/tasks/{tid}").json()
    return row if row.get("status") in ("completed", "failed", "cancelled") else None


def test_a_call_the_dying_daemon_never_sent_is_sent_again_and_completes_once(
    start_daemon: Any, tmp_path: Path, raw_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv(ENV, str(faults))
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    (faults / "die").touch()
    call = {"name": "fx__slow", "arguments": {"seconds": 0.2, "steps": 1}, "task": {"ttl": 600000}}
    try:
        host.legacy("tools/call", call)
    except httpx.HTTPError:
        pass  # the daemon may die before its reply is out: the row is what counts
    assert d.proc is not None
    wait_until(lambda: d.proc is not None and d.proc.poll() is not None, 10, "the daemon to die before sending")
    [(tid, body)] = d.store_rows("SELECT id, body FROM tasks")
    assert json.loads(body)["upstream_request"] is not None, "the row names the request before it is sent"
    assert _slow_calls(tmp_path) == 0  # the server never got it
    (faults / "die").unlink()
    d.start(port=d.port)
    with Api(d) as api:
        row = wait_until(lambda: _ended(api, tid), 15, "the task to end after the restart")
        assert row["status"] == "completed", row
        assert row["result"]["content"][0]["text"] == "slept 0.2"
    assert _slow_calls(tmp_path) == 1  # sent again, once


def test_a_call_the_server_got_whose_reply_the_keeper_could_not_hold_fails_saying_so(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "keepers": {"bufferBytes": 16}})
    host = raw_host(d.url)
    host.initialize()
    call = {"name": "fx__slow", "arguments": {"seconds": 0.5, "steps": 1}, "task": {"ttl": 600000}}
    tid = host.legacy("tools/call", call).json()["result"]["task"]["taskId"]
    wait_until(lambda: _slow_calls(tmp_path) == 1, 10, "the call upstream")
    d.stop(signal.SIGKILL)
    log = tmp_path / "fixture.log.jsonl"
    wait_until(lambda: any(e.get("event") == "finished" for e in read_jsonl(log)), 10, "the call to finish")
    d.start(port=d.port)
    with Api(d) as api:
        row = wait_until(lambda: _ended(api, tid), 15, "the task to end after the restart")
    assert row["status"] == "failed", row
    assert "got request" in row["statusMessage"] and "its reply was lost" in row["statusMessage"], row
    assert _slow_calls(tmp_path) == 1  # never sent twice
