"""What becomes of a host's plain call (no task) when the daemon is killed under it (#39 item 7;
README "What survives a daemon restart"), one test per row of that table:

- a `mcpx serve` host, a kept stdio server: the shim sends the request again to the next daemon,
  marked as resumed; the daemon finds the call its predecessor made (the keeper remembers which
  host request each call was for) and collects the reply: the host gets its result, the server saw
  the call once. If the dying daemon never sent it, it is made now, once.
- a `mcpx serve` host, an HTTP server: nothing can tell whether the call ran; the host gets an
  error saying so, and the call is not made again.
- an HTTP host: its response connection died with the daemon; its client sees the connection
  close, and nothing is sent again.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import ShimHost, read_jsonl, stdio_server, wait_until

from mcpx.upstream.stdio.send_fault import ENV

pytestmark = [
    pytest.mark.sqlite_only("the shim and the keeper carry a host's call: no row holds it"),
    pytest.mark.heavy,
]


def _slow_calls(log: Path) -> int:
    return sum(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(log))


def _call_aside(shim: ShimHost, seconds: float) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def call() -> None:
        params = {"name": "fx__slow", "arguments": {"seconds": seconds, "steps": 1}}
        box["frame"] = shim.request("tools/call", params, timeout=40)

    box["thread"] = threading.Thread(target=call, daemon=True)
    box["thread"].start()
    return box


def test_a_serve_hosts_plain_call_on_a_kept_server_gets_its_result_after_a_sigkill(
    start_daemon: Any, tmp_path: Path
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = ShimHost(d)
    try:
        box = _call_aside(shim, 1.5)
        log = tmp_path / "fixture.log.jsonl"
        wait_until(lambda: _slow_calls(log) == 1, 10, "the call upstream")
        d.stop(signal.SIGKILL)
        d.start(port=d.port)
        box["thread"].join(40)
        frame = box["frame"]
        assert frame["result"]["content"][0]["text"] == "slept 1.5", frame
        assert _slow_calls(log) == 1  # collected, not made again
    finally:
        shim.close()


def test_a_serve_hosts_plain_call_the_dying_daemon_never_sent_is_made_once_by_the_next(
    start_daemon: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv(ENV, str(faults))
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = ShimHost(d)
    try:
        (faults / "die").touch()
        box = _call_aside(shim, 0.2)
        wait_until(lambda: d.proc is not None and d.proc.poll() is not None, 10, "the daemon to die before sending")
        (faults / "die").unlink()
        log = tmp_path / "fixture.log.jsonl"
        assert _slow_calls(log) == 0
        d.start(port=d.port)
        box["thread"].join(40)
        assert box["frame"]["result"]["content"][0]["text"] == "slept 0.2", box["frame"]
        assert _slow_calls(log) == 1
    finally:
        shim.close()


def test_a_serve_hosts_plain_call_on_an_http_server_is_refused_not_repeated_after_a_sigkill(
    start_daemon: Any, tmp_path: Path, fixture_http: Any
) -> None:
    up = fixture_http()
    d = start_daemon({"mcpServers": {"fx": {"url": up.url}}})
    shim = ShimHost(d)
    try:
        box = _call_aside(shim, 1.5)
        log = up.log
        wait_until(lambda: _slow_calls(log) == 1, 10, "the call upstream")
        d.stop(signal.SIGKILL)
        d.start(port=d.port)
        box["thread"].join(40)
        error = box["frame"]["error"]
        assert "restarted" in error["message"] and "not made again" in error["message"], error
        assert _slow_calls(log) == 1
    finally:
        shim.close()


def test_an_http_hosts_plain_call_loses_its_connection_with_the_daemon(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    host = raw_host(d.url)
    host.initialize()
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 1.5, "steps": 1}})
        except httpx.HTTPError as exc:
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    log = tmp_path / "fixture.log.jsonl"
    wait_until(lambda: _slow_calls(log) == 1, 10, "the call upstream")
    d.stop(signal.SIGKILL)
    t.join(10)
    assert isinstance(box.get("error"), httpx.HTTPError), box
    d.start(port=d.port)
    assert _slow_calls(log) == 1  # nothing sent it again


def test_a_serve_hosts_task_call_whose_handle_never_came_is_refused_not_made_twice(
    start_daemon: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dying daemon had made the task (its handle never reached the host): the shim's resent
    request gets an error naming tasks/list, and the task there is the only one, carried on."""
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv(ENV, str(faults))
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}})
    shim = ShimHost(d)
    try:
        (faults / "die").touch()
        box: dict[str, Any] = {}

        def call() -> None:
            params = {"name": "fx__slow", "arguments": {"seconds": 0.2, "steps": 1}, "task": {"ttl": 600000}}
            box["frame"] = shim.request("tools/call", params, timeout=40)

        t = threading.Thread(target=call, daemon=True)
        t.start()
        wait_until(lambda: d.proc is not None and d.proc.poll() is not None, 10, "the daemon to die before sending")
        (faults / "die").unlink()
        d.start(port=d.port)
        t.join(40)
        error = box["frame"]["error"]
        assert "handle" in error["message"] and "tasks/list" in error["message"], error
        [task] = shim.request("tasks/list", {})["result"]["tasks"]
        done = wait_until(
            lambda: (r := shim.request("tasks/get", {"taskId": task["taskId"]})["result"])["status"] != "working" and r,
            15,
            "the task to end",
        )
        assert done["status"] == "completed", done
    finally:
        shim.close()
    assert _slow_calls(tmp_path / "fixture.log.jsonl") == 1  # the task's call, sent again once: never twice
