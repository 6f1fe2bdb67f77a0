"""What an upstream transport is to the session and the pool: stdio and HTTP are its two variants."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import anyio

from ..protocol.jsonrpc import Id
from ..protocol.revisions import Era

# One inbound message, and the id of the request on whose response stream it arrived (HTTP), if any.
Feed = Callable[[dict[str, Any], "Id | None"], Awaitable[None]]


class Transport(Protocol):
    kind: Literal["stdio", "http"]
    closed: anyio.Event
    era: Era | None  # set by the session once probed
    revision: str | None  # the handshake revision, for legacy HTTP headers
    # Names the server process across daemon restarts (a kept stdio server); None when the
    # server cannot outlive this daemon, so nothing about its calls is worth recording.
    run_id: str | None

    async def run(self, feed: Feed, started: Callable[[], None]) -> None:
        """Deliver every inbound message to `feed` until the connection ends; `started()` once up."""

    async def send(self, msg: dict[str, Any], origin: str | None = None) -> None:
        """Send one message; raises ConnectionError when the upstream is gone. `origin` names the
        host request a tools/call is made for, where the server outlives the daemon (a keeper
        remembers it for the next daemon: upstream/stdio/keeper.py); other transports ignore it."""

    async def abort(self, request_id: Id) -> None:
        """Stop waiting for this request's reply (HTTP: close its response stream)."""

    async def open_listen_stream(self) -> None:
        """Start receiving what a legacy server pushes outside any request (HTTP: the GET stream)."""

    async def close(self) -> None: ...

    @property
    def returncode(self) -> int | None:
        """The exit code of a stdio child that ended; None otherwise."""
