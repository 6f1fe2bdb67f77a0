"""`/mcp`: Streamable HTTP for both eras on one URL (raw ASGI, so statuses and streams are ours).

A request with `initialize` starts a legacy session (Mcp-Session-Id); a request whose `_meta` names
a protocol version is stateless 2026-07-28; anything else must belong to a known legacy session.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from typing import Any

import anyio
from starlette.types import Receive, Scope
from starlette.types import Send as AsgiSend

from ...connections import naming
from ...protocol import jsonrpc, modern
from ...protocol.errors import (
    HEADER_MISMATCH,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    InvalidParams,
    InvalidRequest,
    McpError,
)
from ...protocol.origin import origin_allowed
from ...protocol.revisions import LEGACY_LATEST, MODERN, Era, is_modern
from ...telemetry import tracing
from ..auth import TokenTable
from ..connection import HostConnection, RequestContext
from ..outbound import Outbound
from ..router import Call, HostRouter, StreamItem, emit, notifier
from .peer_process import look_up_again, look_up_process
from .sessions import HttpHosts

log = logging.getLogger("mcpx.host")

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
KEEPALIVE_S = 15.0
# A 2026 call watches for its host closing the stream (its cancellation) only once it has run this
# long: a watcher task on every call cost a task spawn and two more loop turns per call (the
# profile in bench/README.md), and most calls end sooner. A longer one is cancelled at most this late.
WATCH_AFTER_S = 0.05
_KEEPALIVE: dict[str, Any] = {}  # the session stream's keepalive comment, queued like a frame
# Methods whose reply may stream notifications first; the rest answer as one JSON body.
_STREAMING = frozenset({"tools/call", "prompts/get", "resources/read", "subscriptions/listen", "tasks/result"})


class McpEndpoint:
    def __init__(
        self,
        router: HostRouter,
        *,
        max_body: int,
        allowed_origins: list[str],
        tokens: TokenTable,
        hosts: HttpHosts,
        require_task_name: bool = True,
    ) -> None:
        self.router = router
        self.require_task_name = require_task_name  # config tasks.requireMcpName
        self._relaxed_for: set[str] = set()  # clients told (in the log) that their tasks/* lacked Mcp-Name
        self.max_body = max_body
        self.allowed_origins = set(allowed_origins)
        self.tokens = tokens
        self.hosts = hosts

    def _note_relaxed(self, conn: HostConnection, method: str) -> None:
        info = conn.client_info
        client = f"{info.get('name', '?')} {info.get('version', '?')}"
        if client not in self._relaxed_for and len(self._relaxed_for) < 1000:
            self._relaxed_for.add(client)
            log.warning(
                "%s sent %s without the Mcp-Name header the tasks extension requires; accepted because"
                " tasks.requireMcpName is false (logged once per client)",
                client,
                method,
            )

    # ---- ASGI ----------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: AsgiSend) -> None:
        if scope["type"] != "http":
            return
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            name, value = k.decode("latin-1").lower(), v.decode("latin-1")
            # Repeated field lines combine with ", " (RFC 9110 5.3). Keeping only the last would let
            # `Mcp-Method: tools/call` + `Mcp-Method: tools/list` pass the header/body check while an
            # intermediary routes on the first; combined, the value no longer matches the body.
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else None
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            return await _json(
                send,
                403,
                emit(
                    _rev_hint(headers),
                    None,
                    jsonrpc.error(None, {"code": -32600, "message": f"Forbidden: origin {origin!r} is not allowed"}),
                ),
            )
        principal = None
        if self.tokens.enabled:
            auth = headers.get("authorization", "")
            token = auth[7:] if auth.lower().startswith("bearer ") else ""
            principal = self.tokens.principal_for(token)
            if principal is None:
                err = jsonrpc.error(None, {"code": -32600, "message": "Unauthorized: a valid bearer token is required"})
                return await _json(send, 401, emit(_rev_hint(headers), None, err), [(b"www-authenticate", b"Bearer")])
        method = scope["method"]
        if method == "POST":
            await self._post(headers, peer, principal, receive, send)
        elif method == "GET":
            await self._get(headers, principal, receive, send)
        elif method == "DELETE":
            await self._delete(headers, principal, send)
        else:
            await _json(send, 405, None, [(b"allow", b"GET, POST, DELETE")])

    def _origin_ok(self, origin: str) -> bool:
        return origin_allowed(origin, self.allowed_origins)

    # ---- POST ----------------------------------------------------------------------------
    async def _post(
        self, headers: dict[str, str], peer: str | None, principal: str | None, receive: Receive, send: AsgiSend
    ) -> None:
        body = await _read_body(receive, self.max_body, headers)
        if body is None:
            return await _json(
                send,
                413,
                emit(
                    _rev_hint(headers),
                    None,
                    jsonrpc.error(None, {"code": -32600, "message": f"Request body exceeds {self.max_body} bytes"}),
                ),
            )
        try:
            msg = jsonrpc.parse(body)
        except McpError as exc:
            return await _json(send, exc.http_status, emit(_rev_hint(headers), None, jsonrpc.error_from(None, exc)))
        sid = headers.get("mcp-session-id")
        if msg.kind == "response":
            # A legacy host answering a request mcpx sent on one of its streams.
            conn = await self.hosts.session(sid, principal) if sid is not None else None
            if conn is None:
                return await _json(send, 404 if sid is not None else 400, None)
            self.router.response(conn, msg)
            return await _json(send, 202, None)
        if msg.kind == "notification":
            if not is_modern(msg.params) and sid is not None:
                conn = await self.hosts.session(sid, principal)
                if conn is None:
                    return await _json(send, 404, None)
                await self.router.notification(conn, msg)
            # A modern host cancels by closing the stream; its notifications need no session.
            return await _json(send, 202, None)
        if msg.method == "initialize" and not is_modern(msg.params):
            return await self._initialize(msg, peer, principal, headers, send)
        if is_modern(msg.params):
            conn = await self.hosts.stateless(principal, msg.params, peer, headers.get(naming.LABEL_HEADER))
            try:
                modern.check_version_header(msg.params, headers)
                ctx = self.router.modern_context(conn, msg.params, None)
                ctx.peer = peer
                relaxed = modern.check_headers(
                    msg.method, msg.params, headers, tasks_extension=True, require_task_name=self.require_task_name
                )
                if relaxed:
                    self._note_relaxed(conn, msg.method)
                if msg.method == "tools/call":
                    modern.check_param_headers(
                        self.router.dispatcher.tool_schema(msg.params.get("name")), msg.params.get("arguments"), headers
                    )
            except McpError as exc:
                return await _json(send, exc.http_status, emit(MODERN, msg.method, jsonrpc.error_from(msg.id, exc)))
        else:
            if sid is None:
                missing: McpError
                if headers.get("mcp-protocol-version") == MODERN:
                    missing = InvalidParams(
                        f"Missing params._meta[{'io.modelcontextprotocol/protocolVersion'!r}] for {MODERN}",
                        http_status=400,
                    )
                else:
                    missing = InvalidRequest(
                        "Missing Mcp-Session-Id header: send initialize first, or use 2026-07-28 _meta"
                    )
                frame = jsonrpc.error_from(msg.id, missing)
                return await _json(send, 400, emit(_rev_hint(headers), msg.method, frame))
            conn = await self.hosts.session(sid, principal)
            if conn is None:
                return await _json(
                    send,
                    404,
                    emit(
                        LEGACY_LATEST,
                        msg.method,
                        jsonrpc.error(msg.id, {"code": -32600, "message": "Session not found: initialize again"}),
                    ),
                )
            version = headers.get("mcp-protocol-version")
            if version is not None and version != conn.revision:
                err = jsonrpc.error(
                    msg.id,
                    {
                        "code": -32600,
                        "message": f"MCP-Protocol-Version {version!r} does not match the session's {conn.revision!r}",
                    },
                )
                return await _json(send, 400, emit(conn.revision, msg.method, err))
            ctx = self.router.legacy_context(conn, msg.params, None)
            ctx.peer = peer  # this request's socket (a session's requests may each come on another)
            look_up_again(self.router, conn, peer)
        refused = self.router.over_budget(conn)
        if refused is not None:
            retry = str(max(1, math.ceil(refused.retry_after_s))).encode()  # whole seconds (RFC 9110)
            frame = emit(ctx.revision, msg.method, jsonrpc.error_from(msg.id, refused))
            return await _json(send, 429, frame, [(b"retry-after", retry)])
        await self._run(ctx, msg, headers, receive, send)

    async def _initialize(
        self, msg: jsonrpc.Message, peer: str | None, principal: str | None, headers: dict[str, str], send: AsgiSend
    ) -> None:
        conn = HostConnection("http", peer=peer, principal=principal)
        frame = self.router.initialize(conn, msg)
        if "error" in frame:
            return await _json(send, 200, frame)
        conn.given_label = naming.from_header(headers.get(naming.LABEL_HEADER))
        if conn.given_label is None:  # a host that names itself is not looked up
            await look_up_process(self.router, conn, peer)
        if not await self.hosts.start_session(conn):
            return await _json(
                send,
                200,
                emit(
                    conn.revision,
                    "initialize",
                    jsonrpc.error(msg.id, {"code": -32603, "message": "Internal error: could not store the session"}),
                ),
            )
        await _json(send, 200, frame, [(b"mcp-session-id", conn.id.encode())])

    async def _run(
        self, ctx: RequestContext, msg: jsonrpc.Message, headers: dict[str, str], receive: Receive, send: AsgiSend
    ) -> None:
        """The call runs in this request's task. What it sends the host meanwhile (progress, a
        question) opens an SSE stream, written by a task started on the first such frame; a 2026
        host's closed stream cancels the call (a watcher task), a 2025 host's does not (the call
        runs on, its reply dropped). Most calls send nothing meanwhile: no task but this one."""
        accept = headers.get("accept", "")
        streaming = "text/event-stream" in accept and (msg.method in _STREAMING or "application/json" not in accept)
        stream = _LazyStream(send, self.router, f"{ctx.conn.record_id} request {msg.id!r}")
        if streaming:
            ctx.notify = notifier(ctx.revision, stream)
        if tracing.tracer is not None:
            ctx.http_headers = headers  # its traceparent, if the host sent one
        call = self.router.prepare(ctx, msg)
        watch = None
        if ctx.era == "modern":
            loop = asyncio.get_running_loop()
            watch = loop.call_later(WATCH_AFTER_S, self.router.spawn, _cancel_on_disconnect, receive, call, stream)
        try:
            await self.router.run(call, ctx, msg)
        finally:
            if watch is not None:
                watch.cancel()  # ended before the watcher was needed (or it started and ends itself)
        frame = call.frame
        if stream.disconnected:
            return
        if stream.started:
            await stream.finish(frame)
            return
        stream.close()
        if frame is None:
            frame = jsonrpc.error(msg.id, {"code": -32800, "message": "Request cancelled"})
        await _json(send, _status_for(ctx.era, frame), frame)

    # ---- GET / DELETE (legacy sessions only) --------------------------------------------
    async def _get(self, headers: dict[str, str], principal: str | None, receive: Receive, send: AsgiSend) -> None:
        sid = headers.get("mcp-session-id")
        if sid is None or headers.get("mcp-protocol-version") == MODERN:
            return await _json(send, 405, None, [(b"allow", b"POST")])
        conn = await self.hosts.session(sid, principal)
        if conn is None:
            return await _json(send, 404, None)
        if "text/event-stream" not in headers.get("accept", ""):
            return await _json(send, 406, None)
        out = Outbound(f"{conn.record_id} session stream", stall_s=self.router.stall_s)
        sender = notifier(conn.revision or LEGACY_LATEST, out)
        conn.attach(sender)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        async with anyio.create_task_group() as tg:

            async def on_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                out.send_nowait(None)

            async def keepalive() -> None:
                while True:
                    await anyio.sleep(KEEPALIVE_S)
                    out.send_nowait(_KEEPALIVE)  # through the channel: one writer, and a stall shows

            async def write(frames: list[dict[str, Any]]) -> None:
                if sid not in self.hosts.sessions:
                    out.close()  # the session was deleted: its stream ends
                    return
                body = b"".join(b": keepalive\n\n" if f is _KEEPALIVE else _sse_event(f) for f in frames)
                await send({"type": "http.response.body", "body": body, "more_body": True})

            tg.start_soon(on_disconnect)
            tg.start_soon(keepalive)
            await out.drain(write)
            tg.cancel_scope.cancel()
        if conn.send is sender:  # (not a stream the host opened since)
            conn.attach(None)
        if out.slow is None:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _delete(self, headers: dict[str, str], principal: str | None, send: AsgiSend) -> None:
        sid = headers.get("mcp-session-id")
        if sid is None:
            return await _json(send, 405, None, [(b"allow", b"POST")])
        conn = await self.hosts.session(sid, principal)
        if conn is None:
            return await _json(send, 404, None)
        await self.hosts.delete_session(conn)
        await _json(send, 200, None)


def _status_for(era: Era, frame: dict[str, Any]) -> int:
    """Modern errors have documented statuses (DIGEST 1.4); other JSON-RPC errors ride on 200."""
    err = frame.get("error")
    if not isinstance(err, dict) or era != "modern":
        return 200
    code = err.get("code")
    if code == METHOD_NOT_FOUND:
        return 404
    if code in (HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION):
        return 400
    return 200


def _rev_hint(headers: dict[str, str]) -> str:
    v = headers.get("mcp-protocol-version")
    return MODERN if v == MODERN else LEGACY_LATEST


async def _read_body(receive: Receive, limit: int, headers: dict[str, str]) -> bytes | None:
    try:
        if int(headers.get("content-length", "0")) > limit:
            return None
    except ValueError:
        pass
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


class _LazyStream:
    """A request's SSE stream, opened by its first frame: a writer task drains what the call sends
    the host meanwhile, through a bounded channel that never blocks the call (host/outbound.py):
    a host that stops reading loses progress first, then the stream."""

    def __init__(self, send: AsgiSend, router: HostRouter, name: str) -> None:
        self.send = send
        self.router = router
        self.out = Outbound(name, stall_s=router.stall_s)
        self.started = False
        self.disconnected = False
        self._written = anyio.Event()

    def send_nowait(self, item: StreamItem) -> None:
        """The call's notifier: the first frame starts the writer."""
        if not self.started:
            self.started = True
            self.router.spawn(self._write)
        self.out.send_nowait(item)

    async def _write(self) -> None:
        try:
            await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await self.out.drain(functools.partial(_sse, self.send))
            if self.out.slow is None:
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the host went: nothing more to write
            pass
        finally:
            self._written.set()

    async def finish(self, frame: dict[str, Any] | None) -> None:
        if frame is not None:
            self.out.send_nowait(frame)
        self.out.send_nowait(None)
        await self._written.wait()

    def close(self) -> None:
        self.out.close()


async def _cancel_on_disconnect(receive: Receive, call: Call, stream: _LazyStream) -> None:
    """2026-07-28: a host that closes its response stream cancels the request. Ends when the
    response completes too (the server then answers receive() with a disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if not call.done.is_set():
        stream.disconnected = True
        call.scope.cancel()


async def _json(
    send: AsgiSend, status: int, frame: dict[str, Any] | None, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = jsonrpc.dumps(frame) if frame is not None else b""
    headers = [(b"content-type", b"application/json")] if frame is not None else []
    headers += [(b"content-length", str(len(body)).encode())] + (extra or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _sse_event(frame: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + jsonrpc.dumps(frame) + b"\n\n"


async def _sse(send: AsgiSend, frames: list[dict[str, Any]]) -> None:
    """Frames as SSE events, in one body chunk (one socket write)."""
    await send({"type": "http.response.body", "body": b"".join(map(_sse_event, frames)), "more_body": True})
