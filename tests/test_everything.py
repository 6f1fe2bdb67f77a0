"""The reference server `@modelcontextprotocol/server-everything` 2026.8.31 (TypeScript SDK) as an
upstream of mcpx, with the official SDK 1.30 client as the host.

The server is installed by `tests/peers/npm_peers.py` (`npm ci` from the lock in
tests/peers/everything/, cached under ~/.cache/mcpx-test-peers/) and runs over stdio as the
upstream `everything`. It registers some tools only after `initialize`, from the client capabilities
it was sent: mcpx's (elicitation, sampling, roots) add `get-roots-list`, `trigger-elicitation-request`,
`trigger-sampling-request` and the task-only `simulate-research-query`; URL elicitation and
task-augmented client requests, which mcpx does not declare, would add three more.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Daemon, SuiteStore
from peers.npm_peers import everything_command
from peers.run_host import run_host
from peers.venvs import peer_python

# The first run builds the SDK 1.30 venv and installs the npm package (about a minute in all).
pytestmark = [pytest.mark.timeout(600), pytest.mark.peers]  # slow tier (tests/conftest.py)

ALWAYS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
}
FOR_MCPX_CAPS = {"get-roots-list", "trigger-elicitation-request", "trigger-sampling-request", "simulate-research-query"}


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return peer_python("mcp-1.30")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore) -> Iterator[Daemon]:
    command, *args = everything_command()
    tmp = tmp_path_factory.mktemp("everything")
    d = Daemon(tmp, {"mcpServers": {"everything": {"command": command, "args": args}}}, store=suite_store)
    d.start()
    yield d
    d.stop()
    d.check_wire()


def _text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")


def test_sdk1_host_lists_everythings_tools_namespaced_and_calls_them(sdk1_python: Path, daemon: Daemon) -> None:
    connect, tools, echo, long_run = run_host(
        sdk1_python,
        "sdk1_host.py",
        ["--url", daemon.url],
        [
            {"op": "list_tools"},
            {"op": "call", "name": "everything__echo", "args": {"message": "hi there"}},
            {
                "op": "call",
                "name": "everything__trigger-long-running-operation",
                "args": {"duration": 0.3, "steps": 3},
                "progress": True,
            },
        ],
    )
    assert connect["protocolVersion"] == "2025-11-25", connect

    assert tools["ok"], tools
    listed = {t["name"]: t for t in tools["result"]["tools"]}
    assert set(listed) == {f"everything__{name}" for name in ALWAYS | FOR_MCPX_CAPS}, sorted(listed)
    assert listed["everything__echo"]["inputSchema"]["required"] == ["message"], listed["everything__echo"]

    assert echo["ok"] and not echo["result"].get("isError"), echo
    assert _text(echo["result"]) == "Echo: hi there", echo

    assert long_run["ok"] and not long_run["result"].get("isError"), long_run
    assert _text(long_run["result"]).startswith("Long running operation completed."), long_run
    assert [p["progress"] for p in long_run["progress"]] == [1.0, 2.0, 3.0], long_run
