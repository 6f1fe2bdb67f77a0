"""The one place a host request becomes an upstream call: params, relayed capabilities, log level,
MRTR state, the questions asked on the way and the notifications relayed back.

(The session itself maps the host's progress token and tells the upstream of a cancellation:
upstream/session.py `request`.)

2026 upstream, 2026 host: MRTR rounds pass through; the host's real capabilities go up,
`inputRequests` come down, and the upstream's requestState travels inside mcpx's signed one
(`raw_state` keeps it bare, for rounds mcpx answers itself, e.g. inside a task).
2026 upstream, 2025 host with a stream to ask on: mcpx asks the host each question as a server
request and retries the upstream with the answers.
2025 upstream: its server requests during the call are asked of a 2025 host the same way.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..config.model import Config
from ..protocol import jsonrpc, legacy, request_state, shaping
from ..protocol.errors import InternalError, UpstreamUnavailable
from ..protocol.ids import opaque_id
from ..protocol.jsonrpc import Id
from ..protocol.revisions import Era
from ..questions import elicitation
from ..tasks.engine import Run, TaskEngine, current_run, now_ms
from ..tasks.plain_calls import CallInfo, LiveCall, OperatorCancelled, PlainCalls
from ..upstream import carry_on
from ..upstream.pool import Route, UpstreamServer
from ..upstream.session import (
    RELAYED_CLIENT_CAPS,
    Caller,
    NeverArrived,
    OnNotify,
    OnSent,
    UpstreamSession,
    current_caller,
)
from ..upstream.tasks import follow, foreign_sessions
from .approvals import Approvals, Resumed
from .asking import Asker
from .connection import RequestContext

# Keys of a host's params that are mcpx's business, never forwarded as they came.
_MCPX_KEYS = ("task", "inputResponses", "requestState")
# Methods that may answer input_required (mrtr.mdx:184-192), and the capabilities those rounds use.
_MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
_RELAYABLE_CAPS = frozenset({"elicitation", "sampling", "roots"})
# Request-scoped notifications a call relays to its host; anything else an upstream sends on a
# request's stream is not the host's business.
_RELAYED = frozenset({"notifications/progress", "notifications/message"})
# The progress token mcpx asks a plain call's progress with when its host asked for none: the
# operator sees the call's progress; the host is not sent what it did not ask for.
WATCH_TOKEN = "mcpx-watch"
Inline = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]  # one upstream call, answered inline
# Where a call goes now: the server configured under its server's key (and its route there) after a
# reload replaced the one it was routed to, or what the reload did that leaves it nowhere to go.
Current = Callable[[RequestContext, UpstreamServer, Route], Awaitable[tuple[UpstreamServer, Route] | str]]


@dataclass(frozen=True)
class UpstreamRequest:
    """What goes upstream for one host request, before the session shapes it for its own era."""

    params: dict[str, Any]
    client_caps: dict[str, Any]
    log_level: str | None
    mrtr: bool  # MRTR rounds run between mcpx and the upstream for this host
    bound: str  # what mcpx's signed requestState is bound to ("" when no round can be signed)
    round_: int  # the MRTR round the host is in (from mcpx's signed state)


def stripped(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in _MCPX_KEYS}


def build(
    ctx: RequestContext,
    upstream_era: Era | None,
    method: str,
    params: dict[str, Any],
    *,
    key: bytes,
    raw_state: bool,
    now: int,
) -> UpstreamRequest:
    """No I/O: the upstream's era, mcpx's state key and `now` come from the caller."""
    up = stripped(params)
    can_ask_legacy = ctx.era == "legacy" and ctx.notify is not None
    mrtr = upstream_era == "modern" and method in _MRTR_METHODS and (ctx.era == "modern" or can_ask_legacy)
    # A hash of the arguments: only a call whose rounds mcpx signs (or whose state it checks) needs
    # it, and for a plain call it was a fifth of the dispatcher's own CPU.
    signing = mrtr or params.get("requestState") is not None
    bound = request_state.binding(method, up, ctx.conn.record_id) if signing else ""
    round_ = 0
    caps: dict[str, Any] = {}
    if mrtr and ctx.era == "modern":
        # Capability honesty: the host's own, per request; what it lacks, the upstream refuses.
        caps = {k: v for k, v in ctx.client_caps.items() if k in _RELAYABLE_CAPS}
        if "inputResponses" in params:
            up["inputResponses"] = params["inputResponses"]
        if params.get("requestState") is not None:
            state = params["requestState"]
            if not raw_state:
                verified = request_state.unwrap(key, state, bound, now)
                state, round_ = verified.state, verified.number
                if "inputResponses" in up:
                    up["inputResponses"] = request_state.fill_defaults(up["inputResponses"], verified.defaults)
            if state is not None:
                up["requestState"] = state
    elif mrtr:
        # A 2025 host is asked what it declared; anything else an operator answers (broker),
        # as mcpx promises every handshake upstream (session.RELAYED_CLIENT_CAPS).
        caps = dict(RELAYED_CLIENT_CAPS)
    log_level = ctx.log_level if ctx.era == "modern" else ctx.conn.log_level
    return UpstreamRequest(up, caps, log_level, mrtr, bound, round_)


def retry_params(params: dict[str, Any], round_result: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    """The retry of an MRTR round: the same params, the answers, the upstream's requestState."""
    retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    retry["inputResponses"] = answers
    if round_result.get("requestState") is not None:
        retry["requestState"] = round_result["requestState"]
    return retry


