"""The hosts `mcpx install-host` knows: where each keeps its servers (docs/hosts.md cites each host's
docs) and their file read and written in its own format: JSON, or Codex's TOML through tomlkit, which
keeps the file's comments and layout. Where mcpx's own config goes for each scope is decided here too."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.items

ENTRY_NAME = "mcpx"


@dataclass(frozen=True)
class Host:
    servers_key: str  # the object holding the servers: `mcpServers`, VS Code's `servers`, Codex's `mcp_servers`
    project: str | None  # the file for --scope project, relative to the current folder
    user: str  # the file for --scope user, relative to the home folder ("" = by platform)
    typed: bool  # the entry carries `type` (stdio / http)
    takes_url: bool = True  # Claude Desktop's file has stdio servers only (remote ones are added in its UI)
    toml: bool = False


HOSTS: dict[str, Host] = {
    "claude-code": Host("mcpServers", ".mcp.json", ".claude.json", typed=True),
    "cursor": Host("mcpServers", ".cursor/mcp.json", ".cursor/mcp.json", typed=False),
    "vscode": Host("servers", ".vscode/mcp.json", "", typed=True),
    "codex": Host("mcp_servers", ".codex/config.toml", ".codex/config.toml", typed=False, toml=True),
    "claude-desktop": Host("mcpServers", None, "", typed=False, takes_url=False),
}

PROJECT_CONFIG = ".mcpx.json"  # found by the config search from the project's folder, before ./.mcp.json


def user_file(host: str, home: Path) -> Path:
    """The host's user-level file on this platform."""
    if host == "claude-desktop":
        if sys.platform == "darwin":
            return home / "Library/Application Support/Claude/claude_desktop_config.json"
        if sys.platform == "win32":
            return Path(os.environ.get("APPDATA") or home / "AppData/Roaming") / "Claude/claude_desktop_config.json"
        return home / ".config/Claude/claude_desktop_config.json"  # no official Linux build; where ports read it
    if host == "vscode":
        if sys.platform == "darwin":
            return home / "Library/Application Support/Code/User/mcp.json"
        if sys.platform == "win32":
            return Path(os.environ.get("APPDATA") or home / "AppData/Roaming") / "Code/User/mcp.json"
        return home / ".config/Code/User/mcp.json"
    return home / HOSTS[host].user


def mcpx_config_for(scope: str, explicit: str | None, cwd: Path) -> Path:
    """Where the host's servers go: `--config`, else `MCPX_CONFIG`, else the scope's own place: a
    project's `./.mcpx.json` (beside `.mcp.json`, and searched before it), the user's
    `$XDG_CONFIG_HOME/mcpx/config.json` (the search's last place, for every folder)."""
    chosen = explicit or os.environ.get("MCPX_CONFIG")
    if chosen:
        return Path(chosen).expanduser().absolute()
    if scope == "project":
        return cwd / PROJECT_CONFIG
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return (xdg / "mcpx" / "config.json").absolute()


