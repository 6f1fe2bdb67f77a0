"""Which protocol revisions mcpx speaks, and how an inbound message says which era it is. Pure."""

from __future__ import annotations

from typing import Any, Literal

# The two eras mcpx speaks: handshake sessions (2025-11-25 and older) and stateless 2026-07-28.
Era = Literal["legacy", "modern"]

MODERN = "2026-07-28"
LEGACY_LATEST = "2025-11-25"
# Handshake revisions a legacy host may negotiate, newest first.
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
MODERN_VERSIONS = (MODERN,)
# What a -32022 lists: mcpx is dual-era on both transports (DIGEST C3), so the legacy version is real too.
SUPPORTED_VERSIONS = (MODERN, LEGACY_LATEST)
UNSUPPORTED_CODE = -32022

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META_RELATED_TASK = "io.modelcontextprotocol/related-task"

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def is_modern(params: dict[str, Any]) -> bool:
    """A request is modern when its _meta names a protocol version (DIGEST 1.2), not merely has _meta."""
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


def negotiate_legacy(requested: object) -> str:
    """The version an `initialize` gets: the requested one if we speak it, else our latest."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_LATEST


def at_least(version: str, other: str) -> bool:
    """Revisions are dates, so string order is version order."""
    return version >= other