class UpstreamCalls:
    """The CallSurface (host/task_host.py) the era modules call the upstream through."""

    def __init__(
        self,
        config: Config,
        engine: TaskEngine,
        asker: Asker,
        state_key: bytes,
        plain: PlainCalls,
        approvals: Approvals | None = None,
        current: Current | None = None,
    ) -> None:
        self.config = config
        self.current = current  # after an approval wait: the server as a reload may have left it
        self.approvals = approvals or Approvals(config, asker, engine.store)  # approval gates (host/approvals.py)
        self.engine = engine
        self.plain = plain  # lists a host's plain calls that run long (tasks/plain_calls.py)
        self.asker = asker
        self.state_key = state_key  # signs MRTR requestState; per daemon

    async def ask_round(self, ctx: RequestContext, requests: dict[str, Any], server: UpstreamServer) -> dict[str, Any]:
        return await self.asker.ask_round(ctx, requests, server)

    async def forward(
        self,
        ctx: RequestContext,
        server: UpstreamServer,
        method: str,
        params: dict[str, Any],
        timeout: float | None = None,
        *,
        raw_state: bool = False,
    ) -> dict[str, Any]:
        """One upstream request for a host request, with the questions the upstream asks on the way."""
        token = current_caller.set(_caller(ctx, server, params))
        try:
            with server.call_slot():
                return await self._forward(ctx, server, method, params, timeout, raw_state=raw_state)
        finally:
            current_caller.reset(token)

    async def _forward(
        self,
        ctx: RequestContext,
        server: UpstreamServer,
        method: str,
        params: dict[str, Any],
        timeout: float | None,
        *,
        raw_state: bool,
    ) -> dict[str, Any]:
        session = await server.ready_session()
        req = build(ctx, session.era, method, params, key=self.state_key, raw_state=raw_state, now=now_ms())
        origin = origin_of(ctx) if method == "tools/call" else None
        try:
            res = await session.request(
                method,
                session.shape_params(req.params, client_caps=req.client_caps, log_level=req.log_level),
                on_notify=self.relay(ctx),
                on_request=self.asker.on_request(ctx, server),
                timeout=timeout,
                on_sent=self._remember_request(session, plain=True) if method == "tools/call" else None,
                origin=origin,
            )
            rounds = 0
            while res.get("resultType") == "input_required" and req.mrtr and ctx.era == "legacy":
                rounds += 1
                if rounds > request_state.MAX_ROUNDS:
                    raise InternalError(f"upstream {server.key!r} kept asking for input ({rounds} rounds)")
                answers = await self.asker.ask_round(ctx, res.get("inputRequests") or {}, server)
                res = await session.request(
                    method,
                    session.shape_params(
                        retry_params(req.params, res, answers), client_caps=req.client_caps, log_level=req.log_level
                    ),
                    on_notify=self.relay(ctx),
                    timeout=timeout,
                    origin=origin,
                )
        except TimeoutError:
            raise UpstreamUnavailable(f"upstream {server.key!r} did not answer {method} within {timeout} s") from None
        if res.get("resultType") == "input_required":
            if not req.mrtr:
                raise InternalError(f"upstream {server.key!r} asked for input that mcpx cannot relay to this host")
            if not raw_state:
                res = {**res, "requestState": self._signed(res, req.bound, req.round_)}
        return res

    def _remember_request(self, session: UpstreamSession, *, plain: bool) -> OnSent | None:
        """For a call that is (or may become) a task, on a server that outlives the daemon: the
        request id goes on the task row, so a restarted daemon collects the reply. A `plain` call
        to any other server can never be carried over a restart: its run is anchored at once."""
        run, run_id = current_run(), session.transport.run_id
        if run is None or not run.taskable:
            return None
        if run_id is None:
            if plain:
                run.anchored.set()
            return None
        engine = self.engine

        async def sent(rid: Id) -> None:
            ref = carry_on.make_ref(run_id, rid)
            if ref is not None:
                await engine.set_upstream_request(run, ref)

        return sent

    async def call_tool(
        self,
        ctx: RequestContext,
        params: dict[str, Any],
        route: Route,
        server: UpstreamServer,
        *,
        raw_state: bool = False,
        resumed: Resumed | None = None,
    ) -> dict[str, Any]:
        """One upstream tools/call, shaped for the host's revision. `resumed`: a later round of a
        call that already passed its approval gate (never read from the host's params).

        A call that runs under the task engine (an mcpx task, or a 2026 call that may become one:
        `current_run()`) goes to an upstream that offers tasks for this tool as an *upstream task*
        (`upstream_tasks`): its id is recorded on the run, and on the mcpx task row once there is
        one, so a restarted daemon resumes polling it. Every other call goes straight through."""
        run = current_run()
        if run is not None and not run.taskable:
            run = None  # a call that can never become an mcpx task has no task to hand a question to
        named = {**params, "name": route.name}

        async def gated(named: dict[str, Any]) -> dict[str, Any]:
            denied = await self.approvals.check(ctx, server, named, resumed)  # a plain call is listed inside
            if denied is not None:
                return _refused(denied, ctx)
            now = await self._after_gate(ctx, server, route)
            if isinstance(now, str):
                return _refused(now, ctx)
            return await self._run(ctx, named, now[1], now[0], run, raw_state=raw_state)

        if run is None:
            return await self._plain_call(ctx, named, server, gated)
        return await gated(named)

    async def _after_gate(
        self, ctx: RequestContext, server: UpstreamServer, route: Route
    ) -> tuple[UpstreamServer, Route] | str:
        """Where a call goes once past its gate: the server it was routed to, or, when a reload
        replaced that while the call waited for approval, the server configured under its key now
        (once it is up); what the host is told when there is none, or it no longer offers the tool."""
        if self.current is None:
            return server, route
        found = await self.current(ctx, server, route)
        if not isinstance(found, str):
            return found
        exposed = server.naming.name_out(route.name)
        return f"mcpx: the call to {exposed} was not run: while it waited for approval, a config reload {found}."

    async def _run(
        self,
        ctx: RequestContext,
        named: dict[str, Any],
        route: Route,
        server: UpstreamServer,
        run: Run | None,
        *,
        raw_state: bool,
    ) -> dict[str, Any]:
        """The call itself, on `server`: as an upstream task it follows (see call_tool), or plain."""
        override = server.cfg.mcpx.tools.get(route.name)
        timeout = (override.callTimeout if override and override.callTimeout else None) or server.cfg.mcpx.callTimeout
        # An upstream that runs this tool only as a task: a host that holds no task is answered
        # inline, mcpx following the upstream task (docs/tasks.md TASK-03).
        must_follow = run is None and follow.required(route.item)
        session = (
            await server.ready_session()
            if must_follow or (run is not None and (raw_state or ctx.era == "legacy"))
            else None
        )
        followed = session is not None and follow.task_capable(
            session, follow.upstream_tool(server.lists.get("tools"), route.name)
        )
        if ctx.resumed:
            # `mcpx serve` asks again for a call a previous daemon never answered: its reply is
            # collected, or the call made now if it never reached the server, never made twice.
            collected = await self._resumed(ctx, named, server, timeout, plain=run is None and not followed)
            if collected is not None:
                return collected
        if followed and session is not None:
            return await self._followed(ctx, named, server, session, timeout, run)
        return await self._inline_call(ctx, named, server, timeout, raw_state=raw_state)

    async def _resumed(
        self, ctx: RequestContext, named: dict[str, Any], server: UpstreamServer, timeout: float | None, *, plain: bool
    ) -> dict[str, Any] | None:
        """A host's call a previous daemon made for it on a kept server: its reply (or its error),
        or None when the server never got it (the caller makes it now). Any call that cannot be
        told apart so (another kind of server, a task, an older keeper) is refused, saying why."""
        session = await server.ready_session()
        origin = origin_of(ctx)
        if plain and origin is not None and session.origins is not None:
            rid = session.origins.get(origin)
            if rid is None and session.origins_complete:
                return None  # the keeper heard of every call the previous daemon made: not this one
            if rid is not None:
                try:
                    res = await session.claim(rid, timeout=timeout)
                except NeverArrived:
                    return None
                if res.get("resultType") == "input_required":
                    raise UpstreamUnavailable(
                        f"upstream {server.key!r} asked for input as the mcpx daemon restarted; call the tool again"
                    )
                return _for_host(res, server, ctx)
        raise UpstreamUnavailable(
            f"the mcpx daemon restarted while this call to {server.key!r} ran, and its result could not be"
            " collected; the call was not made again (it may have run)"
        )

    async def _followed(
        self,
        ctx: RequestContext,
        named: dict[str, Any],
        server: UpstreamServer,
        session: UpstreamSession,
        timeout: float | None,
        run: Run | None,
    ) -> dict[str, Any]:
        """The call as an upstream task, followed to its end: for the mcpx task `run` is (its id
        and status message go on the row), or for a plain call answered inline (`run` None: the
        upstream task's status reaches the operator's row, and the host as progress if it asked)."""
        req = build(ctx, session.era, "tools/call", named, key=self.state_key, raw_state=True, now=now_ms())
        record = await self.engine.get(run.task_id) if run is not None and run.task_id is not None else None
        ttl = record.ttl_ms if record is not None else self.config.tasks.ttlMs
        engine, task_run = self.engine, run

        async def relay_status(status: str, message: str | None) -> None:
            if task_run is None:
                await self._status_as_progress(ctx, message)
                return
            # The upstream task's own status message is the mcpx task's (both eras; console too).
            task_run.status_message = message
            if task_run.task_id is not None:
                await engine.set_status_message(task_run.task_id, message)

        async def remember(upstream_task_id: str) -> None:
            if task_run is not None:  # (a plain call's upstream task cannot outlive its host's request)
                await engine.set_upstream_task(task_run, upstream_task_id, foreign_sessions.session_id_of(session))

        async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
            if ctx.era == "modern" and task_run is not None:
                await task_run.adopted.wait()  # a 2026 host: the questions become the mcpx task's inputRequests
                assert task_run.task_id is not None
                ctx.task_id = task_run.task_id
            return await self.asker.ask_round(ctx, requests, server)  # through the broker: operators too

        async def ask_round(requests: dict[str, Any]) -> dict[str, Any]:
            return await self.asker.ask_round(ctx, requests, server)

        token = current_caller.set(_caller(ctx, server, named))
        try:
            with server.call_slot(), anyio.fail_after(timeout):
                res = await follow.call(
                    session,
                    req.params,
                    get_session=server.ready_session,
                    on_task_id=remember,
                    ttl_ms=ttl,
                    client_caps=req.client_caps,
                    log_level=req.log_level,
                    on_notify=self.relay(ctx),
                    on_request=self.asker.on_request(ctx, server),
                    on_input=on_input,
                    ask_round=ask_round if ctx.era == "legacy" else None,
                    keep_upstream=lambda: engine.closing,
                    on_status=relay_status,
                    on_sent=self._remember_request(session, plain=False) if task_run is not None else None,
                )
        except TimeoutError:
            raise UpstreamUnavailable(f"upstream {server.key!r} did not finish tools/call within {timeout} s") from None
        finally:
            current_caller.reset(token)
        return _for_host(res, server, ctx)  # (an MRTR round before any upstream task: the caller answers it)

    async def _status_as_progress(self, ctx: RequestContext, message: str | None) -> None:
        """An upstream task's status message, for a plain call that follows it: the operator's row
        shows it, and a host that asked for progress gets it as a progress notification."""
        if message is None:
            return
        if ctx.plain is not None:
            ctx.plain.progress({"message": message})
        token = ctx.meta.get("progressToken")
        if token is not None and ctx.notify is not None:
            # Progress must grow (progress.mdx): just past the last value sent.
            progress = 1.0 if ctx.last_progress is None else ctx.last_progress + 1
            ctx.last_progress = progress
            params = {"progressToken": token, "progress": progress, "message": message}
            await ctx.notify(jsonrpc.notification("notifications/progress", params))

    async def _inline_call(
        self,
        ctx: RequestContext,
        named: dict[str, Any],
        server: UpstreamServer,
        timeout: float | None,
        *,
        raw_state: bool,
    ) -> dict[str, Any]:
        return _for_host(
            await self.forward(ctx, server, "tools/call", named, timeout, raw_state=raw_state), server, ctx
        )

    async def _plain_call(
        self, ctx: RequestContext, named: dict[str, Any], server: UpstreamServer, inline: Inline
    ) -> dict[str, Any]:
        """A call no task holds: listed for operators if it runs long or asks (tasks/plain_calls.py);
        an operator's cancel ends it with an isError result that names the operator (docs/api.md)."""
        arguments = named.get("arguments")
        info = CallInfo(
            ctx.conn.record_id,
            server.key,
            str(named["name"]),
            arguments if isinstance(arguments, dict) else {},
            ctx.era,
        )
        meta = jsonrpc.as_object(named.get("_meta"))
        if "progressToken" not in meta:
            named = {**named, "_meta": {**meta, "progressToken": WATCH_TOKEN}}

        async def call(live: LiveCall) -> dict[str, Any]:
            ctx.plain = live
            try:
                return await inline(named)
            finally:
                ctx.plain = None

        try:
            return await self.plain.run(info, call)
        except OperatorCancelled as stopped:
            return _refused(f"mcpx: this call was {stopped.message}.", ctx)

    # ---- MRTR rounds mcpx signs (host/modern_tasks.py holds the upstream call meanwhile) ----
    def _bound(self, ctx: RequestContext, params: dict[str, Any], route: Route) -> str:
        return request_state.binding("tools/call", {**stripped(params), "name": route.name}, ctx.conn.record_id)

    def _signed(self, res: dict[str, Any], bound: str, round_: int) -> str:
        return request_state.wrap(
            self.state_key,
            res.get("requestState"),
            bound,
            round_ + 1,
            now_ms(),
            nonce=opaque_id(12),
            defaults=_round_defaults(res.get("inputRequests")),
        )

    def unwrap_round(
        self, ctx: RequestContext, params: dict[str, Any], route: Route
    ) -> tuple[dict[str, Any], request_state.Round | None]:
        if params.get("requestState") is None:
            return params, None
        verified = request_state.unwrap(
            self.state_key, params["requestState"], self._bound(ctx, params, route), now_ms()
        )
        out = {k: v for k, v in params.items() if k != "requestState"}
        if "inputResponses" in out:
            out["inputResponses"] = request_state.fill_defaults(out["inputResponses"], verified.defaults)
        if verified.state is not None:
            out["requestState"] = verified.state
        return out, verified

    def wrap_round(
        self, ctx: RequestContext, res: dict[str, Any], params: dict[str, Any], route: Route, round_: int
    ) -> dict[str, Any]:
        """Bound to the upstream params and the host, as `forward` checks it on the retry."""
        return {**res, "requestState": self._signed(res, self._bound(ctx, params, route), round_)}

    # ---- notifications back to the host ------------------------------------------------
    def relay(self, ctx: RequestContext) -> OnNotify:
        async def relay(msg: dict[str, Any]) -> None:
            if ctx.plain is not None and msg.get("method") == "notifications/progress":
                params = jsonrpc.as_object(msg.get("params"))
                ctx.plain.progress(params)
                if params.get("progressToken") == WATCH_TOKEN:
                    return  # asked by mcpx, for the operator
            if ctx.notify is None or msg.get("method") not in _RELAYED:
                return
            if msg.get("method") == "notifications/message":
                level = (msg.get("params") or {}).get("level")
                # 2026: only when the request's own _meta asked for a level; 2025: the session's.
                threshold = ctx.log_level if ctx.era == "modern" else ctx.conn.log_level
                if ctx.era == "modern" and threshold is None:
                    return
                if not legacy.log_level_allows(threshold, level):
                    return
            else:
                progress = jsonrpc.as_object(msg.get("params")).get("progress")
                if isinstance(progress, (int, float)) and not isinstance(progress, bool):
                    ctx.last_progress = float(progress)
            await ctx.notify(msg)

        return relay


