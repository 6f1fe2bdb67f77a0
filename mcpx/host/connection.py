"""Host connections as the console sees them, and the per-request context dispatch works with."""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..connections import naming
from ..connections.registry import new_connection_id
from ..protocol.ids import opaque_id
from ..protocol.jsonrpc import Id
from ..protocol.revisions import Era
from ..records.connection_record import ConnectionKind, ConnectionRecord
from ..tasks.frame_log import Direction
from .ratelimit import TokenBucket

if TYPE_CHECKING:
    from ..tasks.plain_calls import LiveCall
    from .parking import Park

Send = Callable[[dict[str, Any]], Awaitable[None]]
# Told each frame of an exchange with the host, as it goes: "out" (mcpx sent it) or "in".
Record = Callable[[Direction, dict[str, Any]], None]


@dataclass
class HostConnection:
    """A legacy session, a `mcpx serve` shim process, or a stateless modern HTTP host identity."""

    transport: Literal["http", "stdio"]
    peer: str | None = None
    principal: str | None = None
    id: str = field(default_factory=lambda: opaque_id(12))
    era: Era | None = None  # "legacy" once initialized; stateless modern requests never set it
    revision: str | None = None
    client_info: dict[str, Any] = field(default_factory=dict)
    client_caps: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    shim_pid: int | None = None  # the `mcpx serve` process behind a stdio connection
    # That process's own random id, the same across the daemons it talks to (host/shim_wire.py):
    # what a restarted daemon finds the calls it made for this shim by.
    shim_instance: str | None = None
    # What an operator tells it apart by (connections/naming.py; display only, never a decision):
    given_label: str | None = None  # the name it gave itself (MCPX_HOST_LABEL, X-Mcpx-Host-Label)
    process: str | None = None  # the process behind it, `python in ~/src/api`, where mcpx can see it
    process_lookup: anyio.Event | None = None  # set when a lookup of `process` still running ends
    looked_up_again: bool = False  # from a later request's socket, once (host/http/peer_process.py)
    created: float = field(default_factory=time.time)
    # Its id in the connection registry (connections/registry.py): public, unlike a legacy session id.
    record_id: str = field(default_factory=new_connection_id)
    # Session-level outbound channel (stdio: the shim's websocket; legacy HTTP: the GET stream).
    send: Send | None = None
    channel_opened: anyio.Event = field(default_factory=anyio.Event)  # set (and renewed) by attach()
    registered: anyio.Event = field(default_factory=anyio.Event)  # its registry record is stored
    in_flight: dict[Id | None, anyio.CancelScope] = field(default_factory=dict)
    resource_subscriptions: set[str] = field(default_factory=set)  # legacy resources/subscribe
    # Requests mcpx sent to this (legacy) host, waiting for its response.
    awaiting: dict[str, _Reply] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    bucket: TokenBucket | None = None  # its request budget, made on its first request (router.py)

    @property
    def label(self) -> str | None:
        """Its given label, else its process led by its clientInfo name (`research-agent · python in ~/src/api`)."""
        return naming.shown_label(self.given_label, self.process, self.client_info)

    async def process_settled(self, timeout: float) -> None:
        """Wait, at most `timeout`, for a lookup of its process still running (host/http/peer_process.py)."""
        pending = self.process_lookup
        if pending is not None:
            with anyio.move_on_after(timeout):
                await pending.wait()

    def attach(self, send: Send | None) -> None:
        """Set (or clear) the session-level channel, waking whoever waits for one to open."""
        self.send = send
        if send is not None:
            opened, self.channel_opened = self.channel_opened, anyio.Event()
            opened.set()

    async def request(
        self, send: Send, method: str, params: dict[str, Any], timeout: float, record: Record | None = None
    ) -> dict[str, Any]:
        """Ask this host something (elicitation, sampling, roots) and wait for its answer; `record`
        is told the request once sent and the host's response once it arrived."""
        rid = f"mcpx-{next(self._ids)}"
        reply = _Reply()
        self.awaiting[rid] = reply
        frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        try:
            await send(frame)
            if record is not None:
                record("out", frame)
            with anyio.fail_after(timeout):
                await reply.done.wait()
        finally:
            self.awaiting.pop(rid, None)
        msg = reply.msg or {}
        if record is not None and reply.msg is not None:
            record("in", reply.msg)
        if "error" in msg:
            raise HostError(
                msg["error"] if isinstance(msg["error"], dict) else {"code": -32603, "message": str(msg["error"])}
            )
        result = msg.get("result")
        return result if isinstance(result, dict) else {}

    def resolve(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        reply = self.awaiting.get(rid) if isinstance(rid, str) else None  # ours are all "mcpx-<n>"
        if reply is not None:
            reply.msg = msg
            reply.done.set()

    def record(self, kind: ConnectionKind, key: str | None = None) -> ConnectionRecord:
        """What the connection registry stores about this connection."""
        ms = int(self.created * 1000)
        return ConnectionRecord(
            self.record_id,
            kind,
            self.transport,
            ms,
            ms,
            revision=self.revision,
            client_info=self.client_info,
            principal=self.principal,
            peer=self.peer,
            shim_pid=self.shim_pid,
            key=key,
            label=self.label,
            capabilities=self.client_caps,
        )


class _Reply:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.msg: dict[str, Any] | None = None


class HostError(Exception):
    """The host answered one of our requests with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


@dataclass
class RequestContext:
    conn: HostConnection
    era: Era
    revision: str
    client_caps: dict[str, Any]
    meta: dict[str, Any]
    log_level: str | None
    # Where request-scoped notifications (progress, log) go; None when nothing can receive them.
    notify: Send | None
    task_id: str | None = None  # set when this request's work runs as an mcpx task
    park: Park | None = None  # a 2026 host's held call, whose upstream questions become MRTR rounds
    last_progress: float | None = None  # the last progress value relayed to this request's host
    request_id: Id | None = None  # the host's id for this request (a listen stream is named by it)
    plain: LiveCall | None = None  # a plain tools/call in flight, listed for operators if it runs long
    # A request `mcpx serve` sent again because a previous daemon never answered it (shim_wire.py).
    resumed: bool = False
    # This request's socket address (HTTP): a stateless host's requests may come from several
    # processes, and an approval names the one that sent this request (host/approvals.py).
    peer: str | None = None
    # Tracing only (mcpx/telemetry/tracing.py; both stay None when it is off): the HTTP request's
    # headers, for a `traceparent` there, and this request's span once started.
    http_headers: dict[str, str] | None = None
    span: Any = None
