"""Routes one host request to the pool, per revision, and turns the outcome into a reply frame."""

from __future__ import annotations

import logging
from typing import Any

import anyio

from .. import __version__
from ..config import Config
from ..protocol import jsonrpc, legacy, modern, pagination, shaping
from ..protocol.errors import (
    InternalError,
    InvalidParams,
    McpError,
    MethodNotFound,
    UpstreamError,
    UpstreamUnavailable,
    upstream_error_for,
)
from ..protocol.revisions import MODERN
from ..upstream.pool import UpstreamPool
from .connection import RequestContext

log = logging.getLogger("mcpx.host")

SERVER_INFO = {"name": "mcpx", "version": __version__}
INSTRUCTIONS = "mcpx gateway: tools from several MCP servers, namespaced as <server>__<tool>."


class Dispatcher:
    def __init__(self, config: Config, pool: UpstreamPool) -> None:
        self.config = config
        self.pool = pool

    # ---- capabilities: declare only what this revision really gets -----------------------
    def legacy_capabilities(self) -> dict[str, Any]:
        return {"tools": {"listChanged": False}, "logging": {}}

    def modern_capabilities(self) -> dict[str, Any]:
        return {"tools": {}, "logging": {}}

    # ---- entry point ---------------------------------------------------------------------
    async def reply(self, ctx: RequestContext, msg: jsonrpc.Message) -> dict[str, Any]:
        """The response frame for one request; never raises for anything a peer sent."""
        try:
            res = await self.handle(ctx, msg.method, msg.params)
            if ctx.era == "modern":
                res = modern.decorate(res, SERVER_INFO)
            return jsonrpc.result(msg.id, res)
        except McpError as exc:
            return jsonrpc.error_from(msg.id, exc)
        except UpstreamError as exc:
            return jsonrpc.error(msg.id, upstream_error_for(exc.error, ctx.revision))
        except TimeoutError:
            return jsonrpc.error_from(msg.id, UpstreamUnavailable(f"{msg.method}: the upstream did not answer in time"))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception:
            log.exception("internal error handling %s", msg.method)
            return jsonrpc.error_from(msg.id, InternalError(f"Internal error handling {msg.method}"))

    async def handle(self, ctx: RequestContext, method: str, params: dict[str, Any]) -> dict[str, Any]:
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
        return await handler(self, ctx, params)

    # ---- methods -------------------------------------------------------------------------
    async def _ping(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _discover(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return modern.discover_result(self.modern_capabilities(), SERVER_INFO, INSTRUCTIONS)

    async def _set_level(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in legacy.LOG_LEVELS:
            raise InvalidParams(f"logging/setLevel: level must be one of {', '.join(legacy.LOG_LEVELS)}")
        ctx.conn.log_level = level
        return {}

    async def _tools_list(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await self.pool.wait_started()
        tools = [shaping.tool_for(r.tool, ctx.revision) for r in self.pool.catalogue()]
        chunk, nxt = pagination.page("tools", tools, params.get("cursor"))
        res: dict[str, Any] = {"tools": chunk}
        if nxt:
            res["nextCursor"] = nxt
        if ctx.era == "modern":
            # Tools change with upstream list_changed; 0 = always revalidate.
            res = modern.cacheable(res, 0)
        return res

    async def _tools_call(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        route = self.pool.resolve(params.get("name"))
        if "arguments" in params and not isinstance(params["arguments"], dict):
            raise InvalidParams("tools/call: params.arguments must be an object")
        server = self.pool.servers[route.server]
        session = await server.ready_session()
        up = {k: v for k, v in params.items() if k not in ("task", "inputResponses", "requestState")}
        up["name"] = route.name
        # Questions from upstreams are not relayed yet, so declare no client capability upstream.
        up = session.shape_params(up, client_caps={}, log_level=ctx.log_level if ctx.era == "modern" else None)
        override = server.cfg.mcpx.tools.get(route.name)
        timeout = (override.callTimeout if override and override.callTimeout else None) or server.cfg.mcpx.callTimeout
        try:
            res = await session.request("tools/call", up, on_notify=self._relay(ctx), timeout=timeout)
        except TimeoutError:
            raise UpstreamUnavailable(f"upstream {server.key!r} did not answer tools/call {route.name!r} within {timeout} s") from None
        return shaping.call_result_for(res, ctx.revision)

    def _relay(self, ctx: RequestContext) -> Any:
        async def relay(msg: dict[str, Any]) -> None:
            if ctx.notify is None:
                return
            if msg.get("method") == "notifications/message":
                level = (msg.get("params") or {}).get("level")
                if ctx.era == "modern":
                    # 2026: only when the request's own _meta asked for a level.
                    if ctx.log_level is None or not legacy.log_level_allows(ctx.log_level, level):
                        return
                elif not legacy.log_level_allows(ctx.conn.log_level, level):
                    return
            await ctx.notify(msg)

        return relay


_COMMON = {"tools/list": Dispatcher._tools_list, "tools/call": Dispatcher._tools_call}
_LEGACY = {**_COMMON, "ping": Dispatcher._ping, "logging/setLevel": Dispatcher._set_level}
_MODERN = {**_COMMON, "server/discover": Dispatcher._discover}
