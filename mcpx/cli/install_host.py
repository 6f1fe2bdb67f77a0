"""`mcpx install-host HOST`: write (or print) the entry that points a host at mcpx, `mcpx serve` over
stdio by default or the daemon's `/mcp` with `--http`, merged into the host's own config file (other
servers and keys kept), after a backup (`<file>.bak`); a second run changes nothing.
File places and shapes per host: docs/hosts.md (with the hosts' docs cited)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENTRY_NAME = "mcpx"


@dataclass(frozen=True)
class Host:
    servers_key: str  # the object holding the servers: `mcpServers`, VS Code's `servers`, Codex's `mcp_servers`
    project: str | None  # the file for --scope project, relative to the current folder
    user: str  # the file for --scope user, relative to the home folder ("" = by platform)
    typed: bool  # the entry carries `type` (stdio / http)
    takes_url: bool = True  # Claude Desktop's file has stdio servers only (remote ones are added in its UI)


HOSTS: dict[str, Host] = {
    "claude-code": Host("mcpServers", ".mcp.json", ".claude.json", typed=True),
    "cursor": Host("mcpServers", ".cursor/mcp.json", ".cursor/mcp.json", typed=False),
    "vscode": Host("servers", ".vscode/mcp.json", "", typed=True),
    "codex": Host("mcp_servers", ".codex/config.toml", ".codex/config.toml", typed=False),
    "claude-desktop": Host("mcpServers", None, "", typed=False, takes_url=False),
}


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


def entry_for(host: str, http: bool, port: int) -> dict[str, Any]:
    spec = HOSTS[host]
    if http:
        entry: dict[str, Any] = {"url": f"http://127.0.0.1:{port}/mcp"}
        return {"type": "http", **entry} if spec.typed else entry
    command = shutil.which("mcpx") or "mcpx"
    entry = {"command": command, "args": ["serve"]}
    return {"type": "stdio", **entry} if spec.typed else entry


def render_toml_table(name: str, entry: dict[str, Any]) -> str:
    """A minimal TOML writer for one `[mcp_servers.<name>]` table of strings and string lists."""
    lines = [f"[mcp_servers.{name}]"]
    for key, value in entry.items():
        lines.append(f"{key} = {json.dumps(value)}")  # a JSON string or list of strings is valid TOML
    return "\n".join(lines) + "\n"


def merged_json(text: str | None, servers_key: str, entry: dict[str, Any]) -> str | None:
    """The file with our entry set, or None when it already holds exactly that entry."""
    data = json.loads(text) if text and text.strip() else {}
    if not isinstance(data, dict) or not isinstance(data.get(servers_key, {}), dict):
        raise ValueError(f"expected a JSON object with an object {servers_key!r}")
    if data.get(servers_key, {}).get(ENTRY_NAME) == entry:
        return None
    data.setdefault(servers_key, {})[ENTRY_NAME] = entry
    return json.dumps(data, indent=2) + "\n"


def merged_toml(text: str | None, entry: dict[str, Any]) -> str | None:
    text = text or ""
    current = tomllib.loads(text).get("mcp_servers", {}).get(ENTRY_NAME)
    if current == entry:
        return None
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):  # drop our old table (and its sub-tables), keep the rest
        header = line.strip()
        if header.startswith("["):
            name = header.strip("[]").strip()
            skipping = name == f"mcp_servers.{ENTRY_NAME}" or name.startswith(f"mcp_servers.{ENTRY_NAME}.")
        if not skipping:
            kept.append(line)
    body = "".join(kept).rstrip("\n")
    new = (body + "\n\n" if body else "") + render_toml_table(ENTRY_NAME, entry)
    tomllib.loads(new)  # what we write parses
    return new


def install(host: str, path: Path, entry: dict[str, Any]) -> str:
    """Merge the entry into `path`; what happened, for the user."""
    old = path.read_text(encoding="utf-8") if path.exists() else None
    spec = HOSTS[host]
    new = merged_toml(old, entry) if host == "codex" else merged_json(old, spec.servers_key, entry)
    if new is None:
        return f"{path}: already points {host} at mcpx; unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    if old is not None:
        path.with_name(path.name + ".bak").write_text(old, encoding="utf-8")
    path.write_text(new, encoding="utf-8")
    backup = f" (the previous file is {path.name}.bak)" if old is not None else ""
    return f"{path}: {host} now reaches mcpx as {ENTRY_NAME!r}{backup}"


def cmd_install_host(args: argparse.Namespace) -> int:
    spec = HOSTS[args.host]
    if args.http and not spec.takes_url:
        print(f"mcpx: {args.host}'s config file takes stdio servers only; leave out --http", file=sys.stderr)
        return 2
    entry = entry_for(args.host, args.http, args.port)
    if args.print:
        if args.host == "codex":
            print(render_toml_table(ENTRY_NAME, entry), end="")
        else:
            print(json.dumps({spec.servers_key: {ENTRY_NAME: entry}}, indent=2))
        return 0
    if args.file:
        path = Path(args.file)
    elif args.scope == "project" and spec.project is not None:
        path = Path.cwd() / spec.project
    elif args.scope == "project":
        print(f"mcpx: {args.host} has no project file; use --scope user", file=sys.stderr)
        return 2
    else:
        path = user_file(args.host, Path.home())
    try:
        print(install(args.host, path, entry))
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"mcpx: {path}: cannot merge into it: {exc}", file=sys.stderr)
        return 1
    return 0


def add_install_host_parser(sub: Any) -> None:
    p = sub.add_parser(
        "install-host", help="point a host (Claude Code, Cursor, VS Code, Codex, Claude Desktop) at mcpx"
    )
    p.add_argument("host", choices=sorted(HOSTS))
    p.add_argument("--print", action="store_true", help="print the entry instead of writing it")
    p.add_argument("--http", action="store_true", help="the daemon's /mcp URL instead of `mcpx serve` (stdio)")
    p.add_argument("--port", type=int, default=7435, help="the daemon's port for --http (default 7435)")
    p.add_argument("--scope", choices=("project", "user"), default="project", help="the host's project or user file")
    p.add_argument("--file", help="write into this file instead of the host's usual one")
    p.set_defaults(func=cmd_install_host)
