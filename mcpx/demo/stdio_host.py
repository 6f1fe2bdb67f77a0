"""A 2025-11-25 host over stdio: spawns `mcpx serve` and speaks JSON-RPC on its stdin/stdout, as
an IDE that launches MCP servers as commands does (the console demo's "demo-cli" host)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ..connections import naming
from ..protocol.revisions import LEGACY_LATEST
from .host_client import RpcError

MAX_LINE = 64 * 1024 * 1024


@asynccontextmanager
async def open_stdio_host(
    state_dir: Path, client_info: dict[str, Any], capabilities: dict[str, Any]
) -> AsyncIterator[StdioHost]:
    """Spawn `mcpx serve`, initialize, yield the host; on the way out close its stdin (EOF is how a
    stdio host says it is done), then kill it if it lingers."""
    # The shim inherits our stderr (the demo's hosts log). It would start a daemon if none ran:
    # the caller spawns it only while the demo's daemon runs.
    cmd = [sys.executable, "-m", "mcpx", "serve", "--state-dir", str(state_dir)]
    label = f"{client_info.get('name', '')} {client_info.get('version', '')}"  # as the operator knows it
    env = {**os.environ, naming.LABEL_ENV: label}
    proc = await anyio.open_process(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env)
    host = StdioHost(proc)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.read)
            await host.initialize(client_info, capabilities)
            yield host
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                if proc.stdin is not None:
                    await proc.stdin.aclose()
            with anyio.move_on_after(2):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


class StdioHost:
    """`request()` raises RpcError for a JSON-RPC error, ConnectionError once the shim is gone."""

    def __init__(self, proc: Process) -> None:
        self.revision = LEGACY_LATEST
        self._proc = proc
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._gone = False

    async def initialize(self, client_info: dict[str, Any], capabilities: dict[str, Any]) -> None:
        res = await self.request(
            "initialize", {"protocolVersion": LEGACY_LATEST, "capabilities": capabilities, "clientInfo": client_info}
        )
        self.revision = str(res.get("protocolVersion") or LEGACY_LATEST)
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _send(self, msg: dict[str, Any]) -> None:
        if self._gone or self._proc.stdin is None:
            raise ConnectionError("mcpx serve has exited")
        try:
            await self._proc.stdin.send((json.dumps(msg) + "\n").encode())
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ConnectionError(f"mcpx serve has exited: {exc}") from None

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        rid = next(self._ids)
        done, box = anyio.Event(), list[dict[str, Any]]()
        self._waiting[rid] = (done, box)
        try:
            await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
            await done.wait()
        finally:
            self._waiting.pop(rid, None)
        if not box:
            raise ConnectionError("mcpx serve exited before it answered")
        reply = box[0]
        if "error" in reply:
            raise RpcError(reply["error"] if isinstance(reply["error"], dict) else {"code": -32603, "message": "?"})
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def read(self) -> None:
        """Route every line the shim writes, until it exits."""
        assert self._proc.stdout is not None
        lines = BufferedByteReceiveStream(self._proc.stdout)
        try:
            while True:
                line = await lines.receive_until(b"\n", MAX_LINE)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    await self._dispatch(msg)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the shim exited (the daemon went away, or we closed its stdin)
        finally:
            self._gone = True
            for done, _box in list(self._waiting.values()):
                done.set()  # with no reply: request() raises ConnectionError

    async def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" not in msg:
            waiting = self._waiting.get(msg["id"]) if isinstance(msg.get("id"), int) else None
            if waiting is not None:
                waiting[1].append(msg)
                waiting[0].set()
        elif "id" in msg:
            # A server request: this host declared nothing, so it answers only ping.
            if msg["method"] == "ping":
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
            else:
                reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not supported"}}
            with contextlib.suppress(ConnectionError):
                await self._send(reply)
        # Notifications (progress, task status) need no answer; the demo hosts do not show them.
