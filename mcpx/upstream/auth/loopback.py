"""The loopback listener a sign-in with `oauth.callbackPort` comes back to: `http://localhost:<port>/callback`
on 127.0.0.1, open only while such a sign-in waits (as Claude Code's). It reads one request head, hands
its query to `on_callback`, answers with the page that returns, and closes the connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl, urlsplit

import anyio
from anyio.abc import SocketStream

MAX_HEAD = 16 * 1024
READ_TIMEOUT_S = 10.0
OnCallback = Callable[[dict[str, str]], Awaitable[tuple[int, str]]]  # query -> (HTTP status, HTML page)


async def serve(port: int, on_callback: OnCallback, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """Listen on 127.0.0.1:`port` until cancelled; OSError (the port is taken) before `started`."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port, reuse_port=False)
    task_status.started()
    async with listener:
        await listener.serve(lambda stream: _one(stream, on_callback))


async def _one(stream: SocketStream, on_callback: OnCallback) -> None:
    async with stream:
        head = b""
        with anyio.move_on_after(READ_TIMEOUT_S):
            while b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) < MAX_HEAD:
                try:
                    head += await stream.receive(4096)
                except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    return
        line = head.split(b"\n", 1)[0].decode("latin-1").strip()
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            status, page = 400, "not a sign-in callback"
        else:
            target = urlsplit(parts[1])
            if target.path != "/callback":
                status, page = 404, "not found"
            else:
                status, page = await on_callback(dict(parse_qsl(target.query, keep_blank_values=True)))
        body = page.encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        reply = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        ).encode() + body
        try:
            await stream.send(reply)
        except (anyio.BrokenResourceError, OSError):
            pass
