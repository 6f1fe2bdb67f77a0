"""The console's only way to the daemon: `/v1` over HTTP and the `/v1/events` websocket.

The daemon is found anew for every connection (its info file and token in the state folder), so
after a restart on another port the console simply reconnects and resumes by sequence number.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import quote

import anyio
import httpx
import websockets
from websockets.asyncio.client import connect

from mcpx.client.daemon_client import daemon_endpoint

from .backend import BackendError
from .wire import FEED_TYPES, FeedMessage, Frame, Json, JsonObject, TaskDetail


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # http://127.0.0.1:<port>
    token: str

    @property
    def feed_url(self) -> str:
        return self.base_url.replace("http://", "ws://", 1) + "/v1/events"


Locate = Callable[[], Endpoint | None]
NO_DAEMON = "no daemon is running for this state folder (start one: mcpx daemon, or mcpx console --start)"


def locate_in(folder: Path) -> Locate:
    """The running daemon of a state folder, read afresh each time (None when none runs)."""

    def locate() -> Endpoint | None:
        found = daemon_endpoint(folder)
        return Endpoint(*found) if found is not None else None

    return locate


class ApiError(BackendError):
    def __init__(self, status: int, body: JsonObject) -> None:
        super().__init__(str(body.get("error") or f"HTTP {status}"))
        self.status = status
        self.fields = body.get("fields") or {}


class DaemonGone(BackendError):
    """No daemon answers (not running, or it went away)."""


class DaemonClient:
    def __init__(self, locate: Locate, operator: str, *, attach_as_operator: bool = True) -> None:
        self.locate = locate
        self.operator = operator
        # False (--read-only): the feed is watched without counting as an operator, so the daemon
        # never holds a question for this console, which could not answer it.
        self.attach_as_operator = attach_as_operator
        self._http: httpx.AsyncClient | None = None
        self._endpoint: Endpoint | None = None

    @property
    def endpoint(self) -> Endpoint | None:
        return self._endpoint

    def label(self) -> str:
        ep = self._endpoint or self.locate()
        return ep.base_url.removeprefix("http://") if ep is not None else "(no daemon)"

    async def _client(self) -> httpx.AsyncClient:
        ep = self.locate()
        if ep is None:
            raise DaemonGone(NO_DAEMON)
        if self._http is None or ep != self._endpoint:
            # Swap first, close after: two workers arriving here at once must not both replace the
            # client (the one replaced by the other would never be closed).
            old, self._endpoint = self._http, ep
            self._http = httpx.AsyncClient(
                base_url=ep.base_url, headers={"Authorization": f"Bearer {ep.token}"}, timeout=10
            )
            if old is not None:
                await old.aclose()
        return self._http

    async def _call(self, method: str, path: str, *, json: JsonObject | None = None) -> Json:
        """One /v1 request; its JSON body (the caller names its shape, docs/api.md's)."""
        client = await self._client()
        try:
            resp = await client.request(method, path, json=json)
        except httpx.TransportError as exc:
            raise DaemonGone(f"the daemon does not answer: {exc}") from None
        body = resp.json() if resp.content else {}
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, body if isinstance(body, dict) else {})
        return body

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    # ---- REST ------------------------------------------------------------------------------
    async def task(self, task_id: str) -> TaskDetail:
        result: TaskDetail = await self._call("GET", f"/v1/tasks/{task_id}")
        return result

    async def frames(self, task_id: str) -> list[Frame]:
        result: list[Frame] = (await self._call("GET", f"/v1/tasks/{task_id}/frames"))["frames"]
        return result

    async def cancel(self, task_id: str) -> None:
        """Asked (its real final state comes through the feed); raises ApiError when refused."""
        await self._call("POST", f"/v1/tasks/{task_id}/cancel", json={"by": self.operator})

    async def answer(
        self, question_id: str, action: str, content: JsonObject | None, result: JsonObject | None
    ) -> None:
        """Taken by the daemon (it reaches the upstream); raises ApiError, with `fields`, when refused."""
        body: JsonObject = {"action": action, "by": self.operator}
        if content is not None:
            body["content"] = content
        if result is not None:
            body["result"] = result
        await self._call("POST", f"/v1/questions/{question_id}/answer", json=body)

    async def status(self) -> JsonObject:
        result: JsonObject = await self._call("GET", "/v1/status")
        return result

    async def allowances(self) -> list[JsonObject]:
        result: list[JsonObject] = (await self._call("GET", "/v1/allowances"))["allowances"]
        return result

    async def revoke_allowance(self, allowance_id: str) -> None:
        await self._call("DELETE", f"/v1/allowances/{allowance_id}")

    # ---- the views (console/views/) ----------------------------------------------------------
    async def upstreams(self) -> list[JsonObject]:
        result: list[JsonObject] = (await self._call("GET", "/v1/status"))["upstreams"]
        return result

    async def upstream_stderr(self, name: str, tail: int) -> JsonObject:
        result: JsonObject = await self._call("GET", f"/v1/upstreams/{quote(name, safe='')}/stderr?tail={tail}")
        return result

    async def restart_upstream(self, name: str) -> None:
        await self._call("POST", f"/v1/upstreams/{quote(name, safe='')}/restart", json={"by": self.operator})

    async def login_upstream(self, name: str) -> JsonObject:
        result: JsonObject = await self._call(
            "POST", f"/v1/upstreams/{quote(name, safe='')}/login", json={"by": self.operator}
        )
        return result

    async def connection(self, connection_id: str) -> JsonObject:
        result: JsonObject = await self._call("GET", f"/v1/connections/{quote(connection_id, safe='')}")
        return result

    async def events(self, since: int, limit: int) -> list[JsonObject]:
        result: list[JsonObject] = (await self._call("GET", f"/v1/events?since={since}&limit={limit}"))["events"]
        return result

    # ---- the feed --------------------------------------------------------------------------
    async def feed(self, since: int | None, snapshot_tasks: int = 20_000) -> AsyncIterator[FeedMessage]:
        """The feed's messages, from a snapshot (since None) or after `since`; ends (raising
        DaemonGone) when the connection does."""
        ep = self.locate()
        if ep is None:
            raise DaemonGone(NO_DAEMON)
        hello: JsonObject = {"type": "subscribe", "snapshotTasks": snapshot_tasks}
        if self.attach_as_operator:
            hello["operator"] = self.operator
        if since is not None:
            hello["since"] = since
        try:
            async with connect(
                ep.feed_url, additional_headers={"Authorization": f"Bearer {ep.token}"}, max_size=None, open_timeout=5
            ) as ws:
                try:
                    await ws.send(json.dumps(hello))
                    async for text in ws:
                        message = json.loads(text)
                        if isinstance(message, dict) and message.get("type") in FEED_TYPES:
                            yield cast(FeedMessage, message)  # (the daemon's own schemas: docs/api.md)
                except (anyio.get_cancelled_exc_class(), GeneratorExit):
                    # The console is closing (or the feed worker was replaced): drop the socket now.
                    # A close handshake would wait on a loop that may be about to stop, leaving the
                    # socket to the garbage collector (found as a ResourceWarning in the tests).
                    ws.transport.abort()
                    raise
        except (OSError, websockets.WebSocketException, TimeoutError) as exc:
            raise DaemonGone(f"the feed ended: {exc}") from None
        raise DaemonGone("the feed ended")
