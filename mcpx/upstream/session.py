"""One MCP client session to an upstream: probes its era, then speaks it.

Probe (DIGEST 1.3/1.4): `server/discover` first; a DiscoverResult or a recognised modern error
means a 2026-07-28 server; anything else, or silence, means a handshake server, so `initialize`
(accepting a 2025-06-18 or 2025-03-26 counter-offer).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .. import __version__
from ..protocol import jsonrpc
from ..protocol.errors import UPSTREAM_UNAVAILABLE, McpError, UpstreamError, UpstreamUnavailable
from ..protocol.revisions import (
    LEGACY_LATEST,
    LEGACY_VERSIONS,
    META_CAPS,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN,
    UNSUPPORTED_CODE,
    Era,
)
from ..tasks import frame_log
from ..tasks.frame_log import FrameSink
from ..telemetry import tracing
from .stdio.id_ranges import IdRanges
from .transport import Transport

log = logging.getLogger("mcpx.upstream")

# A stdio server answers its first line only once it has started (FastMCP takes > 5 s to import),
# so its probe waits longer; silence then means a handshake server that ignores unknown methods.
PROBE_TIMEOUT_S = {"stdio": 15.0, "http": 5.0}
INIT_TIMEOUT_S = 20.0
CLIENT_INFO = {"name": "mcpx", "version": __version__}
OnNotify = Callable[[dict[str, Any]], Awaitable[None]]
# A notification the upstream sent outside any request (list_changed, resources/updated).
OnEvent = Callable[[str, dict[str, Any]], Coroutine[Any, Any, None]]


OnRequest = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
# Told the id a request will go out under, before it is sent (a kept stdio server: the task row
# remembers it, committed first, so a daemon killed at any point never loses track of a sent call).
OnSent = Callable[[jsonrpc.Id], Awaitable[None]]
MAX_ORPHANS = 10_000  # replies to a previous daemon's requests, held until a task row claims them
# Requests a server may send mid-call; mcpx relays them to whoever made the call.
_CALL_METHODS = frozenset({"tools/call", "prompts/get", "resources/read", "tasks/result"})


class NeverArrived(UpstreamUnavailable):
    """A previous daemon's request its kept server never got (the daemon stopped before sending it):
    it can be sent again without running anything twice (upstream/carry_on.py does)."""


@dataclass(frozen=True)
class Caller:
    """Who a request to an upstream is made for: the host connection (its registry id), the mcpx
    task it runs under, what it calls. Set around a host's call (`current_caller`), so a question the
    upstream asks with no request named on it can be put to the right host, or listed for an operator
    with every call that may have asked it."""

    connection: str | None
    task_id: str | None = None
    name: str | None = None  # the tool (prompt, resource) called

    def wire(self, method: str) -> dict[str, Any]:
        return {"connectionId": self.connection, "taskId": self.task_id, "method": method, "name": self.name}


current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mcpx_upstream_caller", default=None)
# An upstream's question that no one call can be tied to, for an operator: (method, params, the calls
# in flight that may have asked it, as Caller.wire shows them) -> the result the upstream gets.
AskOperator = Callable[[str, dict[str, Any], list[dict[str, Any]]], Awaitable[dict[str, Any]]]
# A question of a process that serves one host alone (`scope: host`) that no call in flight can be
# tied to (a roots/list at its start, say): still that host's, never anyone else's.
# (method, params) -> the result the upstream gets.
AskOwner = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
# What mcpx declares to handshake upstreams: it can relay these to hosts that declared them.
RELAYED_CLIENT_CAPS: dict[str, dict[str, Any]] = {"elicitation": {}, "sampling": {}, "roots": {}}


@dataclass
class _Pending:
    method: str
    on_notify: OnNotify | None
    on_request: OnRequest | None = None
    wants_logs: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: dict[str, Any] | None = None
    sink: FrameSink | None = None  # the task's frame log, when a task's call made this request
    caller: Caller | None = None  # who it was made for (current_caller when it was sent)
    # Server requests being answered for this call: they end when the call does.
    handlers: set[anyio.CancelScope] = field(default_factory=set)


class UpstreamSession:
    def __init__(
        self,
        name: str,
        transport: Transport,
        on_event: OnEvent | None = None,
        ask_operator: AskOperator | None = None,
        *,
        ask_owner: AskOwner | None = None,
    ) -> None:
        """`ask_operator` answers a question the server asks while calls of several hosts are in
        flight and none is named on it (stdio): it is an operator's alone then. `ask_owner` (a
        process of one host's own) answers every question no call in flight is tied to."""
        self.name = name
        self.transport = transport
        self.on_event = on_event
        self.ask_operator = ask_operator
        self.ask_owner = ask_owner
        # What would let a question no call explains be answered, for the -32601 it gets otherwise.
        self.unattributed_fix = f"give each host its own process: mcpServers.{name}.mcpx.scope: host"
        self.era: Era | None = None
        self.revision: str | None = None
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self._ids = itertools.count(1)
        self._pending: dict[jsonrpc.Id, _Pending] = {}
        # our progress token -> (the host's own token, where its progress goes)
        self._progress: dict[str, tuple[object, OnNotify, FrameSink | None]] = {}
        self.dead_reason: str | None = None
        # its task id -> set on a status notification; weak: an event nobody waits on goes away
        self._task_notices: weakref.WeakValueDictionary[str, anyio.Event] = weakref.WeakValueDictionary()
        self.tg: TaskGroup | None = None  # where server-to-client requests are answered (set by the pool)
        # Ids below first_id were a previous daemon's (a kept server): their replies wait in
        # _orphans for the task rows that name them (claim()).
        self.first_id = 1
        self._orphans: dict[jsonrpc.Id, dict[str, Any]] = {}
        self.inherited: set[jsonrpc.Id] = set()  # a previous daemon's requests the server has not answered
        self.forwarded: IdRanges | None = None  # which ids a kept server got, as its keeper said at attach
        # The host request each of a previous daemon's tools/calls was made for (its keeper's word),
        # and whether that list is whole (then a host request not in it was never sent).
        self.origins: dict[str, jsonrpc.Id] | None = None
        self.origins_complete = False
        self.detached = False  # the daemon stops but leaves the server running: cancel nothing upstream

    # ---- inbound -------------------------------------------------------------------------
    async def feed(self, msg: dict[str, Any], related_id: jsonrpc.Id | None) -> None:
        if "method" in msg:
            if "id" in msg:
                if self.tg is not None:
                    self.tg.start_soon(self._server_request, msg, related_id)  # never block the reader
                else:
                    await self._server_request(msg, related_id)
            else:
                await self._notification(msg, related_id)
            return
        rid = msg.get("id")
        slot = self._pending.get(rid) if isinstance(rid, (str, int)) else None
        if slot is None:
            if isinstance(rid, int) and rid < self.first_id:
                self._orphans[rid] = msg  # a previous daemon's call: a task row may claim it
                while len(self._orphans) > MAX_ORPHANS:
                    del self._orphans[next(iter(self._orphans))]
            return  # a late reply to a call we abandoned
        slot.reply = msg
        slot.done.set()

    def task_notified(self, task_id: str) -> anyio.Event:
        """Set when this upstream pushes a status notification for its task `task_id` (2025:
        notifications/tasks/status; 2026: notifications/tasks), so its follower polls at once."""
        event = self._task_notices.get(task_id)
        if event is None or event.is_set():
            event = self._task_notices[task_id] = anyio.Event()
        return event

    async def _notification(self, msg: dict[str, Any], related_id: jsonrpc.Id | None) -> None:
        method = msg.get("method")
        params = jsonrpc.as_object(msg.get("params"))
        if method in ("notifications/tasks/status", "notifications/tasks"):
            notice = self._task_notices.pop(str(params.get("taskId")), None)
            if notice is not None:
                notice.set()
            return
        if method == "notifications/progress":
            route = self._progress.get(str(params.get("progressToken")))
            if route is not None:
                original, cb, sink = route
                if sink is not None:
                    sink("upstream", "in", msg)
                out = dict(params)
                out["progressToken"] = original
                await _safe(cb, jsonrpc.notification("notifications/progress", out))
            return
        if related_id is not None and related_id in self._pending:
            # Arrived on the response stream of one request (HTTP): it belongs to that request.
            pending = self._pending[related_id]
            if pending.sink is not None:
                pending.sink("upstream", "in", msg)
            on_notify = pending.on_notify
            if on_notify is not None:
                await _safe(on_notify, msg)
            return
        if method == "notifications/message":
            # A 2026 server logs only for requests that asked (logLevel); on stdio the message names
            # no request, so it goes to the one in-flight request that asked, if there is exactly one.
            asking = [p for p in self._pending.values() if p.wants_logs and p.on_notify is not None]
            if self.era == "modern" and len(asking) == 1 and asking[0].on_notify is not None:
                await _safe(asking[0].on_notify, msg)
                return
            log.info("upstream %s log: %s", self.name, params.get("data"))
        if self.on_event is not None and isinstance(method, str):
            # The handler may ask this upstream something (tools/list after list_changed): it must
            # not run on the reader, which is the only thing that can read the answer.
            if self.tg is not None:
                self.tg.start_soon(self.on_event, method, params)
            else:
                await self.on_event(method, params)

    async def _server_request(self, msg: dict[str, Any], related_id: jsonrpc.Id | None) -> None:
        method = msg.get("method")
        params = jsonrpc.as_object(msg.get("params"))
        slot = self._pending.get(related_id) if related_id is not None else None
        unattributed: list[_Pending] = []
        if slot is None:
            # Over stdio a request names no call. It goes to a host only when mcpx is certain which
            # host's call asked: one call in flight, or every call in flight is that one host's.
            calls = [p for p in self._pending.values() if p.method in _CALL_METHODS]
            slot = _one_hosts_call(calls)
            if slot is None:
                unattributed = calls
        if slot is not None and slot.sink is not None:
            slot.sink("upstream", "in", msg)
        if method == "ping":
            reply = jsonrpc.result(msg["id"], {})
        elif slot is not None and slot.on_request is not None:
            scope = anyio.CancelScope()
            slot.handlers.add(scope)
            try:
                with scope:
                    reply = jsonrpc.result(msg["id"], await slot.on_request(str(method), params))
                if scope.cancelled_caught:
                    # The call that asked ended first: its question is moot (and closed with it).
                    reply = jsonrpc.error(msg["id"], {"code": -32603, "message": "the call that asked has ended"})
            except McpError as exc:
                reply = jsonrpc.error(msg["id"], exc.to_error())
            except UpstreamError as exc:  # the host's own JSON-RPC error, passed back
                reply = jsonrpc.error(msg["id"], exc.error)
            except Exception as exc:  # noqa: BLE001 - whatever failed, the upstream gets an answer, not silence
                log.warning("upstream %s: answering its %s failed: %s", self.name, method, exc)
                reply = jsonrpc.error(msg["id"], {"code": -32603, "message": f"mcpx could not get an answer: {exc}"})
            finally:
                slot.handlers.discard(scope)
        elif self.ask_owner is not None:
            # One host's own process: whatever no call of its explains is still that host's.
            try:
                reply = jsonrpc.result(msg["id"], await self.ask_owner(str(method), params))
            except McpError as exc:
                reply = jsonrpc.error(msg["id"], exc.to_error())
            except UpstreamError as exc:
                reply = jsonrpc.error(msg["id"], exc.error)
            except Exception as exc:  # noqa: BLE001 - the upstream gets an answer, not silence
                log.warning("upstream %s: answering its %s failed: %s", self.name, method, exc)
                reply = jsonrpc.error(msg["id"], {"code": -32603, "message": f"mcpx could not get an answer: {exc}"})
        elif unattributed and self.ask_operator is not None:
            # Another host's data may be in it: never a host's to answer, an operator's always.
            candidates = [p.caller.wire(p.method) if p.caller else {"method": p.method} for p in unattributed]
            try:
                reply = jsonrpc.result(msg["id"], await self.ask_operator(str(method), params, candidates))
            except McpError as exc:
                reply = jsonrpc.error(msg["id"], exc.to_error())
            except UpstreamError as exc:
                reply = jsonrpc.error(msg["id"], exc.error)
        else:
            why = f"{len(unattributed)} calls were in flight" if unattributed else "no call was in flight"
            reply = jsonrpc.error(
                msg["id"],
                {
                    "code": -32601,
                    "message": f"mcpx cannot tell which call asked {method} ({why}); nobody can answer it"
                    f" ({self.unattributed_fix})",
                },
            )
        if slot is not None and slot.sink is not None:
            slot.sink("upstream", "out", reply)
        try:
            await self.transport.send(reply)
        except ConnectionError:
            log.info("upstream %s went away before mcpx answered its %s", self.name, method)

    def fail_all(self, reason: str) -> None:
        self.dead_reason = reason
        for rid, slot in list(self._pending.items()):
            slot.reply = jsonrpc.error(rid, {"code": UPSTREAM_UNAVAILABLE, "message": reason})
            slot.done.set()

    # ---- outbound ------------------------------------------------------------------------
    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notify: OnNotify | None = None,
        on_request: OnRequest | None = None,
        timeout: float | None = None,
        on_sent: OnSent | None = None,
        origin: str | None = None,
    ) -> dict[str, Any]:
        """Send one request and wait for its reply; cancelling this call cancels it upstream.
        `origin`: the host request it is made for, remembered by a kept server's keeper."""
        if self.dead_reason is not None:
            raise UpstreamUnavailable(self.dead_reason)
        rid = next(self._ids)
        params = dict(params or {})
        sink = frame_log.current_sink.get()
        token_key = None
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta and on_notify is not None:
            # Hosts choose their own tokens; two hosts may pick the same one, so upstream sees ours.
            token_key = f"mcpx-{rid}"
            self._progress[token_key] = (meta["progressToken"], on_notify, sink)
            params["_meta"] = {**meta, "progressToken": token_key}
        slot = _Pending(method, on_notify, on_request, sink=sink, caller=current_caller.get())
        meta = params.get("_meta")
        slot.wants_logs = isinstance(meta, dict) and META_LOG_LEVEL in meta
        self._pending[rid] = slot
        span = None  # tracing: this request's CLIENT span; its context goes into params._meta
        if tracing.tracer is not None:
            span = tracing.client_span(self.name, self.transport.kind, self.revision, method, rid, params)
        try:
            if on_sent is not None:
                await on_sent(rid)
            try:
                # The timeout covers the send too: an HTTP transport's send is the whole exchange.
                with anyio.fail_after(timeout):
                    try:
                        out = jsonrpc.request(rid, method, params)
                        if sink is not None:
                            sink("upstream", "out", out)
                        await self.transport.send(out, origin)
                    except ConnectionError as exc:
                        raise UpstreamUnavailable(f"upstream {self.name!r} is not reachable: {exc}") from None
                    await slot.done.wait()
            except TimeoutError:
                await self._cancel_upstream(rid, "timed out")
                raise
            except anyio.get_cancelled_exc_class():
                if not self.detached:
                    await self._cancel_upstream(rid, "cancelled by the host")
                raise
        finally:
            self._pending.pop(rid, None)
            if token_key is not None:
                self._progress.pop(token_key, None)
            for scope in slot.handlers:
                scope.cancel()
            if span is not None:
                tracing.end_client(span, slot.reply, sys.exc_info()[1])
        return self._result_of(slot.reply)

    async def claim(self, rid: jsonrpc.Id, timeout: float | None = None) -> dict[str, Any]:
        """The result of a request a previous daemon sent this (kept) server: held already, or
        awaited. Nothing is cancelled upstream if the wait ends: the call was never ours."""
        if self.dead_reason is not None:
            raise UpstreamUnavailable(self.dead_reason)
        held = self._orphans.pop(rid, None)
        if held is not None:
            return self._result_of(held)
        if rid not in self.inherited:
            seen = self.forwarded.seen(rid) if self.forwarded is not None and isinstance(rid, int) else "unknown"
            if seen == "never":
                raise NeverArrived(
                    f"upstream {self.name!r} never got request {rid}: the daemon stopped before sending it"
                )
            if seen == "forwarded":
                raise UpstreamUnavailable(
                    f"upstream {self.name!r} got request {rid}, but its reply was lost while no daemon was connected"
                    " (its keeper could hold no more); the result of this call is lost"
                )
            raise UpstreamUnavailable(
                f"upstream {self.name!r} has no record of request {rid} (it never arrived, or its reply was lost"
                " while no daemon was connected); the result of this call is lost"
            )
        slot = _Pending("tools/call", None)
        self._pending[rid] = slot
        try:
            with anyio.fail_after(timeout):
                await slot.done.wait()
        finally:
            self._pending.pop(rid, None)
        return self._result_of(slot.reply)

    def _result_of(self, reply: dict[str, Any] | None) -> dict[str, Any]:
        """A reply's result, or its error raised (as UpstreamError, or unavailable if the server died)."""
        sink = frame_log.current_sink.get()
        reply = reply or {}
        if sink is not None and reply:
            sink("upstream", "in", reply)
        if "error" in reply:
            err = (
                reply["error"] if isinstance(reply["error"], dict) else {"code": -32603, "message": str(reply["error"])}
            )
            if err.get("code") == UPSTREAM_UNAVAILABLE and self.dead_reason is not None:
                raise UpstreamUnavailable(str(err.get("message", self.dead_reason)))
            raise UpstreamError(err)
        res = reply.get("result")
        if not isinstance(res, dict):
            raise UpstreamError(
                {"code": -32603, "message": f"upstream {self.name!r} sent a result that is not an object"}
            )
        return res

    async def _cancel_upstream(self, rid: jsonrpc.Id, reason: str) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            if not (self.era == "modern" and self.transport.kind == "http"):
                try:
                    await self.transport.send(
                        jsonrpc.notification(
                            "notifications/cancelled", self._with_meta({"requestId": rid, "reason": reason})
                        )
                    )
                except ConnectionError:
                    log.debug("upstream %s gone: the cancel of request %s has nobody to reach", self.name, rid)
            # A modern HTTP server reads a closed stream as the cancel; for others it just frees it.
            await self.transport.abort(rid)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.transport.send(jsonrpc.notification(method, params))

    def _with_meta(
        self, params: dict[str, Any], client_caps: dict[str, Any] | None = None, log_level: str | None = None
    ) -> dict[str, Any]:
        if self.era != "modern":
            return params
        meta = dict(params.get("_meta") or {})
        meta[META_VERSION] = MODERN
        meta[META_CAPS] = client_caps if client_caps is not None else meta.get(META_CAPS, {})
        meta.setdefault(META_CLIENT_INFO, CLIENT_INFO)
        if log_level is not None:
            meta[META_LOG_LEVEL] = log_level
        return {**params, "_meta": meta}

    def shape_params(
        self, params: dict[str, Any], *, client_caps: dict[str, Any] | None, log_level: str | None
    ) -> dict[str, Any]:
        """Params for this upstream's era: modern gets the 2026 _meta keys, legacy loses them."""
        if self.era == "modern":
            return self._with_meta(params, client_caps or {}, log_level)
        meta = params.get("_meta")
        if isinstance(meta, dict):
            kept = {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/")}
            params = {k: v for k, v in params.items() if k != "_meta"}
            if kept:
                params["_meta"] = kept
        return params

    # ---- probe ---------------------------------------------------------------------------
    async def start(self) -> None:
        try:
            with anyio.fail_after(PROBE_TIMEOUT_S.get(self.transport.kind, 5.0)):
                self.era = "modern"  # so the probe itself carries modern headers
                res = await self.request(
                    "server/discover", {"_meta": {META_VERSION: MODERN, META_CAPS: {}, META_CLIENT_INFO: CLIENT_INFO}}
                )
            if MODERN in (res.get("supportedVersions") or []):
                self._adopt_modern(res)
                return
        except UpstreamError as exc:
            data = jsonrpc.as_object(exc.error.get("data"))
            if exc.error.get("code") == UNSUPPORTED_CODE and MODERN in (data.get("supported") or []):
                raise UpstreamUnavailable(f"upstream {self.name!r} rejected {MODERN} although it lists it") from None
        except TimeoutError:
            pass
        except McpError:
            raise
        self.era = "legacy"
        with anyio.fail_after(INIT_TIMEOUT_S):
            res = await self.request(
                "initialize",
                {"protocolVersion": LEGACY_LATEST, "capabilities": RELAYED_CLIENT_CAPS, "clientInfo": CLIENT_INFO},
            )
        version = res.get("protocolVersion")
        if version not in LEGACY_VERSIONS:
            raise UpstreamUnavailable(f"upstream {self.name!r} offered protocol {version!r}, which mcpx does not speak")
        self.revision = version
        self.transport.era = "legacy"
        self.transport.revision = version
        self.server_info = res.get("serverInfo") or {}
        self.capabilities = res.get("capabilities") or {}
        self.instructions = res.get("instructions")
        await self.notify("notifications/initialized")

    # ---- a kept server: the session a previous daemon opened ------------------------------
    def handshake(self) -> dict[str, Any]:
        """What a next daemon needs to carry on this session without a new handshake."""
        return {
            "era": self.era,
            "revision": self.revision,
            "serverInfo": self.server_info,
            "capabilities": self.capabilities,
            "instructions": self.instructions,
        }

    def adopt(self, handshake: dict[str, Any], next_id: int) -> bool:
        """Carry on a previous daemon's session with a kept server; False if the record is unusable."""
        era, revision = handshake.get("era"), handshake.get("revision")
        if era == "modern" and revision == MODERN:
            self.era = "modern"
        elif era == "legacy" and revision in LEGACY_VERSIONS:
            self.era = "legacy"
        else:
            return False
        self.revision = revision
        self.transport.era = self.era
        self.transport.revision = revision if self.era == "legacy" else None
        self.server_info = jsonrpc.as_object(handshake.get("serverInfo"))
        self.capabilities = jsonrpc.as_object(handshake.get("capabilities"))
        instructions = handshake.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self.continue_ids(next_id)
        return True

    def continue_ids(self, next_id: int) -> None:
        """Number requests from `next_id`: lower ids are a previous daemon's, still in flight."""
        self.first_id = max(next_id, 1)
        self._ids = itertools.count(self.first_id)

    def _adopt_modern(self, res: dict[str, Any]) -> None:
        self.era = "modern"
        self.revision = MODERN
        self.transport.era = "modern"
        self.capabilities = res.get("capabilities") or {}
        self.server_info = ((res.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")) or {}
        self.instructions = res.get("instructions")


async def _safe(cb: OnNotify, msg: dict[str, Any]) -> None:
    try:
        await cb(msg)
    except Exception:  # a host that went away must not break the upstream reader
        log.debug("notification relay failed", exc_info=True)


def _one_hosts_call(calls: list[_Pending]) -> _Pending | None:
    """The call a question with no request named on it belongs to, when that is certain: the only
    one in flight, or (several in flight, all of one host connection) one of that host's that can
    be asked, the newest."""
    if len(calls) == 1:
        return calls[0]
    hosts = {p.caller.connection if p.caller is not None else None for p in calls}
    if len(hosts) != 1 or None in hosts:
        return None
    askable = [p for p in calls if p.on_request is not None]
    return askable[-1] if askable else None
