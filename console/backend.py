"""What the app needs of the daemon: the feed and a few /v1 calls (console/client.py is the real one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from .wire import FeedMessage, Frame, JsonObject, TaskDetail


class BackendError(Exception):
    """The daemon refused (then `fields` may say why, by field) or could not be reached."""

    fields: dict[str, str] = {}  # noqa: RUF012 - read-only default; instances set their own


class Backend(Protocol):
    operator: str

    def label(self) -> str:
        """Where the daemon is, for the header."""

    def feed(self, since: int | None) -> AsyncIterator[FeedMessage]:
        """The feed's messages; raises BackendError when it ends."""

    async def task(self, task_id: str) -> TaskDetail: ...

    async def aclose(self) -> None:
        """Let go of connections (the app is closing)."""

    async def frames(self, task_id: str) -> list[Frame]: ...

    async def cancel(self, task_id: str) -> None: ...

    async def answer(
        self, question_id: str, action: str, content: JsonObject | None, result: JsonObject | None
    ) -> None: ...

    async def status(self) -> JsonObject:
        """`GET /v1/status` (the header shows its version and uptimeS)."""

    async def allowances(self) -> list[JsonObject]:
        """The approval allowances in force (`GET /v1/allowances`, docs/approvals.md)."""

    async def revoke_allowance(self, allowance_id: str) -> None: ...

    # ---- the views (console/views/) ----------------------------------------------------------
    async def upstreams(self) -> list[JsonObject]:
        """The upstream servers as `GET /v1/status` lists them."""

    async def upstream_stderr(self, name: str, tail: int) -> JsonObject:
        """`GET /v1/upstreams/{name}/stderr`: its stderr log's last lines."""

    async def restart_upstream(self, name: str) -> None: ...

    async def login_upstream(self, name: str) -> JsonObject:
        """`POST /v1/upstreams/{name}/login`: start an OAuth sign-in; its `authorizationUrl` to open."""

    async def connection(self, connection_id: str) -> JsonObject:
        """`GET /v1/connections/{id}`: a host connection, what it negotiated included."""

    async def events(self, since: int, limit: int) -> list[JsonObject]:
        """`GET /v1/events`: the event log after `since`, oldest first."""
