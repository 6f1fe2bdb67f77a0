"""#26 item 2, #37 item 12: a host that stops reading never stalls the daemon or the other hosts
(host/outbound.py), and loses only superseded progress, never its reply or its newest progress.

The upstream (the fixture, over stdio, shared by every host) floods one call with 40,000 progress
notifications, as fast as it can, to a host that stopped reading: a stdio host (the daemon's side
of `mcpx serve`) or an HTTP host's SSE stream. Meanwhile another host's calls to the same upstream
are all answered, the daemon's memory stays bounded, and when the slow host reads again it finds
fewer notifications than were sent, the newest (40,000 of 40,000) among them, and its reply.
What is checked here is what is deterministic; how much slower the other host's calls get under a
flood is measured against idle in bench/flood_latency.py. Before #26, the stdio host's stall
stopped the upstream's reader: the other host's next call never came back.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Api, Daemon, RawHost, modern_meta, read_jsonl, stdio_server, wait_until

pytestmark = [pytest.mark.sqlite_only("a host that stops reading: the outbound channel")]

# As fast as the upstream can: the kernel's socket buffers take a few MB (10,000 notifications and
# more) before a host's not reading reaches mcpx at all.
FLOOD = {"seconds": 0, "steps": 40_000}


def _echo(host: RawHost, n: int) -> None:
    for i in range(n):
        frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": str(i)}}).json()
        assert frame["result"]["content"][0]["text"] == str(i)


def _rss_kb(d: Daemon) -> int:
    assert d.proc is not None
    with open(f"/proc/{d.proc.pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def _flooding(log: Path) -> bool:
    return any(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(log))


def _answered_while_flooding(host: RawHost, log: Path) -> int:
    """Another host's echoes from the flood's start to its end upstream, each answered (an upstream
    whose reader waits for the slow host never gets there: its next echo hangs, and the host's
    timeout fails the test)."""
    answered = 0
    deadline = time.monotonic() + 60
    while not any(e.get("event") == "finished" for e in read_jsonl(log)):
        assert time.monotonic() < deadline, "the flood never ended upstream"
        _echo(host, 20)
        answered += 20
    return answered


def _small_buffer_socket(family: int = socket.AF_INET) -> socket.socket:
    """A host that stops reading keeps its socket buffer small: a real one's grows to MBs first."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


def _stdio_host(d: Daemon, _session: RawHost) -> socket.socket:
    """A stdio host's websocket (the daemon's side of `mcpx serve`), spoken by hand so that "stops
    reading" means it (a client library reads on in a thread of its own), that floods itself."""
    sock = _small_buffer_socket()
    sock.connect(("127.0.0.1", d.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /v1/stdio HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {d.token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    params = {"name": "fx__slow", "arguments": FLOOD, "_meta": {**modern_meta(), "progressToken": "flood"}}
    sock.sendall(_ws_text(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})))
    return sock


def _ws_text(text: str) -> bytes:
    """One masked client text frame (RFC 6455 5.2)."""
    payload = text.encode()
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x81]) + (bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big"))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _ws_messages(data: bytes) -> list[dict[str, Any]]:
    """The JSON text frames in what a server sent (unmasked frames, RFC 6455 5.2)."""
    out, at = [], 0
    while at + 2 <= len(data):
        size, at_payload = data[at + 1] & 0x7F, at + 2
        if size == 126:
            size, at_payload = int.from_bytes(data[at + 2 : at + 4], "big"), at + 4
        elif size == 127:
            size, at_payload = int.from_bytes(data[at + 2 : at + 10], "big"), at + 10
        if at_payload + size > len(data):
            break
        if data[at] & 0x0F == 0x1:
            out.append(json.loads(data[at_payload : at_payload + size]))
        at = at_payload + size
    return out


def _http_host(d: Daemon, session: RawHost) -> socket.socket:
    """A 2025-11-25 HTTP host that floods its own call's SSE stream and does not read it."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "fx__slow", "arguments": FLOOD, "_meta": {"progressToken": "flood"}},
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session.session_id}\r\n"
        f"MCP-Protocol-Version: {session.revision}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = _small_buffer_socket()
    sock.connect(("127.0.0.1", d.port))
    sock.sendall(head + body)
    return sock


def _sse_messages(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in data.decode().splitlines() if line.startswith("data:")]


Parse = Callable[[bytes], list[dict[str, Any]]]


def _read_until_reply(sock: socket.socket, parse: Parse) -> list[dict[str, Any]]:
    """Now the slow host reads: whatever was kept for it, up to the end of its reply (id 7), or 5 s
    of quiet; the messages it got. (Its reply's `"id":7` may arrive before the rest of its frame.)"""
    sock.settimeout(5)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
            if b'"id":7' in received and any(m.get("id") == 7 for m in _complete(parse, received)):
                break
    except TimeoutError:
        pass
    return _complete(parse, received)


def _complete(parse: Parse, data: bytes) -> list[dict[str, Any]]:
    """The messages that arrived whole (a message still arriving is not one yet)."""
    try:
        return parse(data)
    except ValueError:
        return parse(data[: data.rfind(b"\n") + 1])


FloodHost = Callable[[Daemon, RawHost], socket.socket]


def _flood_a_host_that_stopped_reading(
    start_daemon: Any, tmp_path: Path, raw_host: Any, flood_host: FloodHost, parse: Parse
) -> list[dict[str, Any]]:
    """The flood to a host that does not read while another host calls the same upstream; the
    daemon's memory checked; what the slow host reads at last returned."""
    log = tmp_path / "fixture.log.jsonl"
    # No frame log: 40,000 progress frames, a line each, to schema-check at teardown, of a shape the
    # rest of the suite checks; this test is about who waits for whom.
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}}, wire_log=False)
    host = raw_host(d.url)
    host.initialize()
    _echo(host, 20)  # warm
    rss_before = _rss_kb(d)
    sock = flood_host(d, host)
    try:
        wait_until(functools.partial(_flooding, log), 10, "the flood upstream")
        assert _answered_while_flooding(host, log) > 0
        rss_after = _rss_kb(d)
        received = _read_until_reply(sock, parse)
    finally:
        sock.close()
    assert rss_after - rss_before < 64 * 1024, (rss_before, rss_after)
    return received


