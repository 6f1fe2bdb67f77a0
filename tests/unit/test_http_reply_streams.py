"""`HttpTransport` against real scripted HTTP servers on 127.0.0.1: reply streams that end before
the response are resumed with Last-Event-ID (2025-11-25 transports.mdx, "Resumability and
Redelivery") or fail the call at once naming the upstream; the GET stream is reopened."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream
from scripted_http import SSE_HEAD, LegacyMcp, Request, event, reply, result, serve

from mcpx.config.model import ServerConfig
from mcpx.protocol.jsonrpc import Id
from mcpx.upstream.http import h1, sse, streamable
from mcpx.upstream.http.streamable import HttpTransport

pytestmark = pytest.mark.anyio

CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "work", "arguments": {}}}


class Fed:
    """What the transport fed the session: (message, the request it arrived for)."""

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], Id | None]] = []
        self.changed = anyio.Event()

    async def __call__(self, msg: dict[str, Any], related: Id | None) -> None:
        self.items.append((msg, related))
        self.changed.set()
        self.changed = anyio.Event()

    def replies(self, rid: Id) -> list[dict[str, Any]]:
        return [m for m, _ in self.items if m.get("id") == rid and "method" not in m]

    async def wait_for(self, pred: Any, timeout: float = 5) -> None:
        with anyio.fail_after(timeout):
            while not pred():
                await self.changed.wait()


@asynccontextmanager
async def legacy_transport(port: int) -> AsyncIterator[tuple[HttpTransport, Fed]]:
    """A transport as the session leaves it after a 2025-11-25 handshake with session "s-1"."""
    transport = HttpTransport("up", ServerConfig(url=f"http://127.0.0.1:{port}/mcp"))
    fed = Fed()
    async with anyio.create_task_group() as tg:
        started = anyio.Event()
        tg.start_soon(transport.run, fed, started.set)
        await started.wait()
        transport.era, transport.revision, transport.session_id = "legacy", "2025-11-25", "s-1"
        try:
            yield transport, fed
        finally:
            transport.detach = True  # no DELETE: the scripted server may be gone
            await transport.close()


async def call(transport: HttpTransport, fed: Fed, msg: dict[str, Any] = CALL) -> tuple[dict[str, Any], float]:
    """Send the request; its reply is fed before send returns (the exchange runs in the caller)."""
    started = time.monotonic()
    with anyio.fail_after(10):
        await transport.send(msg)
    [answer] = fed.replies(msg["id"])
    return answer, time.monotonic() - started


# ---- a reply stream resumed ------------------------------------------------------------------


async def test_reply_stream_closed_after_priming_event_is_resumed_with_last_event_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A serverless host's way: prime the stream, close, answer the GET that resumes it."""

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD + event(id="c-1", retry=50))
        return False  # closes the connection: the SSE stream goes on, on the next GET

    async def on_get(req: Request, stream: ByteStream) -> bool:
        assert req.headers.get("last-event-id") == "c-1"
        await stream.send(SSE_HEAD + event(result(7, "done"), id="c-2"))
        return False

    server = LegacyMcp(on_call, on_get)
    caplog.set_level(logging.WARNING, "mcpx.upstream")
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        answer, took = await call(transport, fed)
    assert answer["result"]["content"][0]["text"] == "done"
    [get] = server.gets()
    assert get.headers["last-event-id"] == "c-1"
    assert get.headers["mcp-session-id"] == "s-1" and get.headers["mcp-protocol-version"] == "2025-11-25"
    assert took >= 0.05, "the retry hint (50 ms) is waited before the GET"
    assert not [r for r in caplog.records if "not JSON" in r.getMessage()], "a priming event is not a warning"


async def test_resumed_stream_that_closes_again_is_resumed_from_its_latest_id() -> None:
    """Polling: each resumed connection carries an event and closes; the last id moves on."""

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD + event(id="c-1"))
        return False

    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}}

    async def on_get(req: Request, stream: ByteStream) -> bool:
        if req.headers["last-event-id"] == "c-1":
            await stream.send(SSE_HEAD + event(progress, id="c-2", retry=10))
        else:
            await stream.send(SSE_HEAD + event(result(7, "polled"), id="c-3"))
        return False

    server = LegacyMcp(on_call, on_get)
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        answer, _ = await call(transport, fed)
        assert answer["result"]["content"][0]["text"] == "polled"
        assert (progress, 7) in fed.items, "what a resumed stream carries belongs to its request"
    assert [g.headers["last-event-id"] for g in server.gets()] == ["c-1", "c-2"]


# ---- a reply stream that cannot be resumed fails its call at once -----------------------------


async def test_reply_stream_whose_resume_is_refused_fails_the_call_naming_the_upstream() -> None:
    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD + event(id="c-1", retry=100))
        return False

    server = LegacyMcp(on_call)  # GET: 405
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        answer, took = await call(transport, fed)
        assert not transport.closed.is_set(), "one refused resume is not a lost upstream"
    assert "'up'" in answer["error"]["message"] and "HTTP 405" in answer["error"]["message"], answer
    assert took < 2
    assert [g.headers.get("last-event-id") for g in server.gets()] == ["c-1"]


