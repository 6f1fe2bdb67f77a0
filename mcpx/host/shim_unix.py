"""`mcpx serve` over the shim socket: one JSON line per frame, one write per frame (shim_wire.py has
the format, shim_endpoint.py what a shim connection does).

Measured against the websocket it replaces (bench/README.md, `proxy_overhead.py --only stdio`):
no handshake, no masking or frame headers, and no HTTP server between the shim and the router.
The socket is bound as soon as the daemon holds its state folder (so a shim reconnecting across a
restart finds it early and waits in the backlog) and served once the daemon serves. Who may
connect: the socket is 0600 in a 0700 folder, and where the platform tells the peer's uid
(SO_PEERCRED), a peer of another user is closed unheard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from pathlib import Path
from typing import Any

from ..connections import naming
from ..protocol import jsonrpc
from . import shim_wire
from .connection import HostConnection
from .shim_endpoint import ShimEndpoint

log = logging.getLogger("mcpx.host")

HELLO_TIMEOUT_S = 10.0
CLOSE_WAIT_S = 2.0
_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class _LineChannel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def receive(self) -> bytes | None:
        while True:
            try:
                line = await self.reader.readline()
            except (ValueError, ConnectionError) as exc:  # ValueError: a line over MAX_LINE
                log.warning("shim socket: closing a connection: %s", exc)
                return None
            if not line:
                return None
            if line.strip():
                return line

    async def send(self, frames: list[dict[str, Any]]) -> None:
        self.writer.write(b"".join(jsonrpc.dumps(frame) + b"\n" for frame in frames))  # one write
        await self.writer.drain()

    async def close(self, reason: str) -> None:
        log.info("shim socket: closing a connection: %s", reason)
        self.writer.close()


def bind(folder: Path) -> socket.socket:
    """The listening shim socket, 0600, replacing what a daemon killed before left behind (the
    caller holds the state folder's lock: no other daemon owns it)."""
    path = shim_wire.socket_path(folder)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if len(os.fsencode(path)) <= shim_wire.SUN_PATH_MAX:
            sock.bind(str(path))
        else:  # too long for sockaddr_un: through the folder's fd, a short path to the same place
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                sock.bind(f"/proc/self/fd/{fd}/{path.name}")
            finally:
                os.close(fd)
        os.chmod(path, 0o600)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def peer_pid(writer: asyncio.StreamWriter) -> tuple[bool, int | None]:
    """(whether the peer may connect, its pid where the platform tells)."""
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return True, None  # elsewhere the file mode alone decides
    try:
        pid, uid, _gid = _CREDS.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _CREDS.size))
    except OSError:
        return True, None
    return uid == os.getuid(), pid or None


class ShimSocket:
    def __init__(self, endpoint: ShimEndpoint, folder: Path) -> None:
        self.endpoint = endpoint
        self.folder = folder
        self.path = shim_wire.socket_path(folder)
        self._server: asyncio.AbstractServer | None = None
        self._clients: dict[asyncio.StreamWriter, tuple[asyncio.StreamReader, asyncio.Task[Any]]] = {}

    async def listen(self) -> None:
        """Bound and listening (a connection waits in the backlog until `serve`)."""
        self._server = await asyncio.start_unix_server(
            self._client, sock=bind(self.folder), limit=shim_wire.MAX_LINE, start_serving=False
        )

    async def serve(self) -> None:
        if self._server is not None:
            await self._server.start_serving()

    async def aclose(self) -> None:
        """Stop listening and end every shim's connection: what is queued for it goes out first
        (a call cut by the daemon stopping is answered), then the shim sees its socket end."""
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        for reader, _task in self._clients.values():
            reader.feed_eof()  # the connection's reading loop ends as if the shim had gone
        pending = [task for _reader, task in self._clients.values() if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_WAIT_S)
        for writer in list(self._clients):
            writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients[writer] = (reader, task)
        try:
            allowed, pid = peer_pid(writer)
            if not allowed:
                log.warning("shim socket: refused a connection from another user (pid %s)", pid)
                return
            try:
                hello = shim_wire.parse_hello(await asyncio.wait_for(reader.readuntil(b"\n"), HELLO_TIMEOUT_S))
            except (TimeoutError, ValueError, asyncio.IncompleteReadError, ConnectionError) as exc:
                log.warning("shim socket: no hello from pid %s: %s", pid, exc)
                return
            conn = HostConnection("stdio")
            conn.shim_pid = pid
            conn.shim_instance = hello.instance
            conn.id = shim_wire.connection_id(hello.instance) or conn.id
            conn.given_label = naming.clean_label(hello.label)
            conn.process = naming.clean_label(hello.process)
            await self.endpoint.serve(conn, _LineChannel(reader, writer))
        except Exception:  # one shim's failure is logged; the daemon serves the others
            log.exception("shim socket: a connection failed")
        finally:
            self._clients.pop(writer, None)
            writer.close()
