"""What reloading the config changes (docs/daemon-behavior.md, "Reloading the config"). Pure.

`mcpServers`, `notify` and the approval gates' `approve` and `approveTimeoutMs` are applied to a
running daemon (LIVE). Each server entry is compared whole, so any edit to one (its command, env,
URL, headers, its `mcpx` block, a key another host keeps there) restarts that server, and a server
whose entry is the same keeps running untouched; the approval gates read the config in force.
Every other top-level setting that differs is named as needing a restart and otherwise ignored:
the listener, the store, the engine's limits and the rest were built from the config the daemon
started with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from .model import Config, ServerConfig

LIVE = frozenset({"mcpServers", "notify", "approve", "approveTimeoutMs"})  # the top-level keys a reload applies
Trigger = Literal["signal", "file", "api"]


@dataclass(frozen=True)
class ServerChanges:
    """Server keys by what a reload does to them; each list in its config's order."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def listing_changes(self) -> bool:
        """Some server's tools, prompts or resources come or go."""
        return bool(self.added or self.removed or self.changed)


def _spec(server: ServerConfig) -> dict[str, Any]:
    return server.model_dump(mode="json")


def diff_servers(old: Mapping[str, ServerConfig], new: Mapping[str, ServerConfig]) -> ServerChanges:
    """The running servers (`old`) against the ones a new config would run (both without the
    `disabled` ones: disabling a server removes it, enabling one adds it)."""
    return ServerChanges(
        added=tuple(key for key in new if key not in old),
        removed=tuple(key for key in old if key not in new),
        changed=tuple(key for key in new if key in old and _spec(new[key]) != _spec(old[key])),
        unchanged=tuple(key for key in new if key in old and _spec(new[key]) == _spec(old[key])),
    )


def needs_restart(running: Config, new: Config) -> tuple[str, ...]:
    """The settings outside `mcpServers` that differ, as dotted paths (`daemon.port`, `store.url`,
    `auth`): a section's own fields are named one by one, anything else by its top-level key."""
    names: list[str] = []
    for key in Config.model_fields:
        if key in LIVE:
            continue
        was, now = getattr(running, key), getattr(new, key)
        if isinstance(was, BaseModel) and isinstance(now, BaseModel) and type(was) is type(now):
            names += [f"{key}.{f}" for f in type(was).model_fields if _dump(getattr(was, f)) != _dump(getattr(now, f))]
        elif _dump(was) != _dump(now):
            names.append(key)
    return tuple(names)


def _dump(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class ReloadOutcome:
    """One reload, applied or refused: the feed's event and `mcpx status` say the same."""

    trigger: Trigger
    at_ms: int
    path: str | None
    changes: ServerChanges = field(default_factory=ServerChanges)
    restart_needed: tuple[str, ...] = ()
    error: str | None = None  # set: refused, and the running config kept

    @property
    def applied(self) -> bool:
        return self.error is None

    def source(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "path": self.path}

    def change_lists(self) -> dict[str, Any]:
        c = self.changes
        return {
            "added": list(c.added),
            "removed": list(c.removed),
            "changed": list(c.changed),
            "needsRestart": list(self.restart_needed),
        }

    def wire(self) -> dict[str, Any]:
        """As /v1 shows it (models.ConfigReload)."""
        return {
            "result": "applied" if self.applied else "refused",
            "atMs": self.at_ms,
            "error": self.error,
            **self.source(),
            **self.change_lists(),
        }

    def summary(self) -> str:
        """One line for the log and the CLI."""
        if not self.applied:
            return f"refused, still serving the previous config: {self.error}"
        c = self.changes
        parts = [f"{what} {', '.join(keys)}" for what, keys in (("added", c.added), ("removed", c.removed),
                 ("changed", c.changed)) if keys]  # fmt: skip
        said = "; ".join(parts) if parts else "no server changed"
        if self.restart_needed:
            said += f"; needs a restart (ignored until then): {', '.join(self.restart_needed)}"
        return said