@pytest.mark.parametrize("framing", ["close-delimited", "chunked"])
async def test_reply_stream_ending_without_response_or_event_id_fails_at_once(framing: str) -> None:
    """No id to resume from: a dropped close-delimited reply reads as a normal end, and a chunked
    one may end cleanly too; either way nothing will answer the call now."""
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}}

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        if framing == "chunked":
            body = event(progress)
            head = SSE_HEAD.replace(b"\r\n\r\n", b"\r\nTransfer-Encoding: chunked\r\n\r\n")
            await stream.send(head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            return True  # a complete reply on a kept connection
        await stream.send(SSE_HEAD + event(progress))
        return False

    server = LegacyMcp(on_call)
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        answer, took = await call(transport, fed)
    assert "'up'" in answer["error"]["message"] and "without the response" in answer["error"]["message"]
    assert took < 2
    assert server.gets() == [], "nothing to resume from"


async def test_modern_reply_stream_is_never_resumed() -> None:
    """2026-07-28 has no Last-Event-ID: a closed stream ends the call (streamable-http.mdx:157)."""

    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD + event(id="c-1"))
        return False

    server = LegacyMcp(on_call)
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        transport.era = "modern"
        answer, took = await call(transport, fed)
    assert "cannot be resumed" in answer["error"]["message"] and took < 2
    assert server.gets() == []


async def test_resumes_that_keep_closing_empty_end_the_call() -> None:
    async def on_call(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD + event(id="c-1"))
        return False

    async def on_get(req: Request, stream: ByteStream) -> bool:
        await stream.send(SSE_HEAD)  # a stream with nothing in it, closed
        return False

    server = LegacyMcp(on_call, on_get)
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        answer, took = await call(transport, fed)
    assert "closed empty" in answer["error"]["message"], answer
    assert len(server.gets()) == streamable.MAX_EMPTY_RESUMES and took < 5


# ---- the GET stream --------------------------------------------------------------------------


async def test_get_stream_is_reopened_with_last_event_id_and_its_list_changed_arrives() -> None:
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}

    async def on_get(req: Request, stream: ByteStream) -> bool:
        if "last-event-id" not in req.headers:
            await stream.send(SSE_HEAD + event(id="g-1", retry=20))  # primed, then the connection drops
        else:
            await stream.send(SSE_HEAD + event(changed, id="g-2"))
            await anyio.sleep(30)  # held open, as a live GET stream is
        return False

    server = LegacyMcp(on_get=on_get, list_changed=True)
    async with serve(server) as port, legacy_transport(port) as (transport, fed):
        await transport.open_listen_stream()
        await fed.wait_for(lambda: (changed, None) in fed.items)
    assert [g.headers.get("last-event-id") for g in server.gets()] == [None, "g-1"]


async def test_get_stream_that_fails_is_retried_with_growing_delays() -> None:
    opened: list[float] = []

    async def on_get(req: Request, stream: ByteStream) -> bool:
        opened.append(time.monotonic())
        await stream.send(reply(503))
        return True

    server = LegacyMcp(on_get=on_get, list_changed=True)
    async with serve(server) as port, legacy_transport(port) as (transport, _):
        await transport.open_listen_stream()
        with anyio.fail_after(10):
            while len(opened) < 3:
                await anyio.sleep(0.05)
    gaps = [b - a for a, b in itertools.pairwise(opened)]
    assert gaps[0] >= streamable.LISTEN_MIN_DELAY_S * 0.9 and gaps[1] >= 2 * streamable.LISTEN_MIN_DELAY_S * 0.9, gaps


async def test_get_stream_answered_405_is_not_asked_again() -> None:
    server = LegacyMcp(list_changed=True)  # GET: 405
    async with serve(server) as port, legacy_transport(port) as (transport, _):
        await transport.open_listen_stream()
        await anyio.sleep(streamable.LISTEN_MIN_DELAY_S * 1.5)
    assert len(server.gets()) == 1


# ---- the SSE cursor (pure) -------------------------------------------------------------------


class Lines:
    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    async def aiter_lines(self) -> AsyncIterator[str]:
        for line in self.lines:
            yield line


async def test_priming_event_is_not_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "mcpx.upstream")
    got = [item async for item in streamable.iter_sse(Lines('id: p-1\ndata:\n\ndata: {"x": 1}\n\n'))]
    assert got == [{"x": 1}]
    assert caplog.records == []


async def test_cursor_follows_ids_and_retry_and_priming_events_yield_nothing() -> None:
    text = 'id: a\nretry: 250\ndata:\n\ndata: {"x": 1}\n\nid\ndata: {"x": 2}\n\nretry: soon\nid: b\0c\n\n'
    cursor = sse.Cursor()
    got = [item async for item in sse.iter_sse(Lines(text), cursor)]
    assert got == [{"x": 1}, {"x": 2}]
    # `id` with no value clears the last id; one with a NUL in it is ignored; `retry: soon` too.
    assert cursor.last_id is None and cursor.retry_ms == 250 and cursor.events == 4


async def test_an_event_whose_data_keeps_growing_ends_the_stream() -> None:
    text = 'data: {"x": 1}\n\n' + "data: aaaaaaaaaa\n" * 10
    got: list[Any] = []
    with pytest.raises(h1.ConnectionFailed, match="longer than 64 characters"):
        async for item in sse.iter_sse(Lines(text), max_event=64):
            got.append(item)
    assert got == [{"x": 1}]  # what came before it was delivered
