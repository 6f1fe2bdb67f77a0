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
from harness import Api, Daemon, SuiteStore, operator_attached, wait_until
from peers.npm_peers import everything_command
from peers.run_host import HostProcess, run_host
from peers.venvs import peer_python

# The first run builds the SDK 1.30 venv and installs the npm package (about a minute in all).
pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.peers,
    pytest.mark.sqlite_only("a third-party server through mcpx: the wire"),
]  # slow tier (tests/conftest.py)

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


def _listed_call(api: Api, tool: str) -> list[dict[str, Any]]:
    return [t for t in api.get("/v1/tasks").json()["tasks"] if t["kind"] == "call" and t["tool"] == tool]


def test_everythings_elicitation_while_another_hosts_call_runs_is_answered_by_the_operator(
    sdk1_python: Path, daemon: Daemon
) -> None:
    """#25: two SDK 1.30 hosts share the one stdio server. While host A's long call runs on it,
    host B's tool asks a question that mcpx cannot pin to one call: the operator gets it, listing
    both calls, and the answer completes B's call; A's call ends on its own."""
    feed = operator_attached(daemon, "olga")
    long_call = {
        "op": "call",
        "name": "everything__trigger-long-running-operation",
        "args": {"duration": 6, "steps": 3},
    }
    ask = {"op": "call", "name": "everything__trigger-elicitation-request", "args": {}, "timeout": 60}
    try:
        with (
            Api(daemon) as api,
            HostProcess(sdk1_python, "sdk1_host.py", ["--url", daemon.url], [long_call]) as a,
        ):
            wait_until(lambda: _listed_call(api, "trigger-long-running-operation"), 20, "A's call listed")
            with HostProcess(sdk1_python, "sdk1_host.py", ["--url", daemon.url], [ask]) as b:
                [q] = wait_until(api.open_questions, 20, "the operator's question")
                names = sorted(c["name"] for c in q["candidates"])
                assert names == [
                    "everything__trigger-elicitation-request",
                    "everything__trigger-long-running-operation",
                ]
                assert q["params"]["requestedSchema"]["required"] == ["name"]
                taken = api.answer(q["id"], "accept", by="olga", content={"name": "Ada"})
                assert taken.status_code == 200, taken.text
                [asked] = b.step_lines()
            assert asked["ok"] and not asked["result"].get("isError"), asked
            assert "- Name: Ada" in _text(asked["result"]), asked
            [ran] = a.step_lines()
            assert _text(ran["result"]).startswith("Long running operation completed."), ran
    finally:
        feed.close()


@pytest.mark.parametrize(
    ("venv", "driver", "mode"),
    [("mcp-1.30", "sdk1_host.py", []), ("mcp-2.3", "sdk2_host.py", ["--mode", "legacy"]),
     ("mcp-2.3", "sdk2_host.py", ["--mode", "2026-07-28"])],
    ids=["sdk-1.30", "sdk-2.3-legacy", "sdk-2.3-2026"],
)  # fmt: skip
def test_a_task_only_tool_answers_a_host_that_holds_no_task(
    daemon: Daemon, venv: str, driver: str, mode: list[str]
) -> None:
    """`simulate-research-query` runs only as a task upstream (`taskSupport: required`); a host that
    asks for none is answered inline, mcpx following the upstream task; mcpx offers it `optional`."""
    step = {"op": "call", "name": "everything__simulate-research-query", "args": {"topic": "tides"}, "timeout": 60}
    [_, line] = run_host(peer_python(venv), driver, [*mode, "--url", daemon.url], [step], timeout=120)
    assert line["ok"] and not line["result"].get("isError"), line
    assert "tides" in _text(line["result"]), line


def test_sdk1_host_runs_a_long_everything_tool_as_a_task(sdk1_python: Path, daemon: Daemon) -> None:
    """`trigger-long-running-operation` declares `taskSupport: forbidden` (the TypeScript SDK's
    default): mcpx holds the task and calls it plainly upstream."""
    _, listed, created, polled, result = run_host(
        sdk1_python,
        "sdk1_host.py",
        ["--url", daemon.url],
        [
            {"op": "list_tools"},
            {
                "op": "call_task",
                "name": "everything__trigger-long-running-operation",
                "args": {"duration": 1, "steps": 2},
            },
            {"op": "poll", "task": "$2", "timeout": 30},
            {"op": "result", "task": "$2", "timeout": 30},
        ],
    )
    tools = {t["name"]: t for t in listed["result"]["tools"]}
    assert tools["everything__trigger-long-running-operation"]["execution"]["taskSupport"] == "optional"
    assert created["ok"] and created["task"]["status"] == "working", created
    assert polled["ok"] and polled["statuses"][-1] == "completed", polled
    assert _text(result["result"]).startswith("Long running operation completed."), result
