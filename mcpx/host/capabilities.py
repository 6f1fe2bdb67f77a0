"""The server capabilities mcpx declares: only what a host at this revision really gets."""

from __future__ import annotations

from typing import Any

from ..protocol.legacy_tasks import TASK_CAPABILITY
from ..protocol.revisions import LEGACY_LATEST, MODERN, TASKS_EXTENSION
from ..upstream.pool import UpstreamPool


def _upstream_caps(pool: UpstreamPool) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for server in pool.servers.values():
        for key, value in server.capabilities.items():  # last known, so a restart changes nothing
            if isinstance(value, dict):
                merged.setdefault(key, {}).update(value)
    return merged


def server_capabilities(pool: UpstreamPool, revision: str = MODERN) -> dict[str, Any]:
    """Legacy sessions get changes on their session, modern hosts via listen; core tasks only
    for 2025-11-25 sessions (the extension replaces them in 2026)."""
    up = _upstream_caps(pool)
    caps: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
    if revision == LEGACY_LATEST:
        caps["tasks"] = TASK_CAPABILITY
    elif revision == MODERN:
        caps["extensions"] = {TASKS_EXTENSION: {}}
    if "prompts" in up:
        caps["prompts"] = {"listChanged": True}
    if "resources" in up:
        caps["resources"] = {"listChanged": True, "subscribe": bool(up["resources"].get("subscribe"))}
    if "completions" in up:
        caps["completions"] = {}
    return caps
