"""The HTTP front's two changes to uvicorn (mcpx/host/http/front.py): a response's head goes out in
the same socket write as its body, and `/mcp` skips the Starlette app. Against a real uvicorn server
on 127.0.0.1, the socket writes counted by a transport that records them."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mcpx.host.http import front

pytestmark = pytest.mark.anyio

WRITES: list[bytes] = []


class _Recording(front.OneWriteHttp):
    """OneWriteHttp whose transport notes each write it is given."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature narrows asyncio's
        write = transport.write

        def noted(data: bytes) -> None:
            WRITES.append(bytes(data))
            write(data)

        transport.write = noted  # type: ignore[method-assign,assignment]  # the real transport, its write noted
        super().connection_made(transport)


async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
    """A JSON reply, or (GET) a stream whose head comes long before its first event."""
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await asyncio.sleep(0.5)
        await send({"type": "http.response.body", "body": b"data: late\n\n", "more_body": False})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def other(_: Any) -> PlainTextResponse:
    return PlainTextResponse("the app's")


@asynccontextmanager
async def serving() -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/mcp", lambda _: PlainTextResponse("not the endpoint")), Route("/other", other)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(front.McpFirst(mcp, app), http=_Recording, log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def request(port: int, method: str, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".encode())
    got = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return got


async def test_a_json_reply_is_one_write_and_comes_from_the_endpoint_not_the_app() -> None:
    async with serving() as port:
        WRITES.clear()
        got = await request(port, "POST", "/mcp")
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\n{}")
    assert len(WRITES) == 1, WRITES  # uvicorn alone: the head, then the body


async def test_a_head_whose_body_waits_goes_out_at_once_alone() -> None:
    """A stream's head must reach the host before its first event (the 2025 GET stream's does)."""
    async with serving() as port:
        WRITES.clear()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.4)  # before the event's 0.5 s
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/event-stream" in head
        assert b"data: late" in await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 5)
        writer.close()
    assert WRITES[0] == head


async def test_other_paths_go_through_the_app() -> None:
    async with serving() as port:
        assert (await request(port, "GET", "/other")).endswith(b"the app's")
