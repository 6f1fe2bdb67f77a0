"""What the package layout promises to processes: the old `python -m` names still run after the house
move (configs written by earlier versions name `mcpx.demo_upstream`; keepers started by an earlier
daemon run as `mcpx.upstream.keeper`, and a new daemon must recognise them to adopt them), and the
processes mcpx spawns run this checkout's mcpx."""

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


def test_the_processes_mcpx_spawns_run_this_checkouts_mcpx() -> None:
    """Keepers and the console demo's processes get the folder holding this mcpx package first on
    PYTHONPATH (a package move once handed them mcpx/ itself, so they ran whatever mcpx was
    installed instead)."""
    import os
    from pathlib import Path

    from mcpx.demo.console_world import _env
    from mcpx.upstream.stdio.keeper_transport import PACKAGE_ROOT

    here = Path(__file__).resolve().parents[1]
    assert Path(PACKAGE_ROOT) == here
    assert Path(_env("test")["PYTHONPATH"].split(os.pathsep)[0]) == here
