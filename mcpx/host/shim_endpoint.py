"""The daemon's side of `mcpx serve`: one websocket = one stdio host connection, lines both ways."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from anyio.abc import TaskGroup
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..connections import naming
from ..protocol import jsonrpc
from ..protocol.errors import McpError
from ..protocol.revisions import LEGACY_LATEST, MODERN, is_modern
from ..store import StoreError
from .connection import HostConnection, Send
from .router import Call, HostRouter, emit

log = logging.getLogger("mcpx.host")


class ShimEndpoint:
    def __init__(self, router: HostRouter, token: str) -> None:
        self.router = router
        self.token = token

    async def __call__(self, ws: WebSocket) -> None:
        auth = ws.headers.get("authorization", "")
        if auth != f"Bearer {self.token}":
            await ws.close(code=4401, reason="mcpx API token required")
            return
        await ws.accept()
        lock = anyio.Lock()
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else None
        conn = HostConnection("stdio", peer=peer)
        pid = ws.headers.get("x-mcpx-shim-pid", "")
        conn.shim_pid = int(pid) if pid.isdigit() else None
        conn.label = naming.from_header(ws.headers.get(naming.LABEL_HEADER) or ws.headers.get(naming.PROCESS_HEADER))

        async def write(frame: dict[str, Any]) -> None:
            async with lock:
                await ws.send_text(json.dumps(frame, separators=(",", ":"), ensure_ascii=False))

        async def notify(frame: dict[str, Any]) -> None:
            emit(conn.revision or MODERN, frame.get("method"), frame)
            try:
                await write(frame)
            except Exception as exc:  # noqa: BLE001 - whatever closed the socket, progress is advisory
                log.debug("shim %s gone: notification %s dropped (%s)", conn.id, frame.get("method"), exc)

        conn.attach(notify)
        await self.router.open(conn, "shim")
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    try:
                        text = await ws.receive_text()
                    except (WebSocketDisconnect, RuntimeError):
                        break
                    await self._line(conn, text, write, notify, tg)
                tg.cancel_scope.cancel()  # stop waiting; the calls themselves run on in the router
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.router.close(conn, "the mcpx serve process disconnected")
                except StoreError as exc:
                    log.warning("shim %s: could not record its end: %s", conn.record_id, exc)

    async def _line(self, conn: HostConnection, text: str, write: Send, notify: Send, tg: TaskGroup) -> None:
        try:
            msg = jsonrpc.parse(text)
        except McpError as exc:
            await write(emit(conn.revision or LEGACY_LATEST, None, jsonrpc.error_from(None, exc)))
            return
        if msg.kind == "response":
            self.router.response(conn, msg)  # the host answering a request mcpx sent it
            return
        if msg.kind == "notification":
            await self.router.notification(conn, msg)
            return
        if msg.method == "initialize" and not is_modern(msg.params):
            frame = self.router.initialize(conn, msg)
            if "result" in frame:
                await self.router.initialized(conn)
            await write(frame)
            return
        try:
            if is_modern(msg.params):
                ctx = self.router.modern_context(conn, msg.params, notify)
            else:
                ctx = self.router.legacy_context(conn, msg.params, notify)
        except McpError as exc:
            rev = MODERN if is_modern(msg.params) else (conn.revision or LEGACY_LATEST)
            await write(emit(rev, msg.method, jsonrpc.error_from(msg.id, exc)))
            return
        refused = self.router.over_budget(conn)
        if refused is not None:
            await write(emit(ctx.revision, msg.method, jsonrpc.error_from(msg.id, refused)))
            return
        call = self.router.start(ctx, msg)
        tg.start_soon(self._deliver, call, write)

    async def _deliver(self, call: Call, write: Send) -> None:
        await call.done.wait()
        if call.frame is not None:
            try:
                await write(call.frame)
            except Exception as exc:  # noqa: BLE001 - the shim is gone, however its socket closed
                # The call itself completed (a task stays collectable); only this reply is lost.
                log.warning("shim gone before its reply to request %r could be sent: %s", call.frame.get("id"), exc)
