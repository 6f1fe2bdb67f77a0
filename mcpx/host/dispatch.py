"""Routes one host request to the pool, per revision, and turns the outcome into a reply frame."""

from __future__ import annotations

import logging
import secrets
from typing import Any

import anyio

from .. import __version__
from ..broker import Broker, HostAsk, OnWaiting
from ..config import Config
from ..protocol import jsonrpc, legacy, modern, pagination, request_state, shaping
from ..protocol.errors import (
    INVALID_PARAMS,
    InternalError,
    InvalidParams,
    McpError,
    MethodNotFound,
    MissingClientCapability,
    UpstreamError,
    UpstreamUnavailable,
    upstream_error_for,
)
from ..protocol.jsonrpc import Id
from ..protocol.revisions import LEGACY_LATEST, META_RELATED_TASK, META_SUBSCRIPTION, MODERN, TASKS_EXTENSION
from ..questions import Question
from ..tasks.engine import TaskEngine, now_ms
from ..tasks.model import Task, legacy_task
from ..upstream.catalogue import KINDS
from ..upstream.pool import Route, UpstreamPool, UpstreamServer
from ..upstream.session import RELAYED_CLIENT_CAPS, OnNotify, OnRequest
from ..waiting import first_error
from .connection import HostError, RequestContext
from .legacy_tasks import TASK_CAPABILITY, LegacyTasks, TaskErrorReply, task_support, tasks_enabled
from .modern_tasks import ModernTasks, detailed
from .subscriptions import LIST_FILTERS, Hub, Listener

log = logging.getLogger("mcpx.host")

SERVER_INFO = {"name": "mcpx", "version": __version__}
INSTRUCTIONS = (
    "mcpx gateway: tools, prompts and resources from several MCP servers; namespaced ones appear as <server>__<name>."
)
# Request-scoped notifications a call relays to its host; anything else an upstream sends on a
# request's stream is not the host's business.
_RELAYED = frozenset({"notifications/progress", "notifications/message"})
# Methods that may answer input_required (mrtr.mdx:184-192), and the capabilities those rounds use.
_MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
_RELAYABLE_CAPS = frozenset({"elicitation", "sampling", "roots"})
_CAPABILITY_FOR = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
QUESTION_TIMEOUT_S = 600.0


