"""A Streamable HTTP upstream: each request is a POST whose reply is JSON or an SSE stream.

Requests go through `h1.Client`, one per transport (so one per upstream connection lifetime), not
through the pool's shared httpx client: httpx's per-request CPU made this hop cost 3-5 ms a call on
a busy machine (see h1.py).
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import AsyncGenerator, Callable
from typing import Any, Literal

import anyio
import httpx

from ...daemon.config import ServerConfig
from ...protocol import fastjson
from ...protocol.errors import UPSTREAM_UNAVAILABLE
from ...protocol.jsonrpc import Id
from ...protocol.revisions import Era
from ..transport import Feed
from . import h1

log = logging.getLogger("mcpx.upstream")

_SAFE = re.compile(r"[\x20-\x7e]*")
CONNECT_TIMEOUT_S = 30.0
LISTEN_CONNECT_TIMEOUT_S = 10.0
SSE_LINGER_S = 0.05  # how long an answered SSE reply may stay open before mcpx leaves it
# Errors that mean the upstream is gone or broken: the transport closes, and the pool reconnects.
_LOST = h1.ConnectionFailed
_FAILED = (h1.HttpError, OSError)  # OSError includes TimeoutError (connecting took too long)


def header_value(value: str) -> str:
    """Mcp-Name values that are not plain ASCII travel base64-sentinel encoded (SEP-2243)."""
    if _SAFE.fullmatch(value) and value == value.strip():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


async def iter_sse(resp: httpx.Response | h1.Response) -> AsyncGenerator[Any, None]:
    """Yield the JSON payload of every `data:` event in an SSE response."""
    data: list[str] = []
    async for line in resp.aiter_lines():
        if line == "":
            if data:
                payload = "\n".join(data)
                data = []
                try:
                    yield fastjson.loads(payload)
                except ValueError:
                    log.warning("upstream SSE event is not JSON: %.200r", payload)
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        try:
            yield fastjson.loads("\n".join(data))
        except ValueError:
            pass


class HttpTransport:
    kind: Literal["stdio", "http"] = "http"
    run_id: str | None = None  # the server does not outlive the daemon

    def __init__(self, name: str, cfg: ServerConfig) -> None:
        self.name = name
        self.cfg = cfg
        self.http = h1.Client(cfg.url or "", connect_timeout=CONNECT_TIMEOUT_S)
        self.closed = anyio.Event()
        self.era: Era | None = None  # set by the session once probed
        self.revision: str | None = None
        self.session_id: str | None = None
        self.detach = False  # the daemon stops but the next one carries the session on: no DELETE
        self._tg: anyio.abc.TaskGroup | None = None
        self._feed: Feed | None = None
        self._streams: dict[Id, anyio.CancelScope] = {}

    async def run(self, feed: Feed, started: Callable[[], None]) -> None:
        self._feed = feed
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                started()
                await self.closed.wait()
                tg.cancel_scope.cancel()
        finally:
            self.closed.set()
            await self.http.aclose()

    def _headers(self, msg: dict[str, Any]) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        h.update(self.cfg.headers)
        method = msg.get("method")
        params = msg.get("params") or {}
        if self.era == "modern" or (method == "server/discover"):
            version = ((params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")) or "2026-07-28"
            h["MCP-Protocol-Version"] = version
            if method:
                h["Mcp-Method"] = method
            name = (
                params.get("name")
                if method in ("tools/call", "prompts/get")
                else params.get("uri")
                if method == "resources/read"
                else params.get("taskId")
                if method in ("tasks/get", "tasks/update", "tasks/cancel")
                else None
            )
            if isinstance(name, str):
                h["Mcp-Name"] = header_value(name)
        elif self.era == "legacy":
            if self.revision:
                h["MCP-Protocol-Version"] = self.revision
            if self.session_id:
                h["Mcp-Session-Id"] = self.session_id
        return h

    async def send(self, msg: dict[str, Any]) -> None:
        if self.closed.is_set() or self._tg is None:
            raise ConnectionError("transport closed")
        if "method" in msg and "id" in msg:
            # The exchange runs in the caller's task (no task per request): its reply is fed
            # before send returns. Cancelling the caller leaves the response, which is how a
            # 2026-07-28 client cancels; abort() does the same from elsewhere.
            scope = anyio.CancelScope()
            self._streams[msg["id"]] = scope
            await self._exchange(msg, scope)
        else:
            # Notifications and our replies to server requests: a POST answered 202.
            await self._post_simple(msg)

    async def abort(self, request_id: Id) -> None:
        """Closing a request's response stream is how a modern client cancels it."""
        scope = self._streams.pop(request_id, None)
        if scope is not None:
            scope.cancel()

    async def _post_simple(self, msg: dict[str, Any]) -> None:
        try:
            async with self.http.stream("POST", self._headers(msg), _encode(msg)) as resp:
                await resp.aread()
        except _FAILED as exc:
            raise ConnectionError(str(exc)) from None

    async def _exchange(self, msg: dict[str, Any], scope: anyio.CancelScope) -> None:
        assert self._feed is not None
        rid = msg["id"]
        try:
            with scope:
                async with self.http.stream("POST", self._headers(msg), _encode(msg)) as resp:
                    sid = resp.headers.get("mcp-session-id")
                    if sid and msg.get("method") == "initialize":
                        self.session_id = sid
                    ctype = resp.headers.get("content-type", "")
                    if "text/event-stream" in ctype and resp.status_code < 400:
                        events = iter_sse(resp)
                        try:
                            async for item in events:
                                if isinstance(item, dict):
                                    await self._feed(item, rid)
                                    if item.get("id") == rid and ("result" in item or "error" in item):
                                        break  # answered: the caller goes on, whenever the server closes
                            else:
                                return
                            # A server SHOULD close the stream after the response; one that lingers
                            # gets a moment, then the connection is closed (not reused): it answered.
                            with anyio.move_on_after(SSE_LINGER_S):
                                async for item in events:
                                    if isinstance(item, dict):
                                        await self._feed(item, rid)
                        finally:
                            await events.aclose()
                        return
                    body = await resp.aread()
                    try:
                        data = fastjson.loads(body) if body else None
                    except ValueError:
                        data = None
                    if isinstance(data, dict) and ("result" in data or "error" in data):
                        # A JSON body answers this POST's request, whatever id a server put on an
                        # error it could not tie to one (SDK 1.30 says "server-error").
                        data["id"] = rid
                        await self._feed(data, rid)
                        return
                    if resp.status_code == 404 and self.era == "legacy" and self.session_id:
                        self.closed.set()  # session gone upstream: reconnect and re-initialize
                    await self._feed(_error(rid, f"upstream {self.name!r} answered HTTP {resp.status_code}"), rid)
        except _FAILED as exc:
            if isinstance(exc, _LOST):
                self.closed.set()
            await self._feed(_error(rid, f"upstream {self.name!r} unreachable: {exc}"), rid)
        finally:
            self._streams.pop(rid, None)

    async def open_listen_stream(self) -> None:
        """Legacy servers push list_changed on a GET stream; a 405 means they offer none."""
        if self._tg is None:
            return
        self._tg.start_soon(self._get_stream)

    async def _get_stream(self) -> None:
        assert self._feed is not None
        headers = {"Accept": "text/event-stream", **self.cfg.headers}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.revision:
            headers["MCP-Protocol-Version"] = self.revision
        try:
            async with self.http.stream("GET", headers, connect_timeout=LISTEN_CONNECT_TIMEOUT_S) as resp:
                if resp.status_code != 200:
                    return
                async for item in iter_sse(resp):
                    if isinstance(item, dict):
                        await self._feed(item, None)
        except _FAILED:
            return

    @property
    def returncode(self) -> int | None:
        return None

    async def close(self) -> None:
        if self.era == "legacy" and self.session_id and not self.detach:
            with anyio.move_on_after(2, shield=True):
                try:
                    async with self.http.stream(
                        "DELETE", {"Mcp-Session-Id": self.session_id, **self.cfg.headers}
                    ) as resp:
                        await resp.aread()
                except _FAILED:
                    pass
        self.closed.set()


def _encode(msg: dict[str, Any]) -> bytes:
    return fastjson.dumps(msg)


def _error(rid: Id, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": UPSTREAM_UNAVAILABLE, "message": message}}
