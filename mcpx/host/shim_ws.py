"""`mcpx serve` over the `/v1/stdio` websocket: the fallback carrier (shim_endpoint.py says what a
shim connection does). A shim uses it when the state folder has no shim socket: a daemon of an
older version still running after an upgrade, or a folder where a Unix socket cannot be made.
It needs the API token (the socket's file mode is that one's credential); the shim names itself
in headers."""

from __future__ import annotations

from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..connections import naming
from ..protocol import jsonrpc
from . import shim_wire
from .connection import HostConnection
from .shim_endpoint import ShimEndpoint

PID_HEADER = "x-mcpx-shim-pid"
INSTANCE_HEADER = "x-mcpx-shim-instance"


class _WebsocketChannel:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws

    async def receive(self) -> str | None:
        try:
            return await self.ws.receive_text()
        except (WebSocketDisconnect, RuntimeError):
            return None

    async def send(self, frames: list[dict[str, Any]]) -> None:
        for frame in frames:  # a websocket message each
            await self.ws.send_text(jsonrpc.dumps(frame).decode())

    async def close(self, reason: str) -> None:
        await self.ws.close(code=1008, reason=reason[:120])


class ShimWebsocket:
    def __init__(self, endpoint: ShimEndpoint, token: str) -> None:
        self.endpoint = endpoint
        self.token = token

    async def __call__(self, ws: WebSocket) -> None:
        if ws.headers.get("authorization", "") != f"Bearer {self.token}":
            await ws.close(code=4401, reason="mcpx API token required")
            return
        await ws.accept()
        conn = HostConnection("stdio", peer=f"{ws.client.host}:{ws.client.port}" if ws.client else None)
        pid = ws.headers.get(PID_HEADER, "")
        conn.shim_pid = int(pid) if pid.isdigit() else None
        conn.shim_instance = shim_wire.valid_instance(ws.headers.get(INSTANCE_HEADER))
        conn.id = shim_wire.connection_id(conn.shim_instance) or conn.id
        conn.given_label = naming.from_header(ws.headers.get(naming.LABEL_HEADER))
        conn.process = naming.from_header(ws.headers.get(naming.PROCESS_HEADER))
        await self.endpoint.serve(conn, _WebsocketChannel(ws))
