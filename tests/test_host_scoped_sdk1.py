"""`scope: host` with real peers (#39 items 3 and 4): the official SDK 1.30 client as the host, the
reference server `@modelcontextprotocol/server-everything` and mcpx's fixture as stdio upstreams,
each host connection with a process of its own.

- A 2025-11-25 task outlives its host: the host starts it and disconnects (the SDK DELETEs its
  session); its process stays for the task, and the next connection of the same principal collects
  the result with `tasks/result`, as the operator sees it through `/v1`; then the process stops.
- server-everything asks `roots/list` as soon as its process is initialized, before any call: that
  question is the host's whose process it is. A host that declared roots is asked (on its GET
  stream) and the server then knows its roots; one that did not gets an operator question filed
  under its own connection, not an unattributable one.

The SDK 1.30 venv and the npm package are built on first use (tests/peers/README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from harness import UNIT, Api, Daemon, wait_until
from peers.npm_peers import everything_command
from peers.run_host import run_host
from peers.venvs import peer_python

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.peers,
    pytest.mark.sqlite_only("per-host processes and their questions: the pool, not storage"),
]  # slow tier (tests/conftest.py)

TOKEN = "ana-" + "t" * 28
AS_ANA = ["--header", f"Authorization: Bearer {TOKEN}"]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "upstream_server.py"


@pytest.fixture(scope="module")
def sdk1_python() -> Path:
    return peer_python("mcp-1.30")


def config(tmp: Path) -> dict[str, Any]:
    command, *args = everything_command()
    fixture = [str(FIXTURE), "stdio", "--log", str(tmp / "fx.log.jsonl"), "--name", "fx"]
    return {
        "auth": {"tokens": [{"principal": "ana", "token": TOKEN}]},
        "mcpServers": {
            "every": {"command": command, "args": args, "mcpx": {"scope": "host"}},
            "fx": {"command": sys.executable, "args": fixture, "mcpx": {"scope": "host"}},
        },
        "tasks": {"pollIntervalMs": 100},
    }


def _text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result["content"] if c.get("type") == "text")


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("fx__slow", {"seconds": 3, "steps": 3}, "slept 3"),
        ("every__trigger-long-running-operation", {"duration": 3, "steps": 3}, "Long running operation completed."),
    ],
    ids=["fixture", "server-everything"],
)
def test_a_task_outlives_its_sdk1_host_and_the_next_connection_of_its_principal_collects_it(
    sdk1_python: Path, start_daemon: Any, tmp_path: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    d: Daemon = start_daemon(config(tmp_path))
    _, started = run_host(
        sdk1_python, "sdk1_host.py", ["--url", d.url, *AS_ANA], [{"op": "call_task", "name": tool, "args": arguments}]
    )
    assert started["ok"] and started["task"]["status"] == "working", started
    task_id = started["task"]["taskId"]
    with Api(d) as api:
        # The host has exited, its SDK deleting its session, while its task runs on its own process.
        def closed() -> list[str]:
            return [c["closeReason"] for c in api.get("/v1/connections").json()["connections"] if c["closedMs"]]

        assert wait_until(closed, 10 * UNIT, "the host's session to close") == ["session deleted by the host"]
        assert api.get(f"/v1/tasks/{task_id}").json()["status"] == "working"
    _, collected, listed = run_host(
        sdk1_python,
        "sdk1_host.py",
        ["--url", d.url, *AS_ANA],
        [{"op": "result", "task": task_id, "timeout": 60 * UNIT}, {"op": "list_tasks"}],
    )
    assert collected["ok"] and not collected["result"].get("isError"), collected  # before #39: -15, "exited"
    assert _text(collected["result"]).startswith(expected), collected
    assert [t["taskId"] for t in listed["result"]["tasks"]] == [task_id], listed
    with Api(d) as api:
        row = api.get(f"/v1/tasks/{task_id}").json()
    assert row["status"] == "completed" and _text(row["result"]).startswith(expected), row
    wait_until(
        lambda: "its host connection closed and its last task ended" in d.stderr(),
        10 * UNIT,
        "the first host's process to stop once its task ended",
    )


def test_everythings_roots_list_at_its_start_is_its_own_hosts_question(
    sdk1_python: Path, start_daemon: Any, tmp_path: Path
) -> None:
    """The first call starts the host's process; server-everything asks roots/list 350 ms after it is
    initialized, once that quick call has ended: no call is in flight, and the question is still the
    host's. Before #39 it got -32601 ("cannot tell which call asked"), logged "Failed to request
    roots", and get-roots-list had to ask again inside its own call."""
    d: Daemon = start_daemon(config(tmp_path))
    echo = {"op": "call", "name": "every__echo", "args": {"message": "hi"}}
    quiet = {"op": "sleep", "seconds": 3 * UNIT}  # the process asks meanwhile, with no call in flight
    _, _, _, listed, asked = run_host(
        sdk1_python,
        "sdk1_host.py",
        ["--url", d.url, *AS_ANA, "--root", "file:///work/ana"],
        [echo, quiet, {"op": "call", "name": "every__get-roots-list", "args": {}}, {"op": "roots_asked"}],
    )
    assert listed["ok"] and "URI: file:///work/ana" in _text(listed["result"]), listed
    assert asked["count"] == 1, asked  # once, by its process at its start: the tool found the roots known
    # A host that declared no roots: the server asks all the same (mcpx declares roots upstream).
    _, echoed, _ = run_host(sdk1_python, "sdk1_host.py", ["--url", d.url, *AS_ANA], [echo, quiet])
    assert echoed["ok"], echoed
    with Api(d) as api:

        def settled() -> list[dict[str, Any]] | None:
            rows = [q for q in api.history() if q["method"] == "roots/list" and q["status"] != "open"]
            return rows if len(rows) >= 2 else None

        rows = wait_until(settled, 20 * UNIT, "both hosts' roots questions settled")
    [a] = [q for q in rows if q["status"] == "answered"]
    [b] = [q for q in rows if q["status"] != "answered"]
    logs = d.state_dir / "logs"
    for q in (a, b):  # each filed under the connection whose process asked it, never unattributed
        assert q["connectionId"] and (logs / f"every.{q['connectionId']}.stderr.log").is_file(), q
        assert q["candidates"] == [], q
    assert a["connectionId"] != b["connectionId"]
    assert a["answeredBy"] == f"host:{a['connectionId']}" and a["taskId"] is None, a
    assert a["why"] == "asked of the host (it declared roots)", a
    assert b["why"] == "waiting for an operator: the host did not declare roots", b
    assert "Failed to request roots" not in (logs / f"every.{a['connectionId']}.stderr.log").read_text()
