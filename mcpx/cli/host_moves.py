"""Moving a host's servers into mcpx's config, and back (`install-host --undo`).

`<host file>.bak` keeps the host's file as it was before mcpx was put in front: written by the run that
first adds the `mcpx` entry, and a later run adds to it each server it moves. `--undo` puts those
servers back into the host's file (other changes made to it since are kept), takes them out of mcpx's
config unless they were changed there since, and removes the `mcpx` entry (or puts back the one the
file had before). mcpx's config is backed up (`.bak`) before each change."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.from_hosts import Moving, Staying, checkable, for_mcpx
from ..config.model import ConfigError, parse_config, runs_mcpx_serve
from .host_files import ENTRY_NAME, HOSTS, ServersFile, write_atomically


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def is_mcpx_entry(name: str, entry: object) -> bool:
    """Our own entry, or another that reaches mcpx the same way (the host keeps one)."""
    if name == ENTRY_NAME:
        return True
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return isinstance(command, str) and isinstance(args, list) and runs_mcpx_serve(command, args)


@dataclass
class McpxConfig:
    """mcpx's own config file (JSON), where the host's servers go."""

    path: Path
    old: str | None
    data: dict[str, Any]

    @classmethod
    def read(cls, path: Path) -> McpxConfig:
        old = path.read_text(encoding="utf-8") if path.exists() else None
        data = json.loads(old) if old and old.strip() else {}
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            raise ValueError(f"{path}: expected a JSON object with an object 'mcpServers'")
        return cls(path, old, data)

    @property
    def servers(self) -> dict[str, Any]:
        return dict(self.data.get("mcpServers", {}))

    def problem_with(self, data: dict[str, Any]) -> str | None:
        """Why mcpx would refuse `data` as this file (its `${VAR}`s aside: they are the daemon's)."""
        try:
            parse_config(data, str(self.path), checkable(os.environ), self.path.parent)
        except ConfigError as exc:
            return str(exc)
        return None

    def with_servers(self, servers: dict[str, Any]) -> dict[str, Any]:
        return {**self.data, "mcpServers": servers}

    def text(self) -> str:
        return json.dumps(self.data, indent=2) + "\n"


@dataclass
class Outcome:
    moved: dict[str, list[str]] = field(default_factory=dict)  # name: what the user should know
    stayed: dict[str, str] = field(default_factory=dict)  # name: why
    dropped: list[str] = field(default_factory=list)  # other entries that reached mcpx
    backups: list[Path] = field(default_factory=list)
    host_changed: bool = False


def install(host: str, path: Path, entry: dict[str, Any], config: McpxConfig) -> Outcome:
    """Move the host's servers into mcpx's config and leave the host one `mcpx` entry; write the files
    (each backed up first) only if something changes."""
    hosts = ServersFile.read(host, path)
    backup = backup_of(path)
    # Before mcpx: no `mcpx` entry yet (or no backup of a file that has one) makes a new backup.
    kept = ServersFile.read(host, backup) if ENTRY_NAME in hosts.servers() and backup.exists() else None
    out = Outcome()
    config_changed = kept_changed = False
    for name, server in hosts.servers().items():
        if name == ENTRY_NAME:
            continue
        if not is_mcpx_entry(name, server):
            fate = _fate(host, path, name, server, config)
            if isinstance(fate, Staying):
                out.stayed[name] = fate.why
                continue
            if name not in config.servers:
                config.data, config_changed = config.with_servers({**config.servers, name: fate.entry}), True
            out.moved[name] = fate.notes
        else:
            out.dropped.append(name)
        if kept is not None and name not in kept.servers():
            kept.put(name, hosts.raw(name))
            kept_changed = True
        hosts.remove(name)
    out.host_changed = hosts.servers().get(ENTRY_NAME) != entry or bool(out.moved or out.dropped)
    hosts.put(ENTRY_NAME, entry)
    if config_changed:  # first, so that a failure in between leaves a server in both files, not in neither
        if config.old is not None:
            write_atomically(backup_of(config.path), config.old, no_wider_than=config.path)
            out.backups.append(backup_of(config.path))
        write_atomically(config.path, config.text(), no_wider_than=path)
    if out.host_changed:
        if kept is None and hosts.old is not None:
            write_atomically(backup, hosts.old, no_wider_than=path)
        elif kept is not None and kept_changed:
            write_atomically(backup, kept.text(), no_wider_than=path)
        if backup.exists():
            out.backups.append(backup)
        write_atomically(path, hosts.text())
    return out


def _fate(host: str, path: Path, name: str, server: object, config: McpxConfig) -> Moving | Staying:
    fate = for_mcpx(name, server, codex=HOSTS[host].toml, host_file=path, environ=os.environ)
    if isinstance(fate, Staying):
        return fate
    existing = config.servers.get(name)
    if existing is not None:
        return fate if existing == fate.entry else Staying(f"mcpx's config already has a different server {name!r}")
    problem = config.problem_with(config.with_servers({**config.servers, name: fate.entry}))
    return fate if problem is None else Staying(f"mcpx's config would not load with it: {problem}")


def undo(host: str, path: Path, config_path: Path) -> list[str]:
    """Put the host's servers back (from its `.bak`) and take them out of mcpx's config; what was done."""
    backup = backup_of(path)
    now = ServersFile.read(host, path)
    if not backup.exists():
        if ENTRY_NAME not in now.servers():
            return [f"{path}: no {backup.name} and no {ENTRY_NAME!r} entry: nothing to undo"]
        now.remove(ENTRY_NAME)
        if now.holds_only_servers():
            path.unlink()
            return [f"{path}: removed (install-host had made it, for the {ENTRY_NAME!r} entry alone)"]
        write_atomically(path, now.text())
        return [f"{path}: the {ENTRY_NAME!r} entry is removed"]
    before = ServersFile.read(host, backup)
    config = McpxConfig.read(config_path)
    returned, taken, left = [], [], []
    for name, server in before.servers().items():
        if name == ENTRY_NAME or name in now.servers():
            continue
        now.put(name, before.raw(name))
        returned.append(name)
        fate = None if is_mcpx_entry(name, server) else _fate(host, path, name, server, config)
        if isinstance(fate, Moving) and config.servers.get(name) == fate.entry:
            config.data = config.with_servers({k: v for k, v in config.servers.items() if k != name})
            taken.append(name)
        elif fate is not None and name in config.servers:
            left.append(name)
    if ENTRY_NAME in before.servers() and before.servers()[ENTRY_NAME] != now.servers().get(ENTRY_NAME):
        now.put(ENTRY_NAME, before.raw(ENTRY_NAME))  # the entry it had before this install-host
    elif ENTRY_NAME in now.servers():
        now.remove(ENTRY_NAME)
    said = [f"{path}: the {ENTRY_NAME!r} entry is gone" + (f"; back in it: {', '.join(returned)}" if returned else "")]
    if taken and config.data == {"mcpServers": {}}:
        config_path.unlink()
        said.append(f"{config_path}: removed (it held only the servers moved from {path.name})")
    elif taken:
        write_atomically(backup_of(config_path), config.old or "", no_wider_than=config_path)
        write_atomically(config_path, config.text())
        said.append(
            f"{config_path}: no longer serves {', '.join(taken)} (previous file: {backup_of(config_path).name})"
        )
    if left:
        said.append(f"{config_path}: still serves {', '.join(left)} (changed there since they moved)")
    write_atomically(path, now.text())
    backup.unlink()
    return said
