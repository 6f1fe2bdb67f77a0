"""A full disk under the daemon's state folder: requests that need a write fail cleanly (a JSON-RPC
error, no handle, no 5xx), reads go on, nothing already acknowledged is lost, and when space
returns the daemon carries on by itself: the outcome of a task that ended while the disk was full
is written once it can be, and new tasks work again.

The state folder is a small tmpfs of its own (the tests run as root, as CI does); a ballast file
fills it and is deleted to give the space back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import SQLITE, Api, Daemon, RawHost, reply_of, sqlite_only, stdio_server, wait_until

pytestmark = pytest.mark.timeout(180)
TMPFS_MB = 24
BIG = "x" * 200_000  # each result fills rows and WAL pages fast, so the disk runs out quickly


@contextlib.contextmanager
def small_disk(path: Path) -> Iterator[Path]:
    path.mkdir(mode=0o700)
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (these tests run as root, as CI does): {out.stderr}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path) -> Path:
    """Write a ballast file until the disk says it is full."""
    ballast = folder / "ballast"
    chunk = b"\0" * (256 * 1024)
    with open(ballast, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:
            while True:  # the last few blocks too
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return ballast


def _legacy_task(host: RawHost, name: str, args: dict[str, Any]) -> dict[str, Any]:
    frame: dict[str, Any] = host.legacy("tools/call", {"name": name, "arguments": args, "task": {"ttl": 600000}}).json()
    return frame


@sqlite_only  # the disk that fills is the SQLite file's
def test_a_full_disk_fails_writes_cleanly_loses_nothing_acknowledged_and_recovers(
    start_daemon: Any, tmp_path: Path
) -> None:
    with small_disk(tmp_path / "disk-state") as disk:
        d = Daemon(tmp_path, {"mcpServers": {"fx": stdio_server(tmp_path)}}, name="disk", store=SQLITE)
        d.state_dir = disk  # the daemon's whole state folder is the small disk
        d.start()
        try:
            _run(d)
        finally:
            d.stop()
            d.kill_keepers()
            d.check_wire()


def _run(d: Daemon) -> None:
    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()
        first = _legacy_task(host, "fx__echo", {"text": "before"})["result"]["task"]["taskId"]
        wait_until(lambda: host.legacy("tasks/get", {"taskId": first}).json()["result"]["status"] == "completed")
        running = _legacy_task(host, "fx__slow", {"seconds": 4})["result"]["task"]["taskId"]
        ballast = _fill(d.state_dir)

        # Take tasks until the store refuses one: every handle given out before that must survive.
        accepted, refused = [], None
        for _ in range(400):
            frame = _legacy_task(host, "fx__echo", {"text": BIG})
            if "error" in frame:
                refused = frame
                break
            accepted.append(frame["result"]["task"]["taskId"])
        assert refused is not None, "the store never ran out of space"
        assert refused["error"]["code"] == -32603 and "could not create the task" in refused["error"]["message"]
        # Reads go on, and so does a call that needs no write.
        assert host.legacy("tasks/get", {"taskId": first}).json()["result"]["status"] == "completed"
        plain = reply_of(host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "still here"}}))
        assert plain["result"]["content"][0]["text"] == "still here"
        assert api.get("/v1/status").status_code == 200
        assert api.get(f"/v1/tasks/{first}").status_code == 200
        # The slow task ends upstream while nothing can be written: its outcome waits for space.
        log = d.stderr
        wait_until(lambda: "could not record its outcome" in log(), 20, "the outcome refused by the full disk")
        assert host.legacy("tasks/get", {"taskId": running}).json()["result"]["status"] == "working"

        ballast.unlink()  # space returns

        done = wait_until(
            lambda: (t := host.legacy("tasks/get", {"taskId": running}).json()["result"])["status"] != "working" and t,
            30,
            "the held outcome to land",
        )
        assert done["status"] == "completed"
        assert reply_of(host.legacy("tasks/result", {"taskId": running}))["result"]["content"][0]["text"] == "slept 4"
        again = _legacy_task(host, "fx__echo", {"text": "after"})
        assert "result" in again, again
        for tid in [first, *accepted]:
            assert "result" in host.legacy("tasks/get", {"taskId": tid}).json(), f"acknowledged task {tid} lost"
        events = []
        since = 0
        while page := api.get("/v1/events", params={"since": since, "limit": 5000}).json()["events"]:
            events += page
            since = page[-1]["seq"]
        seqs = [e["seq"] for e in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a gap in the event log"
        assert d.proc is not None and d.proc.poll() is None
    print(f"\n{len(accepted)} tasks accepted after the disk filled, then: {refused['error']['message']}")
    os.sync()
