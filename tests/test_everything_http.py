"""The TypeScript SDK's reference server, `@modelcontextprotocol/server-everything` 2026.8.31, over
Streamable HTTP as a 2025-11-25 upstream of mcpx (#36), with a frame-level host.

What a TypeScript server sends with no related request goes on its standalone GET stream:
`toggle-subscriber-updates` starts `server.notification(resources/updated)` for the session's
subscriptions, once at once and every 5 s. mcpx opens that stream after initialize, so the update
reaches the host that subscribed, on the host's own GET stream. Its `trigger-elicitation-request` asks
on the call's stream; the host accepts with only the required `name`, and the server's reply shows the
defaults mcpx filled in (SEP-1034: "Favorite Integer: 42", "Favorite Number: 3.14", which the server
prints only when the answer has them)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from harness import Daemon, RawHost, SseStream, SuiteStore, reply_of, wait_until
from peers.npm_peers import everything_http_command

pytestmark = [pytest.mark.timeout(600), pytest.mark.peers]  # slow tier (tests/conftest.py)
WATCHED = "demo://resource/dynamic/text/1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def everything_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("everything-http") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            everything_http_command(port), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    try:

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                assert proc.poll() is None, log.read_text()
                return False

        wait_until(up, 60, "server-everything listening")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, suite_store: SuiteStore, everything_url: str) -> Iterator[Daemon]:
    config = {"mcpServers": {"everything": {"url": everything_url, "mcpx": {"passthrough": True}}}}
    d = Daemon(tmp_path_factory.mktemp("mcpx"), config, store=suite_store)
    d.start()
    yield d
    d.stop()
    d.check_wire()


def test_its_resource_updates_on_the_get_stream_reach_the_subscribed_host(daemon: Daemon) -> None:
    [up] = daemon.status()["upstreams"]
    assert (up["era"], up["revision"]) == ("legacy", "2025-11-25"), up
    with RawHost(daemon.url) as host:
        host.initialize()
        stream = SseStream("GET", daemon.url, {"Accept": "text/event-stream", **host._legacy_headers()})
        try:
            assert "result" in reply_of(host.legacy("resources/subscribe", {"uri": WATCHED}))
            toggled = reply_of(host.legacy("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}}))
            assert "Started simulated resource updated" in toggled["result"]["content"][0]["text"], toggled

            def updated() -> list[dict[str, Any]]:
                return [f for f in stream.frames if f.get("method") == "notifications/resources/updated"]

            [first, *_] = wait_until(updated, 20, "a resources/updated on the host's GET stream")
            assert first["params"]["uri"] == WATCHED
            reply_of(host.legacy("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}}))  # off
        finally:
            stream.close()


def test_its_elicitation_is_answered_by_the_host_and_reaches_it_with_the_forms_defaults(daemon: Daemon) -> None:
    with RawHost(daemon.url) as host:
        host.initialize(capabilities={"elicitation": {}})
        body = {
            "jsonrpc": "2.0",
            "id": 900,
            "method": "tools/call",
            "params": {"name": "trigger-elicitation-request", "arguments": {}},
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        headers.update(host._legacy_headers())
        asked: list[dict[str, Any]] = []
        frame: dict[str, Any] = {}
        with (
            httpx.Client(timeout=30) as c,
            c.stream("POST", host.url, content=json.dumps(body), headers=headers) as resp,
        ):
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                msg = json.loads(line[5:])
                if msg.get("method") == "elicitation/create":
                    asked.append(msg)
                    answer = {"action": "accept", "content": {"name": "Ada Lovelace"}}
                    reply = {"jsonrpc": "2.0", "id": msg["id"], "result": answer}
                    assert host.post(reply, host._legacy_headers()).status_code == 202
                elif msg.get("id") == 900:
                    frame = msg
                    break
    assert [a["params"]["requestedSchema"]["properties"]["firstLine"]["title"] for a in asked] == [
        "String with default"
    ]
    text = "\n".join(c.get("text", "") for c in frame["result"]["content"])
    assert "- Name: Ada Lovelace" in text and "- Favorite Integer: 42" in text and "- Favorite Number: 3.14" in text, (
        text
    )
