"""What every host transport shares: era per message, legacy sessions, running and cancelling calls."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from ..connections.registry import ConnectionRegistry
from ..protocol import jsonrpc, legacy, modern
from ..protocol.errors import InternalError, InvalidRequest, McpError
from ..protocol.revisions import LEGACY_LATEST, META_CLIENT_INFO, META_LOG_LEVEL, MODERN
from ..records.connection_record import ConnectionKind
from ..telemetry import tracing
from . import wirelog
from .connection import HostConnection, RequestContext, Send
from .dispatch import INSTRUCTIONS, SERVER_INFO, Dispatcher
from .outbound import STALL_S
from .ratelimit import RateLimited, TokenBucket, refusal

log = logging.getLogger("mcpx.host")


class Call:
    """One request running under the daemon's task group, so it can outlive the HTTP request."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.frame: dict[str, Any] | None = None
        # Called once, right after `done` is set: lets the HTTP writer learn of the end without a
        # task of its own that only waits for `done` (one spawn less on every request).
        self.on_done: Callable[[], None] | None = None
        self.cut: str | None = None  # set when the daemon cuts the call: it is answered with this error

    def cut_short(self, reason: str) -> None:
        self.cut = reason
        self.scope.cancel()

    def when_done(self, hook: Callable[[], None]) -> None:
        if self.done.is_set():
            hook()
        else:
            self.on_done = hook


# Told of each host tools/call once answered: (exposed tool name, era, reply frame or None, seconds).
OnToolCall = Callable[[object, str, dict[str, Any] | None, float], None]


