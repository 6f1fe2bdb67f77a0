"""A Streamable HTTP upstream: each request is a POST whose reply is JSON or an SSE stream.

Requests go through `h1.Client`, one per transport (so one per upstream connection lifetime), not
through the pool's shared httpx client: httpx's per-request CPU made this hop cost 3-5 ms a call on
a busy machine (see h1.py).

A reply stream that ends before the response never leaves its call waiting: a 2025-11-25 server
that gave an event id is asked to resume it (GET with Last-Event-ID, after its `retry` hint); any
other end fails the call at once, naming the upstream. The 2025-11-25 GET stream (what the server
says outside any request: list changes, updates, its requests with no related call) is opened after
initialize, unless answered 405, and reopened whenever it ends, with backoff and Last-Event-ID.

A 2026-07-28 tools/call mirrors the tool's `x-mcp-header` arguments as `Mcp-Param-*` headers
(SEP-2243, protocol/param_headers.py); the pool tells the transport which, each time it lists tools.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Literal

import anyio

from ...config.model import ServerConfig
from ...protocol import fastjson, param_headers
from ...protocol.errors import UPSTREAM_UNAVAILABLE
from ...protocol.jsonrpc import Id
from ...protocol.revisions import Era
from ...telemetry import tracing
from ..auth.upstream_auth import UpstreamAuth
from ..transport import Feed
from . import h1
from .sse import Cursor, iter_sse

__all__ = ["HttpTransport", "header_value", "iter_sse"]

log = logging.getLogger("mcpx.upstream")

CONNECT_TIMEOUT_S = 30.0
LISTEN_CONNECT_TIMEOUT_S = 10.0
SSE_LINGER_S = 0.05  # how long an answered SSE reply may stay open before mcpx leaves it
# Resuming a reply stream: the server's `retry` hint is waited (up to MAX_RETRY_S, so a hint cannot
# park a call for hours); a resumed stream that closes with no event at all, MAX_EMPTY_RESUMES times
# in a row, is not being resumed, and the call fails. Connecting and the reply head are bounded: a
# call must not wait on a server that stopped answering.
MAX_RETRY_S = 60.0
MAX_EMPTY_RESUMES = 3
RESUME_MIN_DELAY_S = 0.25  # between resumes without a hint (the first goes at once): no busy loop
RESUME_HEAD_TIMEOUT_S = 10.0
# The GET stream is reopened after the server's hint, at least LISTEN_MIN_DELAY_S, doubling up to
# LISTEN_MAX_DELAY_S while attempts give nothing.
LISTEN_MIN_DELAY_S = 1.0
LISTEN_MAX_DELAY_S = 30.0
# Errors that mean the upstream is gone or broken: the transport closes, and the pool reconnects.
_LOST = h1.ConnectionFailed
_FAILED = (h1.HttpError, OSError)  # OSError includes TimeoutError (connecting took too long)


def header_value(value: str) -> str:
    """Mcp-Name values that are not plain ASCII travel base64-sentinel encoded (SEP-2243)."""
    return param_headers.encode(value)


class HttpTransport:
    kind: Literal["stdio", "http"] = "http"
    run_id: str | None = None  # the server does not outlive the daemon

    def __init__(self, name: str, cfg: ServerConfig, auth: UpstreamAuth | None = None) -> None:
        """`auth`: the upstream's OAuth client (upstream/auth/), when mcpx may sign in to it."""
        self.name = name
        self.cfg = cfg
        self.auth = auth
        self.http = h1.Client(cfg.url or "", connect_timeout=CONNECT_TIMEOUT_S)
        self.closed = anyio.Event()
        self.era: Era | None = None  # set by the session once probed
        self.revision: str | None = None
        self.session_id: str | None = None
        self.detach = False  # the daemon stops but the next one carries the session on: no DELETE
        self._tg: anyio.abc.TaskGroup | None = None
        self._feed: Feed | None = None
        self._streams: dict[Id, anyio.CancelScope] = {}
        # Each listed tool's `x-mcp-header` arguments (SEP-2243), mirrored on its 2026 calls; set
        # by the pool each time it lists the server's tools.
        self.tool_headers: dict[str, tuple[param_headers.HeaderParam, ...]] = {}

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
            if method == "tools/call" and isinstance(name, str) and name in self.tool_headers:
                h.update(param_headers.headers_for(self.tool_headers[name], params.get("arguments")))
        elif self.era == "legacy":
            if self.revision:
                h["MCP-Protocol-Version"] = self.revision
            if self.session_id:
                h["Mcp-Session-Id"] = self.session_id
        if tracing.tracer is not None:  # the request's trace context (session.request put it in _meta)
            meta = params.get("_meta")
            if isinstance(meta, dict):
                h.update({k: meta[k] for k in tracing.TRACE_KEYS if isinstance(meta.get(k), str)})
        return h

    async def send(self, msg: dict[str, Any], origin: str | None = None) -> None:
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

    async def _authorized(self, headers: dict[str, str]) -> str | None:
        """Put the upstream's OAuth token on a request (every request carries it: POST, GET, DELETE);
        the token sent, or None."""
        if self.auth is None:
            return None
        token = await self.auth.token()
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return token

    async def _auth_retry(self, resp: h1.Response, sent: str | None) -> bool:
        """A 401 or 403: True when the auth has a new token to send the request again with (once)."""
        if self.auth is None:
            return False
        header = resp.headers.get("www-authenticate")
        if resp.status_code == 401:
            return await self.auth.unauthorized(header, sent)
        return resp.status_code == 403 and await self.auth.forbidden(header, sent)

    def _auth_refused(self, resp: h1.Response) -> bool:
        """A 401, or a 403 for want of scope: the request fails with the auth's reason."""
        if self.auth is None:
            return False
        return resp.status_code == 401 or (
            resp.status_code == 403 and "insufficient_scope" in resp.headers.get("www-authenticate", "")
        )

    async def _post_simple(self, msg: dict[str, Any]) -> None:
        try:
            for attempt in (0, 1):
                headers = self._headers(msg)
                sent = await self._authorized(headers)
                async with self.http.stream("POST", headers, _encode(msg)) as resp:
                    await resp.aread()
                    if resp.status_code in (401, 403) and attempt == 0 and await self._auth_retry(resp, sent):
                        continue
                return
        except _FAILED as exc:
            raise ConnectionError(str(exc)) from None

    async def _exchange(self, msg: dict[str, Any], scope: anyio.CancelScope) -> None:
        assert self._feed is not None
        rid = msg["id"]
        try:
            with scope:
                cursor = Cursor()
                ended = await self._post(msg, rid, cursor)
                if ended is not None:
                    await self._resume(rid, cursor, ended)
        except _FAILED as exc:
            if isinstance(exc, _LOST):
                self.closed.set()
            await self._feed(_error(rid, f"upstream {self.name!r}: {exc}"), rid)  # h1 says what failed
        finally:
            self._streams.pop(rid, None)

    async def _post(self, msg: dict[str, Any], rid: Id, cursor: Cursor) -> str | None:
        """POST one request and feed what comes back: None once it is answered (or failed), else
        why its SSE stream ended first."""
        assert self._feed is not None
        body = _encode(msg)
        for attempt in (0, 1):  # a second time only with a token the first answer (401, 403) got us
            headers = self._headers(msg)
            sent = await self._authorized(headers) if self.auth is not None else None
            async with self.http.stream("POST", headers, body) as resp:
                if resp.status_code in (401, 403) and self.auth is not None:
                    await resp.aread()
                    if attempt == 0 and await self._auth_retry(resp, sent):
                        continue
                    if self._auth_refused(resp):
                        await self._feed(_auth_error(rid, self.auth), rid)
                        return None
                elif sent is not None and self.auth is not None and self.auth.step_ups:
                    self.auth.succeeded()
                return await self._answer(msg, rid, cursor, resp)
        return None  # pragma: no cover - the loop returns

    async def _answer(self, msg: dict[str, Any], rid: Id, cursor: Cursor, resp: h1.Response) -> str | None:
        assert self._feed is not None
        sid = resp.headers.get("mcp-session-id")
        if sid and msg.get("method") == "initialize":
            self.session_id = sid
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" in ctype and resp.status_code < 400:
            return await self._read_reply(resp, rid, cursor)
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
            return None
        if resp.status_code == 404 and self.era == "legacy" and self.session_id:
            self.closed.set()  # session gone upstream: reconnect and re-initialize
        await self._feed(_error(rid, f"upstream {self.name!r} answered HTTP {resp.status_code}"), rid)
        return None

    async def _read_reply(self, resp: h1.Response, rid: Id, cursor: Cursor) -> str | None:
        """Feed one SSE stream of request `rid`: None once its response came, else why it ended."""
        assert self._feed is not None
        events = iter_sse(resp, cursor)
        try:
            try:
                async for item in events:
                    if isinstance(item, dict):
                        await self._feed(item, rid)
                        if item.get("id") == rid and ("result" in item or "error" in item):
                            break  # answered: the caller goes on, whenever the server closes
                else:
                    return "the server closed it"
            except h1.ConnectionFailed as exc:
                return str(exc)
            # A server SHOULD close the stream after the response; one that lingers gets a moment,
            # then the connection is closed (not reused). It answered: a break now changes nothing.
            with anyio.move_on_after(SSE_LINGER_S), contextlib.suppress(h1.ConnectionFailed):
                async for item in events:
                    if isinstance(item, dict):
                        await self._feed(item, rid)
        finally:
            await events.aclose()
        return None

    async def _resume(self, rid: Id, cursor: Cursor, why: str) -> None:
        """A reply stream ended before its response. A 2025-11-25 server that gave an event id may
        be polling (transports.mdx 6, "Resumability and Redelivery"): GET the stream again with
        Last-Event-ID after its `retry` hint, as long as it keeps answering. Otherwise, or when it
        will not resume, the call fails now: nothing else would ever answer it."""
        assert self._feed is not None
        lost = f"upstream {self.name!r} ended its reply stream without the response"
        empty = resumes = 0
        while True:
            if self.era != "legacy" or not cursor.last_id:
                # 2026-07-28 has no resumption, and a stream without event ids cannot be resumed.
                await self._feed(_error(rid, f"{lost} ({why}; it cannot be resumed)"), rid)
                return
            hint = min(cursor.retry_ms / 1000, MAX_RETRY_S) if cursor.retry_ms is not None else 0.0
            await anyio.sleep(hint if resumes == 0 else max(hint, RESUME_MIN_DELAY_S * 2**empty))
            resumes += 1
            seen = cursor.events
            async with contextlib.AsyncExitStack() as stack:
                headers = self._get_headers(cursor)
                sent = await self._authorized(headers)
                try:
                    with anyio.fail_after(RESUME_HEAD_TIMEOUT_S):
                        resp = await stack.enter_async_context(
                            self.http.stream("GET", headers, connect_timeout=RESUME_HEAD_TIMEOUT_S)
                        )
                except TimeoutError:
                    await self._feed(
                        _error(rid, f"{lost}; resuming it got no reply in {RESUME_HEAD_TIMEOUT_S:g} s"), rid
                    )
                    return
                renewed = False
                if resp.status_code in (401, 403) and self.auth is not None:
                    await resp.aread()
                    renewed = await self._auth_retry(resp, sent)  # resumed again with the new token (counted empty)
                    if not renewed and self._auth_refused(resp):
                        await self._feed(_auth_error(rid, self.auth), rid)
                        return
                ctype = resp.headers.get("content-type", "")
                ended: str | None = f"HTTP {resp.status_code}"
                if renewed:
                    pass
                elif resp.status_code != 200 or "text/event-stream" not in ctype:
                    refused = f"HTTP {resp.status_code}" + (
                        "" if resp.status_code != 200 else f" {ctype or 'no body type'}"
                    )
                    await self._feed(_error(rid, f"{lost}; it refused to resume it ({refused})"), rid)
                    return
                else:
                    ended = await self._read_reply(resp, rid, cursor)
                    if ended is None:
                        return
            empty = empty + 1 if cursor.events == seen else 0
            if empty >= MAX_EMPTY_RESUMES:
                await self._feed(_error(rid, f"{lost}; {empty} resumed streams in a row closed empty"), rid)
                return
            why = ended or why

    def _get_headers(self, cursor: Cursor) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", **self.cfg.headers}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.revision:
            headers["MCP-Protocol-Version"] = self.revision
        if cursor.last_id:
            headers["Last-Event-ID"] = cursor.last_id
        return headers

    async def open_listen_stream(self) -> None:
        """A 2025-11-25 server says what belongs to no request on its GET stream; a 405: it has none."""
        if self._tg is None:
            return
        self._tg.start_soon(self._get_stream)

    async def _get_stream(self) -> None:
        """Kept open for the transport's life: reopened whenever it ends or fails (after the
        server's retry hint, LISTEN_MIN_DELAY_S at least, doubling while attempts give nothing),
        with Last-Event-ID once the server gave ids, so a list_changed is not lost until a restart."""
        assert self._feed is not None
        cursor = Cursor()
        failures = 0
        while True:
            seen = cursor.events
            try:
                headers = self._get_headers(cursor)
                sent = await self._authorized(headers)
                async with self.http.stream("GET", headers, connect_timeout=LISTEN_CONNECT_TIMEOUT_S) as resp:
                    if resp.status_code == 405:
                        return
                    if resp.status_code in (401, 403):
                        await self._auth_retry(resp, sent)  # the next attempt (after the wait) has its new token
                    if resp.status_code == 200 and "text/event-stream" in resp.headers.get("content-type", ""):
                        async for item in iter_sse(resp, cursor):
                            if isinstance(item, dict):
                                await self._feed(item, None)
                    elif failures == 0:
                        log.info("upstream %s: its GET stream answered HTTP %d", self.name, resp.status_code)
            except _FAILED as exc:
                if failures == 0:
                    log.info("upstream %s: its GET stream failed: %s", self.name, exc)
            failures = 0 if cursor.events > seen else failures + 1
            delay = min(LISTEN_MIN_DELAY_S * 2 ** max(failures - 1, 0), LISTEN_MAX_DELAY_S)
            hint = min(cursor.retry_ms / 1000, MAX_RETRY_S) if cursor.retry_ms is not None else 0.0
            await anyio.sleep(max(delay, hint))

    @property
    def returncode(self) -> int | None:
        return None

    async def close(self) -> None:
        if self.era == "legacy" and self.session_id and not self.detach:
            with anyio.move_on_after(2, shield=True):
                try:
                    headers = {"Mcp-Session-Id": self.session_id, **self.cfg.headers}
                    if self.auth is not None and self.auth.creds is not None:
                        await self._authorized(headers)
                    async with self.http.stream("DELETE", headers) as resp:
                        await resp.aread()
                except _FAILED:
                    pass
        self.closed.set()


def _encode(msg: dict[str, Any]) -> bytes:
    return fastjson.dumps(msg)


def _auth_error(rid: Id, auth: UpstreamAuth) -> dict[str, Any]:
    """What a request gets when the upstream wants a sign-in mcpx cannot give alone (never a token)."""
    data = {"upstream": auth.name, "needsLogin": auth.needs_login is not None, "login": f"mcpx login {auth.name}"}
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {"code": UPSTREAM_UNAVAILABLE, "message": auth.refusal(), "data": data},
    }


def _error(rid: Id, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": UPSTREAM_UNAVAILABLE, "message": message}}
