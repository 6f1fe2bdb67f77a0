"""Upstreams that crash, restart and stop: calls fail at once naming the upstream; the pool recovers."""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import FixtureHttp, RawHost, read_jsonl, reply_of, stdio_server, wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_stdio_upstream_crash_fails_only_its_inflight_calls_at_once_and_restarts(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path), "fy": stdio_server(tmp_path, name="other")}})
    host = raw_host(d.url)
    box: dict[str, Any] = {}

    def slow(server: str, seconds: float) -> None:
        started = time.monotonic()
        with RawHost(d.url) as h:
            box[server] = reply_of(
                h.modern("tools/call", {"name": f"{server}__slow", "arguments": {"seconds": seconds, "steps": 1}})
            )
        box[f"{server} elapsed"] = time.monotonic() - started

    threads = [threading.Thread(target=slow, args=a) for a in (("fx", 30), ("fy", 2))]
    for t in threads:
        t.start()
    for log in ("fixture", "other"):
        wait_until(
            lambda log=log: any(
                e.get("msg", {}).get("params", {}).get("name") == "slow"
                for e in read_jsonl(tmp_path / f"{log}.log.jsonl")
            ),
            what=f"slow call upstream ({log})",
        )
    crash = reply_of(host.modern("tools/call", {"name": "fx__crash", "arguments": {}}))
    for t in threads:
        t.join(15)
    assert crash["error"]["code"] == -32603 and "'fx'" in crash["error"]["message"]
    assert box["fx"]["error"]["code"] == -32603 and "'fx'" in box["fx"]["error"]["message"]
    assert box["fx elapsed"] < 10, "the in-flight call must fail when the upstream dies, not at its timeout"
    # Only the dead server's calls fail: the other server's call, in flight at the time, completes.
    assert box["fy"]["result"]["content"][0]["text"] == "slept 2", box["fy"]
    d.wait_upstreams("ready")
    ups = {u["name"]: u for u in d.status()["upstreams"]}
    assert ups["fx"]["restarts"] >= 1 and ups["fy"]["restarts"] == 0
    res = reply_of(host.modern("tools/call", {"name": "fx__echo", "arguments": {"text": "back"}}))
    assert res["result"]["content"][0]["text"] == "back"


