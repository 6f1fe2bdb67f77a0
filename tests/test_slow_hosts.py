"""#26 item 2: a host that stops reading never slows the others (host/outbound.py).

The upstream (the fixture, over stdio, shared by every host) floods one call with 40,000 progress
notifications, as fast as it can, to a host that reads them, then to one that stopped reading: a
stdio host (the daemon's side of `mcpx serve`) or an HTTP host's SSE stream. Another host's calls
to the same upstream are no slower the second time (median within 2x: the shared upstream is busy
either way), the daemon's memory stays bounded, and the slow host loses progress (never its reply).
Before the fix, the stdio host's stall stopped the upstream's reader: the other host's next call
never came back.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import Daemon, RawHost, modern_meta, read_jsonl, stdio_server, wait_until

# As fast as the upstream can: the kernel's socket buffers take a few MB (10,000 notifications and
# more) before a host's not reading reaches mcpx at all.
FLOOD = {"seconds": 0, "steps": 40_000}
CALLS = 80


def _latencies(host: RawHost, n: int = CALLS) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        frame = host.legacy("tools/call", {"name": "fx__echo", "arguments": {"text": str(i)}}).json()
        out.append(time.perf_counter() - t)
        assert frame["result"]["content"][0]["text"] == str(i)
    return out


def _rss_kb(d: Daemon) -> int:
    assert d.proc is not None
    with open(f"/proc/{d.proc.pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def _flooding(log: Path) -> bool:
    return any(e.get("msg", {}).get("params", {}).get("name") == "slow" for e in read_jsonl(log))


def _latencies_while_flooding(host: RawHost, log: Path) -> list[float]:
    """Echo latencies from the flood's start to its end upstream (an upstream whose reader waits
    for the slow host never gets there: its next echo hangs, and the host's timeout fails the test)."""
    out: list[float] = []
    deadline = time.monotonic() + 60
    while not any(e.get("event") == "finished" for e in read_jsonl(log)):
        assert time.monotonic() < deadline, "the flood never ended upstream"
        out += _latencies(host, 20)
    return out


def _stdio_host(d: Daemon, *, reading: bool) -> socket.socket:
    """A stdio host's websocket (the daemon's side of `mcpx serve`), spoken by hand so that "stops
    reading" means it (a client library reads on in a thread of its own), that floods itself. One
    that stops reading keeps its socket buffer small: a real shim's grows to tens of MB first."""
    sock = socket.socket()
    if not reading:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
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
    sock.sendall(_ws_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})))
    if reading:
        threading.Thread(target=_read_all, args=(sock,), daemon=True).start()
    return sock


def _read_all(sock: socket.socket) -> None:
    try:
        while sock.recv(65536):
            pass
    except OSError:  # closed by the test
        pass


def _ws_text(text: str) -> bytes:
    """One masked client text frame (RFC 6455 5.2)."""
    payload = text.encode()
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x81]) + (bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big"))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


FloodHost = Callable[[Daemon, RawHost, bool], socket.socket]


def _flood_twice(start_daemon: Any, tmp_path: Path, raw_host: Any, flood_host: FloodHost) -> bytes:
    """The flood to a host that reads, then (a new daemon) to one that does not: the other host's
    echo medians compared, the daemon's memory checked; what the slow host reads at last returned."""
    medians: list[float] = []
    received = b""
    for reading in (True, False):
        name = "reads" if reading else "stalls"
        log = tmp_path / f"{name}.log.jsonl"
        # No frame log: 80,000 progress frames, a line each, to schema-check at teardown (17 s), of a
        # shape the rest of the suite checks; this test is about who waits for whom.
        d = start_daemon({"mcpServers": {"fx": stdio_server(tmp_path, name=name)}}, name=name, wire_log=False)
        host = raw_host(d.url)
        host.initialize()
        _latencies(host, 20)  # warm
        rss_before = _rss_kb(d)
        sock = flood_host(d, host, reading)
        try:
            wait_until(functools.partial(_flooding, log), 10, "the flood upstream")
            busy = _latencies_while_flooding(host, log)
            rss_after = _rss_kb(d)
            if not reading:
                received = _read_until_reply(sock)
        finally:
            sock.close()
        assert rss_after - rss_before < 64 * 1024, (reading, rss_before, rss_after)
        medians.append(statistics.median(busy))
    print(f"echo median, another host flooded: it reads {medians[0] * 1000:.2f} ms, not {medians[1] * 1000:.2f} ms")
    assert medians[1] <= 2 * medians[0], medians
    return received


def _read_until_reply(sock: socket.socket) -> bytes:
    """Now the slow host reads: whatever was kept for it, up to its reply (id 7), or 2 s of quiet."""
    sock.settimeout(2)
    received = b""
    try:
        while b'"id":7' not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except TimeoutError:
        pass
    return received


@pytest.mark.long  # a 40,000-notification flood, twice
def test_a_stdio_host_that_stops_reading_does_not_slow_the_other_hosts(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    """A shim whose host no longer reads its stdout stops reading the socket once its pipe is full."""
    _flood_twice(start_daemon, tmp_path, raw_host, lambda d, _host, reading: _stdio_host(d, reading=reading))


def _http_host(d: Daemon, session: RawHost, *, reading: bool) -> socket.socket:
    """A 2025-11-25 HTTP host that floods its own call's SSE stream; one that does not read it
    keeps its socket buffer small."""
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
    sock = socket.socket()
    if not reading:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", d.port))
    sock.sendall(head + body)
    if reading:
        threading.Thread(target=_read_all, args=(sock,), daemon=True).start()
    return sock


@pytest.mark.long  # a 40,000-notification flood, twice
def test_an_http_host_that_stops_reading_its_stream_loses_progress_not_its_reply(
    start_daemon: Any, tmp_path: Path, raw_host: Any
) -> None:
    received = _flood_twice(
        start_daemon, tmp_path, raw_host, lambda d, host, reading: _http_host(d, host, reading=reading)
    )
    frames = [json.loads(line[5:]) for line in received.decode().splitlines() if line.startswith("data:")]
    progress = [f for f in frames if f.get("method") == "notifications/progress"]
    [reply] = [f for f in frames if f.get("id") == 7]
    assert reply["result"]["content"][0]["text"] == "slept 0"
    assert 0 < len(progress) < FLOOD["steps"], len(progress)  # behind, it lost progress; never the reply
