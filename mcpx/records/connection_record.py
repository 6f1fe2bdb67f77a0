"""A host connection as it is stored and shown: a 2025-11-25 session, a `mcpx serve` shim process,
or a stateless 2026 host (connections/registry.py keeps them). Plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ConnectionKind = Literal["session", "shim", "stateless"]


@dataclass(frozen=True)
class ConnectionRecord:
    id: str
    kind: ConnectionKind
    transport: Literal["http", "stdio"]
    opened_ms: int
    last_seen_ms: int
    revision: str | None = None
    client_info: dict[str, Any] = field(default_factory=dict)
    principal: str | None = None
    peer: str | None = None
    shim_pid: int | None = None
    key: str | None = None  # a stateless host's identity key (principal, or name/version@address)
    closed_ms: int | None = None
    close_reason: str | None = None
    label: str | None = None  # what an operator tells it apart by (connections/naming.py)
    capabilities: dict[str, Any] = field(default_factory=dict)  # what it declared (2025: at initialize)

    @property
    def open(self) -> bool:
        return self.closed_ms is None

    @property
    def shown_as(self) -> str:
        """A short name for one line: its label, else its client's name and version, else its id."""
        if self.label:
            return self.label
        info = " ".join(str(self.client_info[k]) for k in ("name", "version") if self.client_info.get(k))
        return info or f"connection {self.id[:8]}"

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "transport": self.transport,
            "revision": self.revision,
            "clientInfo": self.client_info,
            "principal": self.principal,
            "peer": self.peer,
            "shimPid": self.shim_pid,
            "openedMs": self.opened_ms,
            "lastSeenMs": self.last_seen_ms,
            "closedMs": self.closed_ms,
            "closeReason": self.close_reason,
            "label": self.label,
            "capabilities": self.capabilities,
        }
