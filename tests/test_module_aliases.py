"""The old `python -m` names still run after the house move: configs written by earlier versions
name `mcpx.demo_upstream`, and keepers started by an earlier daemon run as `mcpx.upstream.keeper`
(a new daemon must recognise them to adopt them)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mcpx.upstream.stdio.keeper_wire import is_keeper

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def test_the_old_demo_upstream_name_still_serves_mcp() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpx.demo_upstream"],
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "mcpx-demo"


@pytest.mark.parametrize("module", ["mcpx.upstream.keeper", "mcpx.upstream.stdio.keeper"])
def test_a_keeper_under_either_name_is_recognised_as_a_keeper(module: str) -> None:
    # A keeper first reads its spec from stdin: held open, the process waits there, alive.
    proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not is_keeper(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)  # the interpreter's argv shows in /proc once it is exec'd
        assert is_keeper(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stdin is not None
        proc.stdin.close()
    assert not is_keeper(proc.pid)
