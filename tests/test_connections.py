"""The connection registry as operators see it through /v1: sessions, shims and stateless hosts,
when each opens and closes, and what survives a daemon restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import ROOT, Api, RawHost, SseStream, stdio_server, wait_until


def _connections(api: Api) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in api.get("/v1/connections").json()["connections"]}


def test_a_deleted_session_shows_closed_and_keeps_its_tasks(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()
        tid = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "a"}, "task": {}}).json()
        tid = tid["result"]["task"]["taskId"]
        [conn] = _connections(api).values()
        assert conn["kind"] == "session" and conn["revision"] == "2025-11-25" and conn["closedMs"] is None
        assert conn["clientInfo"]["name"] == "pytest-raw"
        # Let the task end first, so the close is the connection's last event (not a late task.status).
        wait_until(lambda: api.get(f"/v1/tasks/{tid}").json()["status"] == "completed", 10, "task done")
        assert host.client.delete(d.url, headers=host._legacy_headers()).status_code == 200
        closed = _connections(api)[conn["id"]]
        assert closed["closedMs"] and closed["closeReason"] == "session deleted by the host"
        listed = api.get("/v1/tasks", params={"connection": conn["id"]}).json()["tasks"]
        assert [t["id"] for t in listed] == [tid]  # still listed under who made it
        kinds = [e["kind"] for e in api.get("/v1/events").json()["events"] if e.get("connectionId") == conn["id"]]
        assert kinds[0] == "connection.opened" and kinds[-1] == "connection.closed"


def test_a_stateless_host_closes_when_idle_and_comes_back_as_a_new_record(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "connections": {"idleCloseS": 0.5}})
    with RawHost(d.url) as host, Api(d) as api:
        assert host.modern("tools/list").status_code == 200
        [first] = _connections(api).values()
        assert first["kind"] == "stateless" and first["clientInfo"] == {"name": "pytest", "version": "0"}
        wait_until(lambda: _connections(api)[first["id"]]["closedMs"], 10, "idle close")
        assert _connections(api)[first["id"]]["closeReason"] == "idle for 0.5 s"
        assert host.modern("tools/list").status_code == 200
        fresh = [c for c in _connections(api).values() if c["closedMs"] is None]
        assert len(fresh) == 1 and fresh[0]["id"] != first["id"]


def test_a_quiet_session_closes_when_idle_unless_its_stream_is_open_and_comes_back_with_its_next_request(
    start_daemon: Any, tmp_path: Path
) -> None:
    """An abandoned session (no DELETE) must not hold memory forever: past idleCloseS without a
    request, an open GET stream or a call in flight it is closed and dropped from memory; it stays
    stored, so its host's next request opens the same record again."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "connections": {"idleCloseS": 0.5}})
    with RawHost(d.url) as quiet, RawHost(d.url) as streaming, RawHost(d.url) as witness, Api(d) as api:
        quiet.initialize()
        [quiet_id] = _connections(api)
        streaming.initialize()
        [streaming_id] = set(_connections(api)) - {quiet_id}
        stream = SseStream("GET", d.url, {"Accept": "text/event-stream", **streaming._legacy_headers()})
        try:
            # A witness: a session last seen after the stream opened, so after anything the streaming
            # session sent. The idle sweep that closes it finds the streaming session quiet for longer
            # than idleCloseS too: from then on only its open stream can be keeping it open.
            witness.initialize()
            [witness_id] = set(_connections(api)) - {quiet_id, streaming_id}
            ids = {quiet_id, streaming_id, witness_id}
            wait_until(lambda: _connections(api)[witness_id]["closedMs"], 10, "the witness's idle close")
            conns = _connections(api)
            assert set(conns) == ids, conns
            assert conns[streaming_id]["closedMs"] is None, conns  # open: its stream is
            for closed in (conns[quiet_id], conns[witness_id]):
                assert closed["closedMs"] and closed["closeReason"] == "idle for 0.5 s", conns
            reply = quiet.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "back"}}).json()
            assert reply["result"]["content"][0]["text"] == "back"
            again = _connections(api)[quiet_id]
            assert again["closedMs"] is None and set(_connections(api)) == ids  # the same record, open again
        finally:
            stream.close()


def test_after_a_restart_sessions_stay_open_and_shims_are_closed(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(d.state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        with RawHost(d.url) as host, Api(d) as api:
            host.initialize()
            wait_until(lambda: len(_connections(api)) == 2, 20, "a session and a shim")
            before = _connections(api)
        d.stop(signal.SIGKILL)
        d.start(port=d.port)
        with Api(d) as api:
            after = _connections(api)
        kinds = {c["kind"]: c for c in after.values()}
        assert set(after) == set(before)
        assert kinds["session"]["closedMs"] is None  # a session survives a restart
        assert kinds["shim"]["closeReason"] == "the mcpx daemon restarted"
        with RawHost(d.url) as again:
            again.session_id, again.revision = host.session_id, host.revision
            assert "result" in again.legacy("tools/list").json()
        with Api(d) as api:
            assert len(_connections(api)) == 2  # the session's old record, not a new one
    finally:
        shim.kill()
        shim.wait()
        assert shim.stdin is not None
        shim.stdin.close()