def _assert_coalesced(messages: list[dict[str, Any]]) -> None:
    """Behind, the host lost progress, but never the newest nor its reply."""
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    replies = [m for m in messages if m.get("id") == 7]
    assert len(replies) == 1, f"{len(replies)} replies in {len(messages)} messages; the last: {messages[-2:]}"
    [reply] = replies
    assert reply["result"]["content"][0]["text"] == "slept 0"
    assert 0 < len(progress) < FLOOD["steps"], len(progress)
    assert progress[-1] == FLOOD["steps"], progress[-5:]  # the newest was kept
    assert progress == sorted(progress), "progress went backwards"


def test_a_stdio_host_that_stops_reading_loses_superseded_progress_and_slows_no_one(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    """A shim whose host no longer reads its stdout stops reading the socket once its pipe is full."""
    # (the handshake's head was read before the flood)
    _assert_coalesced(_flood_a_host_that_stopped_reading(start_daemon, tmp_path, raw_host, _stdio_host, _ws_messages))


def test_an_http_host_that_stops_reading_its_stream_loses_superseded_progress_not_its_reply(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    _assert_coalesced(_flood_a_host_that_stopped_reading(start_daemon, tmp_path, raw_host, _http_host, _sse_messages))


def test_a_host_that_stops_reading_after_its_last_reply_is_closed_as_slow(start_daemon: Any, tmp_path: Path) -> None:
    """#37 item 9: nothing else is queued for it, so only the stalled write itself can tell."""
    d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path)}, "connections": {"stallS": 1}}, wire_log=False)
    sock = _small_buffer_socket(socket.AF_UNIX)
    sock.connect(str(d.state_dir / "shim.sock"))
    hello = {"mcpx-shim": 1, "label": "stops-reading"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "slow", "version": "0"}}
    big = "x" * (2 * 1024 * 1024)  # the reply (text and structured content) is far past the socket buffers
    lines = [
        hello,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "fx__echo", "arguments": {"text": big}}},
    ]
    sender = threading.Thread(
        target=sock.sendall, args=(b"".join(json.dumps(m).encode() + b"\n" for m in lines),), daemon=True
    )
    sender.start()
    try:
        with Api(d) as api:

            def closed_slow() -> dict[str, Any] | None:
                rows = api.get("/v1/connections").json()["connections"]
                return next((c for c in rows if "slow consumer" in (c.get("closeReason") or "")), None)

            row = wait_until(closed_slow, 15, "the shim connection closed as a slow consumer")
            assert "a write took nothing for 1 s" in row["closeReason"], row
            assert api.get("/v1/status").status_code == 200  # and the daemon serves on
    finally:
        sock.close()
    assert "closed as a slow consumer" in d.stderr()
