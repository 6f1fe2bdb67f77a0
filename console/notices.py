"""Feed events the console shows as a notification (a toast) rather than a row: config reloads, and
background work of the daemon that failed (docs/daemon-behavior.md, "Background work").

Pure: a feed message in, what to say (or None) out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    title: str
    text: str
    severity: Severity


def _names(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def config_notice(message: Mapping[str, Any]) -> Notice | None:
    """`config.reloaded` / `config.refused` (docs/api.md) as one toast; None for any other message."""
    if message.get("type") != "event":
        return None
    data = message.get("data")
    data = data if isinstance(data, Mapping) else {}
    kind = message.get("kind")
    if kind == "config.refused":
        return Notice("config refused", f"{data.get('error')}\nstill serving the config it had", "error")
    if kind == "daemon.background_failed":
        then = f"starting it again in {data.get('retryInS')} s" if data.get("action") == "restarting" else "dropped"
        return Notice(f"{data.get('task')} failed", f"{data.get('error')}\n{then}; the daemon serves on", "error")
    if kind != "config.reloaded":
        return None
    done = [
        f"{what}: {', '.join(_names(data, what))}" for what in ("added", "removed", "changed") if _names(data, what)
    ]
    text = "\n".join(done) or "no server changed"
    restart = _names(data, "needsRestart")
    if restart:
        text += f"\nneeds a restart: {', '.join(restart)}"
    return Notice("config reloaded", text, "warning" if restart else "information")
