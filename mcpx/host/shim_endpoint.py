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
from .outbound import Outbound
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
        peer = f"{ws.client.host}:{ws.client.port}" if ws.client else None
        conn = HostConnection("stdio", peer=peer)
        pid = ws.headers.get("x-mcpx-shim-pid", "")
        conn.shim_pid = int(pid) if pid.isdigit() else None
        conn.label = naming.from_header(ws.headers.get(naming.LABEL_HEADER) or ws.headers.get(naming.PROCESS_HEADER))
        # Everything for this host goes through one bounded channel with its own writer: an upstream
        # reader relaying progress, or a task change, never waits for a shim that stopped reading.
        slow = anyio.Event()
        out = Outbound(f"{conn.record_id} (mcpx serve)", on_slow=lambda _why: slow.set())
        write = out.send

        async def send_text(frame: dict[str, Any]) -> None:
            await ws.send_text(json.dumps(frame, separators=(",", ":"), ensure_ascii=False))

        async def notify(frame: dict[str, Any]) -> None:
            emit(conn.revision or MODERN, frame.get("method"), frame)
            out.send_nowait(frame)

        conn.attach(notify)
        await self.router.open(conn, "shim")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._writer, out, send_text)
                tg.start_soon(_end_when, slow, tg.cancel_scope)
                while True:
                    try:
                        text = await ws.receive_text()
                    except (WebSocketDisconnect, RuntimeError):
                        break
                    await self._line(conn, text, write, notify, tg)
                tg.cancel_scope.cancel()  # stop waiting; the calls themselves run on in the router
        finally:
            out.close()
            with anyio.CancelScope(shield=True):
                if out.slow is not None:
                    with anyio.move_on_after(1):
                        await ws.close(code=1008, reason=out.slow[:120])
                try:
                    await self.router.close(conn, out.slow or "the mcpx serve process disconnected")
                except StoreError as exc:
                    log.warning("shim %s: could not record its end: %s", conn.record_id, exc)

    async def _writer(self, out: Outbound, send_text: Send) -> None:
        try:
            await out.drain(send_text)
        except Exception as exc:  # noqa: BLE001 - the socket closed, however: what was queued is undeliverable
            log.debug("shim writer %s stopped: %s", out.name, exc)
            out.close()

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
            await write(call.frame)  # queued; a shim gone meanwhile loses only this reply (a task stays collectable)


async def _end_when(slow: anyio.Event, scope: anyio.CancelScope) -> None:
    """A slow consumer's connection ends: the reading loop stops, and the socket is closed."""
    await slow.wait()
    scope.cancel()