class ServersFile:
    """One host's file, parsed: its servers object read and changed in place, the rest kept."""

    def __init__(self, host: str, path: Path, text: str | None) -> None:
        self.host, self.path, self.spec = host, path, HOSTS[host]
        self.old = text
        self.doc: Any
        if self.spec.toml:
            self.doc = tomlkit.parse(text or "")
        else:
            self.doc = json.loads(text) if text and text.strip() else {}
            if not isinstance(self.doc, dict):
                raise ValueError("expected a JSON object at the top")
        servers = self.doc.get(self.spec.servers_key, {})
        if not isinstance(servers, dict):
            raise ValueError(f"expected {self.spec.servers_key!r} to be a table of servers")

    @classmethod
    def read(cls, host: str, path: Path) -> ServersFile:
        return cls(host, path, path.read_text(encoding="utf-8") if path.exists() else None)

    def servers(self) -> dict[str, Any]:
        """The servers, as plain JSON-like values."""
        servers = self.doc.get(self.spec.servers_key, {})
        return dict(servers.unwrap() if hasattr(servers, "unwrap") else servers)  # a table, or tables apart

    def remove(self, name: str) -> None:
        servers = self.doc[self.spec.servers_key]
        if not self.spec.toml:
            del servers[name]
            return
        # tomlkit counts the comment lines above a table's header as the end of the table before it:
        # they stay, above whatever now comes next.
        names = list(servers)
        at = names.index(name)
        tail = _trailing_comments(servers[name])
        del servers[name]
        if not tail:
            return
        following = servers[names[at + 1]] if at + 1 < len(names) else self._table_after_servers()
        if following is not None:
            following.trivia.indent = "".join(item.as_string() for item in tail) + following.trivia.indent
        else:  # the servers end the file
            for item in tail:
                self.doc.append(None, item)

    def _table_after_servers(self) -> tomlkit.items.Table | None:
        """The first table whose header follows the servers' tables."""
        keys = [key.key if key is not None else None for key, _ in self.doc.body]
        if self.spec.servers_key not in keys:
            return None
        for _, item in self.doc.body[keys.index(self.spec.servers_key) + 1 :]:
            while isinstance(item, tomlkit.items.Table) and item.is_super_table() and item.value.body:
                item = item.value.body[0][1]
            if isinstance(item, tomlkit.items.Table):
                return item
        return None

    def raw(self, name: str) -> Any:
        """A server as the file holds it (for TOML: its table, with its comments)."""
        return self.doc[self.spec.servers_key][name]

    def put(self, name: str, entry: Any) -> None:
        """Set a server (a plain value, or another file's `raw`), in place of one of that name."""
        if not self.spec.toml:
            self.doc.setdefault(self.spec.servers_key, {})[name] = entry
            return
        if self.spec.servers_key not in self.doc:
            self.doc[self.spec.servers_key] = tomlkit.table(is_super_table=True)
        if name in self.doc[self.spec.servers_key]:
            self.remove(name)
        table = entry if isinstance(entry, tomlkit.items.Table) else tomlkit.table()
        if table is not entry:
            table.update(entry)
        if not table.as_string().endswith("\n\n"):
            table.add(tomlkit.nl())  # a blank line before the next table, as the file's others have
        self.doc[self.spec.servers_key][name] = table

    def holds_only_servers(self) -> bool:
        return not self.servers() and set(self.doc) <= {self.spec.servers_key}

    def text(self) -> str:
        if self.spec.toml:
            return str(tomlkit.dumps(self.doc))
        return json.dumps(self.doc, indent=2) + "\n"


def _last_table(table: tomlkit.items.Table) -> tomlkit.items.Table:
    """The table whose lines come last in the file: `table`, or its last sub-table."""
    while table.value.body and isinstance(table.value.body[-1][1], tomlkit.items.Table):
        table = table.value.body[-1][1]
    return table


def _trailing_comments(table: tomlkit.items.Table) -> list[Any]:
    """The comment lines (and the blank lines between them) at the very end of a table."""
    body = _last_table(table).value.body
    start = len(body)
    while start and isinstance(body[start - 1][1], tomlkit.items.Comment | tomlkit.items.Whitespace):
        start -= 1
    run = [item for _, item in body[start:]]
    first = next((i for i, item in enumerate(run) if isinstance(item, tomlkit.items.Comment)), None)
    return [] if first is None else run[first:]


def render_entry(host: str, entry: dict[str, Any]) -> str:
    """The host's entry alone, as `--print` shows it."""
    spec = HOSTS[host]
    if spec.toml:
        doc = tomlkit.document()
        servers = tomlkit.table(is_super_table=True)
        servers[ENTRY_NAME] = entry
        doc[spec.servers_key] = servers
        return str(tomlkit.dumps(doc))
    return json.dumps({spec.servers_key: {ENTRY_NAME: entry}}, indent=2) + "\n"


def write_atomically(path: Path, text: str, *, no_wider_than: Path | None = None) -> None:
    """Replace the file whole (a reader sees the old file or the new one), keeping its mode, and no
    more open than `no_wider_than`: a backup of a private file (`~/.claude.json`), or mcpx's config
    taking servers (and their tokens) from one, stays private."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
    if no_wider_than is not None and no_wider_than.exists():
        mode &= no_wider_than.stat().st_mode & 0o777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
