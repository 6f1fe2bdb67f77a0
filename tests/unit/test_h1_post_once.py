"""`h1.Client` never sends a POST twice unless it knows the first was not received: a kept-alive
connection that closes after the server read the POST is an error, not a second POST (the server
may have run the tool). Real raw socket servers on 127.0.0.1."""

from __future__ import annotations

import anyio
import pytest
from anyio.abc import ByteStream
from scripted_http import Request, reply, serve

from mcpx.upstream.http import h1

pytestmark = pytest.mark.anyio


class Server:
    """Answers GETs; answers POSTs too, except that one arriving on a reused connection is read
    and then the connection closes without a reply (a crash or restart after reading it)."""

    def __init__(self, drop_reused_posts: bool = True) -> None:
        self.drop_reused_posts = drop_reused_posts
        self.posts: list[Request] = []
        self.connections_closed = anyio.Event()

    async def __call__(self, req: Request, stream: ByteStream) -> bool:
        if req.method == "POST":
            self.posts.append(req)
            if self.drop_reused_posts and req.served_before > 0:
                return False
        await stream.send(reply(200, b"ok"))
        return True


async def exchange(client: h1.Client, method: str) -> bytes:
    with anyio.fail_after(5):
        async with client.stream(method, {}, b"{}" if method == "POST" else b"") as resp:
            return await resp.aread()


async def test_post_read_then_dropped_on_kept_connection_is_an_error_not_a_second_post() -> None:
    server = Server()
    async with serve(server) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/mcp")
        try:
            assert await exchange(client, "GET") == b"ok"
            assert len(client._idle) == 1  # the POST goes out on this kept connection
            with pytest.raises(h1.ConnectionFailed, match="without a reply"):
                await exchange(client, "POST")
            await anyio.sleep(0.1)  # a second POST, if one were sent, has arrived by now
        finally:
            await client.aclose()
    assert len(server.posts) == 1, "the POST was sent again: the tool would run twice"


async def test_get_on_a_kept_connection_that_drops_silently_is_sent_again() -> None:
    """GET is idempotent (RFC 9110 9.2.2): repeating it is safe, and saves a spurious error."""
    gets: list[Request] = []

    async def handler(req: Request, stream: ByteStream) -> bool:
        gets.append(req)
        if len(gets) == 2:
            return False  # the second GET, on the reused connection: read, then closed
        await stream.send(reply(200, b"ok"))
        return True

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/mcp")
        try:
            assert await exchange(client, "GET") == b"ok"
            assert await exchange(client, "GET") == b"ok"
        finally:
            await client.aclose()
    assert [g.served_before for g in gets] == [0, 1, 0]


async def test_post_after_the_server_closed_the_idle_connection_goes_on_a_fresh_one() -> None:
    """A connection the server closed while idle is seen closed before the POST is written: the
    POST goes on a new connection, once."""
    closed = anyio.Event()

    async def handler(req: Request, stream: ByteStream) -> bool:
        await stream.send(reply(200, req.method.encode()))
        if req.method == "GET":
            await stream.aclose()
            closed.set()
            return False
        return True

    posts = 0

    async def counting(req: Request, stream: ByteStream) -> bool:
        nonlocal posts
        posts += req.method == "POST"
        return await handler(req, stream)

    async with serve(counting) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/mcp")
        try:
            assert await exchange(client, "GET") == b"GET"
            with anyio.fail_after(5):
                await closed.wait()
            await anyio.sleep(0.05)  # its FIN has reached the client
            assert await exchange(client, "POST") == b"POST"
        finally:
            await client.aclose()
    assert posts == 1
