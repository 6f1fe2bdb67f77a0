"""The configured upstream servers: start, probe, restart with capped backoff, stop; tool catalogue."""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from ..config import Config, ServerConfig
from ..protocol.errors import InvalidParams, UpstreamUnavailable
from .http import HttpTransport
from .session import UpstreamSession
from .stdio import StdioTransport

log = logging.getLogger("mcpx.upstream")

SEP = "__"
BACKOFF_START_S = 0.25
BACKOFF_CAP_S = 30.0
STABLE_AFTER_S = 30.0  # an upstream that ran this long starts its backoff afresh
READY_WAIT_S = 10.0
RESTART_WAIT_S = 2.0


@dataclass(frozen=True)
class ToolRoute:
    server: str
    name: str  # the upstream's own tool name
    tool: dict[str, Any]


class UpstreamServer:
    def __init__(self, key: str, cfg: ServerConfig, namespace: str | None, log_dir: Path, client: httpx.AsyncClient) -> None:
        self.key = key
        self.cfg = cfg
        self.namespace = namespace
        self.log_dir = log_dir
        self.client = client
        self.session: UpstreamSession | None = None
        self.state = "starting"
        self.last_error: str | None = None
        self.restarts = 0
        self.tools: list[dict[str, Any]] = []
        self._ready = anyio.Event()
        self._stopping = False
        self._transport: Any = None

    async def run(self) -> None:
        backoff = BACKOFF_START_S
        while not self._stopping:
            started_at = time.monotonic()
            try:
                await self._run_once()
            except Exception as exc:  # one upstream's failure never takes the daemon down
                self.last_error = _describe(exc)
                log.warning("upstream %s failed: %s", self.key, self.last_error)
            if self._stopping:
                break
            self.state = "restarting"
            if time.monotonic() - started_at > STABLE_AFTER_S:
                backoff = BACKOFF_START_S
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_CAP_S)
            self.restarts += 1

    async def _run_once(self) -> None:
        transport: Any
        if self.cfg.transport == "stdio":
            transport = StdioTransport(self.key, self.cfg, self.log_dir)
        else:
            transport = HttpTransport(self.key, self.cfg, self.client)
        self._transport = transport
        session = UpstreamSession(self.key, transport, self._on_event)
        async with anyio.create_task_group() as tg:
            await tg.start(self._run_transport, transport, session)
            try:
                await session.start()
                self.tools = await self._list_tools(session)
            except BaseException:
                await transport.close()
                raise
            if hasattr(transport, "open_listen_stream") and session.era == "legacy" and (session.capabilities.get("tools") or {}).get("listChanged"):
                await transport.open_listen_stream()
            self.session = session
            self.state = "ready"
            self.last_error = None
            self._ready.set()
            log.info("upstream %s ready (%s %s, %d tools)", self.key, session.era, session.revision, len(self.tools))
            await transport.closed.wait()
            tg.cancel_scope.cancel()
        code = getattr(transport, "returncode", None)
        reason = f"upstream {self.key!r} exited" + (f" with code {code}" if code is not None else "") if self.cfg.transport == "stdio" else f"upstream {self.key!r} connection lost"
        self._down(session, reason)
        if not self._stopping:
            raise RuntimeError(reason)

    async def _run_transport(self, transport: Any, session: UpstreamSession, *, task_status: Any) -> None:
        try:
            await transport.run(session.feed, task_status.started)
        finally:
            self._down(session, session.dead_reason or f"upstream {self.key!r} " + ("exited" if self.cfg.transport == "stdio" else "connection lost"))

    def _down(self, session: UpstreamSession, reason: str) -> None:
        session.fail_all(reason)
        if self.session is session:
            self.session = None
            self._ready = anyio.Event()
            self.state = "down" if not self._stopping else "stopped"

    async def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed" and self.session is not None:
            try:
                self.tools = await self._list_tools(self.session)
            except Exception as exc:
                log.warning("upstream %s: tools/list after list_changed failed: %s", self.key, exc)

    async def _list_tools(self, session: UpstreamSession) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(1000):  # a cursor loop from a broken upstream must end
            params: dict[str, Any] = {"cursor": cursor} if cursor else {}
            res = await session.request("tools/list", session.shape_params(params, client_caps={}, log_level=None), timeout=30)
            tools.extend(t for t in res.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = res.get("nextCursor")
            if not cursor:
                break
        return tools

    async def ready_session(self) -> UpstreamSession:
        # A first start may take a while (npx, a cold interpreter); a restart gets a short grace.
        wait = READY_WAIT_S if self.state == "starting" else RESTART_WAIT_S
        if self.session is None:
            with anyio.move_on_after(wait):
                await self._ready.wait()
        if self.session is None:
            detail = f": {self.last_error}" if self.last_error else ""
            raise UpstreamUnavailable(f"upstream {self.key!r} is not available ({self.state}){detail}")
        return self.session

    async def stop(self) -> None:
        self._stopping = True
        if self._transport is not None:
            await self._transport.close()


def _describe(exc: BaseException) -> str:
    """The first real error inside task-group wrappers, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


class UpstreamPool:
    def __init__(self, config: Config, log_dir: Path) -> None:
        self.config = config
        # One pooled client for every HTTP upstream; read=None because SSE replies may be long.
        # TCP_NODELAY: httpx writes headers and body separately; Nagle + delayed ACK would add 40 ms a call.
        transport = httpx.AsyncHTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)], limits=httpx.Limits(max_connections=200, max_keepalive_connections=50))
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(30, read=None), transport=transport)
        self.servers = {key: UpstreamServer(key, cfg, config.namespace_of(key), log_dir, self.client) for key, cfg in config.mcpServers.items()}

    async def run(self, tg: anyio.abc.TaskGroup) -> None:
        for server in self.servers.values():
            tg.start_soon(server.run)

    async def wait_started(self, wait: float = READY_WAIT_S) -> None:
        """Give every upstream a bounded chance to come up, so a first tools/list is complete."""
        with anyio.move_on_after(wait):
            for server in self.servers.values():
                while server.state == "starting":
                    await anyio.sleep(0.02)

    def exposed_name(self, server: UpstreamServer, tool: str) -> str:
        return tool if server.namespace is None else f"{server.namespace}{SEP}{tool}"

    def catalogue(self) -> list[ToolRoute]:
        """Stable order: servers in config order, each server's tools in its own order."""
        routes: list[ToolRoute] = []
        seen: set[str] = set()
        for server in self.servers.values():
            for tool in server.tools:
                exposed = self.exposed_name(server, tool["name"])
                if exposed in seen:
                    continue  # two passthrough servers with one name: the first configured wins
                seen.add(exposed)
                routes.append(ToolRoute(server.key, tool["name"], {**tool, "name": exposed}))
        return routes

    def resolve(self, exposed: Any) -> ToolRoute:
        if not isinstance(exposed, str):
            raise InvalidParams("tools/call: params.name must be a string")
        for route in self.catalogue():
            if route.tool["name"] == exposed:
                return route
        # An upstream that is down still owns its namespace: say so rather than "unknown tool".
        if SEP in exposed:
            ns = exposed.split(SEP, 1)[0]
            for server in self.servers.values():
                if server.namespace == ns and server.session is None:
                    raise UpstreamUnavailable(f"upstream {server.key!r} is not available ({server.state}); cannot call {exposed!r}")
        raise InvalidParams(f"Unknown tool: {exposed}")

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in self.servers.values():
                    tg.start_soon(server.stop)
            await self.client.aclose()