class HostRouter:
    def __init__(
        self,
        dispatcher: Dispatcher,
        registry: ConnectionRegistry,
        *,
        rate: float = 1000,
        burst: int = 2000,
        stall_s: float = STALL_S,
        on_tool_call: OnToolCall | None = None,
    ) -> None:
        self.stall_s = stall_s  # connections.stallS: every host stream's Outbound
        self.on_tool_call = on_tool_call  # the daemon's metrics (telemetry/metrics.py)
        self.rate = rate  # connections.maxRequestsPerSecond
        self.burst = burst
        self.dispatcher = dispatcher
        self.registry = registry
        self.tg: TaskGroup | None = None  # the daemon's, from start()
        self.connections: dict[str, HostConnection] = {}
        self.running: set[Call] = set()

    def run_under(self, tg: TaskGroup) -> None:
        """Serve: host calls run under the daemon's task group from now on."""
        self.tg = tg

    def over_budget(self, conn: HostConnection) -> RateLimited | None:
        """The refusal for a request beyond the connection's rate, or None when it may go."""
        now = time.monotonic()
        bucket = conn.bucket
        if bucket is None:
            bucket = conn.bucket = TokenBucket(self.rate, self.burst, now)
        wait = bucket.take(now)
        return refusal(self.rate, wait) if wait else None

    # ---- connections ---------------------------------------------------------------------
    async def open(self, conn: HostConnection, kind: ConnectionKind, key: str | None = None) -> HostConnection:
        """A connection starts (or comes back after a restart): registered, stored, announced."""
        await self.registry.open(self.registry.get(conn.record_id) or conn.record(kind, key))
        self.connections[conn.id] = conn
        if conn.era == "legacy":
            self.dispatcher.hub.legacy[conn.id] = conn
        return conn

    def forget(self, conn: HostConnection) -> None:
        """Drop what this daemon holds for the connection; its record stays as it is."""
        self.connections.pop(conn.id, None)
        self.dispatcher.hub.legacy.pop(conn.id, None)
        if conn.resource_subscriptions and self.tg is not None:
            uris, conn.resource_subscriptions = set(conn.resource_subscriptions), set()
            self.tg.start_soon(self.dispatcher.unwatch_all, uris)  # upstream subscriptions go too
        # A legacy host's disconnect is not a cancellation; its calls finish and are dropped.

    async def close(self, conn: HostConnection, reason: str) -> None:
        """The connection is over (session deleted, shim gone, stateless host idle)."""
        self.forget(conn)
        await self.registry.close(conn.record_id, reason)

    async def initialized(self, conn: HostConnection) -> None:
        """A stdio connection learnt its revision and client (at initialize, or a 2026 host's first
        request): the record too, with the label its client's name may now lead."""
        await self.registry.update(
            conn.record_id,
            revision=conn.revision,
            client_info=conn.client_info,
            capabilities=conn.client_caps,
            label=conn.label,
        )

    # ---- contexts ------------------------------------------------------------------------
    def modern_context(self, conn: HostConnection, params: dict[str, Any], notify: Send | None) -> RequestContext:
        caps = modern.check_meta(params)
        meta = params["_meta"]
        info = meta.get(META_CLIENT_INFO)
        if isinstance(info, dict) and not conn.client_info:
            conn.client_info = info
        level = meta.get(META_LOG_LEVEL)
        return RequestContext(conn, "modern", MODERN, caps, meta, level if level in legacy.LOG_LEVELS else None, notify)

    def legacy_context(self, conn: HostConnection, params: dict[str, Any], notify: Send | None) -> RequestContext:
        if conn.revision is None:
            raise InvalidRequest("Send initialize first (or, for 2026-07-28, put the protocol version in params._meta)")
        meta = jsonrpc.as_object(params.get("_meta"))
        return RequestContext(conn, "legacy", conn.revision, conn.client_caps, meta, conn.log_level, notify)

    def initialize(self, conn: HostConnection, msg: jsonrpc.Message) -> dict[str, Any]:
        try:
            revision = legacy.negotiate_version(msg.params)
            revision, res = legacy.initialize_result(
                msg.params, self.dispatcher.capabilities(revision), SERVER_INFO, INSTRUCTIONS
            )
        except McpError as exc:
            return emit(LEGACY_LATEST, "initialize", jsonrpc.error_from(msg.id, exc))
        conn.era = "legacy"
        conn.revision = revision
        conn.client_caps = msg.params.get("capabilities") or {}
        conn.client_info = msg.params.get("clientInfo") or {}
        if conn.id in self.connections:  # a stdio connection is open before it initializes
            self.dispatcher.hub.legacy[conn.id] = conn
        return emit(revision, "initialize", jsonrpc.result(msg.id, res))

    # ---- calls ---------------------------------------------------------------------------
    def start(self, ctx: RequestContext, msg: jsonrpc.Message) -> Call:
        """Run a request detached from its transport; the caller waits on `call.done`."""
        assert self.tg is not None, "router not started"
        call = self.prepare(ctx, msg)
        self.tg.start_soon(self.run, call, ctx, msg)
        return call

    def prepare(self, ctx: RequestContext, msg: jsonrpc.Message) -> Call:
        """A call about to run (in the caller's task with `run`, or detached with `start`)."""
        call = Call()
        ctx.conn.in_flight[msg.id] = call.scope
        self.running.add(call)
        self.registry.seen(ctx.conn.record_id)
        return call

    async def run(self, call: Call, ctx: RequestContext, msg: jsonrpc.Message) -> None:
        rid = msg.id
        began = time.perf_counter()
        traced = None if tracing.tracer is None else tracing.server_span(ctx, msg, ctx.http_headers)
        try:
            with call.scope:
                call.frame = await self.dispatcher.reply(ctx, msg)
            if call.frame is None and call.cut is not None and rid is not None:
                call.frame = jsonrpc.error_from(rid, InternalError(call.cut))
            # A request its host cancelled gets no reply at all (cancellation.mdx): frame stays None.
            if call.frame is not None:
                emit(ctx.revision, msg.method, call.frame)
        finally:
            if traced is not None:
                traced.end(call.frame)
            if self.on_tool_call is not None and msg.method == "tools/call":
                self.on_tool_call(msg.params.get("name"), ctx.era, call.frame, time.perf_counter() - began)
            self.running.discard(call)
            if ctx.conn.in_flight.get(rid) is call.scope:
                del ctx.conn.in_flight[rid]
            call.done.set()
            if call.on_done is not None:
                call.on_done()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: object) -> None:
        """Run `fn(*args)` under the daemon's task group (outliving the request that asked)."""
        assert self.tg is not None, "router not started"
        self.tg.start_soon(fn, *args)

    def cut_all(self, reason: str) -> int:
        """At shutdown: every running request ends now with an error naming `reason`, instead of
        being killed by the server's grace timeout with no JSON-RPC reply at all."""
        running = list(self.running)
        for call in running:
            call.cut_short(reason)
        return len(running)

    def cancel(self, conn: HostConnection, params: dict[str, Any]) -> None:
        scope = conn.in_flight.get(params.get("requestId"))
        if scope is not None:
            scope.cancel()

    def response(self, conn: HostConnection, msg: jsonrpc.Message) -> None:
        """A host's reply to a request mcpx sent it (elicitation, sampling, roots)."""
        conn.resolve(msg.raw)

    async def notification(self, conn: HostConnection, msg: jsonrpc.Message) -> None:
        if msg.method == "notifications/cancelled":
            self.cancel(conn, msg.params)
        # Other notifications (roots/list_changed, progress from a host) need no action yet.


def emit(revision: str | None, method: str | None, frame: dict[str, Any]) -> dict[str, Any]:
    """Every frame bound for a host passes here once, so the wire log sees all of them."""
    wirelog.record(revision, method, frame)
    return frame


class FrameSink(Protocol):
    def send_nowait(self, item: StreamItem, /) -> None: ...


def notifier(revision: str, sink: FrameSink) -> Send:
    """A request-scoped notification sender that records each frame and never blocks the upstream."""

    async def send(msg: dict[str, Any]) -> None:
        emit(revision, msg.get("method"), msg)
        try:
            sink.send_nowait(msg)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # host gone or not reading: progress is advisory, the result still arrives

    return send


# Frames for one host stream; None tells the stream's writer that the request is over.
StreamItem = dict[str, Any] | None
