"""Routes one host request to its handler, per era, and turns the outcome into a reply frame.

The era variants live beside it (built in eras.py): legacy_tasks.py / modern_tasks.py under the one
interface of task_host.py, listen.py, and upstream_call.py, the one place an upstream call is built.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from .. import __version__
from ..config.model import Config
from ..protocol import jsonrpc, legacy, modern, pagination, shaping
from ..protocol.errors import (
    INVALID_PARAMS,
    InternalError,
    InvalidParams,
    McpError,
    MethodNotFound,
    UpstreamError,
    UpstreamUnavailable,
    upstream_error_for,
)
from ..protocol.jsonrpc import Id
from ..protocol.legacy_tasks import TaskErrorReply, enabled, task_support
from ..protocol.revisions import MODERN
from ..questions.broker import Broker
from ..tasks.engine import TaskEngine, now_ms
from ..upstream.catalogue import KINDS
from ..upstream.host_scoped import HostInstances
from ..upstream.pool import Route, UpstreamPool, UpstreamServer
from . import eras
from .capabilities import server_capabilities
from .connection import RequestContext
from .subscriptions import Hub

log = logging.getLogger("mcpx.host")

SERVER_INFO = {"name": "mcpx", "version": __version__}
INSTRUCTIONS = (
    "mcpx gateway: tools, prompts and resources from several MCP servers; namespaced ones appear as <server>__<name>."
)
Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]


class Dispatcher:
    def __init__(
        self,
        config: Config,
        pool: UpstreamPool,
        hub: Hub,
        engine: TaskEngine,
        broker: Broker | None = None,
        instances: HostInstances | None = None,
    ) -> None:
        self.config = config
        self.instances = instances or HostInstances()  # `scope: host` servers' per-host processes
        self.broker = broker or Broker(engine.store)
        self.pool = pool
        self.hub = hub
        self.engine = engine
        self.eras = eras.build(config, pool, hub, engine, self.broker, self._current)
        self.calls, self.legacy_tasks, self.modern_tasks = self.eras.calls, self.eras.legacy, self.eras.modern
        common: dict[str, Handler] = {
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "prompts/list": self._list_of("prompts"),
            "prompts/get": self._prompts_get,
            "resources/list": self._list_of("resources"),
            "resources/templates/list": self._list_of("resourceTemplates"),
            "resources/read": self._resources_read,
            "completion/complete": self._complete,
        }
        self.methods: dict[str, dict[str, Handler]] = {
            "legacy": {
                **common,
                "tasks/get": self.legacy_tasks.get,
                "tasks/result": self.legacy_tasks.result,
                "tasks/list": self.legacy_tasks.list,
                "tasks/cancel": self.legacy_tasks.cancel,
                "ping": self._ping,
                "logging/setLevel": self._set_level,
                "resources/subscribe": self._subscribe,
                "resources/unsubscribe": self._unsubscribe,
            },
            "modern": {
                **common,
                "server/discover": self._discover,
                "subscriptions/listen": self.eras.listen,
                "tasks/get": self.modern_tasks.get,
                "tasks/update": self.modern_tasks.update,
                "tasks/cancel": self.modern_tasks.cancel,
            },
        }
        self.tools_call_by_era = {"legacy": self.legacy_tasks.tools_call, "modern": self.modern_tasks.tools_call}

    def capabilities(self, revision: str = MODERN) -> dict[str, Any]:
        return server_capabilities(self.pool, revision)

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
        except (UpstreamError, TaskErrorReply) as exc:
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
        ctx.request_id = rid
        handler = self.methods[ctx.era].get(method)
        if handler is not None:
            return await handler(ctx, params)
        if ctx.era == "legacy":
            raise MethodNotFound(f"Method not found: {method}")
        removed = f" (removed in {MODERN})" if method in modern.REMOVED_METHODS else ""
        raise MethodNotFound(f"Method not found: {method}{removed}", http_status=404)

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
        # 2026 lists change with upstream list_changed (relayed on listen streams): 0 = revalidate.
        return modern.cacheable(res, 0) if ctx.era == "modern" else res

    def _list_of(self, kind: str) -> Handler:
        async def handler(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
            return await self._list(ctx, params, kind)

        return handler

    async def _tools_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        res = await self._list(ctx, params, "tools")
        if enabled(ctx.era, ctx.revision):
            # 2025-11-25 hosts learn per tool whether it may (or must) run as a task.
            by_name = {r.item["name"]: r for r in self.pool.catalogue()}
            tools = []
            for tool in res["tools"]:
                route = by_name.get(tool["name"])
                support = self._support(route) if route else "forbidden"
                tools.append({**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": support}})
            res["tools"] = tools
        return res

    def _support(self, route: Route) -> str:
        override = self.pool.servers[route.server].cfg.mcpx.tools.get(route.name)
        return task_support(override.taskSupport if override else None)

    # ---- forwarded requests --------------------------------------------------------------
    async def _server(self, ctx: RequestContext, shared: UpstreamServer) -> UpstreamServer:
        """Where this host's request goes: the shared process, or (`scope: host`) its own."""
        if shared.cfg.mcpx.scope == "shared":
            return shared
        connection = ctx.conn.record_id
        # The process's questions that no call of the host explains are still the host's alone.
        ask_owner = self.calls.asker.for_owner(ctx.conn, shared.key, lambda: self.instances.left(connection))
        return await self.instances.for_host(shared, connection, ask_owner)

    async def _current(
        self, ctx: RequestContext, server: UpstreamServer, route: Route
    ) -> tuple[UpstreamServer, Route] | str:
        """Where a call routed to `server` goes now (it waited for an approval meanwhile): there,
        unless a reload replaced it; then to the server now configured under its key, once that is
        up and if it still offers the tool; else what the reload did."""
        shared = self.pool.servers.get(server.key)
        if shared is server or (shared is not None and server.instance is not None and shared.cfg is server.cfg):
            return server, route  # the same entry (a host's own process shares its entry's config)
        if shared is None:
            return f"removed {server.key} from the config"
        await shared.ready_session()  # the reloaded entry's process starts once the old one stopped
        now = next((r for r in self.pool.catalogue() if r.server == server.key and r.name == route.name), None)
        if now is None:
            return f"left {server.key} without the tool {route.name}"
        log.info("a call to %s waited for approval across a reload: it runs on %s as reloaded", route.name, server.key)
        return await self._server(ctx, shared), now

    async def _tools_call(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        route = self.pool.resolve(params.get("name"))
        if "arguments" in params and not isinstance(params["arguments"], dict):
            raise InvalidParams("tools/call: params.arguments must be an object")
        server = await self._server(ctx, self.pool.servers[route.server])
        return await self.tools_call_by_era[ctx.era](ctx, params, route, server, self._support(route))

    async def _prompts_get(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        route = self.pool.resolve(params.get("name"), "prompts")
        if "arguments" in params and not isinstance(params["arguments"], dict):
            raise InvalidParams("prompts/get: params.arguments must be an object")
        server = await self._server(ctx, self.pool.servers[route.server])
        named = {**params, "name": route.name}
        res = await self.calls.forward(ctx, server, "prompts/get", named, server.cfg.mcpx.callTimeout)
        if res.get("resultType") == "input_required":
            return res
        return shaping.result_for(server.naming.prompt_result_out(res), ctx.revision)

    async def _resources_read(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        server, uri = self.pool.resolve_uri(params.get("uri"))
        server = await self._server(ctx, server)
        res = await self.calls.forward(
            ctx, server, "resources/read", {**params, "uri": uri}, server.cfg.mcpx.callTimeout
        )
        if res.get("resultType") == "input_required":
            return res  # an interim MRTR round: no contents, never cacheable
        if isinstance(res.get("contents"), list):
            res = {**res, "contents": [_rename_uri(c, server) for c in res["contents"]]}
        return shaping.read_result_for(res, ctx.revision)

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
        server = await self._server(ctx, server)
        res = await self.calls.forward(ctx, server, "completion/complete", {**params, "ref": ref})
        return shaping.result_for(res, ctx.revision)

    # ---- 2025 resources/subscribe --------------------------------------------------------
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