class Dispatcher:
    def __init__(
        self, config: Config, pool: UpstreamPool, hub: Hub, engine: TaskEngine, broker: Broker | None = None
    ) -> None:
        self.config = config
        self.broker = broker or Broker(engine.store)
        self.pool = pool
        self.hub = hub
        self.engine = engine
        self.legacy_tasks = LegacyTasks(self)
        self.modern_tasks = ModernTasks(self)
        self.state_key = secrets.token_bytes(32)  # signs MRTR requestState; per daemon
        engine.on_change = self._task_changed

    # ---- capabilities: declare only what this revision really gets -----------------------
    def _upstream_caps(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for server in self.pool.servers.values():
            for key, value in server.capabilities.items():  # last known, so a restart changes nothing
                if isinstance(value, dict):
                    merged.setdefault(key, {}).update(value)
        return merged

    def capabilities(self, revision: str = MODERN) -> dict[str, Any]:
        """Legacy sessions get changes on their session, modern hosts via listen; core tasks only
        for 2025-11-25 sessions (the extension replaces them in 2026)."""
        up = self._upstream_caps()
        caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
        if revision == LEGACY_LATEST:
            caps["tasks"] = TASK_CAPABILITY
        elif revision == MODERN:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        if "prompts" in up:
            caps["prompts"] = {"listChanged": True}
        if "resources" in up:
            caps["resources"] = {"listChanged": True, "subscribe": bool(up["resources"].get("subscribe"))}
        if "completions" in up:
            caps["completions"] = {}
        return caps

    def tool_schema(self, exposed: object) -> object:
        """The inputSchema hosts see for a tool, or None (an unknown tool is judged later)."""
        for route in self.pool.catalogue():
            if route.item["name"] == exposed:
                return route.item.get("inputSchema")
        return None

    # ---- entry point ---------------------------------------------------------------------
    async def reply(self, ctx: RequestContext, msg: jsonrpc.Message) -> dict[str, Any]:
        """The response frame for one request; never raises for anything a peer sent. A request
        about a task (its creating tools/call, tasks/*) goes into the task's frame log."""
        arrived = now_ms()
        frame = await self._reply(ctx, msg)
        task_id = _task_of(msg, frame)
        # Not a probe of someone else's (or no) task: that answer is the unknown-id error.
        if task_id is not None and jsonrpc.as_object(frame.get("error")).get("code") != INVALID_PARAMS:
            self.engine.frames.record(task_id, "host", "in", msg.raw, arrived)
            self.engine.frames.record(task_id, "host", "out", frame)
        return frame

    async def _reply(self, ctx: RequestContext, msg: jsonrpc.Message) -> dict[str, Any]:
        try:
            res = await self.handle(ctx, msg.method, msg.params, msg.id)
            if ctx.era == "modern":
                res = modern.decorate(res, SERVER_INFO)
            return jsonrpc.result(msg.id, res)
        except McpError as exc:
            return jsonrpc.error_from(msg.id, exc)
        except UpstreamError as exc:
            return jsonrpc.error(msg.id, upstream_error_for(exc.error, ctx.revision))
        except TaskErrorReply as exc:
            return jsonrpc.error(msg.id, upstream_error_for(exc.error, ctx.revision))
        except TimeoutError:
            return jsonrpc.error_from(msg.id, UpstreamUnavailable(f"{msg.method}: the upstream did not answer in time"))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            log.exception("internal error handling %s", msg.method)
            return jsonrpc.error_from(msg.id, InternalError(f"Internal error handling {msg.method}"))

    async def handle(
        self, ctx: RequestContext, method: str, params: dict[str, Any], rid: Id | None = None
    ) -> dict[str, Any]:
        if ctx.era == "modern":
            if method in modern.REMOVED_METHODS:
                raise MethodNotFound(f"Method not found: {method} (removed in {MODERN})", http_status=404)
            handler = _MODERN.get(method)
            if handler is None:
                raise MethodNotFound(f"Method not found: {method}", http_status=404)
        else:
            handler = _LEGACY.get(method)
            if handler is None:
                raise MethodNotFound(f"Method not found: {method}")
        if method == "subscriptions/listen" and rid is not None:  # a request always has its id
            return await self._listen(ctx, params, rid)
        return await handler(self, ctx, params)

    # ---- plain methods -------------------------------------------------------------------
    async def _ping(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _discover(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await self.pool.wait_started()
        return modern.discover_result(self.capabilities(), SERVER_INFO, INSTRUCTIONS)

    async def _set_level(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in legacy.LOG_LEVELS:
            raise InvalidParams(f"logging/setLevel: level must be one of {', '.join(legacy.LOG_LEVELS)}")
        ctx.conn.log_level = level
        return {}

    # ---- lists ---------------------------------------------------------------------------
    async def _list(self, ctx: RequestContext, params: dict[str, Any], kind: str) -> dict[str, Any]:
        await self.pool.wait_started()
        items = [shaping.item_for(r.item, ctx.revision) for r in self.pool.listing(kind)]
        chunk, nxt = pagination.page(kind, items, params.get("cursor"))
        res: dict[str, Any] = {KINDS[kind][1]: chunk}
        if nxt:
            res["nextCursor"] = nxt
        if ctx.era == "modern":
            # Lists change with upstream list_changed (relayed on listen streams): 0 = revalidate.
            res = modern.cacheable(res, 0)
        return res

    async def _tools_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        res = await self._list(ctx, params, "tools")
        if tasks_enabled(ctx):
            # 2025-11-25 hosts learn per tool whether it may (or must) run as a task.
            by_name = {r.item["name"]: r for r in self.pool.catalogue()}
            tools = []
            for tool in res["tools"]:
                route = by_name.get(tool["name"])
                support = task_support(self, route.server, route.item, route.name) if route else "forbidden"
                tools.append({**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": support}})
            res["tools"] = tools
        return res

    async def _prompts_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self._list(ctx, params, "prompts")

    async def _resources_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self._list(ctx, params, "resources")

    async def _templates_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self._list(ctx, params, "resourceTemplates")

    # ---- forwarded requests --------------------------------------------------------------
    async def _forward(
        self,
        ctx: RequestContext,
        server: UpstreamServer,
        method: str,
        params: dict[str, Any],
        timeout: float | None = None,
        *,
        raw_state: bool = False,
    ) -> dict[str, Any]:
        """One upstream request for a host request, with the questions the upstream asks on the way.

        2026 upstream, 2026 host: MRTR rounds pass through; the host's real capabilities go up,
        `inputRequests` come down, and the upstream's requestState travels inside mcpx's signed one
        (`raw_state` keeps it bare, for rounds mcpx answers itself, e.g. inside a task).
        2026 upstream, 2025 host with a stream to ask on: mcpx asks the host each question as a
        server request and retries the upstream with the answers.
        2025 upstream: its server requests during the call are asked of a 2025 host the same way.
        """
        session = await server.ready_session()
        up = {k: v for k, v in params.items() if k not in ("task", "inputResponses", "requestState")}
        can_ask_legacy = ctx.era == "legacy" and ctx.notify is not None
        mrtr = session.era == "modern" and method in _MRTR_METHODS and (ctx.era == "modern" or can_ask_legacy)
        bound = request_state.binding(method, up)
        round_ = 0
        caps: dict[str, Any] = {}
        if mrtr and ctx.era == "modern":
            # Capability honesty: the host's own, per request; what it lacks, the upstream refuses.
            caps = {k: v for k, v in ctx.client_caps.items() if k in _RELAYABLE_CAPS}
        elif mrtr:
            # A 2025 host is asked what it declared; anything else an operator answers (broker),
            # as mcpx promises every handshake upstream (session.RELAYED_CLIENT_CAPS).
            caps = dict(RELAYED_CLIENT_CAPS)
        if mrtr and ctx.era == "modern":
            if "inputResponses" in params:
                up["inputResponses"] = params["inputResponses"]
            if params.get("requestState") is not None:
                state = params["requestState"]
                if not raw_state:
                    state, round_ = request_state.unwrap(self.state_key, state, bound, now_ms())
                if state is not None:
                    up["requestState"] = state
        log_level = ctx.log_level if ctx.era == "modern" else ctx.conn.log_level
        on_request = self._asker(ctx, server)
        try:
            res = await session.request(
                method,
                session.shape_params(up, client_caps=caps, log_level=log_level),
                on_notify=self._relay(ctx),
                on_request=on_request,
                timeout=timeout,
            )
            rounds = 0
            while res.get("resultType") == "input_required" and mrtr and ctx.era == "legacy":
                rounds += 1
                if rounds > request_state.MAX_ROUNDS:
                    raise InternalError(f"upstream {server.key!r} kept asking for input ({rounds} rounds)")
                answers = await self._ask_all(ctx, res.get("inputRequests") or {}, server)
                retry = {**up, "inputResponses": answers}
                retry.pop("requestState", None)
                if res.get("requestState") is not None:
                    retry["requestState"] = res["requestState"]
                res = await session.request(
                    method,
                    session.shape_params(retry, client_caps=caps, log_level=log_level),
                    on_notify=self._relay(ctx),
                    timeout=timeout,
                )
        except TimeoutError:
            raise UpstreamUnavailable(f"upstream {server.key!r} did not answer {method} within {timeout} s") from None
        if res.get("resultType") == "input_required":
            if not mrtr:
                raise InternalError(f"upstream {server.key!r} asked for input that mcpx cannot relay to this host")
            if not raw_state:
                res = {
                    **res,
                    "requestState": request_state.wrap(
                        self.state_key, res.get("requestState"), bound, round_ + 1, now_ms()
                    ),
                }
        return res

    def _asker(self, ctx: RequestContext, server: UpstreamServer) -> OnRequest:
        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await self._ask_host(ctx, method, params, server)

        return ask

    async def _ask_host(
        self, ctx: RequestContext, method: str, params: dict[str, Any], server: UpstreamServer, key: str = "q"
    ) -> dict[str, Any]:
        """One question, through the broker: asked of a 2025 host on the stream of the request that
        caused it (if it declared that capability), and open to an operator in any case."""
        clean = {k: v for k, v in params.items() if k != "_meta"}
        capability = _CAPABILITY_FOR.get(method)
        host_ask: HostAsk | None = None
        if capability is not None and capability in ctx.client_caps and ctx.notify is not None and ctx.era == "legacy":
            notify = ctx.notify
            sent = dict(clean)
            if ctx.task_id is not None:  # inside a 2025 task: tagged with it (tasks.mdx:448,470)
                sent["_meta"] = {META_RELATED_TASK: {"taskId": ctx.task_id}}

            async def host_ask(q: Question) -> dict[str, Any]:
                try:
                    if ctx.task_id is None:
                        return await ctx.conn.request(notify, method, sent, QUESTION_TIMEOUT_S)
                    async with self.engine.asking(ctx.task_id):  # the task shows input_required meanwhile
                        channel = await self.legacy_tasks.question_channel(ctx.task_id, ctx.conn)
                        return await ctx.conn.request(channel, method, sent, QUESTION_TIMEOUT_S)
                except HostError as exc:
                    raise UpstreamError(exc.error) from None

        elif ctx.era == "modern" and ctx.task_id is not None and capability in ctx.client_caps:
            task_id = ctx.task_id

            async def host_ask(q: Question) -> dict[str, Any]:
                # Inside a 2026 task the question is one of the task's inputRequests, keyed by its
                # question id (unique for the task's whole life, tasks.md:350).
                answers = await self.engine.ask(task_id, {q.id: {"method": method, "params": clean}})
                answer: dict[str, Any] = answers[q.id]
                return answer

        elif ctx.era == "modern" and ctx.task_id is None and ctx.park is not None and capability not in ctx.client_caps:
            # The upstream needs what this 2026 host did not declare: the host's call gets -32021
            # (index.mdx:387-392) and the held upstream call is dropped.
            refused = MissingClientCapability(
                f"Missing required client capability: {capability}",
                {"requiredCapabilities": {capability or method: {}}},
            )
            ctx.park.refuse(refused)
            raise refused
        elif ctx.era == "modern" and ctx.task_id is None and ctx.park is not None:
            # A 2026 host's ordinary call: the question goes back to it as an MRTR round while the
            # upstream call is held open, and its retry answers it (host/parking.py).
            host_ask = ctx.park.hold
        return await self.broker.ask(
            upstream=server.key,
            method=method,
            params=clean,
            task_id=ctx.task_id,
            connection=ctx.conn.record_id,
            host_ask=host_ask,
            on_waiting=self._tell_waiting(ctx),
        )

    def _tell_waiting(self, ctx: RequestContext) -> OnWaiting:
        """While a question waits for an operator the host sees it: its task's status message,
        or progress on a plain call that asked for progress."""

        async def tell(message: str) -> None:
            if ctx.task_id is not None:
                await self.engine.set_status_message(ctx.task_id, message)
                return
            token = ctx.meta.get("progressToken")
            if token is not None and ctx.notify is not None:
                # Progress must grow (progress.mdx): just past the last value the upstream sent.
                progress = 0.0 if ctx.last_progress is None else ctx.last_progress + 1e-6
                params = {"progressToken": token, "progress": progress, "message": message}
                await ctx.notify(jsonrpc.notification("notifications/progress", params))

        return tell

    async def ask_in_task(
        self, ctx: RequestContext, requests: dict[str, Any], server: UpstreamServer
    ) -> dict[str, Any]:
        """One MRTR round an upstream asked inside a 2026 task: every request becomes an
        inputRequest of the task (and a broker question an operator may answer)."""
        return await self._ask_all(ctx, requests, server)

    async def _ask_all(self, ctx: RequestContext, requests: dict[str, Any], server: UpstreamServer) -> dict[str, Any]:
        """Every MRTR inputRequest of one round, asked of the host at once."""
        answers: dict[str, Any] = {}

        async def one(key: str, request: object) -> None:
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                raise InternalError(f"upstream sent a malformed input request {key!r}")
            answers[key] = await self._ask_host(ctx, request["method"], request.get("params") or {}, server, key)

        try:
            async with anyio.create_task_group() as tg:
                for key, request in requests.items():
                    tg.start_soon(one, key, request)
        except BaseExceptionGroup as group:
            raise first_error(group) from None  # one question's failure is the round's, as it is
        return answers

    async def _tools_call(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        route = self.pool.resolve(params.get("name"))
        if "arguments" in params and not isinstance(params["arguments"], dict):
            raise InvalidParams("tools/call: params.arguments must be an object")
        server = self.pool.servers[route.server]
        if tasks_enabled(ctx):
            self.legacy_tasks.check_required(ctx, task_support(self, route.server, route.item, route.name), params)
            if "task" in params:
                return await self.legacy_tasks.call_as_task(ctx, params, route, server)
        if ctx.era == "modern":
            support = task_support(self, route.server, route.item, route.name)
            return await self.modern_tasks.call(
                ctx, {k: v for k, v in params.items() if k != "task"}, route, server, support
            )
        return await self.call_tool(ctx, params, route, server)

    async def call_tool(
        self,
        ctx: RequestContext,
        params: dict[str, Any],
        route: Route,
        server: UpstreamServer,
        *,
        raw_state: bool = False,
    ) -> dict[str, Any]:
        """One upstream tools/call, shaped for the host's revision.

        A call that runs under the task engine (an mcpx task, or a 2026 call that may become one:
        `current_run()`) goes to an upstream that offers tasks for this tool as an *upstream task*
        (`upstream_tasks`): its id is recorded on the run, and on the mcpx task row once there is
        one, so a restarted daemon resumes polling it. Every other call goes straight through."""
        from ..tasks.engine import current_run
        from ..upstream import upstream_tasks
        from ..upstream.session import RELAYED_CLIENT_CAPS

        override = server.cfg.mcpx.tools.get(route.name)
        timeout = (override.callTimeout if override and override.callTimeout else None) or server.cfg.mcpx.callTimeout
        run = current_run()
        if run is not None and not run.taskable:
            run = None  # a call that can never become an mcpx task has no task to hand a question to
        session = await server.ready_session() if run is not None and (raw_state or ctx.era == "legacy") else None
        if session is None or not upstream_tasks.task_capable(
            session, upstream_tasks.upstream_tool(server, route.name)
        ):
            res = await self._forward(
                ctx, server, "tools/call", {**params, "name": route.name}, timeout, raw_state=raw_state
            )
            if res.get("resultType") == "input_required":
                return res  # not a CallToolResult: nothing to trim
            return shaping.call_result_for(res, ctx.revision)
        assert run is not None
        up = {k: v for k, v in params.items() if k not in ("task", "inputResponses", "requestState")}
        up["name"] = route.name
        if session.era == "modern" and ctx.era == "modern":  # an MRTR retry (raw state: inside the engine)
            for key in ("inputResponses", "requestState"):
                if params.get(key) is not None:
                    up[key] = params[key]
        caps: dict[str, Any] = {}
        if session.era == "modern":  # as _forward declares them: the 2026 host's own; for a 2025 host, all it relays
            caps = (
                {k: v for k, v in ctx.client_caps.items() if k in _RELAYABLE_CAPS}
                if ctx.era == "modern"
                else dict(RELAYED_CLIENT_CAPS)
            )
        record = await self.engine.get(run.task_id) if run.task_id is not None else None
        ttl = record.ttl_ms if record is not None else self.config.tasks.ttlMs
        engine = self.engine

        async def relay_status(status: str, message: str | None) -> None:
            # The upstream task's own status message is the mcpx task's (both eras; console too).
            run.status_message = message
            if run.task_id is not None:
                await engine.set_status_message(run.task_id, message)

        async def remember(upstream_task_id: str) -> None:
            await engine.set_upstream_task(run, upstream_task_id)

        async def on_input(requests: dict[str, Any]) -> dict[str, Any]:
            if ctx.era == "legacy":
                return await self._ask_all(ctx, requests, server)
            await run.adopted.wait()  # a 2026 host: the questions become the mcpx task's inputRequests
            assert run.task_id is not None
            ctx.task_id = run.task_id
            return await self._ask_all(ctx, requests, server)  # through the broker: operators too

        async def ask_round(requests: dict[str, Any]) -> dict[str, Any]:
            return await self._ask_all(ctx, requests, server)

        try:
            with anyio.fail_after(timeout):
                res = await upstream_tasks.call(
                    session,
                    up,
                    get_session=server.ready_session,
                    on_task_id=remember,
                    ttl_ms=ttl,
                    client_caps=caps,
                    log_level=ctx.log_level if ctx.era == "modern" else ctx.conn.log_level,
                    on_notify=self._relay(ctx),
                    on_request=self._asker(ctx, server),
                    on_input=on_input,
                    ask_round=ask_round if ctx.era == "legacy" else None,
                    keep_upstream=lambda: engine.closing,
                    on_status=relay_status,
                )
        except TimeoutError:
            raise UpstreamUnavailable(f"upstream {server.key!r} did not finish tools/call within {timeout} s") from None
        if res.get("resultType") == "input_required":
            return res  # a 2026 MRTR round before any upstream task: the caller answers it
        return shaping.call_result_for(res, ctx.revision)

    async def _prompts_get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        route = self.pool.resolve(params.get("name"), "prompts")
        if "arguments" in params and not isinstance(params["arguments"], dict):
            raise InvalidParams("prompts/get: params.arguments must be an object")
        server = self.pool.servers[route.server]
        res = await self._forward(
            ctx, server, "prompts/get", {**params, "name": route.name}, server.cfg.mcpx.callTimeout
        )
        return res if res.get("resultType") == "input_required" else shaping.result_for(res, ctx.revision)

    async def _resources_read(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        server, uri = self.pool.resolve_uri(params.get("uri"))
        res = await self._forward(ctx, server, "resources/read", {**params, "uri": uri}, server.cfg.mcpx.callTimeout)
        if res.get("resultType") == "input_required":
            return res  # an interim MRTR round: no contents, never cacheable
        if isinstance(res.get("contents"), list):
            res = {**res, "contents": [_rename_uri(c, server) for c in res["contents"]]}
        res = shaping.result_for(res, ctx.revision)
        if ctx.era == "modern":
            res.setdefault("ttlMs", 0)
            res.setdefault("cacheScope", "private")
        else:
            res.pop("ttlMs", None)
            res.pop("cacheScope", None)
        return res

    async def _complete(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref")
        if not isinstance(ref, dict):
            raise InvalidParams("completion/complete: params.ref must be an object")
        if ref.get("type") == "ref/prompt":
            route = self.pool.resolve(ref.get("name"), "prompts")
            server, ref = self.pool.servers[route.server], {**ref, "name": route.name}
        elif ref.get("type") == "ref/resource":
            server, uri = self.pool.resolve_uri(ref.get("uri"))
            ref = {**ref, "uri": uri}
        else:
            raise InvalidParams("completion/complete: ref.type must be ref/prompt or ref/resource")
        if "completions" not in server.capabilities:
            raise MethodNotFound(
                f"Upstream {server.key!r} offers no completions", http_status=404 if ctx.era == "modern" else None
            )
        return shaping.result_for(
            await self._forward(ctx, server, "completion/complete", {**params, "ref": ref}), ctx.revision
        )

    async def _subscribe(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        exposed = params.get("uri")
        server, uri = self.pool.resolve_uri(exposed)
        if str(exposed) not in ctx.conn.resource_subscriptions:
            ctx.conn.resource_subscriptions.add(str(exposed))
            await server.watch(uri)  # subscribed upstream in its own era
        return {}

    async def _unsubscribe(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        exposed = params.get("uri")
        server, uri = self.pool.resolve_uri(exposed)
        if str(exposed) in ctx.conn.resource_subscriptions:
            ctx.conn.resource_subscriptions.discard(str(exposed))
            await server.unwatch(uri)
        return {}

    async def unwatch_all(self, exposed_uris: set[str]) -> None:
        for exposed in exposed_uris:
            try:
                server, uri = self.pool.resolve_uri(exposed)
                await server.unwatch(uri)
            except Exception as exc:  # noqa: BLE001 - one failed unsubscribe must not keep the others
                log.warning("unwatch %s: %s", exposed, exc)

    # ---- 2026 subscriptions/listen -------------------------------------------------------
    async def _listen(self, ctx: RequestContext, params: dict[str, Any], rid: Id) -> dict[str, Any]:
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("subscriptions/listen: params.notifications must be an object")
        if ctx.notify is None:
            raise InvalidParams("subscriptions/listen needs a stream: send Accept: text/event-stream")
        caps = self.capabilities()
        agreed: dict[str, Any] = {}
        methods: set[str] = set()
        for key, method in LIST_FILTERS.items():
            kind = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}[
                key
            ]
            if wanted.get(key) is True and kind in caps:
                agreed[key] = True
                methods.add(method)
        resources: set[str] = set()
        watched: list[tuple[Any, str]] = []
        if isinstance(wanted.get("resourceSubscriptions"), list) and caps.get("resources", {}).get("subscribe"):
            for exposed in wanted["resourceSubscriptions"]:
                if not isinstance(exposed, str):
                    continue
                try:
                    server, uri = self.pool.resolve_uri(exposed)
                except McpError:
                    continue  # not a resource mcpx can route: not agreed
                resources.add(exposed)
                watched.append((server, uri))
            agreed["resourceSubscriptions"] = sorted(resources)
        task_ids: list[str] = []
        if "taskIds" in wanted:
            task_ids = await self.modern_tasks.listen_tasks(ctx, wanted["taskIds"])
            agreed["taskIds"] = task_ids
        listener = Listener(rid, ctx.notify, methods, resources, set(task_ids))
        await ctx.notify(
            jsonrpc.notification(
                "notifications/subscriptions/acknowledged", {"_meta": {META_SUBSCRIPTION: rid}, "notifications": agreed}
            )
        )
        subscription = self.hub.add(listener)
        try:
            for server, uri in watched:
                await server.watch(uri)
            for task_id in task_ids:  # the current state at once, then on every change
                await self.modern_tasks.send_state(task_id, ctx.notify, rid)
            await anyio.sleep_forever()
        finally:
            self.hub.remove(subscription)
            with anyio.CancelScope(shield=True):
                for server, uri in watched:
                    await server.unwatch(uri)
        return {"_meta": {META_SUBSCRIPTION: rid}}  # pragma: no cover - ended by cancellation

    # ---- 2025-11-25 tasks ----------------------------------------------------------------
    async def _tasks_get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._tasks_gate(ctx)
        return await self.legacy_tasks.get(ctx, params)

    async def _tasks_result(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._tasks_gate(ctx)
        return await self.legacy_tasks.result(ctx, params)

    async def _tasks_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._tasks_gate(ctx)
        return await self.legacy_tasks.list(ctx, params)

    async def _tasks_cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        self._tasks_gate(ctx)
        return await self.legacy_tasks.cancel(ctx, params)

    def _tasks_gate(self, ctx: RequestContext) -> None:
        if not tasks_enabled(ctx):
            raise MethodNotFound(
                f"Method not found: tasks exist only in 2025-11-25 sessions (this one is {ctx.revision})"
            )

    async def _modern_get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self.modern_tasks.get(ctx, params)

    async def _modern_update(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self.modern_tasks.update(ctx, params)

    async def _modern_cancel(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return await self.modern_tasks.cancel(ctx, params)

    async def answer_task_inputs(self, task: Task, responses: dict[str, Any], ctx: RequestContext) -> None:
        await self.engine.answer(task.id, responses)

    def _bound(self, params: dict[str, Any], route: Route) -> str:
        up = {k: v for k, v in params.items() if k not in ("task", "inputResponses", "requestState")}
        up["name"] = route.name
        return request_state.binding("tools/call", up)

    def unwrap_round(self, params: dict[str, Any], route: Route) -> tuple[dict[str, Any], int]:
        """The host's params with mcpx's signed requestState replaced by the upstream's own."""
        if params.get("requestState") is None:
            return params, 0
        raw, round_ = request_state.unwrap(self.state_key, params["requestState"], self._bound(params, route), now_ms())
        out = {k: v for k, v in params.items() if k != "requestState"}
        if raw is not None:
            out["requestState"] = raw
        return out, round_

    def wrap_round(self, res: dict[str, Any], params: dict[str, Any], route: Route, round_: int) -> dict[str, Any]:
        """An MRTR round asked before any task existed, handed to the host with mcpx's signed state
        (bound to the upstream params, as `_forward` checks it on the retry)."""
        return {
            **res,
            "requestState": request_state.wrap(
                self.state_key, res.get("requestState"), self._bound(params, route), round_ + 1, now_ms()
            ),
        }

    async def _task_changed(self, task: Task) -> None:
        """Legacy: notifications/tasks/status to the owning session. Modern: notifications/tasks
        (a DetailedTask) on every listen stream that asked for this task."""
        if task.era == "modern":
            await self.hub.task_changed(task.id, detailed(task))
            return
        if not task.owner.startswith("conn:"):
            return
        conn = self.hub.legacy.get(task.owner[5:])
        if conn is not None and conn.send is not None:
            await conn.send(jsonrpc.notification("notifications/tasks/status", legacy_task(task)))

    def _relay(self, ctx: RequestContext) -> OnNotify:
        async def relay(msg: dict[str, Any]) -> None:
            if ctx.notify is None or msg.get("method") not in _RELAYED:
                return
            if msg.get("method") == "notifications/message":
                level = (msg.get("params") or {}).get("level")
                if ctx.era == "modern":
                    # 2026: only when the request's own _meta asked for a level.
                    if ctx.log_level is None or not legacy.log_level_allows(ctx.log_level, level):
                        return
                elif not legacy.log_level_allows(ctx.conn.log_level, level):
                    return
            else:
                progress = jsonrpc.as_object(msg.get("params")).get("progress")
                if isinstance(progress, (int, float)) and not isinstance(progress, bool):
                    ctx.last_progress = float(progress)
            await ctx.notify(msg)

        return relay


def _task_of(msg: jsonrpc.Message, frame: dict[str, Any]) -> str | None:
    """The task a request and its reply belong to: named in its params, or created by it."""
    if msg.method.startswith("tasks/"):
        task_id = msg.params.get("taskId")
        return task_id if isinstance(task_id, str) else None
    if msg.method != "tools/call":
        return None
    res = jsonrpc.as_object(frame.get("result"))
    if res.get("resultType") == "task" and isinstance(res.get("taskId"), str):
        return str(res["taskId"])
    created = jsonrpc.as_object(res.get("task")).get("taskId")
    return created if isinstance(created, str) and "content" not in res else None


def _rename_uri(content: object, server: UpstreamServer) -> object:
    if isinstance(content, dict) and isinstance(content.get("uri"), str):
        return {**content, "uri": server.naming.uri_out(content["uri"])}
    return content


_COMMON = {
    "tools/list": Dispatcher._tools_list,
    "tools/call": Dispatcher._tools_call,
    "prompts/list": Dispatcher._prompts_list,
    "prompts/get": Dispatcher._prompts_get,
    "resources/list": Dispatcher._resources_list,
    "resources/templates/list": Dispatcher._templates_list,
    "resources/read": Dispatcher._resources_read,
    "completion/complete": Dispatcher._complete,
}
_LEGACY = {
    **_COMMON,
    "tasks/get": Dispatcher._tasks_get,
    "tasks/result": Dispatcher._tasks_result,
    "tasks/list": Dispatcher._tasks_list,
    "tasks/cancel": Dispatcher._tasks_cancel,
    "ping": Dispatcher._ping,
    "logging/setLevel": Dispatcher._set_level,
    "resources/subscribe": Dispatcher._subscribe,
    "resources/unsubscribe": Dispatcher._unsubscribe,
}
_MODERN = {
    **_COMMON,
    "server/discover": Dispatcher._discover,
    "subscriptions/listen": Dispatcher._ping,  # dispatched in handle(): it needs the request id
    "tasks/get": Dispatcher._modern_get,
    "tasks/update": Dispatcher._modern_update,
    "tasks/cancel": Dispatcher._modern_cancel,
}
