"""A small MCP host client over Streamable HTTP, for both eras (used by `mcpx demo`)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from . import __version__
from .protocol.revisions import LEGACY_LATEST, META_CAPS, META_CLIENT_INFO, META_VERSION, MODERN, Era
from .upstream.http import header_value, iter_sse

CLIENT_INFO = {"name": "mcpx-demo-host", "version": __version__}


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class HttpHost:
    def __init__(self, url: str, era: Era = "modern", client: httpx.AsyncClient | None = None) -> None:
        self.url = url
        self.era = era
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(30, read=None))
        self.session_id: str | None = None
        self.revision = MODERN if era == "modern" else LEGACY_LATEST
        self._ids = itertools.count(1)

    async def __aenter__(self) -> HttpHost:
        if self.era == "legacy":
            res = await self.request(
                "initialize", {"protocolVersion": LEGACY_LATEST, "capabilities": {}, "clientInfo": CLIENT_INFO}
            )
            self.revision = res["protocolVersion"]
            await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session_id:
            await self.client.delete(self.url, headers={"Mcp-Session-Id": self.session_id})
        await self.client.aclose()

    def _headers(self, msg: dict[str, Any]) -> dict[str, str]:
        h = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.revision,
        }
        if self.era == "modern":
            h["Mcp-Method"] = msg.get("method", "")
            params = msg.get("params") or {}
            name = params.get("name") if msg.get("method") in ("tools/call", "prompts/get") else params.get("uri")
            if isinstance(name, str):
                h["Mcp-Name"] = header_value(name)
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        return h

    async def _post(self, msg: dict[str, Any]) -> None:
        await self.client.post(self.url, content=json.dumps(msg), headers=self._headers(msg))

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        on_notification: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        params = dict(params or {})
        if self.era == "modern":
            params["_meta"] = {
                **(params.get("_meta") or {}),
                META_VERSION: MODERN,
                META_CAPS: {},
                META_CLIENT_INFO: CLIENT_INFO,
            }
        msg = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        async with self.client.stream("POST", self.url, content=json.dumps(msg), headers=self._headers(msg)) as resp:
            if method == "initialize" and resp.headers.get("mcp-session-id"):
                self.session_id = resp.headers["mcp-session-id"]
            if "text/event-stream" in resp.headers.get("content-type", ""):
                reply = None
                async for item in iter_sse(resp):
                    if "method" in item and on_notification is not None:
                        await on_notification(item)
                    elif "id" in item:
                        reply = item
            else:
                reply = json.loads(await resp.aread())
        if reply is None:
            raise RpcError({"code": -32603, "message": "no reply"})
        if "error" in reply:
            raise RpcError(reply["error"])
        result: dict[str, Any] = reply["result"]
        return result
