"""The daemon's side of `mcpx serve`: one shim connection = one stdio host connection, frames both ways.

What a shim connection does is the same whatever carries its frames; the carriers are thin
variants beside this module: `shim_unix.py` (a Unix socket in the state folder, one JSON line per
frame: what `mcpx serve` uses) and `shim_ws.py` (the `/v1/stdio` websocket: the fallback for a
shim that finds no socket). Each builds the HostConnection from what its transport tells about the
shim (who it is, where it runs) and hands it here with a ShimChannel.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import anyio

from ..protocol import fastjson, jsonrpc
from ..protocol.errors import McpError
from ..protocol.revisions import LEGACY_LATEST, MODERN, is_modern
from ..store import StoreError
from . import shim_wire
from .connection import HostConnection, Send
from .outbound import Outbound, Write
from .router import Call, HostRouter, emit

log = logging.getLogger("mcpx.host")

DISCONNECTED = "the mcpx serve process disconnected"
FLUSH_S = 1.0  # at the end of a connection, how long its queued frames may take to go out


class ShimChannel(Protocol):
    """One shim's frames, as its transport carries them."""

    async def receive(self) -> bytes | str | None:
        """The next frame from the shim (one JSON-RPC message), or None once it is gone."""
        ...

    async def send(self, frames: list[dict[str, Any]]) -> None:
        """Write frames to the shim, in order (the writer task is the only caller)."""
        ...

    async def close(self, reason: str) -> None:
        """End the connection from our side (a slow consumer), telling the shim why where it can."""
        ...


class ShimEndpoint:
    def __init__(self, router: HostRouter) -> None:
        self.router = router

    async def serve(self, conn: HostConnection, channel: ShimChannel) -> None:
        """Serve one shim until it goes (or falls too far behind)."""
        # Everything for this host goes through one bounded channel with its own writer: an upstream
        # reader relaying progress, or a task change, never waits for a shim that stopped reading.
        slow = anyio.Event()
        out = Outbound(f"{conn.record_id} (mcpx serve)", on_slow=lambda _why: slow.set(), stall_s=self.router.stall_s)
        write = out.send

        async def notify(frame: dict[str, Any]) -> None:
            emit(conn.revision or MODERN, frame.get("method"), frame)
            out.send_nowait(frame)

        conn.attach(notify)
        await self.router.open(conn, "shim")
        try:
            async with anyio.create_task_group() as tg:
                written = anyio.Event()  # the writer ended: at the end item, or the socket failed
                tg.start_soon(self._writer, out, channel.send, written)
                tg.start_soon(_end_when, slow, tg.cancel_scope)
                while (frame := await channel.receive()) is not None:
                    await self._frame(conn, frame, write, notify, out)
                # What is queued still goes out if it can (the daemon stopping: the cut calls'
                # replies); to a shim that is gone the first write fails and ends the writer.
                out.send_nowait(None)
                with anyio.move_on_after(FLUSH_S):
                    await written.wait()
                tg.cancel_scope.cancel()  # stop waiting; the calls themselves run on in the router
        finally:
            out.close()
            with anyio.CancelScope(shield=True):
                if out.slow is not None:
                    with anyio.move_on_after(1):
                        await channel.close(out.slow)
                try:
                    await self.router.close(conn, out.slow or DISCONNECTED)
                except StoreError as exc:
                    log.warning("shim %s: could not record its end: %s", conn.record_id, exc)

    async def _writer(self, out: Outbound, send: Write, written: anyio.Event) -> None:
        try:
            await out.drain(send)
        except Exception as exc:  # noqa: BLE001 - the socket closed, however: what was queued is undeliverable
            log.debug("shim writer %s stopped: %s", out.name, exc)
            out.close()
        finally:
            written.set()

    async def _frame(self, conn: HostConnection, text: bytes | str, write: Send, notify: Send, out: Outbound) -> None:
        resumed = False
        if text[:13] in (b'{"mcpx-shim":', '{"mcpx-shim":'):
            try:
                inner = shim_wire.resumed(fastjson.loads(text))
            except ValueError:
                inner = None
            if inner is None:
                return  # a line of the shim's own that this daemon does not know: not the host's
            text, resumed = fastjson.dumps(inner), True
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
        knew_client = bool(conn.client_info)
        try:
            if is_modern(msg.params):
                ctx = self.router.modern_context(conn, msg.params, notify)
            else:
                ctx = self.router.legacy_context(conn, msg.params, notify)
        except McpError as exc:
            rev = MODERN if is_modern(msg.params) else (conn.revision or LEGACY_LATEST)
            await write(emit(rev, msg.method, jsonrpc.error_from(msg.id, exc)))
            return
        ctx.resumed = resumed
        if not knew_client and conn.client_info:  # a 2026 host's first request named its client
            await self.router.initialized(conn)
        refused = self.router.over_budget(conn)
        if refused is not None:
            await write(emit(ctx.revision, msg.method, jsonrpc.error_from(msg.id, refused)))
            return
        call = self.router.start(ctx, msg)
        # The reply is queued when the call ends (a hook, not a task per call). A shim gone
        # meanwhile loses only this reply: its Outbound is closed, and a task stays collectable.
        call.when_done(lambda: _deliver(call, out))


def _deliver(call: Call, out: Outbound) -> None:
    if call.frame is not None:
        out.send_nowait(call.frame)


async def _end_when(slow: anyio.Event, scope: anyio.CancelScope) -> None:
    """A slow consumer's connection ends: the reading loop stops, and the socket is closed."""
    await slow.wait()
    scope.cancel()
