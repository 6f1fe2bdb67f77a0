"""The real daemon on the PostgreSQL store (store.url): tasks of both eras run end to end, and a
daemon killed and started again answers every task it handed out, from the database."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pgcluster
from harness import RawHost, postgres_only, reply_of, stdio_server, wait_until

pytestmark = postgres_only  # its daemons name their store

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def _legacy_task(host: RawHost, name: str, args: dict[str, Any]) -> str:
    frame = host.legacy("tools/call", {"name": name, "arguments": args, "task": {"ttl": 600000}}).json()
    return str(frame["result"]["task"]["taskId"])


def _modern_task(host: RawHost, name: str, args: dict[str, Any]) -> str:
    handle = host.modern("tools/call", {"name": name, "arguments": args}, meta=EXT).json()["result"]
    assert handle["resultType"] == "task"
    return str(handle["taskId"])


def _modern_get(host: RawHost, tid: str) -> dict[str, Any]:
    reply = host.modern("tasks/get", {"taskId": tid}, meta=EXT, headers={"Mcp-Name": tid}).json()
    return dict(reply["result"])


def test_tasks_of_both_eras_run_on_postgres_and_outlive_a_killed_daemon(
    start_daemon: Any, tmp_path: Path, raw_host: Any, pg_cluster: pgcluster.Cluster
) -> None:
    url = pg_cluster.database()
    config = {
        "mcpServers": {"fx": stdio_server(tmp_path)},
        "keepers": {"enabled": False},
        "tasks": {"taskAfterMs": 200},
        "store": {"url": url},
    }
    d = start_daemon(config, name="pg")
    host = raw_host(d.url)
    host.initialize()
    legacy_done = _legacy_task(host, "fx__echo", {"text": "legacy"})
    modern_done = _modern_task(host, "fx__slow", {"seconds": 0.5, "steps": 1})
    wait_until(lambda: host.legacy("tasks/get", {"taskId": legacy_done}).json()["result"]["status"] == "completed")
    wait_until(lambda: _modern_get(host, modern_done)["status"] == "completed")
    cut = _legacy_task(host, "fx__slow", {"seconds": 60, "steps": 4})
    assert host.legacy("tasks/get", {"taskId": cut}).json()["result"]["status"] == "working"

    d.stop(signal.SIGKILL)
    assert (pg_cluster.psql("SELECT count(*) FROM tasks", url.rsplit("/", 1)[1]).strip()) == "3"
    d.start(port=d.port)
    host.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, host._legacy_headers())  # same session
    assert reply_of(host.legacy("tasks/result", {"taskId": legacy_done}))["result"]["content"][0]["text"] == "legacy"
    assert _modern_get(host, modern_done)["result"]["content"][0]["text"] == "slept 0.5"
    failed = wait_until(
        lambda: (t := host.legacy("tasks/get", {"taskId": cut}).json()["result"])["status"] != "working" and t,
        what="the cut call to end",
    )
    assert failed["status"] == "failed" and "restarted" in failed["statusMessage"]
    listed = {t["taskId"] for t in host.legacy("tasks/list").json()["result"]["tasks"]}
    assert {legacy_done, cut} <= listed
