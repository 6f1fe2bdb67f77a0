"""A host's server entry as an entry of mcpx's own config, for `mcpx install-host` moving a host's
servers behind mcpx: moved as it is (other hosts' keys pass, host_keys.py), Codex's TOML keys
translated, or left in the host's file with the reason, whenever mcpx would not serve it as the host
does. Pure: the caller reads and writes the files."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import expand
from .model import ConfigError, parse_config

# Variables only VS Code and Cursor expand (their own, not the environment's): a daemon cannot.
HOST_VARIABLES = ("workspaceFolder", "workspaceFolderBasename", "userHome", "pathSeparator", "fileWorkspaceFolder")

# Ways a host authenticates to a remote server that mcpx does not run (host_keys.ignored_auth).
HOST_AUTH = ("oauth", "headersHelper", "auth")

# Codex's `[mcp_servers.<name>]` keys (https://developers.openai.com/codex/mcp) that map onto mcpx's.
CODEX_SAME = ("command", "args", "env", "cwd", "url")
# Codex's keys mcpx has no use for: its start-up wait, and `env_vars` (names passed through from
# Codex's environment; mcpx passes its whole environment to a stdio server).
CODEX_IGNORED = ("startup_timeout_sec", "startup_timeout_ms", "env_vars")
CODEX_TRANSLATED = ("http_headers", "env_http_headers", "bearer_token_env_var", "enabled", "tool_timeout_sec")


@dataclass(frozen=True)
class Moving:
    entry: dict[str, Any]  # in mcpx's shape
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Staying:
    why: str


class _Placeholders(Mapping[str, str]):
    """The environment, with any variable it lacks set to a URL-shaped stand-in: checks an entry's shape
    whatever its `${VAR}`s hold where the daemon runs."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def __getitem__(self, key: str) -> str:
        return self.environ.get(key, "http://unset.invalid")

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def checkable(environ: Mapping[str, str]) -> Mapping[str, str]:
    return _Placeholders(environ)


def for_mcpx(name: str, entry: object, *, codex: bool, host_file: Path, environ: Mapping[str, str]) -> Moving | Staying:
    """What becomes of one of the host's servers: `Moving` (its entry for mcpx's config, and what the
    user should know) or `Staying` (why mcpx would not serve it as the host does)."""
    if not isinstance(entry, dict):
        return Staying("not an object")
    if codex:
        translated = _from_codex(entry)
        if isinstance(translated, Staying):
            return translated
        entry = translated
    else:
        entry = dict(entry)
    kind = entry.get("type")
    if isinstance(kind, str) and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        return Staying(f"type {kind!r}: mcpx speaks stdio and Streamable HTTP only")
    for key in HOST_AUTH:
        if key in entry:
            return Staying(f"{key!r}: the host signs in for it, mcpx sends only `headers`")
    for variable in HOST_VARIABLES:
        if f"${{{variable}}}" in repr(entry):
            return Staying(f"uses ${{{variable}}}, which only the host expands")
    env_file = entry.get("envFile")
    if isinstance(env_file, str) and env_file and "${" not in env_file and not Path(env_file).is_absolute():
        entry["envFile"] = str(host_file.parent / env_file)  # mcpx reads it relative to its own file
    try:
        parse_config({"mcpServers": {name: entry}}, str(host_file), checkable(environ), host_file.parent)
    except ConfigError as exc:
        return Staying(_without_source(str(exc), str(host_file)))
    notes = [
        f"{variable} is not set here: taken along as-is; the daemon must see it where it starts (a daemon that"
        " `mcpx serve` starts inherits the host's environment), or mcpx refuses its config"
        for variable in expand.unset_variables(entry, environ)
    ]
    return Moving(entry, notes)


def _from_codex(entry: dict[str, Any]) -> dict[str, Any] | Staying:
    for key in entry:
        if key in ("enabled_tools", "disabled_tools"):
            return Staying(f"{key!r}: mcpx has no per-server tool filter, so it would offer every tool")
        if key not in (*CODEX_SAME, *CODEX_IGNORED, *CODEX_TRANSLATED):
            return Staying(f"{key!r} is a Codex key mcpx has no equivalent for")
    for key in ("http_headers", "env_http_headers"):
        if not isinstance(entry.get(key, {}), dict):
            return Staying(f"{key!r} is not a table")
    out: dict[str, Any] = {key: entry[key] for key in CODEX_SAME if key in entry}
    headers: dict[str, Any] = dict(entry.get("http_headers", {}))
    for header, variable in entry.get("env_http_headers", {}).items():
        headers[header] = f"${{{variable}}}"
    if "bearer_token_env_var" in entry:
        headers["Authorization"] = f"Bearer ${{{entry['bearer_token_env_var']}}}"
    if headers:
        out["headers"] = headers
    if entry.get("enabled") is False:
        out["disabled"] = True
    if "tool_timeout_sec" in entry:
        out["mcpx"] = {"callTimeout": entry["tool_timeout_sec"]}
    return out


def _without_source(message: str, source: str) -> str:
    return "; ".join(
        re.sub(rf"^{re.escape(source)}: (mcpServers\.[^:]*: )?", "", line) for line in message.splitlines()
    )