def test_http_upstream_that_dies_is_reported_then_reconnected(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    port = _free_port()
    first = FixtureHttp(tmp_path, "--port", str(port), name="one")
    try:
        d = start_daemon({"mcpServers": {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}})
        host = raw_host(d.url)
        host.initialize()
        frame = reply_of(host.legacy("tools/call", {"name": "web__crash", "arguments": {}}))
        assert frame["error"]["code"] == -32603 and "'web'" in frame["error"]["message"]
        first.proc.wait(10)
        down = reply_of(host.legacy("tools/call", {"name": "web__echo", "arguments": {"text": "x"}}))
        assert down["error"]["code"] == -32603 and "'web'" in down["error"]["message"]
        second = FixtureHttp(tmp_path, "--port", str(port), name="two")
        try:
            d.wait_upstreams("ready")
            res = reply_of(host.legacy("tools/call", {"name": "web__echo", "arguments": {"text": "again"}}))
            assert res["result"]["content"][0]["text"] == "again"
        finally:
            second.stop()
    finally:
        first.stop()


def test_upstream_that_cannot_start_is_reported_not_fatal(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon(
        {"mcpServers": {"good": stdio_server(tmp_path), "bad": {"command": str(tmp_path / "no-such-binary")}}},
        wait_upstreams=False,
    )
    wait_until(
        lambda: {u["name"]: u for u in d.status()["upstreams"]}["good"]["state"] == "ready", what="good upstream"
    )
    bad = {u["name"]: u for u in d.status()["upstreams"]}["bad"]
    wait_until(lambda: {u["name"]: u for u in d.status()["upstreams"]}["bad"]["lastError"], what="bad upstream error")
    bad = {u["name"]: u for u in d.status()["upstreams"]}["bad"]
    assert bad["state"] != "ready" and "no-such-binary" in bad["lastError"]
    host = raw_host(d.url)
    names = [t["name"] for t in host.modern("tools/list").json()["result"]["tools"]]
    assert "good__echo" in names
    frame = host.modern("tools/call", {"name": "bad__anything", "arguments": {}}).json()
    assert frame["error"]["code"] == -32603 and "'bad'" in frame["error"]["message"]


def test_legacy_upstream_counter_offer_is_accepted(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon(
        {"mcpServers": {"old": stdio_server(tmp_path, "--era", "legacy", "--legacy-version", "2025-06-18")}}
    )
    [up] = d.status()["upstreams"]
    assert (up["era"], up["revision"]) == ("legacy", "2025-06-18")
    res = raw_host(d.url).modern("tools/call", {"name": "old__echo", "arguments": {"text": "hi"}}).json()["result"]
    assert res["content"][0]["text"] == "hi" and res["resultType"] == "complete"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_an_upstream_that_keeps_its_sse_reply_open_after_answering_does_not_hold_the_call(
    start_daemon: Any, fixture_http: Any, raw_host: Any, era: str
) -> None:
    """The spec says a server SHOULD close the SSE stream after its response, not MUST: an
    upstream that keeps it open for a minute still answers the host now (both eras, both ways a
    reply reaches mcpx). The host's client gives up after 30 s, so a held call fails the test."""
    up = fixture_http("--era", era, "--sse-linger", "60")
    d = start_daemon({"mcpServers": {"fx": {"url": up.url}}})
    host = raw_host(d.url)
    host.initialize()
    for _ in range(3):  # and again, on a fresh connection each time
        res = reply_of(host.legacy("tools/call", {"name": "fx__slow", "arguments": {"seconds": 0.05, "steps": 1}}))
        assert "slept" in res["result"]["content"][0]["text"], res


def test_modern_only_upstream_is_spoken_to_in_2026(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    d = start_daemon({"mcpServers": {"new": stdio_server(tmp_path, "--era", "modern")}})
    [up] = d.status()["upstreams"]
    assert (up["era"], up["revision"]) == ("modern", "2026-07-28")
    host = raw_host(d.url)
    host.initialize()
    res = reply_of(host.legacy("tools/call", {"name": "new__whoami", "arguments": {}}))["result"]
    meta = res["structuredContent"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    # For a 2025 host mcpx can relay every question (to the host if it declared it, else to an
    # operator), so it declares all three upstream.
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}, "sampling": {}, "roots": {}}
    assert "resultType" not in res  # a legacy host gets no 2026 discriminator
    # A 2026 host's own per-request capabilities go up, and nothing it did not declare.
    caps = {"sampling": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    own = (
        raw_host(d.url)
        .modern(
            "tools/call",
            {"name": "new__whoami", "arguments": {}},
            meta={"io.modelcontextprotocol/clientCapabilities": caps},
        )
        .json()["result"]
    )
    assert own["structuredContent"]["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}


def test_call_timeout_abandons_the_call_and_cancels_it_upstream(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, callTimeout=0.5)}})
    frame = raw_host(d.url).modern("tools/call", {"name": "fx__slow", "arguments": {"seconds": 20, "steps": 1}}).json()
    assert frame["error"]["code"] == -32603 and "within 0.5 s" in frame["error"]["message"]
    wait_until(
        lambda: [e for e in read_jsonl(tmp_path / "fixture.log.jsonl") if e.get("event") == "cancelled"],
        what="upstream saw the cancel",
    )


def test_stubborn_upstream_is_killed_at_shutdown(start_daemon: Any, tmp_path: Path, raw_host: Any) -> None:
    """A server that ignores SIGTERM: the fixture, exec'd with SIGTERM ignored (an ignored signal stays
    ignored across exec), so it starts at once and only its stop is stubborn."""
    marker = tmp_path / "stubborn.pid"
    fixture = stdio_server(tmp_path, name="stub")
    argv = [fixture["command"], *fixture["args"]]
    script = (
        "import os,signal,sys; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" open({str(marker)!r},'w').write(str(os.getpid())); os.execv(sys.executable, {argv!r})"
    )
    d = start_daemon({"mcpServers": {"stub": {"command": sys.executable, "args": ["-c", script]}}})
    pid = int(wait_until(lambda: marker.exists() and marker.read_text(), what="stubborn child"))
    assert int(_status_field(pid, "SigIgn"), 16) & (1 << (signal.SIGTERM - 1)), "SIGTERM is not ignored"
    started = time.monotonic()
    assert d.stop() == 0
    assert time.monotonic() - started < 15
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def _status_field(pid: int, name: str) -> str:
    """A field of /proc/<pid>/status (e.g. SigIgn, the ignored signals' mask in hex)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name} in /proc/{pid}/status")
