"""What serves HTTP in front of `/mcp`: uvicorn, with two changes measured to pay on every call.

- `McpFirst`: a request for `/mcp` goes straight to its endpoint; everything else through the
  Starlette app (its routes, its error middleware, then FastAPI for /v1). The endpoint answers all
  its own errors, so the app's layers only cost it time.
- `OneWriteHttp`: uvicorn's HTTP/1.1 protocol, except that a response head is written with the first
  piece of its body, in one socket write (uvicorn writes the head at once, then the body: two
  writes and two wake-ups of the host for one JSON reply). A head whose body does not follow in the
  same turn of the loop (a stream that waits for its first event) goes out on the next turn alone.

Serving `/mcp` from a protocol of our own on httptools was measured too, and not adopted: it saved
0.03-0.05 ms at the median and 8-11 % of the daemon's CPU per call, for ~350 lines of HTTP server
code to own (bench/README.md, "The HTTP front").
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MCP_PATH = "/mcp"


class McpFirst:
    def __init__(self, mcp: ASGIApp, rest: ASGIApp) -> None:
        self.mcp = mcp
        self.rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == MCP_PATH:
            await self.mcp(scope, receive, send)
        else:
            await self.rest(scope, receive, send)


class OneWriteHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol; each request's response writes through a `_HeadWithBody`."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        # (No cycle: the request upgrades to a websocket, which has its own protocol.)
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = _HeadWithBody(self.transport, self.loop)  # type: ignore[assignment]  # a transport's write, close and the rest, passed through


class _HeadWithBody:
    """The response's transport: holds the first write (the head) until the next one joins it, or
    until the loop's next turn. Everything else is the real transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._wrote = False

    def write(self, data: bytes) -> None:
        if not self._wrote:
            self._wrote = True
            self._head = data
            self._loop.call_soon(self.flush)
        elif self._head is not None:
            head, self._head = self._head, None
            self._transport.write(head + data)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        if self._head is not None:
            head, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
