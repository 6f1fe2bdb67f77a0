"""Stdio upstreams outlive the daemon (issue #15): each runs under a keeper process, so a SIGKILLed or
upgraded daemon's successor carries on the same server, and the calls tasks were running complete
with their own results. And no keeper or server is ever left behind: `mcpx stop` ends them, a
keeper whose daemon never returns ends after its grace period, a changed command replaces it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import UNIT, Daemon, RawHost, read_jsonl, reply_of, stdio_server, wait_until

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def _mcpx(d: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpx", *args, "--state-dir", str(d.state_dir)],
        capture_output=True,
        text=True,
        timeout=30 * UNIT,
        stdin=subprocess.DEVNULL,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def _legacy_task(host: RawHost, seconds: float) -> str:
    frame = host.legacy(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": seconds, "steps": 2}, "task": {"ttl": 600000}}
    ).json()
    return str(frame["result"]["task"]["taskId"])


def _slow_arrived(tmp: Path, n: int = 1) -> bool:
    log = read_jsonl(tmp / "fixture.log.jsonl")
    return sum(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in log) >= n


def test_mcpx_stop_leaves_no_keeper_and_no_server(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    kept = d.left_keepers()
    assert len(kept) == 2  # the keeper and its server
    out = _mcpx(d, "stop")
    assert out.returncode == 0, out.stderr
    wait_until(lambda: not any(_alive(p) for p in kept), 10, "keeper and server gone")
    assert not list((d.state_dir / "keepers").glob("*.json"))


def test_a_keeper_whose_daemon_never_returns_stops_its_server_after_the_grace(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "keepers": {"graceS": 1.0}})
    kept = d.left_keepers()
    assert len(kept) == 2
    d.stop(signal.SIGKILL)
    assert all(_alive(p) for p in kept)  # the daemon's death alone ends nothing
    wait_until(lambda: not any(_alive(p) for p in kept), 15, "keeper and server gone after the grace")
    assert not list((d.state_dir / "keepers").iterdir())


def test_a_modern_task_survives_a_sigkill_of_the_daemon(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"taskAfterMs": 200}})
    host = raw_host(d.url)
    handle = host.modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 3, "steps": 3}}, meta=EXT).json()[
        "result"
    ]
    assert handle["resultType"] == "task"
    tid = handle["taskId"]
    d.stop(signal.SIGKILL)
    d.start(port=d.port)

    def got() -> Any:
        r = host.modern("tasks/get", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()["result"]
        return r["status"] != "working" and r

    done = wait_until(got, 30, "the task to end")
    assert done["status"] == "completed", done.get("statusMessage")
    assert done["result"]["content"][0]["text"] == "slept 3"


def test_stop_keep_upstreams_hands_the_server_and_its_calls_to_the_next_daemon(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    tid = _legacy_task(host, 3)
    wait_until(lambda: _slow_arrived(tmp_path), 10, "the call upstream")
    kept = d.left_keepers()
    out = _mcpx(d, "stop", "--keep-upstreams")
    assert out.returncode == 0, out.stderr
    assert d.proc is not None and d.proc.wait(20) == 0  # reaped, so the next start owns the only Popen
    assert all(_alive(p) for p in kept)  # left running on purpose
    d.start(port=d.port)
    assert d.left_keepers() == kept  # the same keeper and server
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())
    done = wait_until(
        lambda: (t := host.legacy("tasks/get", {"taskId": tid}).json()["result"])["status"] != "working" and t,
        30,
        "the task to end",
    )
    assert done["status"] == "completed", done.get("statusMessage")
    assert reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]["content"][0]["text"] == "slept 3"
    # The session was carried on, not opened again: one initialize in the server's whole life.
    inits = [e for e in read_jsonl(tmp_path / "fixture.log.jsonl") if e.get("msg", {}).get("method") == "initialize"]
    assert len(inits) <= 1
    d.stop()
    wait_until(lambda: not any(_alive(p) for p in kept), 10, "keeper and server gone after a plain stop")


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_calls_that_finish_while_no_daemon_is_connected_are_collected_by_the_next(
    start_daemon: Any, tmp_path: Path, raw_host: Any, era: str
) -> None:
    """The replies wait in the keeper and come first on the next connection: the next daemon must
    know they are its predecessor's before it reads them (the welcome names them), or it drops them
    and the tasks that wait for them fail with "no record of request"."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"taskAfterMs": 50}})
    host = raw_host(d.url)
    tids = []
    if era == "legacy":
        host.initialize()
        tids = [_legacy_task(host, 0.5) for _ in range(5)]
    else:
        for _ in range(5):
            args = {"name": "fx__slow", "arguments": {"seconds": 0.5, "steps": 1}}
            tids.append(host.modern("tools/call", args, meta=EXT).json()["result"]["taskId"])
    wait_until(lambda: _slow_arrived(tmp_path, 5), 10, "the calls upstream")
    d.stop(signal.SIGKILL)
    log = tmp_path / "fixture.log.jsonl"
    wait_until(lambda: sum(e.get("event") == "finished" for e in read_jsonl(log)) >= 5, 10, "the calls to finish")
    d.start(port=d.port)
    for tid in tids:
        if era == "legacy":
            wait_until(
                lambda tid=tid: host.legacy("tasks/get", {"taskId": tid}).json()["result"]["status"] != "working", 10
            )
            done = host.legacy("tasks/get", {"taskId": tid}).json()["result"]
            assert done["status"] == "completed", done.get("statusMessage")
            assert reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]["content"][0]["text"] == "slept 0.5"
        else:

            def got(tid: str = tid) -> Any:
                r = host.modern("tasks/get", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()["result"]
                return r["status"] != "working" and r

            done = wait_until(got, 10, "the task to end")
            assert done["status"] == "completed", done.get("statusMessage")
            assert done["result"]["content"][0]["text"] == "slept 0.5"


def test_a_server_that_dies_while_no_daemon_is_connected_fails_its_calls_by_its_exit(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    tid = _legacy_task(host, 30)
    wait_until(lambda: _slow_arrived(tmp_path), 10, "the call upstream")
    record = json.loads(next((d.state_dir / "keepers").glob("*.json")).read_text())
    d.stop(signal.SIGKILL)
    os.killpg(record["server_pid"], signal.SIGKILL)
    wait_until(lambda: not _alive(record["keeper_pid"]), 10, "the keeper to end with its server")
    d.start(port=d.port)
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())
    done = wait_until(
        lambda: (t := host.legacy("tasks/get", {"taskId": tid}).json()["result"])["status"] != "working" and t,
        30,
        "the task to end",
    )
    assert done["status"] == "failed"
    assert "exited with code -9 while the mcpx daemon was down" in done["statusMessage"]
    assert d.left_keepers() and record["keeper_pid"] not in d.left_keepers()  # a new keeper for the new server


def test_a_changed_command_replaces_the_keeper(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    old = d.left_keepers()
    d.stop(signal.SIGKILL)
    config = json.loads(d.config_path.read_text())
    config["mcpServers"]["fx"]["env"] = {**config["mcpServers"]["fx"].get("env", {}), "MCPX_TEST_CHANGED": "1"}
    d.config_path.write_text(json.dumps(config))
    d.start(port=d.port)
    new = d.left_keepers()
    assert len(new) == 2 and not set(new) & set(old)
    wait_until(lambda: not any(_alive(p) for p in old), 10, "the old keeper and server gone")


def test_after_a_kill_9_status_names_the_keepers_left_and_stop_ends_them(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    [record] = [json.loads(p.read_text()) for p in (d.state_dir / "keepers").glob("*.json")]
    d.stop(signal.SIGKILL)
    status = _mcpx(d, "status")
    assert status.returncode == 3, status  # not running, as before
    assert f"no daemon running for {d.state_dir}" in status.stdout
    assert f"fx (keeper pid {record['keeper_pid']}, server pid {record['server_pid']})" in status.stdout, status
    assert "`mcpx stop` stops them" in status.stdout
    as_json = _mcpx(d, "status", "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["leftKeepers"] == [
        {"server": "fx", "keeperPid": record["keeper_pid"], "serverPid": record["server_pid"]}
    ]
    assert "stopped 1 upstream keeper(s)" in _mcpx(d, "stop").stdout
    assert not d.left_keepers()


def test_a_server_whose_line_never_ends_is_stopped_and_its_call_fails(start_daemon: Any, tmp_path: Path) -> None:
    """Past the keeper's line bound (64 MiB) a server is stopped, not waited on: its call fails
    with an error, and the daemon serves on (the keeper used to wait for the server to exit on its
    own, and a server that then sleeps held the call for ever)."""
    endless = {"command": sys.executable, "args": [str(Path(__file__).parent / "fixtures" / "endless_line_server.py")]}
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path), "big": endless}})
    with RawHost(d.url) as host:
        host.initialize()
        reply = reply_of(host.legacy("tools/call", {"name": "big__spew", "arguments": {}}))  # (the client waits 30 s)
        assert "error" in reply or reply.get("result", {}).get("isError") is True, reply
        echo = reply_of(host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "still here"}}))
        assert echo["result"]["content"][0]["text"] == "still here"
