"""How `mcpx serve` reaches the daemon: the shim socket, or the `/v1/stdio` websocket as a fallback.

Both are plain blocking sockets driven by serve.py's poll loop: `send` writes a batch of lines in
one call, `receive` is called when the socket is readable and returns the whole frames it got
(`closed` once the daemon is gone). The socket is the way (host/shim_wire.py; measured in
bench/README.md); the websocket, spoken through the `websockets` sans-I/O core, is for a daemon
that has no socket: an older daemon still running after an upgrade, or a state folder on a
filesystem without Unix sockets. MCPX_SHIM_TRANSPORT=unix|ws forces one.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Protocol

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from ..connections import naming
from ..host import shim_wire

READ_SIZE = 256 * 1024
CONNECT_TIMEOUT_S = 10.0
PID_HEADER = "X-Mcpx-Shim-Pid"
INSTANCE_HEADER = "X-Mcpx-Shim-Instance"  # (host/shim_ws.py reads both)


class Link(Protocol):
    sock: socket.socket
    closed: bool

    def send(self, lines: list[bytes]) -> None: ...
    def receive(self) -> list[bytes]: ...
    def close(self) -> None: ...


class UnixLink:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False
        self._partial = b""

    @classmethod
    def connect(cls, folder: Path, hello: shim_wire.Hello) -> UnixLink:
        """Raises OSError: FileNotFoundError when the daemon has no socket, ConnectionRefusedError
        when nobody listens on it."""
        path = shim_wire.socket_path(folder)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if len(os.fsencode(path)) <= shim_wire.SUN_PATH_MAX:
                sock.connect(str(path))
            else:  # too long for sockaddr_un: through the folder's fd
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    sock.connect(f"/proc/self/fd/{fd}/{path.name}")
                finally:
                    os.close(fd)
            sock.sendall(hello.encode())
        except OSError:
            sock.close()
            raise
        return cls(sock)

    def send(self, lines: list[bytes]) -> None:
        lines.append(b"")  # so the join ends with a newline
        self.sock.sendall(b"\n".join(lines))

    def receive(self) -> list[bytes]:
        try:
            data = self.sock.recv(READ_SIZE)
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return []
        *lines, self._partial = (self._partial + data).split(b"\n") if self._partial else data.split(b"\n")
        return lines

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class WebsocketLink:
    def __init__(self, sock: socket.socket, proto: ClientProtocol) -> None:
        self.sock = sock
        self.proto = proto
        self.closed = False
        self._fragments: list[bytes] = []
        self._frames: list[Frame] = []  # frames that came with the handshake's response

    @classmethod
    def connect(cls, port: int, token: str, hello: shim_wire.Hello) -> WebsocketLink:
        """Raises OSError, or InvalidHandshake when the daemon refuses."""
        proto = ClientProtocol(parse_uri(f"ws://127.0.0.1:{port}/v1/stdio"), max_size=None)
        request = proto.connect()
        request.headers["Authorization"] = f"Bearer {token}"
        request.headers[PID_HEADER] = str(os.getpid())
        if hello.instance:
            request.headers[INSTANCE_HEADER] = hello.instance
        if hello.label:
            request.headers[naming.LABEL_HEADER] = naming.to_header(hello.label)
        if hello.process:
            request.headers[naming.PROCESS_HEADER] = naming.to_header(hello.process)
        proto.send_request(request)
        sock = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = cls(sock, proto)
            link._flush()
            while proto.state is State.CONNECTING:
                data = sock.recv(READ_SIZE)
                if data:
                    proto.receive_data(data)
                else:
                    proto.receive_eof()
                    break
            if proto.handshake_exc is not None:
                raise proto.handshake_exc
            if proto.state is not State.OPEN:
                raise InvalidHandshake("the daemon closed the connection during the handshake")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        link._frames = [e for e in proto.events_received() if isinstance(e, Frame)]
        return link

    def send(self, lines: list[bytes]) -> None:
        for line in lines:
            self.proto.send_text(line)
        self._flush()

    def receive(self) -> list[bytes]:
        try:
            data = self.sock.recv(READ_SIZE)
        except OSError:
            data = b""
        if data:
            self.proto.receive_data(data)
        else:
            self.proto.receive_eof()
        lines: list[bytes] = []
        frames = [e for e in self.proto.events_received() if isinstance(e, Frame)]
        if self._frames:
            frames, self._frames = [*self._frames, *frames], []
        for frame in frames:
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
                self._fragments.append(bytes(frame.data))
                if frame.fin:
                    lines.append(b"".join(self._fragments))
                    self._fragments.clear()
        try:
            self._flush()  # pongs, and the reply to a close
        except OSError:
            pass
        if not data or self.proto.state is State.CLOSED or self.proto.close_expected():
            self.closed = True
        return lines

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def _flush(self) -> None:
        chunks = self.proto.data_to_send()
        if chunks:
            self.sock.sendall(b"".join(chunks))
