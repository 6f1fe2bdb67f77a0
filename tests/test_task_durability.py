"""Tasks outlive the daemon: SIGKILL mid-task, restart, every handed-out id still answers honestly."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from harness import RawHost, read_jsonl, reply_of, stdio_server, wait_until


def _task(host: RawHost, name: str, args: dict[str, Any]) -> str:
    frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {"ttl": 600000}}).json()
    return frame["result"]["task"]["taskId"]


@pytest.mark.parametrize("kept", [True, False], ids=["keepers", "no-keepers"])
def test_sigkill_mid_task_then_restart_answers_every_handed_out_id(
    start_daemon: Any, tmp_path: Path, raw_host: Any, kept: bool
) -> None:
    """With keepers (the default) the stdio server outlives the daemon, and the plain call a task
    was running completes after the restart with its own result; without them it fails honestly."""
    config: dict[str, Any] = {"mcpServers": {"fx": stdio_server(tmp_path)}}
    if not kept:
        config["keepers"] = {"enabled": False}
    d = start_daemon(config, name="durable")
    host = raw_host(d.url)
    host.initialize()
    done = _task(host, "fx__echo", {"text": "kept"})
    failed = _task(host, "fx__fail", {})
    wait_until(
        lambda: host.legacy("tasks/get", {"taskId": failed}).json()["result"]["status"] == "failed",
        what="fail task done",
    )
    wait_until(
        lambda: host.legacy("tasks/get", {"taskId": done}).json()["result"]["status"] == "completed",
        what="echo task done",
    )
    seconds = 4 if kept else 60
    running = _task(host, "fx__slow", {"seconds": seconds, "steps": 4})
    wait_until(
        lambda: any(
            e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(tmp_path / "fixture.log.jsonl")
        ),
        what="slow upstream",
    )
    d.stop(signal.SIGKILL)
    d.start(port=d.port)
    host.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers()
    )  # same session id, no new initialize
    assert host.legacy("tasks/get", {"taskId": done}).json()["result"]["status"] == "completed"
    assert reply_of(host.legacy("tasks/result", {"taskId": done}))["result"]["content"][0]["text"] == "kept"
    assert host.legacy("tasks/get", {"taskId": failed}).json()["result"]["status"] == "failed"
    if kept:
        finished = wait_until(
            lambda: (t := host.legacy("tasks/get", {"taskId": running}).json()["result"])["status"] != "working" and t,
            timeout=30,
            what="the cut call to end",
        )
        assert finished["status"] == "completed", finished.get("statusMessage")
        result = reply_of(host.legacy("tasks/result", {"taskId": running}))["result"]
        assert result["content"][0]["text"] == f"slept {seconds}"
        starts = [
            line
            for line in (d.state_dir / "logs" / "fx.stderr.log").read_text().splitlines()
            if "mcpx: started" in line
        ]
        assert len(starts) == 1  # one server process for both daemons
    else:
        cut = host.legacy("tasks/get", {"taskId": running}).json()["result"]
        assert cut["status"] == "failed" and "restarted" in cut["statusMessage"]
        err = reply_of(host.legacy("tasks/result", {"taskId": running}))["error"]
        assert err["code"] == -32603 and "restarted" in err["message"]
    listed = {t["taskId"] for t in host.legacy("tasks/list").json()["result"]["tasks"]}
    assert {done, failed, running} <= listed


def test_another_session_still_cannot_see_tasks_after_a_restart(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}}, name="iso")
    owner = raw_host(d.url)
    owner.initialize()
    tid = _task(owner, "fx__echo", {"text": "x"})
    d.stop(signal.SIGKILL)
    d.start(port=d.port)
    other = raw_host(d.url)
    other.initialize()
    assert other.legacy("tasks/get", {"taskId": tid}).json()["error"]["code"] == -32602
    assert owner.legacy("tasks/get", {"taskId": tid}).json()["result"]["taskId"] == tid


def test_a_store_that_cannot_write_fails_the_call_without_a_handle(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}}, name="broken")
    host = raw_host(d.url)
    host.initialize()
    d.store_rows("DROP TABLE tasks")  # another process breaks the database
    frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}, "task": {}}).json()
    assert frame["error"]["code"] == -32603 and "task" in frame["error"]["message"]
    assert "result" not in frame
    ok = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "plain"}}).json()
    assert ok["result"]["content"][0]["text"] == "plain"  # the daemon itself is fine
