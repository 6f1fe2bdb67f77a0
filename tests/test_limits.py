"""Configured limits hit on the real daemon: each refusal names the limit and its value, and
loses nothing already accepted."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness import ROOT, Api, RawHost, operator_attached, read_jsonl, reply_of, stdio_server, wait_until

pytestmark = [pytest.mark.sqlite_only("limits on in-flight work: the router and the pool"), pytest.mark.heavy]

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


def test_question_and_answer_sizes_are_capped_by_questions_max_bytes(start_daemon: Any) -> None:
    server = ROOT / "tests" / "conformance" / "server.py"
    d = start_daemon(
        {
            "mcpServers": {
                "up": {
                    "command": sys.executable,
                    "args": [str(server), "stdio", "--legacy-only"],
                    "mcpx": {"passthrough": True, "tools": {"test_elicitation": {"taskSupport": "optional"}}},
                }
            },
            "questions": {"maxBytes": 1500},
        }
    )
    with RawHost(d.url) as host, Api(d) as api:
        host.initialize()  # no elicitation: an operator answers
        feed = operator_attached(d, "olga")
        try:
            args = {"name": "test_elicitation", "arguments": {"message": "Who?"}, "task": {}}
            tid = host.legacy("tools/call", args).json()["result"]["task"]["taskId"]
            [q] = wait_until(lambda: api.open_questions(), 15, "the question")
            huge = api.answer(q["id"], by="olga", content={"username": "a" * 2000, "email": "a@example.com"})
            assert huge.status_code == 413 and "questions.maxBytes (1500)" in huge.json()["error"], huge.text
            assert [o["id"] for o in api.open_questions()] == [q["id"]]  # still open: nothing lost
            fine = api.answer(q["id"], by="olga", content={"username": "ada", "email": "ada@example.com"})
            assert fine.status_code == 200, fine.text
            done = reply_of(host.legacy("tasks/result", {"taskId": tid}))["result"]
            assert '"username": "ada"' in done["content"][0]["text"]

            # A question larger than the limit never opens; the upstream is told which limit refused it.
            args = {"name": "test_elicitation", "arguments": {"message": "x" * 3000}, "task": {}}
            tid = host.legacy("tools/call", args).json()["result"]["task"]["taskId"]
            ended = reply_of(host.legacy("tasks/result", {"taskId": tid}))
            text = json.dumps(ended)
            assert "questions.maxBytes (1500)" in text, ended
            assert api.open_questions() == []
        finally:
            feed.close()


def test_a_connection_over_its_request_rate_gets_429_with_retry_after(start_daemon: Any, tmp_path: Path) -> None:
    rate = 4  # requests a second: one token comes back every 1 / rate s
    d = start_daemon(
        {
            "mcpServers": {"fx": stdio_server(tmp_path)},
            "connections": {"maxRequestsPerSecond": rate, "requestBurst": 6},
        }
    )
    with RawHost(d.url) as legacy_host, RawHost(d.url) as modern_host:
        legacy_host.initialize()
        for host, send in (
            (legacy_host, lambda h: h.legacy("tools/list", {})),
            (modern_host, lambda h: h.modern("tools/list", {})),
        ):
            replies = [send(host) for _ in range(20)]
            codes = [r.status_code for r in replies]
            assert codes[:5] == [200] * 5 and 429 in codes, codes  # the burst, then the rate
            refused = next(r for r in replies if r.status_code == 429)
            assert refused.headers["retry-after"] == "1"
            err = refused.json()["error"]
            assert err["code"] == -32600 and "connections.maxRequestsPerSecond (4)" in err["message"]
            assert err["data"] == {"limit": "connections.maxRequestsPerSecond", "value": 4}
            # Exactly one token's time: a refused request takes no token and an accepted one leaves
            # the bucket at 0 or more, so whatever it held after the last request, it holds one now.
            time.sleep(1 / rate)
            assert send(host).status_code == 200
        # The budget is per connection: a new session starts with a full one.
        with RawHost(d.url) as other:
            other.initialize()
            assert [other.legacy("tools/list", {}).status_code for _ in range(5)] == [200] * 5


def test_host_requests_in_flight_at_one_upstream_are_capped_by_max_in_flight(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon(
        {
            "mcpServers": {
                "fx": stdio_server(tmp_path, maxInFlight=2),
                "fy": stdio_server(tmp_path, name="other"),
            },
            "tasks": {"taskAfterMs": 100},
        }
    )
    limit = "mcpServers.fx.mcpx.maxInFlight (2)"
    with RawHost(d.url) as legacy, RawHost(d.url) as modern:
        legacy.initialize()
        first, second = (_legacy_task(legacy, 3)["result"]["task"]["taskId"] for _ in range(2))
        wait_until(
            lambda: (
                sum(e.get("msg", {}).get("method") == "tools/call" for e in read_jsonl(tmp_path / "fixture.log.jsonl"))
                >= 2
            ),
            10,
            "both calls upstream",
        )
        # A 2025 task over the limit is refused before any handle; so is a plain call of either era.
        refused = _legacy_task(legacy)
        assert refused["error"]["code"] == -32600 and limit in refused["error"]["message"], refused
        assert refused["error"]["data"] == {"limit": "mcpServers.fx.mcpx.maxInFlight", "value": 2}
        plain = reply_of(modern.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "x"}}))
        assert plain["error"]["code"] == -32600 and limit in plain["error"]["message"], plain
        # Only that server is full: another answers, and the accepted tasks are untouched.
        other = reply_of(modern.modern("tools/call", {"name": "fy__echo", "arguments": {"text": "y"}}))
        assert other["result"]["content"][0]["text"] == "y"
        listed = legacy.legacy("tasks/list", {}).json()["result"]["tasks"]
        assert sorted(t["taskId"] for t in listed) == sorted([first, second])
        # Once a call ends its place is free again.
        for tid in (first, second):
            wait_until(
                lambda tid=tid: legacy.legacy("tasks/get", {"taskId": tid}).json()["result"]["status"] == "completed",
                15,
            )
        again = reply_of(modern.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "z"}}))
        assert again["result"]["content"][0]["text"] == "z"


def test_a_host_polling_in_a_tight_loop_is_slowed_not_refused(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "tasks": {"taskAfterMs": 50, "pollFloorMs": 250}})
    with RawHost(d.url) as modern, RawHost(d.url) as legacy:
        legacy.initialize()
        handle = modern.modern(
            "tools/call", {"name": "fx__slow", "arguments": {"seconds": 30, "steps": 1}}, meta=EXT
        ).json()["result"]
        old = legacy.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 30}, "task": {}}).json()
        polls = [
            lambda: modern.modern(
                "tasks/get", {"taskId": handle["taskId"]}, meta=EXT, headers={"Mcp-Name": handle["taskId"]}
            ),
            lambda: legacy.legacy("tasks/get", {"taskId": old["result"]["task"]["taskId"]}),
        ]
        for poll in polls:
            started = time.monotonic()
            replies = [poll().json() for _ in range(6)]
            # Every poll is answered (no 429, no error); five of the six waited out the 250 ms floor.
            assert all(r["result"]["status"] == "working" for r in replies), replies
            assert time.monotonic() - started >= 5 * 0.25 * 0.9
