"""Streamable HTTP edge of the conformance fixture (starlette request parsing + raw ASGI streaming).

One endpoint, ``/mcp`` on 127.0.0.1, both wires:

* 2026-07-28 (a request whose ``_meta`` or ``MCP-Protocol-Version`` header names a modern
  version): standard-header validation (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``,
  ``Mcp-Param-*`` with the ``=?base64?...?=`` encoding; -32020 + HTTP 400), -32602/-32022/-32021
  + 400, unknown/removed methods -32601 + 404, ``subscriptions/listen`` as a long-lived SSE stream.
  Closing a response stream cancels the request.
* 2025-11-25: ``initialize`` mints an ``Mcp-Session-Id``; GET opens the session's standalone SSE
  stream; DELETE ends the session (later requests get 404). Every legacy SSE event has an id, so a
  client can resume a POST stream with GET + ``Last-Event-ID`` (SEP-1699); ``test_reconnection``
  closes its stream on purpose after a priming event. A disconnect is not a cancellation.

A POST answers ``application/json`` unless something (a notification, or a server->client
request on the legacy wire) is sent before the final response; then it switches to
``text/event-stream``. That keeps error statuses such as 400 for -32021 intact.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from fixture_common import is_mcp_request, serve_http
from fixture_core import LEGACY_VERSIONS, MODERN, PV_KEY, Call, RpcError, Server, Session, log_stderr

LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
B64_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.S)
SAFE_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*$")
NAME_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
RETRY_MS = 500
# Running background drains: the event loop keeps only weak references to tasks.
_BACKGROUND: set[asyncio.Future] = set()


def _in_background(work: Any) -> None:
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


def _host_only(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def local_origin_ok(headers: Any) -> bool:
    """DNS-rebinding protection: Host and (if sent) Origin must name a loopback host."""
    host = headers.get("host")
    if host is not None and _host_only(host) not in LOCAL_HOSTS:
        return False
    origin = headers.get("origin")
    if origin is not None and origin.strip() != "null":
        m = re.match(r"^https?://([^/]+)", origin.strip(), re.I)
        if not m or _host_only(m.group(1)) not in LOCAL_HOSTS:
            return False
    return True


def decode_header_value(raw: str, what: str) -> str:
    """Undo the ``=?base64?...?=`` encoding (strictly); plain values must be header-safe ASCII."""
    value = raw.strip(" \t")
    m = B64_SENTINEL.match(value)
    if m:
        try:
            return base64.b64decode(m.group(1), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise header_error(f"{what} header has invalid Base64 content") from None
    if not SAFE_HEADER_VALUE.match(value):
        raise header_error(f"{what} header contains invalid characters")
    return value


def header_error(message: str) -> RpcError:
    return RpcError(-32020, f"Header mismatch: {message}", None, 400)


def header_form(value: Any) -> str | None:
    """How a body value must appear in an ``Mcp-Param-*`` header (None: no header expected)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def check_modern_headers(server: Server, msg: dict[str, Any], headers: Any) -> None:
    """SEP-2243 standard headers against the body (streamable-http.mdx "Server Validation")."""
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise header_error("missing MCP-Protocol-Version header")
    if version.strip() != meta.get(PV_KEY):
        raise header_error(
            f"MCP-Protocol-Version header {version.strip()!r} does not match _meta protocolVersion {meta.get(PV_KEY)!r}"
        )
    method = headers.get("mcp-method")
    if method is None:
        raise header_error("missing Mcp-Method header")
    if method.strip(" \t") != msg.get("method"):
        raise header_error(f"Mcp-Method header {method.strip()!r} does not match body method {msg.get('method')!r}")
    field = NAME_METHODS.get(msg.get("method", ""))
    if field is not None and params.get(field) is not None:
        name = headers.get("mcp-name")
        if name is None:
            raise header_error("missing Mcp-Name header")
        if decode_header_value(name, "Mcp-Name") != params.get(field):
            raise header_error(f"Mcp-Name header does not match body params.{field}")
    if msg.get("method") == "tools/call" and isinstance(params.get("name"), str):
        tool = server.surface.tool(params["name"])
        props = (tool or {}).get("inputSchema", {}).get("properties", {})
        args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        for prop, schema in props.items():
            suffix = schema.get("x-mcp-header") if isinstance(schema, dict) else None
            if not suffix:
                continue
            expected = header_form(args.get(prop))
            raw = headers.get(f"mcp-param-{suffix.lower()}")
            if expected is None:
                continue  # no value in the body: the header is not expected
            if raw is None:
                raise header_error(f"missing Mcp-Param-{suffix} header for argument {prop!r}")
            got = decode_header_value(raw, f"Mcp-Param-{suffix}")
            if got != expected and not _numeric_equal(got, args.get(prop)):
                raise header_error(f"Mcp-Param-{suffix} header does not match argument {prop!r}")