def _round_defaults(requests: object) -> dict[str, dict[str, Any]]:
    """The schema defaults of an MRTR round's form questions, by input key (SEP-1034)."""
    out: dict[str, dict[str, Any]] = {}
    for key, request in requests.items() if isinstance(requests, dict) else ():
        if not isinstance(request, dict) or request.get("method") != "elicitation/create":
            continue
        params = request.get("params")
        if not isinstance(params, dict) or params.get("mode") == "url":
            continue
        try:
            defaults = elicitation.with_defaults(elicitation.parse_form(params.get("requestedSchema")))
        except elicitation.FormError:
            continue
        if defaults:
            out[str(key)] = defaults
    return out


def _refused(text: str, ctx: RequestContext) -> dict[str, Any]:
    """A call mcpx did not run (denied, or not approved in time), as a tool error a model can read."""
    return shaping.call_result_for({"content": [{"type": "text", "text": text}], "isError": True}, ctx.revision)


def _for_host(res: dict[str, Any], server: UpstreamServer, ctx: RequestContext) -> dict[str, Any]:
    """An upstream's tools/call reply as the host gets it; an MRTR round is not a CallToolResult."""
    if res.get("resultType") == "input_required":
        return res
    return shaping.call_result_for(server.naming.call_result_out(res), ctx.revision)


def origin_of(ctx: RequestContext) -> str | None:
    """The host request a plain call is made for, as a kept server's keeper remembers it: only a
    `mcpx serve` host's (its random instance id and the request's id) can ask for it again."""
    if ctx.conn.shim_instance is None or ctx.request_id is None or ctx.task_id is not None:
        return None
    return f"{ctx.conn.shim_instance}:{json.dumps(ctx.request_id)}"


def _caller(ctx: RequestContext, server: UpstreamServer, params: dict[str, Any]) -> Caller:
    """Whose the upstream requests of this call are (session.current_caller): a question an upstream
    asks without naming its request is then put to the host only when it is certain. The name is the
    one hosts see (params hold the upstream's own)."""
    name, uri = params.get("name"), params.get("uri")
    exposed = (
        server.naming.name_out(name)
        if isinstance(name, str)
        else server.naming.uri_out(uri)
        if isinstance(uri, str)
        else None
    )
    return Caller(ctx.conn.record_id, ctx.task_id, exposed)
