"""The daemon process: info file, token, one daemon per state folder, status, clean signal shutdown."""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import RawHost, sqlite_only, stdio_server, wait_until


def _fixture_pids(log: Path) -> list[int]:
    """Processes whose command line names this test's fixture log (so other tests' are ignored)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(log).encode() in cmd and b"upstream_server.py" in cmd:
                pids.append(int(proc.name))
    return pids


def test_info_file_and_private_token_are_written(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {}})
    info = json.loads((d.state_dir / "daemon.json").read_text())
    assert (
        info["pid"] == d.proc.pid
        and info["port"] == d.port
        and info["config"] == str(d.config_path)
        and info["version"]
    )
    assert stat.S_IMODE((d.state_dir / "token").stat().st_mode) == 0o600


@sqlite_only
def test_the_state_folder_and_the_database_are_private_even_under_a_loose_umask(
    start_daemon: Any, tmp_path: Path
) -> None:
    """Results and answers live in mcpx.db (and its WAL): only the owner may read them, also when
    the folder already existed world-readable and the umask is 022."""
    folder = tmp_path / "daemon0-state"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    old = os.umask(0o022)
    try:
        d = start_daemon({"mcpServers": {}})
    finally:
        os.umask(old)
    assert d.state_dir == folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("mcpx.db", "mcpx.db-wal", "mcpx.db-shm"):
        path = folder / name
        assert path.exists(), name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, (name, oct(path.stat().st_mode))


def test_second_daemon_on_the_same_state_folder_is_refused(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {}})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpx",
            "daemon",
            "--config",
            str(d.config_path),
            "--state-dir",
            str(d.state_dir),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert "already running" in proc.stderr and str(d.proc.pid) in proc.stderr
    assert d.proc.poll() is None


def test_status_reports_the_running_daemon_and_its_upstreams(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    out = subprocess.run(
        [sys.executable, "-m", "mcpx", "status", "--state-dir", str(d.state_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["running"] and status["pid"] == d.proc.pid and status["url"] == d.url
    assert status["upstreams"][0]["name"] == "fx" and status["upstreams"][0]["state"] == "ready"
    text = subprocess.run(
        [sys.executable, "-m", "mcpx", "status", "--state-dir", str(d.state_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "fx" in text.stdout and "ready" in text.stdout


def test_status_without_a_daemon_says_so(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcpx", "status", "--state-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 3 and "no daemon running" in out.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_daemon_and_its_upstream_children(start_daemon: Any, tmp_path: Path, sig: int) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    log = tmp_path / "fixture.log.jsonl"
    assert _fixture_pids(log), "the upstream child should be running"
    assert d.stop(sig) == 0
    assert not (d.state_dir / "daemon.json").exists()
    wait_until(lambda: not _fixture_pids(log), 10, "upstream child to exit")
    assert "Traceback" not in d.stderr()


def test_a_clean_stop_after_a_task_logs_no_failed_expiry_sweep(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    """On SIGTERM the task store closes before the upstreams stop; an expiry sweep that wakes in
    between sees a shutdown and must not log a failure."""
    fx = stdio_server(tmp_path)
    # It lingers after its stdin closes, until the SIGTERM 2 s later: the daemon stays in "stopping
    # upstreams" past the next expiry sweep (every 1 s), which then finds the store closed.
    lingering = {"command": "/bin/sh", "args": ["-c", shlex.join([fx["command"], *fx["args"]]) + "; sleep 30"]}
    d = start_daemon({"mcpServers": {"fx": lingering}})
    assert d.status()["phase"] == "serving"
    host = raw_host(d.url)
    host.initialize()
    frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}, "task": {"ttl": 60_000}})
    task_id = frame.json()["result"]["task"]["taskId"]
    wait_until(
        lambda: host.legacy("tasks/get", {"taskId": task_id}).json()["result"]["status"] == "completed",
        what="the task to complete",
    )
    assert d.stop() == 0
    failed = [line for line in d.stderr().splitlines() if "WARNING" in line and "sweep failed" in line]
    assert failed == [], d.stderr()


def test_state_folder_can_be_reused_after_a_clean_stop(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {}}, name="same")
    token = d.token
    d.stop()
    d.start()
    assert d.token == token and d.proc.poll() is None


def test_demo_runs_end_to_end() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcpx", "demo", "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    assert "hello from a modern host" in out.stdout and "hello from a legacy host" in out.stdout
    assert out.stdout.count("liftoff") == 2
    # The demo brings its own upstream: no "no config file found ... serving with no upstreams", no
    # keeper "went away" at its clean stop; at its default level (warning) a clean run says nothing.
    assert out.stderr == "", out.stderr


def test_a_stop_answers_running_calls_with_an_error_not_a_bare_http_500(start_daemon: Any, tmp_path: Path) -> None:
    """SIGTERM while plain calls run (one each era, 30 s each): every host gets a JSON-RPC error
    naming the stop at once, not the bare `Internal Server Error` of uvicorn's grace timeout."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    replies: dict[str, Any] = {}

    def call(era: str) -> None:
        with RawHost(d.url) as h:
            args = {"name": "fx__slow", "arguments": {"seconds": 30}}
            if era == "legacy":
                h.initialize()
                resp = h.legacy("tools/call", args)
            else:
                resp = h.modern("tools/call", args)
            replies[era] = (resp.status_code, resp.text, time.monotonic())

    threads = [threading.Thread(target=call, args=(era,)) for era in ("legacy", "modern")]
    for t in threads:
        t.start()
    log = tmp_path / "fixture.log.jsonl"
    wait_until(lambda: sum('"slow"' in line for line in log.read_text().splitlines()) >= 2, 10, "both calls upstream")
    stopped_at = time.monotonic()
    assert d.stop() == 0
    for t in threads:
        t.join(10)
    assert set(replies) == {"legacy", "modern"}, replies
    for era, (status, text, at) in replies.items():
        frames = sse_frames_or_json(text)
        [reply] = [f for f in frames if "id" in f and "method" not in f]
        assert reply["error"]["code"] == -32603 and "daemon is stopping" in reply["error"]["message"], (era, text)
        assert status in (200, 500) and at - stopped_at < 2.5, (era, status, at - stopped_at)
    assert "Traceback" not in d.stderr()


def sse_frames_or_json(text: str) -> list[dict[str, Any]]:
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
