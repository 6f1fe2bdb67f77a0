"""#25's acceptance with the hosts people run: the official SDK 1.30 `ClientSession` and the SDK 2.3
`Client` (both eras), asking for no task, call a slow tool on a stdio upstream. The call is listed
for operators within `calls.showAfterMs` + 1 s, naming its host; an operator's cancel through /v1
ends the host's call within a second with a result that names the operator, and the upstream is
told (`notifications/cancelled`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from harness import Api, read_jsonl, stdio_server, wait_until
from peers.run_host import HostProcess
from peers.venvs import peer_python

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.peers,
    pytest.mark.sqlite_only("SDK hosts' plain calls: the wire"),
]  # slow tier (tests/conftest.py)

SHOW_AFTER_MS = 500
HOSTS = {
    "sdk-1.30": ("mcp-1.30", "sdk1_host.py", []),
    "sdk-2.3-legacy": ("mcp-2.3", "sdk2_host.py", ["--mode", "legacy"]),
    "sdk-2.3-2026": ("mcp-2.3", "sdk2_host.py", ["--mode", "2026-07-28"]),
}


@pytest.mark.parametrize("host", list(HOSTS))
def test_an_sdk_hosts_plain_call_is_listed_and_an_operator_cancels_it(
    start_daemon: Any, tmp_path: Path, host: str
) -> None:
    venv, driver, mode = HOSTS[host]
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "calls": {"showAfterMs": SHOW_AFTER_MS}})
    label = f"agent-{host}"
    args = [*mode, "--url", d.url, "--header", f"X-Mcpx-Host-Label: {label}"]
    script = [{"op": "call", "name": "fx__slow", "args": {"seconds": 30, "steps": 30}, "timeout": 60}]
    with Api(d) as api, HostProcess(peer_python(venv), driver, args, script, timeout=60) as proc:
        began = time.monotonic()
        started = wait_until(lambda: _slow_started(tmp_path), 30, "the call upstream")
        assert started
        upstream_at = time.monotonic()
        [row] = wait_until(lambda: _calls(api), 10, "the plain call listed")
        assert time.monotonic() - upstream_at < SHOW_AFTER_MS / 1000 + 1, time.monotonic() - began
        conn = api.get(f"/v1/connections/{row['connectionId']}").json()
        assert conn["label"] == label and conn["clientInfo"]["name"]
        assert (row["tool"], row["upstream"], row["status"]) == ("slow", "fx", "working")

        cancelled_at = time.time()
        resp = api.post(f"/v1/tasks/{row['id']}/cancel", json={"by": "alice"})
        assert resp.status_code == 200, resp.text
        [call] = proc.step_lines()
    assert call["ok"] is True, call
    result = call["result"]
    assert result.get("isError") is True, result
    assert "cancelled by operator alice" in result["content"][0]["text"]
    assert call["ended"] - cancelled_at < 1.0, call["ended"] - cancelled_at
    [told] = wait_until(lambda: _upstream(tmp_path, "cancelled"), 10, "the upstream told")
    assert told["tool"] == "slow"


def _calls(api: Api) -> list[dict[str, Any]]:
    return [t for t in api.get("/v1/tasks").json()["tasks"] if t["kind"] == "call"]


def _upstream(tmp: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(tmp / "fixture.log.jsonl") if e.get("event") == kind]


def _slow_started(tmp: Path) -> bool:
    return any(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(tmp / "fixture.log.jsonl"))
