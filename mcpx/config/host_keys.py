"""Which keys a config may hold: mcpx's own (the models), the ones other hosts write (a documented
allow-list, each naming the host it comes from), and nothing else. An unknown key is an error that
names it, where it is, and the key it most likely meant, so a typo never passes quietly.

docs/hosts.md's key table is generated from `SERVER_KEYS_FROM_OTHER_HOSTS` and `TOP_LEVEL_FROM_OTHER_HOSTS`.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from .doc_blocks import rewrite_block

Where = tuple[str | int, ...]


@dataclass(frozen=True)
class ForeignKey:
    """A key another host writes into the same file: tolerated, and what mcpx does with it."""

    hosts: str
    mcpx_does: str


CLAUDE_CODE = "https://code.claude.com/docs/en/mcp"
VSCODE = "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration"
CURSOR = "https://cursor.com/docs/context/mcp"
CLINE = "https://docs.cline.bot/mcp/configuring-mcp-servers"
ROO = "https://docs.roocode.com/features/mcp/using-mcp-in-roo"
WINDSURF = "https://docs.windsurf.com/windsurf/cascade/mcp"
GEMINI = "https://geminicli.com/docs/tools/mcp-server/"
CLAUDE_DESKTOP = "https://modelcontextprotocol.io/quickstart/user"
ZED = "https://zed.dev/docs/ai/mcp"

IGNORED = "ignored"
SERVER_KEYS_FROM_OTHER_HOSTS: dict[str, ForeignKey] = {
    "type": ForeignKey(
        "Claude Code, VS Code, Cursor, Cline, Roo Code (`stdio`, `http`, `sse`, `streamable-http`, ...)",
        "ignored: mcpx picks the transport from `command` or `url` and speaks Streamable HTTP to a `url`",
    ),
    "headersHelper": ForeignKey("Claude Code (a command that prints headers)", "ignored: give `headers` instead"),
    "oauth": ForeignKey(
        "Claude Code, VS Code, Gemini CLI (OAuth client settings)",
        'honoured: mcpx signs in with OAuth 2.1 (`mcpx login NAME`; README "Remote servers that need a login")',
    ),
    "envFile": ForeignKey("VS Code, Cursor (a dotenv file for a stdio server)", "honoured: read into `env`"),
    "dev": ForeignKey("VS Code (`watch`, `debug` of a server under development)", IGNORED),
    "sandboxEnabled": ForeignKey("VS Code (run the server sandboxed)", IGNORED),
    "sandbox": ForeignKey("VS Code (the sandbox's file and network rules)", IGNORED),
    "gallery": ForeignKey("VS Code (server installed from the MCP gallery)", IGNORED),
    "version": ForeignKey("VS Code (server installed from the MCP gallery)", IGNORED),
    "auth": ForeignKey("Cursor (static OAuth client for a remote server)", "ignored: give `headers` instead"),
    "disabled": ForeignKey("Cline, Roo Code, Windsurf, Kilo Code", "honoured: the server is not started"),
    "alwaysAllow": ForeignKey("Cline, Roo Code, Kilo Code (tools run without asking)", IGNORED),
    "autoApprove": ForeignKey("Cline (tools run without asking)", IGNORED),
    "disabledTools": ForeignKey("Roo Code, Windsurf (tools hidden from the model)", IGNORED),
    "timeout": ForeignKey(
        "Cline, Roo Code (seconds), Claude Code, Gemini CLI (milliseconds)", "ignored: use `mcpx.callTimeout`"
    ),
    "watchPaths": ForeignKey("Roo Code (restart the server when these change)", IGNORED),
    "serverUrl": ForeignKey("Windsurf (its name for `url`)", "honoured: read as `url` when `url` is absent"),
    "httpUrl": ForeignKey("Gemini CLI (its name for a Streamable HTTP `url`)", "honoured: read as `url`"),
    "trust": ForeignKey("Gemini CLI (skip confirmations)", IGNORED),
    "description": ForeignKey("Gemini CLI", IGNORED),
    "includeTools": ForeignKey("Gemini CLI (tools offered to the model)", IGNORED),
    "excludeTools": ForeignKey("Gemini CLI (tools hidden from the model)", IGNORED),
    "authProviderType": ForeignKey("Gemini CLI", IGNORED),
}
# Gemini CLI's keys inside `oauth` that mcpx does not need: it discovers the endpoints (RFC 9728,
# RFC 8414) and picks its own redirect URI.
OAUTH_KEYS_FROM_OTHER_HOSTS: dict[str, ForeignKey] = {
    "enabled": ForeignKey("Gemini CLI", "ignored: mcpx signs in whenever the server asks"),
    "authorizationUrl": ForeignKey("Gemini CLI", "ignored: discovered (give `authServerMetadataUrl` to pin it)"),
    "tokenUrl": ForeignKey("Gemini CLI", "ignored: discovered (give `authServerMetadataUrl` to pin it)"),
    "redirectUri": ForeignKey("Gemini CLI", "ignored: use `callbackPort`"),
    "tokenParamName": ForeignKey("Gemini CLI", IGNORED),
    "audiences": ForeignKey("Gemini CLI", "ignored: mcpx sends the server as `resource` (RFC 8707)"),
}
SOURCES: dict[str, str] = {
    "Claude Code": CLAUDE_CODE,
    "Claude Desktop": CLAUDE_DESKTOP,
    "VS Code": VSCODE,
    "Cursor": CURSOR,
    "Cline": CLINE,
    "Roo Code": ROO,
    "Windsurf": WINDSURF,
    "Gemini CLI": GEMINI,
    "Zed": ZED,
}

# Top-level keys of the files mcpx reads that belong to other hosts; `servers`, `context_servers`
# and `mcp_servers` are other hosts' names for the servers object (see servers_object_problem).
TOP_LEVEL_FROM_OTHER_HOSTS: dict[str, ForeignKey] = {
    "$schema": ForeignKey("JSON editors (a schema for completion)", IGNORED),
    "inputs": ForeignKey("VS Code (prompted values, `${input:id}`)", "ignored: `${input:...}` is refused"),
    "servers": ForeignKey("VS Code (its name for `mcpServers`)", "ignored beside `mcpServers`; alone: an error"),
    "context_servers": ForeignKey("Zed (its settings' servers)", "ignored beside `mcpServers`; alone: an error"),
    "mcp_servers": ForeignKey("Codex (its config.toml's servers)", "ignored beside `mcpServers`; alone: an error"),
    "globalShortcut": ForeignKey("Claude Desktop", IGNORED),
    "preferences": ForeignKey("Claude Desktop", IGNORED),
    "theme": ForeignKey("Gemini CLI, Zed", IGNORED),
    "selectedAuthType": ForeignKey("Gemini CLI", IGNORED),
    "contextFileName": ForeignKey("Gemini CLI", IGNORED),
    "allowMCPServers": ForeignKey("Gemini CLI", IGNORED),
    "excludeMCPServers": ForeignKey("Gemini CLI", IGNORED),
    "coreTools": ForeignKey("Gemini CLI", IGNORED),
    "excludeTools": ForeignKey("Gemini CLI", IGNORED),
    "telemetry": ForeignKey("Gemini CLI", IGNORED),
    "checkpointing": ForeignKey("Gemini CLI", IGNORED),
    "projects": ForeignKey("Claude Code (`~/.claude.json`)", IGNORED),
}
OTHER_HOSTS_SERVER_OBJECTS = {
    "servers": "VS Code's `.vscode/mcp.json`",
    "context_servers": "Zed's settings",
    "mcp_servers": "Codex's config.toml",
}

# Words people write for mcpx's keys; a typo of one (`enviroment`) still finds the key.
SYNONYMS = {
    "environment": "env",
    "environ": "env",
    "arguments": "args",
    "argv": "args",
    "cmd": "command",
    "exec": "command",
    "workingdirectory": "cwd",
    "workdir": "cwd",
    "dir": "cwd",
    "endpoint": "url",
    "header": "headers",
    "disable": "disabled",
    "enabled": "disabled",
}


def _fold(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def did_you_mean(key: str, choices: list[str]) -> str | None:
    """The key of `choices` most likely meant: same but for case or `_`/`-`, a known synonym, or close."""
    folded = {_fold(c): c for c in choices}
    wanted = _fold(key)
    if wanted in folded:
        return folded[wanted]
    targets = dict(folded)
    targets.update((word, folded[_fold(meant)]) for word, meant in SYNONYMS.items() if _fold(meant) in folded)
    close = difflib.get_close_matches(wanted, list(targets), n=1, cutoff=0.7)
    return targets[close[0]] if close else None


def unknown_keys(
    data: Mapping[str, Any], model: type[BaseModel], tolerated: Mapping[type[BaseModel], Mapping[str, object]]
) -> list[tuple[Where, str]]:
    """Every key of `data` (and of the sections inside it) that `model` does not declare and no other
    host writes there, with its message."""
    return list(_walk(data, model, (), tolerated))


def _walk(
    data: Mapping[str, Any],
    model: type[BaseModel],
    where: Where,
    tolerated: Mapping[type[BaseModel], Mapping[str, object]],
) -> Iterator[tuple[Where, str]]:
    fields = model.model_fields
    for key, value in data.items():
        if key in fields:
            yield from _inside(value, fields[key].annotation, (*where, key), tolerated)
        elif key not in tolerated.get(model, {}):
            yield (*where, key), _unknown(key, list(fields), where)


def _inside(
    value: object, annotation: Any, where: Where, tolerated: Mapping[type[BaseModel], Mapping[str, object]]
) -> Iterator[tuple[Where, str]]:
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, dict):
            yield from _walk(value, annotation, where, tolerated)
    elif origin in (Union, types.UnionType):
        for arm in get_args(annotation):
            if isinstance(arm, type) and issubclass(arm, BaseModel):
                yield from _inside(value, arm, where, tolerated)
                return
    elif origin is dict and isinstance(value, dict):
        item = get_args(annotation)[1]
        for key, inner in value.items():
            yield from _inside(inner, item, (*where, key), tolerated)
    elif origin is list and isinstance(value, list):
        item = get_args(annotation)[0]
        for index, inner in enumerate(value):
            yield from _inside(inner, item, (*where, index), tolerated)


def _unknown(key: str, choices: list[str], where: Where) -> str:
    meant = did_you_mean(key, choices)
    hint = f"; did you mean {meant!r}?" if meant else " (not an mcpx option)"
    if not where:
        return f"unknown top-level key {key!r}{hint}"
    if len(where) == 2 and where[0] == "mcpServers":
        return f"unknown key {key!r} in server {where[1]!r}{hint}"
    if len(where) >= 3 and where[0] == "mcpServers":
        return f"unknown key {key!r} in {'.'.join(map(str, where[2:]))} of server {where[1]!r}{hint}"
    return f"unknown key {key!r} in {'.'.join(map(str, where))}{hint}"


def servers_object_problem(data: Mapping[str, Any]) -> tuple[str, str] | None:
    """With no `mcpServers`, a key that names the servers some other way would leave mcpx serving
    nothing: `mcpServer`, `mcpservers`, `mcp_servers` (one edit away), or another host's name."""
    if "mcpServers" in data:
        return None
    for key in data:
        if key in OTHER_HOSTS_SERVER_OBJECTS:
            return key, (
                f"top-level {key!r} is {OTHER_HOSTS_SERVER_OBJECTS[key]} name for the servers, and there is no"
                " 'mcpServers': mcpx reads 'mcpServers' (rename the key)"
            )
        if _edits(_fold(key), "mcpservers") <= 1 or _edits(key, "mcpServers") <= 1:
            return key, f"unknown top-level key {key!r}; did you mean 'mcpServers'? (without it mcpx serves nothing)"
    return None


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (the configs' keys are short)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def ignored_auth(servers: object) -> list[str]:
    """Notes for servers that rely on another host's way of authenticating, which mcpx does not run."""
    notes = []
    for name, entry in servers.items() if isinstance(servers, dict) else ():
        if isinstance(entry, dict) and "oauth" in entry and "command" in entry:
            notes.append(f"server {name!r}: 'oauth' is for HTTP upstreams (`url`); a stdio server's is ignored")
        for key in ("headersHelper", "auth"):
            if isinstance(entry, dict) and key in entry:
                notes.append(
                    f"server {name!r}: {key!r} ({SERVER_KEYS_FROM_OTHER_HOSTS[key].hosts}) is ignored by mcpx;"
                    " if the server needs it, give the credentials in `headers`"
                )
    return notes


def render_host_keys() -> str:
    """docs/hosts.md's table of the keys other hosts write, from the lists above."""
    out = ["| where | key | written by | what mcpx does |", "|---|---|---|---|"]
    for where, keys in (
        ("top level", TOP_LEVEL_FROM_OTHER_HOSTS),
        ("`mcpServers.<name>`", SERVER_KEYS_FROM_OTHER_HOSTS),
        ("`mcpServers.<name>.oauth`", OAUTH_KEYS_FROM_OTHER_HOSTS),
    ):
        for key, foreign in keys.items():
            out.append(f"| {where} | `{key}` | {foreign.hosts} | {foreign.mcpx_does} |")
    out.append("")
    out.append("Sources: " + ", ".join(f"[{host}]({url})" for host, url in SOURCES.items()) + ".")
    return "\n".join(out)


HOSTS_DOC = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"  # the checkout's, beside mcpx/

if __name__ == "__main__":
    rewrite_block(HOSTS_DOC, "host-keys", render_host_keys())
