"""Real HTTP/1.1 servers on 127.0.0.1 whose every byte a test scripts: keep-alive connections, SSE
streams cut where the test says, and a 2025-11-25 MCP upstream built on them.

`serve(handler)` runs one in the caller's event loop (anyio tests); `in_thread(handler)` runs it on
a thread of its own for synchronous tests that point a real mcpx daemon at it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
from anyio.abc import ByteStream
from unit.test_h1_client import serve as serve_streams  # the one raw listener of these tests

LEGACY = "2025-11-25"


@dataclass
class Request:
    method: str
    target: str
    headers: dict[str, str]  # by lower-case name
    body: bytes
    served_before: int  # requests this connection carried before this one (> 0: a reused connection)

    def json(self) -> Any:
        return json.loads(self.body)


# Answers one request on `stream`; returns whether the connection stays open for another.
Handler = Callable[[Request, ByteStream], Awaitable[bool]]


async def _read_request(stream: ByteStream, buf: bytearray, served: int) -> Request | None:
    while b"\r\n\r\n" not in buf:
        try:
            buf.extend(await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return None
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = bytearray(rest)
    while len(body) < length:
        body.extend(await stream.receive())
    buf[:] = body[length:]
    return Request(method, target, headers, bytes(body[:length]), served)


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[int]:
    """Serve `handler` on 127.0.0.1 (keep-alive until it says otherwise); yields the port."""

    async def one(stream: ByteStream) -> None:
        buf = bytearray()
        served = 0
        while (req := await _read_request(stream, buf, served)) is not None:
            served += 1
            if not await handler(req, stream):
                return

    async with serve_streams(one) as port:  # its listener closes each connection after `one`
        yield port


@contextmanager
def in_thread(handler: Handler) -> Iterator[int]:
    """`serve` on an event loop of its own thread, for a synchronous test; yields the port."""
    with anyio.from_thread.start_blocking_portal() as portal, portal.wrap_async_context_manager(serve(handler)) as port:
        yield port


def reply(status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    reason = {200: "OK", 202: "Accepted", 404: "Not Found", 405: "Method Not Allowed"}.get(status, "Status")
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def json_reply(obj: Any, headers: dict[str, str] | None = None) -> bytes:
    return reply(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})


# An SSE reply framed by the connection closing: its end looks the same whether the server meant it.
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\r\n"


def event(data: Any = None, *, id: str | None = None, retry: int | None = None) -> bytes:
    """One SSE event; `data=None` with an id is a priming event (an empty `data:` line)."""
    out = []
    if id is not None:
        out.append(f"id: {id}")
    if retry is not None:
        out.append(f"retry: {retry}")
    out.append("data: " + json.dumps(data) if data is not None else "data:")
    return ("\n".join(out) + "\n\n").encode()


def result(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


OnCall = Callable[[Request, dict[str, Any], ByteStream], Awaitable[bool]]
OnGet = Callable[[Request, ByteStream], Awaitable[bool]]


async def no_get_stream(req: Request, stream: ByteStream) -> bool:
    await stream.send(reply(405))
    return True


async def no_calls(req: Request, msg: dict[str, Any], stream: ByteStream) -> bool:
    raise AssertionError("no tools/call expected")


@dataclass
class LegacyMcp:
    """A 2025-11-25 MCP server (it fails `server/discover`, so mcpx speaks the handshake era to
    it): `initialize` opens session "s-1"; `tools/call` is `on_call`'s, GET is `on_get`'s. Every
    request it sees is kept in `seen`, every tools/call message in `calls`, every answer the client
    POSTs to a request of the server's in `replies`."""

    on_call: OnCall = no_calls
    on_get: OnGet = no_get_stream
    tools: list[str] = field(default_factory=lambda: ["work"])
    list_changed: bool = False
    seen: list[Request] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)  # the client's answers to its requests

    async def __call__(self, req: Request, stream: ByteStream) -> bool:
        self.seen.append(req)
        if req.method == "GET":
            return await self.on_get(req, stream)
        if req.method == "DELETE":
            await stream.send(reply(200))
            return True
        msg = req.json()
        method = msg.get("method")
        if "method" not in msg:  # the client's answer to a request this server made
            self.replies.append(msg)
            await stream.send(reply(202))
            return True
        if "id" not in msg:
            await stream.send(reply(202))
            return True
        if method == "initialize":
            caps = {"tools": {"listChanged": self.list_changed}}
            res = {"protocolVersion": LEGACY, "capabilities": caps, "serverInfo": {"name": "scripted", "version": "0"}}
            await stream.send(json_reply({"jsonrpc": "2.0", "id": msg["id"], "result": res}, {"Mcp-Session-Id": "s-1"}))
            return True
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in self.tools]
            await stream.send(json_reply({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": tools}}))
            return True
        if method == "tools/call":
            self.calls.append(msg)
            return await self.on_call(req, msg, stream)
        error = {"code": -32601, "message": f"no method {method}"}
        await stream.send(json_reply({"jsonrpc": "2.0", "id": msg["id"], "error": error}))
        return True

    def gets(self) -> list[Request]:
        return [r for r in self.seen if r.method == "GET"]
