"""Reloading the config on a real daemon: the file changing, SIGHUP and `mcpx reload` each read it
again. Added servers reach connected hosts (`notifications/tools/list_changed`) and the feed; a server
removed mid-call finishes that call, then its process stops; a broken edit is refused, said in
/v1/status and `mcpx status`, and the running config keeps serving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from harness import (
    ROOT,
    Api,
    Daemon,
    FeedClient,
    RawHost,
    SseStream,
    read_jsonl,
    reply_of,
    sqlite_only,
    stdio_server,
    wait_until,
)

from mcpx.upstream.stdio import keeper_wire

pytestmark = sqlite_only  # nothing here touches the store beyond the event log


def _write(d: Daemon, config: dict[str, Any]) -> None:
    """Rewrite the daemon's config file as an editor would: a new file renamed over the old one."""
    spare = d.config_path.with_suffix(".tmp")
    spare.write_text(json.dumps(config))
    spare.replace(d.config_path)


def _tools(host: RawHost) -> list[str]:
    return [t["name"] for t in reply_of(host.legacy("tools/list"))["result"]["tools"]]


def _mcpx(d: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "mcpx", *args, "--state-dir", str(d.state_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)


def _reloads(feed: FeedClient) -> list[dict[str, Any]]:
    return [m for m in feed.messages if m.get("type") == "event" and m["kind"].startswith("config.")]


def test_a_server_added_to_the_file_reaches_a_connected_host_and_the_feed(start_daemon: Any, tmp_path: Path) -> None:
    config = {"mcpServers": {"fx": stdio_server(tmp_path)}}
    d = start_daemon(config)
    feed = FeedClient(d)
    feed.snapshot()
    host = RawHost(d.url)
    host.initialize()
    stream = SseStream("GET", d.url, {"Accept": "text/event-stream", **host._legacy_headers()})
    assert "fy__echo" not in _tools(host)

    _write(d, {"mcpServers": {**config["mcpServers"], "fy": stdio_server(tmp_path, name="fy")}})

    wait_until(
        lambda: any(f.get("method") == "notifications/tools/list_changed" for f in stream.frames), 10, "list_changed"
    )
    assert "fy__echo" in _tools(host) and "fx__echo" in _tools(host)
    echoed = reply_of(host.legacy("tools/call", {"name": "fy__echo", "arguments": {"text": "new"}}))
    assert echoed["result"]["content"][0]["text"] == "new"
    [event] = _reloads(feed)
    assert event["kind"] == "config.reloaded" and event["by"] == "mcpx"
    assert event["data"] == {
        "trigger": "file",
        "path": str(d.config_path),
        "added": ["fy"],
        "removed": [],
        "changed": [],
        "needsRestart": [],
    }
    last = d.status()["lastReload"]
    assert (last["result"], last["trigger"], last["added"]) == ("applied", "file", ["fy"])


def test_a_server_removed_mid_call_finishes_the_call_then_its_process_stops(start_daemon: Any, tmp_path: Path) -> None:
    servers = {"fx": stdio_server(tmp_path), "fy": stdio_server(tmp_path, name="fy")}
    d = start_daemon({"mcpServers": servers})
    [record] = [r for r in keeper_wire.all_records(d.state_dir / keeper_wire.FOLDER) if r.server == "fy"]
    host = RawHost(d.url)
    host.initialize()
    box: dict[str, Any] = {}

    def slow() -> None:
        with RawHost(d.url) as h:
            box["reply"] = reply_of(h.modern("tools/call", {"name": "fy__slow", "arguments": {"seconds": 1.5}}))

    caller = threading.Thread(target=slow)
    caller.start()
    wait_until(
        lambda: any(e.get("msg", {}).get("method") == "tools/call" for e in read_jsonl(tmp_path / "fy.log.jsonl")),
        10,
        "the slow call upstream",
    )
    # SIGHUP, as `kill -HUP` would: the config is read again, without fy.
    spare = d.config_path.with_suffix(".tmp")
    spare.write_text(json.dumps({"mcpServers": {"fx": servers["fx"]}}))
    os.replace(spare, d.config_path)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)

    wait_until(lambda: d.status()["lastReload"], 10, "the reload")
    assert not any(name.startswith("fy__") for name in _tools(host)), "a removed server is unlisted at once"
    assert [u["name"] for u in d.status()["upstreams"]] == ["fx"]
    assert keeper_wire.alive(record.server_pid), "it drains first: its call is still in flight"
    caller.join(10)
    assert box["reply"]["result"]["content"][0]["text"] == "slept 1.5", box
    wait_until(lambda: not keeper_wire.alive(record.server_pid), 10, "fy's process to stop")
    last = d.status()["lastReload"]
    assert last["removed"] == ["fy"] and last["trigger"] in ("signal", "file")  # (the watcher may see it first)
    echoed = reply_of(host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "still"}}))
    assert echoed["result"]["content"][0]["text"] == "still", "an unchanged server is untouched"


@pytest.mark.stress  # three cold `mcpx` CLI processes: ~6 s
def test_a_broken_edit_is_refused_and_the_running_config_keeps_serving(start_daemon: Any, tmp_path: Path) -> None:
    servers = {"fx": stdio_server(tmp_path)}
    d = start_daemon({"mcpServers": servers})
    feed = FeedClient(d, kinds=["config.reloaded", "config.refused"])
    d.config_path.write_text('{"mcpServers": {"fx": ')  # half an edit

    refused = _mcpx(d, "reload")
    assert refused.returncode == 1, refused.stderr
    assert refused.stdout.startswith("refused, still serving the config it had:") and "not valid JSON" in refused.stdout
    last = d.status()["lastReload"]
    assert last["result"] == "refused" and "not valid JSON" in last["error"]
    status = _mcpx(d, "status")
    assert "last config reload" in status.stdout and "refused" in status.stdout and "not valid JSON" in status.stdout
    host = RawHost(d.url)
    echoed = host.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "old"}}).json()
    assert echoed["result"]["content"][0]["text"] == "old"
    assert "refused" in d.stderr() and "not valid JSON" in d.stderr()

    good = {"mcpServers": {**servers, "fy": stdio_server(tmp_path, name="fy")}, "daemon": {"port": 1}}
    d.config_path.write_text(json.dumps(good))
    applied = _mcpx(d, "reload", "--by", "olga")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (
        applied.stdout.startswith("applied") and "needs a restart (ignored until then): daemon.port" in applied.stdout
    )
    wait_until(lambda: "fy__echo" in [t["name"] for t in host.modern("tools/list").json()["result"]["tools"]], 10)
    by_olga = wait_until(lambda: [e for e in _reloads(feed) if e.get("by") == "operator:olga"], 5, "olga's reload")
    assert by_olga[0]["kind"] == "config.reloaded" and by_olga[0]["data"]["needsRestart"] == ["daemon.port"]
    kinds = [e["kind"] for e in _reloads(feed)]
    assert kinds[0] == "config.refused" and "config.reloaded" in kinds
    with Api(d) as api:
        assert api.get("/v1/status").json()["lastReload"]["result"] == "applied"
