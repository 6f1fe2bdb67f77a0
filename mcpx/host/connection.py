"""Host connections as the console sees them, and the per-request context dispatch works with."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import anyio

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class HostConnection:
    """A legacy session, a `mcpx serve` shim process, or a stateless modern HTTP host identity."""

    transport: str  # "http" | "stdio"
    peer: str | None = None
    principal: str | None = None
    id: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    era: str | None = None  # "legacy" once initialized; stateless modern requests never set it
    revision: str | None = None
    client_info: dict[str, Any] = field(default_factory=dict)
    client_caps: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    initialized: bool = False
    created: float = field(default_factory=time.time)
    # Session-level outbound channel (stdio: the shim's websocket; legacy HTTP: the GET stream).
    send: Send | None = None
    in_flight: dict[Any, anyio.CancelScope] = field(default_factory=dict)
    resource_subscriptions: set[str] = field(default_factory=set)  # legacy resources/subscribe

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "transport": self.transport,
            "era": self.era or "modern",
            "revision": self.revision,
            "clientInfo": self.client_info,
            "principal": self.principal,
            "peer": self.peer,
            "created": self.created,
        }


@dataclass
class RequestContext:
    conn: HostConnection
    era: str  # "legacy" | "modern"
    revision: str
    client_caps: dict[str, Any]
    meta: dict[str, Any]
    log_level: str | None
    # Where request-scoped notifications (progress, log) go; None when nothing can receive them.
    notify: Send | None
