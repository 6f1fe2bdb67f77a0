"""Configured limits hit on the real daemon: each refusal names the limit and its value, and
loses nothing already accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import RawHost, stdio_server, wait_until

EXT = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}


def _legacy_task(host: RawHost, seconds: float = 60) -> dict[str, Any]:
    frame: dict[str, Any] = host.legacy(
        "tools/call", {"name": "fx__slow", "arguments": {"seconds": seconds}, "task": {}}
    ).json()
    return frame


def test_active_task_limits_per_owner_and_in_total(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon(
        {
            "mcpServers": {"fx": stdio_server(tmp_path, tools={"fail": {"taskSupport": "required"}})},
            "tasks": {"taskAfterMs": 100, "maxActivePerOwner": 2, "maxActive": 3},
        }
    )
    with RawHost(d.url) as alice, RawHost(d.url) as bob:
        alice.initialize()
        bob.initialize()
        first, second = (_legacy_task(alice)["result"]["task"]["taskId"] for _ in range(2))
        third = _legacy_task(alice)
        assert third["error"]["code"] == -32600, third
        assert "tasks.maxActivePerOwner (2)" in third["error"]["message"]
        assert third["error"]["data"] == {"limit": "tasks.maxActivePerOwner", "value": 2}

        # Refused means refused: nothing was created, and the two accepted tasks still run.
        listed = alice.legacy("tasks/list", {}).json()["result"]["tasks"]
        assert sorted(t["taskId"] for t in listed) == sorted([first, second])
        assert all(t["status"] == "working" for t in listed)

        # Bob is another owner: one place is left in all, then the total limit speaks.
        assert "result" in _legacy_task(bob)
        over = _legacy_task(bob)
        assert "tasks.maxActive (3)" in over["error"]["message"], over

        # A 2026 host at the limit: a `required` tool is refused, an optional one answers inline.
        required = RawHost(d.url).modern("tools/call", {"name": "fx__fail", "arguments": {}}, meta=EXT).json()
        assert required["error"]["code"] == -32600 and "tasks.maxActive (3)" in required["error"]["message"]
        inline = (
            RawHost(d.url)
            .modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 0.4, "steps": 1}}, meta=EXT)
            .json()["result"]
        )
        assert inline["resultType"] == "complete" and inline["content"][0]["text"] == "slept 0.4"

        # A task that ends frees its place at once.
        assert "result" in alice.legacy("tasks/cancel", {"taskId": first}).json()
        again = wait_until(lambda: "result" in (r := _legacy_task(alice)) and r, 10, "a freed place")
        assert again["result"]["task"]["status"] == "working"
