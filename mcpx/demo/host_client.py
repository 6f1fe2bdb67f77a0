"""A small MCP host client over Streamable HTTP, for both eras (used by `mcpx demo` and the console
demo's hosts, mcpx/demo_hosts.py)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from .. import __version__
from ..connections import naming
from ..protocol.revisions import LEGACY_LATEST, META_CAPS, META_CLIENT_INFO, META_VERSION, MODERN, Era
from ..upstream.http.streamable import header_value, iter_sse

CLIENT_INFO = {"name": "mcpx-demo-host", "version": __version__}


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class SessionLost(RpcError):
    """The daemon does not know this legacy session (HTTP 404): initialize a new one."""


class HttpHost:
    """One host. `client_info` and `capabilities` are what it declares (at `initialize`, or in
    every 2026 request's `_meta`); `session_id` resumes a legacy session instead of initializing."""

    def __init__(
        self,
        url: str,
        era: Era = "modern",
        client: httpx.AsyncClient | None = None,
        *,
        client_info: dict[str, Any] | None = None,
        capabilities: dict[str, Any] | None = None,
        session_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        self.url = url
        self.era = era
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(30, read=None))
        self.client_info = client_info or CLIENT_INFO
        self.capabilities = capabilities or {}
        self.session_id = session_id
        self.revision = revision or (MODERN if era == "modern" else LEGACY_LATEST)
        self._ids = itertools.count(1)

    async def __aenter__(self) -> HttpHost:
        if self.era == "legacy" and self.session_id is None:
            res = await self.request(
                "initialize",
                {"protocolVersion": LEGACY_LATEST, "capabilities": self.capabilities, "clientInfo": self.client_info},
            )
            self.revision = res["protocolVersion"]
            await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, *, end_session: bool = True) -> None:
        """Delete the session (unless told to keep it, to resume later) and close the client."""
        try:
            if self.session_id and end_session:
                await self.client.delete(self.url, headers={"Mcp-Session-Id": self.session_id})
        except httpx.TransportError:
            pass  # the daemon is gone: there is no session left to end
        finally:
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
            if isinstance(params.get("taskId"), str) and msg.get("method", "").startswith("tasks/"):
                name = params["taskId"]  # tasks/* route on the task id (the extension's Mcp-Name rule)
            if isinstance(name, str):
                h["Mcp-Name"] = header_value(name)
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        # The demo's hosts are all one python process: they name themselves, as the operator knows them.
        h[naming.LABEL_HEADER] = naming.to_header(
            f"{self.client_info.get('name', '')} {self.client_info.get('version', '')}"
        )
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
                META_CAPS: self.capabilities,
                META_CLIENT_INFO: self.client_info,
            }
        msg = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        async with self.client.stream("POST", self.url, content=json.dumps(msg), headers=self._headers(msg)) as resp:
            if method == "initialize" and resp.headers.get("mcp-session-id"):
                self.session_id = resp.headers["mcp-session-id"]
            if resp.status_code == 404 and self.session_id and method != "initialize":
                raise SessionLost({"code": -32600, "message": "the daemon does not know this session"})
            if "text/event-stream" in resp.headers.get("content-type", ""):
                reply = None
                async for item in iter_sse(resp):
                    if "method" in item and on_notification is not None:
                        await on_notification(item)
                    elif "id" in item:
                        reply = item
            else:
                body = await resp.aread()
                try:
                    reply = json.loads(body)
                except ValueError:
                    raise RpcError({"code": -32603, "message": f"HTTP {resp.status_code}: {body[:200]!r}"}) from None
        if reply is None:
            raise RpcError({"code": -32603, "message": "no reply"})
        if "error" in reply:
            raise RpcError(reply["error"])
        result: dict[str, Any] = reply["result"]
        return result
