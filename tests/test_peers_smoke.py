"""Smoke tests of the peer drivers themselves, WITHOUT mcpx in between.

The official SDK 2.3 host (tests/peers/sdk2_host.py) talks straight to the SDK 2.3
upstream (tests/peers/sdk2_upstream.py), in each client mode, over stdio and over
Streamable HTTP. Both run as real processes from the SDK 2.3 peer venv, which
tests/peers/venvs.py builds on first use (about a minute) and caches.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).resolve().parent
if str(_TESTS) not in sys.path:  # also under --import-mode=importlib
    sys.path.insert(0, str(_TESTS))

from harness import wait_until  # noqa: E402 - importable only once the sys.path line above has run
from peers.run_host import HostProcess, json_lines, run_host  # noqa: E402 - as above
from peers.venvs import peer_python  # noqa: E402 - as above

pytestmark = pytest.mark.peers  # slow tier (tests/conftest.py)

PEERS = _TESTS / "peers"
UPSTREAM = PEERS / "sdk2_upstream.py"

MODES = ["legacy", "auto", "2026-07-28"]
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}

SCRIPT = [
    {"op": "list_tools"},
    {"op": "call", "name": "echo", "args": {"text": "hi"}},
    {"op": "call", "name": "slow", "args": {"seconds": 0.3, "steps": 3}, "progress": True},
    {"op": "call", "name": "fail"},
    {"op": "call", "name": "rpc_error", "args": {"code": -32042, "message": "boom"}},
    {"op": "call_cancel", "name": "slow", "args": {"seconds": 10, "steps": 10}, "after": 0.4},
    {"op": "call", "name": "echo", "args": {"text": "after cancel"}},
]


@pytest.fixture(scope="module")
def sdk2_python() -> Path:
    return peer_python("mcp-2.3")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_accepting(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 20.0) -> None:
    def accepting() -> bool:
        assert proc.poll() is None, f"upstream exited with {proc.returncode}:\n{log.read_text()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_until(accepting, timeout, f"the upstream to accept connections on port {port} (its output: {log})")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def http_upstream(sdk2_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One SDK 2.3 upstream over HTTP, shared by the modes: it serves both eras on one /mcp."""
    tmp = tmp_path_factory.mktemp("sdk2-http")
    events, log = tmp / "events.jsonl", tmp / "upstream.log"
    port = _free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(sdk2_python), str(UPSTREAM), "http", "--port", str(port), "--events", str(events)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_accepting(port, proc, log)
        yield f"http://127.0.0.1:{port}/mcp", events
    finally:
        _stop(proc)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _wait_event(path: Path, name: str, count: int, timeout: float = 5.0) -> None:
    wait_until(lambda: sum(e["event"] == name for e in _events(path)) >= count, timeout, f"{count}x {name!r} in {path}")


def _text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")


def _check(lines: list[dict[str, Any]], mode: str) -> None:
    connect, tools, echo, slow, fail, rpc_error, cancel, echo_after = lines

    assert connect["op"] == "connect" and connect["ok"], connect
    assert connect["protocolVersion"] == EXPECTED_VERSION[mode], connect
    assert connect["era"] == ("legacy" if mode == "legacy" else "modern"), connect

    assert tools["ok"], tools
    assert {"echo", "slow", "fail", "rpc_error"} <= {t["name"] for t in tools["result"]["tools"]}

    assert echo["ok"] and _text(echo["result"]) == "hi", echo
    assert not echo["result"].get("isError"), echo

    assert slow["ok"] and _text(slow["result"]) == "done after 3 steps", slow
    assert [p["progress"] for p in slow["progress"]] == [1.0, 2.0, 3.0], slow
    assert all(p.get("total") == 3.0 for p in slow["progress"]), slow

    assert fail["ok"] and fail["result"]["isError"] is True, fail
    assert "failed on purpose" in _text(fail["result"]), fail

    assert not rpc_error["ok"], rpc_error
    assert rpc_error["error"] == {"code": -32042, "message": "boom"}, rpc_error

    assert cancel["ok"] and cancel["cancelled"] is True, cancel
    assert "result" not in cancel and cancel["elapsed"] < 5, cancel

    assert echo_after["ok"] and _text(echo_after["result"]) == "after cancel", echo_after

    if mode == "legacy":
        assert "resultType" not in echo["result"], echo  # a 2025-11-25 result carries no 2026 fields
    else:
        assert echo["result"].get("resultType") == "complete", echo


@pytest.mark.timeout(600)  # the first run builds the peer venv
@pytest.mark.parametrize("mode", MODES)
def test_sdk2_host_to_sdk2_upstream_stdio(sdk2_python: Path, mode: str, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    target = ["--stdio", "--", str(sdk2_python), str(UPSTREAM), "stdio", "--events", str(events)]
    lines = run_host(sdk2_python, "sdk2_host.py", ["--mode", mode, *target], SCRIPT)
    _check(lines, mode)
    # The cancellation really reached the upstream: its slow handler was interrupted.
    names = [e["event"] for e in _events(events)]
    assert names.count("slow_cancelled") == 1 and names.count("slow_done") == 1, names


@pytest.mark.timeout(600)  # the first run builds the peer venv
@pytest.mark.parametrize("mode", MODES)
def test_sdk2_host_to_sdk2_upstream_http(sdk2_python: Path, http_upstream: tuple[str, Path], mode: str) -> None:
    url, events = http_upstream
    before = sum(e["event"] == "slow_cancelled" for e in _events(events))
    lines = run_host(sdk2_python, "sdk2_host.py", ["--mode", mode, "--url", url], SCRIPT)
    _check(lines, mode)
    # Legacy: a notifications/cancelled POST; 2026-07-28: the request's POST is aborted.
    _wait_event(events, "slow_cancelled", before + 1)


@pytest.mark.timeout(600)
def test_sdk2_host_reports_connect_failure(sdk2_python: Path) -> None:
    port = _free_port()  # nothing listens there
    host = HostProcess(sdk2_python, "sdk2_host.py", ["--url", f"http://127.0.0.1:{port}/mcp", "--mode", "legacy"], [])
    out, err = host.output()
    assert host.proc.returncode == 2, host.report(out, err)
    [line] = json_lines(out)
    assert line["op"] == "connect" and line["ok"] is False, line