def _numeric_equal(header: str, body: Any) -> bool:
    if isinstance(body, bool) or not isinstance(body, (int, float)):
        return False
    try:
        return float(header) == float(body)
    except ValueError:
        return False


def sse(msg: dict[str, Any] | None, event_id: str | None = None, retry: int | None = None) -> bytes:
    lines = ["event: message"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.append("data: " + ("" if msg is None else json.dumps(msg, separators=(",", ":"))))
    return ("\n".join(lines) + "\n\n").encode()


class LegacyStream:
    """Event log of one 2025-11-25 POST stream, so a client can resume it (Last-Event-ID)."""

    def __init__(self, stream_id: str):
        self.id = stream_id
        self.events: list[tuple[str, bytes]] = []
        self.listener: asyncio.Queue | None = None
        self.finished = False
        self._seq = itertools.count(1)

    def add(self, msg: dict[str, Any] | None, retry: int | None = None, final: bool = False) -> None:
        event_id = f"{self.id}_{next(self._seq)}"
        self.events.append((event_id, sse(msg, event_id, retry)))
        self.finished = self.finished or final
        if self.listener is not None:
            self.listener.put_nowait(self.events[-1][1])
            if final:
                self.listener.put_nowait(None)

    def after(self, event_id: str) -> list[bytes]:
        ids = [e[0] for e in self.events]
        start = ids.index(event_id) + 1 if event_id in ids else 0
        return [e[1] for e in self.events[start:]]


class HttpApp:
    def __init__(self, server: Server):
        self.server = server
        self.streams: dict[str, LegacyStream] = {}  # legacy stream id -> event log
        self.stream_session: dict[str, str] = {}

    # ---- ASGI entry ------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        from starlette.requests import Request
        from starlette.responses import Response

        if not await is_mcp_request(scope, send):
            return
        req = Request(scope, receive)
        if not local_origin_ok(req.headers):
            await self.json(
                scope, receive, send, 403, RpcError(-32600, "Forbidden: non-local Host or Origin").to_msg(None)
            )
            return
        if scope["method"] == "POST":
            await self.post(req, scope, receive, send)
        elif scope["method"] == "GET":
            await self.get(req, scope, receive, send)
        elif scope["method"] == "DELETE":
            await self.delete(req, scope, receive, send)
        else:
            await Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})(scope, receive, send)

    @staticmethod
    async def json(
        scope: dict, receive: Callable, send: Callable, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        from starlette.responses import JSONResponse

        await JSONResponse(body, status, headers=headers)(scope, receive, send)

    def session_of(self, req: Any) -> tuple[Session | None, int]:
        sid = req.headers.get("mcp-session-id")
        if sid is None:
            return None, 400
        session = self.server.sessions.get(sid)
        return (session, 200) if session is not None else (None, 404)

    # ---- POST ------------------------------------------------------------------------------
    async def post(self, req: Any, scope: dict, receive: Callable, send: Callable) -> None:
        from starlette.responses import Response

        body = await req.body()
        try:
            msg = json.loads(body)
        except ValueError as e:
            await self.json(scope, receive, send, 400, RpcError(-32700, f"Parse error: {e}").to_msg(None))
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            await self.json(
                scope,
                receive,
                send,
                400,
                RpcError(
                    -32600, "Invalid Request: expected one JSON-RPC 2.0 message (batches are not supported)"
                ).to_msg(msg.get("id") if isinstance(msg, dict) else None),
            )
            return
        header_version = req.headers.get("mcp-protocol-version")

        if "method" not in msg:  # a client's response to one of our legacy requests
            session, _ = self.session_of(req)
            if session is not None:
                session.on_response(msg)
            await Response(status_code=202)(scope, receive, send)
            return
        if "id" not in msg:  # notification
            session, _ = self.session_of(req)
            if session is not None and msg.get("method") == "notifications/cancelled":
                params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
                task = session.running.get(params.get("requestId"))
                if task is not None:
                    task.cancel()
            status = 404 if req.headers.get("mcp-session-id") and session is None else 202
            await Response(status_code=status)(scope, receive, send)
            return

        if Server.is_modern(msg, header_version):
            await self.post_modern(msg, req, scope, receive, send)
        else:
            await self.post_legacy(msg, req, scope, receive, send)

    async def post_modern(self, msg: dict, req: Any, scope: dict, receive: Callable, send: Callable) -> None:
        exchange = Exchange(scope, receive, send)
        call = Call(self.server, msg, True, None, exchange.emit)
        try:
            self.server.check_modern_meta(call)
            check_modern_headers(self.server, msg, req.headers)
        except RpcError as e:
            await self.json(scope, receive, send, e.http_status, e.to_msg(msg.get("id")))
            return
        if msg.get("method") == "subscriptions/listen":
            await self.listen(call, exchange)
            return
        await exchange.run(self.server.respond(call), cancel_on_disconnect=True)

    async def listen(self, call: Call, exchange: Exchange) -> None:
        try:
            sub = await self.server.open_listen(call)
        except RpcError as e:
            await self.json(exchange.scope, exchange.receive, exchange.send, e.http_status, e.to_msg(call.id))
            return
        try:
            await exchange.pump_until_disconnect()
        finally:
            self.server.close_listen(sub)

    async def post_legacy(self, msg: dict, req: Any, scope: dict, receive: Callable, send: Callable) -> None:
        headers: dict[str, str] = {}
        if msg.get("method") == "initialize":
            sid = uuid.uuid4().hex
            session = Session(sid)
        else:
            session, status = self.session_of(req)
            if session is None:
                text = (
                    "Bad Request: missing Mcp-Session-Id (call initialize first)"
                    if status == 400
                    else "Session not found"
                )
                await self.json(
                    scope,
                    receive,
                    send,
                    status,
                    RpcError(-32600 if status == 400 else -32001, text).to_msg(msg.get("id")),
                )
                return
            headers["mcp-session-id"] = session.sid or ""
            version = req.headers.get("mcp-protocol-version")
            if version is not None and version.strip() not in LEGACY_VERSIONS:
                await self.json(
                    scope,
                    receive,
                    send,
                    400,
                    RpcError(-32600, f"Bad Request: unsupported MCP-Protocol-Version {version!r}").to_msg(
                        msg.get("id")
                    ),
                )
                return
        stream = LegacyStream(uuid.uuid4().hex[:12])
        exchange = Exchange(scope, receive, send, stream=stream, headers=headers)
        call = Call(self.server, msg, False, session, exchange.emit)
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        reconnect = msg.get("method") == "tools/call" and params.get("name") == "test_reconnection"

        async def run() -> tuple[dict, int]:
            response, status = await self.server.respond(call)
            if msg.get("method") == "initialize" and "result" in response:
                self.server.sessions[session.sid] = session  # type: ignore[index]  # an initialize session is always made with a sid
                exchange.headers["mcp-session-id"] = session.sid or ""
            return response, status

        task = asyncio.get_running_loop().create_task(run())
        session.running[msg.get("id")] = task
        task.add_done_callback(lambda _t: session.running.pop(msg.get("id"), None))
        self.streams[stream.id] = stream
        self.stream_session[stream.id] = session.sid or ""
        try:
            await exchange.run(task, cancel_on_disconnect=False, close_early=reconnect)
        finally:
            if stream.finished or not exchange.streaming:
                self.streams.pop(stream.id, None)  # nothing left to resume

    # ---- GET (legacy standalone stream, or resumption) ---------------------------------------
    async def get(self, req: Any, scope: dict, receive: Callable, send: Callable) -> None:
        from starlette.responses import Response

        session, status = self.session_of(req)
        if session is None:
            if status == 400:  # no session: nothing to stream (2026-07-28 has no GET stream)
                await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            else:
                await self.json(scope, receive, send, 404, RpcError(-32001, "Session not found").to_msg(None))
            return
        exchange = Exchange(scope, receive, send, headers={"mcp-session-id": session.sid or ""})
        last = req.headers.get("last-event-id")
        if last:
            stream = self.streams.get(last.rsplit("_", 1)[0])
            if stream is None or self.stream_session.get(stream.id) != session.sid:
                await Response("unknown Last-Event-ID", 404)(scope, receive, send)
                return
            await exchange.resume(stream, last)
            if stream.finished:
                self.streams.pop(stream.id, None)
            return
        if session.standalone is not None:
            await Response("a GET stream is already open for this session", 409)(scope, receive, send)
            return
        session.standalone = exchange.emit
        try:
            await exchange.pump_until_disconnect()
        finally:
            if session.standalone == exchange.emit:
                session.standalone = None

    # ---- DELETE ------------------------------------------------------------------------------
    async def delete(self, req: Any, scope: dict, receive: Callable, send: Callable) -> None:
        from starlette.responses import Response

        session, status = self.session_of(req)
        if session is None:
            await Response("missing Mcp-Session-Id" if status == 400 else "session not found", status)(
                scope, receive, send
            )
            return
        self.server.sessions.pop(session.sid or "", None)
        session.close()
        for stream_id, sid in list(self.stream_session.items()):
            if sid == session.sid:
                self.stream_session.pop(stream_id, None)
                self.streams.pop(stream_id, None)
        await Response(status_code=200)(scope, receive, send)


class Exchange:
    """One HTTP response: JSON, or SSE once something is sent before the final answer."""

    def __init__(
        self,
        scope: dict,
        receive: Callable,
        send: Callable,
        *,
        stream: LegacyStream | None = None,
        headers: dict[str, str] | None = None,
    ):
        self.scope, self.receive, self.send = scope, receive, send
        self.stream = stream
        self.headers = headers or {}
        self.queue: asyncio.Queue = asyncio.Queue()
        self.streaming = False
        self.closed = False

    async def emit(self, msg: dict[str, Any]) -> None:
        """Called by handlers for notifications / server->client requests on this exchange."""
        if self.closed and self.stream is None:
            raise ConnectionError("response stream closed")
        self.queue.put_nowait(msg)

    async def _start_sse(self) -> None:
        self.streaming = True
        headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        headers += [(k.encode(), v.encode()) for k, v in self.headers.items()]
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})

    async def _write(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def _end(self) -> None:
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _wait_disconnect(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass

    def _frame(self, msg: dict[str, Any], final: bool = False) -> bytes | None:
        """Legacy streams log every event (with an id) and hand it to the attached listener."""
        if self.stream is None:
            return sse(msg)
        self.stream.add(msg, final=final)
        return None

    async def run(self, work: Any, *, cancel_on_disconnect: bool, close_early: bool = False) -> None:
        task = work if isinstance(work, asyncio.Task) else asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self._wait_disconnect())
        out: asyncio.Queue = asyncio.Queue()  # bytes to write (legacy: fed by the stream log)
        if self.stream is not None:
            self.stream.listener = out
        disconnected = False
        try:
            if close_early:  # SEP-1699 test: priming event, then close the stream mid-call
                await self._start_sse()
                self.stream.add(None, retry=RETRY_MS)  # type: ignore[union-attr]  # close_early is only asked for on a legacy exchange, which has a stream
                await self._write(out.get_nowait())
                await asyncio.sleep(0.05)
                await self._end()
                self.closed = True
                self.stream.listener = None  # type: ignore[union-attr]  # as above
                _in_background(self._drain_after_close(task))
                return
            while True:
                getter = asyncio.ensure_future(self.queue.get())
                done, _ = await asyncio.wait({getter, task, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    msg = getter.result()
                    if not self.streaming:
                        await self._start_sse()
                    chunk = self._frame(msg)
                    await self._flush(out, chunk)
                    continue
                getter.cancel()
                if task in done:
                    while not self.queue.empty():  # anything emitted just before the end
                        msg = self.queue.get_nowait()
                        if not self.streaming:
                            await self._start_sse()
                        await self._flush(out, self._frame(msg))
                    if task.cancelled():
                        if self.streaming:
                            await self._end()
                        else:
                            await self._send_status(204)
                        return
                    response, status = task.result()
                    if self.streaming:
                        await self._flush(out, self._frame(response, final=True))
                        await self._end()
                    else:
                        if self.stream is not None:
                            self.stream.finished = True
                        await HttpApp.json(self.scope, self.receive, self.send, status, response, self.headers)
                    return
                disconnected = True  # watcher finished: the client went away
                return
        except OSError:
            disconnected = True
        finally:
            watcher.cancel()
            self.closed = True
            if self.stream is not None and self.stream.listener is out:
                self.stream.listener = None
            if disconnected and not task.done():
                if cancel_on_disconnect:
                    task.cancel()  # 2026-07-28: closing the response stream is cancellation
                else:
                    _in_background(self._drain_after_close(task))

    async def _flush(self, out: asyncio.Queue, chunk: bytes | None) -> None:
        if chunk is not None:
            await self._write(chunk)
        while not out.empty():
            item = out.get_nowait()
            if item is not None:
                await self._write(item)

    async def _drain_after_close(self, task: asyncio.Task) -> None:
        """Legacy: keep logging a closed stream's events so a GET with Last-Event-ID can resume."""
        while True:
            getter = asyncio.ensure_future(self.queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                self._frame(getter.result())
                continue
            getter.cancel()
            while not self.queue.empty():
                self._frame(self.queue.get_nowait())
            if not task.cancelled() and task.exception() is None:
                self._frame(task.result()[0], final=True)
            elif self.stream is not None:
                self.stream.finished = True
            return

    async def _send_status(self, status: int) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": []})
        await self._end()

    async def resume(self, stream: LegacyStream, last_event_id: str) -> None:
        """Replay a legacy stream after ``last_event_id`` and follow it until its final event."""
        out: asyncio.Queue = asyncio.Queue()
        for chunk in stream.after(last_event_id):
            out.put_nowait(chunk)
        if stream.finished:
            out.put_nowait(None)
        else:
            stream.listener = out
        await self._start_sse()
        watcher = asyncio.ensure_future(self._wait_disconnect())
        try:
            while True:
                getter = asyncio.ensure_future(out.get())
                done, _ = await asyncio.wait({getter, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                chunk = getter.result()
                if chunk is None:
                    await self._end()
                    return
                await self._write(chunk)
        except OSError:
            return
        finally:
            watcher.cancel()
            if stream.listener is out:
                stream.listener = None

    async def pump_until_disconnect(self) -> None:
        """Standalone stream (legacy GET, modern listen): write emitted messages until the client leaves."""
        if not self.streaming:
            await self._start_sse()
        watcher = asyncio.ensure_future(self._wait_disconnect())
        try:
            while True:
                getter = asyncio.ensure_future(self.queue.get())
                done, _ = await asyncio.wait({getter, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                await self._write(sse(getter.result()))
        except OSError:
            return
        finally:
            watcher.cancel()
            self.closed = True


async def run_http(server: Server, port: int, ready_file: str | None) -> None:
    import uvicorn

    def listening(real_port: int) -> None:
        log_stderr(f"listening on http://127.0.0.1:{real_port}/mcp ({MODERN} and 2025-11-25)")

    await serve_http(uvicorn, HttpApp(server), port, ready_file, listening)
