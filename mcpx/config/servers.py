"""One entry of `mcpServers` and its `mcpx` block: the part of the config other hosts share."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import urls
from .oauth import OAuthConfig

TaskSupport = Literal["forbidden", "optional", "required"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolOverride(_Strict):
    taskSupport: TaskSupport | None = Field(
        None,
        description="What hosts are told of running the tool as a task (2025-11-25 `execution.taskSupport`;"
        " 2026: `required` becomes a task at once, `forbidden` never). Unset: `optional`, whatever the upstream"
        " declared: mcpx holds the task, and follows an upstream's own task where the upstream requires one.",
    )
    callTimeout: float | None = Field(None, gt=0, description="Seconds before a call to this tool is abandoned.")


class McpxServerOptions(_Strict):
    namespace: str | None = Field(
        None, description="Prefix for this server's tools (`<namespace>__<tool>`); default: the server's key."
    )
    passthrough: bool = Field(
        False, description="Expose this server's tools, prompts and resources under their own names."
    )
    callTimeout: float | None = Field(None, gt=0, description="Seconds before a call is abandoned (default: none).")
    maxInFlight: int = Field(
        1024,
        gt=0,
        description="Host requests this server may have in flight through mcpx at once (tool calls, reads,"
        " prompts; a call the server runs as a task of its own counts until that task ends); one more is"
        " refused with -32600 naming this limit, a 2025-11-25 task before it gets a handle.",
    )
    tools: dict[str, ToolOverride] = Field(
        default_factory=dict, description="Per-tool overrides, keyed by the upstream's tool name."
    )
    approve: list[str] = Field(
        default_factory=list,
        description="Tools (globs of the server's own names or the names hosts see, e.g. `delete_*`) whose calls"
        " wait for an operator's approval before they reach the server (docs/approvals.md).",
    )
    approveTimeoutMs: int | None = Field(
        None, gt=0, description="How long such a call waits for an approval; unset: the top-level `approveTimeoutMs`."
    )
    scope: Literal["shared", "host"] = Field(
        "shared",
        description="`shared`: one process serves every host. `host` (stdio servers only): each host connection"
        " gets a process of its own, started on its first call and stopped when the connection closes or idles"
        " (`idleStopS`), but kept while that host's tasks run on it (a task outlives its host, up to its TTL;"
        " another connection of its owner collects it). Every question the process asks is its host's: asked"
        " of that host when it declared the capability, else an operator's; no host sees another's state. One"
        " more process lists the server's tools for everyone.",
    )
    maxInstances: int = Field(
        16,
        gt=0,
        description="With `scope: host`: the most processes of this server at once. A host's first call beyond it"
        " waits up to `roomWaitS` for one to stop, then fails with -32600 naming this limit.",
    )
    roomWaitS: float = Field(
        10,
        ge=0,
        description="With `scope: host`: how long a host's first call beyond `maxInstances` waits for another"
        " host's process to stop before it fails.",
    )
    idleStopS: float = Field(
        300,
        gt=0,
        description="With `scope: host`: a host's process with no call and no task running for this long is"
        " stopped (once its host has disconnected, it stops as soon as its last task ends).",
    )

    @field_validator("namespace")
    @classmethod
    def _namespace_shape(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", v):
            raise ValueError("namespace must be 1-64 characters of letters, digits, '_', '.', '-'")
        return v


class ServerConfig(BaseModel):
    """One entry of `mcpServers`: a stdio command or a Streamable HTTP URL."""

    # Other hosts put their own keys here (`type`, `alwaysAllow`, ...): parse_config lets through only
    # those host_keys.py lists, and they are kept as extras.
    model_config = ConfigDict(extra="allow")

    command: str | None = Field(None, description="Executable to start as a stdio upstream.")
    args: list[str] = Field(default_factory=list, description="Arguments for `command`.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for `command`.")
    cwd: str | None = Field(None, description="Working directory for `command`.")
    url: str | None = Field(None, description="Streamable HTTP endpoint of an HTTP upstream.")
    disabled: bool = Field(False, description="Not started (the switch other hosts' configs use).")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers sent to `url` (e.g. Authorization)."
    )
    oauth: OAuthConfig | None = Field(
        None,
        description="How mcpx signs in to this HTTP upstream with OAuth 2.1 (see `mcpServers.<name>.oauth`);"
        " unset: discovery and dynamic registration, when the server asks for a sign-in.",
    )
    mcpx: McpxServerOptions = Field(
        default_factory=McpxServerOptions, description="mcpx's own options for this server."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("each server needs exactly one of `command` (stdio) or `url` (HTTP)")
        if self.url is not None:
            try:
                urls.parse_http_url(self.url)  # as the upstream's HTTP client (upstream/http/h1.py) reads it
            except ValueError as exc:
                raise ValueError(f"`url` {exc}") from None
        for name, value in self.headers.items():
            urls.check_header(name, value)
        if self.command is not None and not self.command.strip():
            raise ValueError("`command` is empty: name the program to start")
        for what, text in self._process_texts():
            urls.check_process_text(text, what)
        if self.url is not None and self.mcpx.scope == "host":
            raise ValueError("`mcpx.scope: host` starts a process per host: only for stdio servers (`command`)")
        return self

    def _process_texts(self) -> list[tuple[str, str]]:
        """What a stdio server's process is started with, each named as the config names it."""
        texts = [("`command`", self.command or ""), ("`cwd`", self.cwd or "")]
        texts += [(f"`args[{i}]`", a) for i, a in enumerate(self.args)]
        for key, value in self.env.items():
            if not key or "=" in key:
                raise ValueError(f"`env` key {key!r} cannot name an environment variable (empty, or has '=')")
            texts += [(f"`env` key {key!r}", key), (f"`env.{key}`", value)]
        return texts

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def static_authorization(self) -> bool:
        """`headers` carries an Authorization of its own: mcpx sends it as given and never signs in."""
        return any(name.lower() == "authorization" for name in self.headers)


def runs_mcpx_serve(command: str, args: list[str]) -> bool:
    """`mcpx serve ...` or `python -m mcpx serve ...`: a config entry that is mcpx's own stdio shim
    (config/model.py leaves it out of the servers mcpx starts)."""
    exe = Path(command).name
    if exe in ("mcpx", "mcpx.exe"):
        return args[:1] == ["serve"]
    return exe.startswith("python") and args[:3] == ["-m", "mcpx", "serve"]
