"""`h1.Client` connections carry TCP keepalive: with no read timeout (SSE replies may be long), it
is what ends a read from a peer that vanished without closing (a call must not wait on it)."""

from __future__ import annotations

import socket

import pytest
from anyio.abc import ByteStream, SocketAttribute
from scripted_http import Request, reply, serve

from mcpx.upstream.http import h1

pytestmark = pytest.mark.anyio


async def test_connections_probe_a_silent_peer_within_about_half_a_minute() -> None:
    async def handler(req: Request, stream: ByteStream) -> bool:
        await stream.send(reply(200, b"ok"))
        return True

    async with serve(handler) as port:
        client = h1.Client(f"http://127.0.0.1:{port}/mcp")
        try:
            async with client.stream("GET", {}) as resp:
                sock = resp._conn.stream.extra(SocketAttribute.raw_socket)
                await resp.aread()
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_KEEPIDLE"):
                idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
                interval = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
                count = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
                assert idle + interval * count <= 35, (idle, interval, count)
        finally:
            await client.aclose()
