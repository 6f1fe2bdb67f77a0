"""2025-11-25 (and older handshake revisions) session rules. Pure."""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams
from .revisions import negotiate_legacy

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def initialize_result(
    params: dict[str, Any], capabilities: dict[str, Any], server_info: dict[str, Any], instructions: str | None
) -> tuple[str, dict[str, Any]]:
    """Negotiate the version and build InitializeResult. Returns (revision, result)."""
    if not isinstance(params.get("capabilities", {}), dict):
        raise InvalidParams("initialize: capabilities must be an object")
    if "clientInfo" in params and not isinstance(params["clientInfo"], dict):
        raise InvalidParams("initialize: clientInfo must be an object")
    revision = negotiate_legacy(params.get("protocolVersion"))
    res: dict[str, Any] = {"protocolVersion": revision, "capabilities": capabilities, "serverInfo": server_info}
    if instructions:
        res["instructions"] = instructions
    return revision, res


def negotiate_version(params: dict[str, Any]) -> str:
    return negotiate_legacy(params.get("protocolVersion"))


def log_level_allows(threshold: str | None, level: object) -> bool:
    """RFC 5424 ordering; without a setLevel the session gets every message."""
    if threshold is None:
        return True
    try:
        return LOG_LEVELS.index(str(level)) >= LOG_LEVELS.index(threshold)
    except ValueError:
        return True
