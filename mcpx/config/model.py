"""mcpx configuration: the `mcpServers` object other MCP hosts use, plus mcpx's own blocks.

Every field is documented where it is declared; `mcpx config-reference` prints the README's
config reference from these models, so the two cannot drift.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ..events.kinds import EventKind
from . import expand, host_keys, urls
from .oauth import OAuthConfig as OAuthConfig
from .servers import McpxServerOptions as McpxServerOptions
from .servers import ServerConfig as ServerConfig
from .servers import TaskSupport as TaskSupport
from .servers import ToolOverride as ToolOverride
from .servers import runs_mcpx_serve as runs_mcpx_serve
from .telemetry import MetricsConfig, TracesConfig


def sha256_hex(token: str) -> str:
    """How a bearer token is kept and compared (`tokenSha256`)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file, the key and what was expected."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DaemonConfig(_Strict):
    address: Literal["127.0.0.1"] = Field("127.0.0.1", description="Listen address; mcpx only ever binds loopback.")
    port: int = Field(7435, ge=0, le=65535, description="Listen port; 0 picks a free one.")
    maxBodyBytes: int = Field(4 * 1024 * 1024, gt=0, description="Largest request body accepted on /mcp (413 beyond).")
    allowedOrigins: list[Annotated[str, AfterValidator(urls.check_origin)]] = Field(
        default_factory=list,
        description="Browser origins allowed besides loopback ones, as browsers send them: `scheme://host[:port]`.",
    )
    publicUrl: Annotated[str, AfterValidator(urls.check_http_url)] | None = Field(
        None,
        pattern=r"^https?://[^/?#]+(/[^?#]*)?$",
        description="The base answer links use (`<publicUrl>/answer/<token>`) when the daemon is reached through a"
        " tunnel you run (Tailscale, SSH); unset: http://127.0.0.1:<port>. The daemon itself stays on loopback"
        " (docs/answer-links.md, docs/security.md).",
    )


class TasksConfig(_Strict):
    ttlMs: int = Field(600_000, gt=0, description="Default lifetime of a task, from creation.")
    maxTtlMs: int = Field(86_400_000, gt=0, description="Largest TTL a host may ask for.")
    pollIntervalMs: int = Field(1000, gt=0, description="Poll interval suggested to hosts.")
    taskAfterMs: int = Field(300, ge=0, description="A modern call still running after this long becomes a task.")
    pollFloorMs: int = Field(
        100,
        ge=0,
        description="A `tasks/get` of the same task sooner than this after the last is answered when the gap"
        " has passed (at once if the task changes meanwhile): a tight polling loop is slowed, never refused."
        " 0: never slowed.",
    )
    maxActivePerOwner: int = Field(
        1000,
        gt=0,
        description="Most unfinished tasks one owner (a legacy session, a connection or a principal) may hold."
        " Beyond it a legacy `params.task` call or a `required` tool gets error -32600 naming this limit;"
        " other 2026 calls run inline instead of becoming tasks.",
    )
    maxActive: int = Field(
        10_000, gt=0, description="Most unfinished tasks of all owners together; hit the same way as the per-owner one."
    )
    requireMcpName: bool = Field(
        True,
        description="2026 `tasks/get|update|cancel` must carry `Mcp-Name: <taskId>` (the extension's MUST)."
        " `false` accepts a missing header (a mismatched one is still -32020) for clients that omit it, such as"
        " fastmcp-tasks 4.1.4; the daemon logs once per client that it relaxed the rule.",
    )


class CallsConfig(_Strict):
    showAfterMs: int = Field(
        500,
        ge=0,
        description="A host's plain tools/call (no task) still running after this long is listed for operators"
        " (/v1/tasks, the feed, the console) with `kind: call`, and an operator may cancel it; one that asks"
        " a question is listed at once. Ended calls stay listed for `tasks.ttlMs`.",
    )


class QuestionsConfig(_Strict):
    waitForOperator: Literal["attached", "always"] = Field(
        "attached",
        description="When the host cannot answer a question: `attached` waits for an operator only while one is"
        " attached (a console), else answers at once as a client without the capability would (an error);"
        " `always` waits for an operator until the question expires.",
    )
    operatorGraceMs: int = Field(
        2000, ge=0, description="With `attached`: how long a question waits for an operator to attach."
    )
    expiryMs: int = Field(600_000, gt=0, description="An unanswered question expires after this long.")
    maxPendingPerTask: int = Field(
        16, gt=0, description="Most open questions one task may have; the upstream's next one gets -32600 naming this."
    )
    maxBytes: int = Field(
        256 * 1024,
        gt=0,
        description="Largest question (its params) and largest answer, as JSON bytes: a larger question is refused"
        " to the upstream (-32600), a larger answer to whoever sent it (-32600, HTTP 413 on /v1) and the question"
        " stays open.",
    )


class ConnectionsConfig(_Strict):
    idleCloseS: float = Field(
        600.0,
        gt=0,
        description="A stateless 2026 host with no request for this long is shown as closed; so is a 2025 session"
        " with no request, no open stream and no call in flight (it stays stored: its next request opens it again).",
    )
    maxRequestsPerSecond: float = Field(
        1000,
        gt=0,
        description="Requests one host connection may send per second, on average (a token bucket); beyond it"
        " HTTP 429 with Retry-After (stdio: error -32600), naming this limit.",
    )
    requestBurst: int = Field(
        2000, gt=0, description="Requests a connection may send at once before that rate applies."
    )
    stallS: float = Field(
        30.0,
        gt=0,
        description="A host stream that takes no byte of one write for this long (a host that stopped reading)"
        " is closed as a slow consumer, whether or not anything else is waiting for it.",
    )


class KeepersConfig(_Strict):
    enabled: bool = Field(
        True,
        description="Run each stdio upstream under a keeper process, so it and its calls outlive a daemon"
        " restart (false: the server is the daemon's own child and dies with it).",
    )
    graceS: float = Field(
        60.0, gt=0, description="A keeper whose daemon has not come back within this long stops its server."
    )
    bufferBytes: int = Field(
        16 * 1024 * 1024,
        gt=0,
        description="What a keeper holds of its server's output while no daemon is connected; beyond it lines"
        " are dropped and the next daemon fails the calls they answered.",
    )


class EventsConfig(_Strict):
    maxRows: int = Field(200_000, gt=0, description="Cap on the event log: the oldest go at start and each minute.")
    subscriberQueue: int = Field(
        2048, gt=0, description="Events a feed subscriber may lag behind; then it gets `gap` and the store's events."
    )
    heartbeatS: float = Field(
        15.0, gt=0, description="A feed subscriber is sent a heartbeat after this long without any other message."
    )


class FramesConfig(_Strict):
    """The in-memory log of each task's raw JSON-RPC frames (`/v1/tasks/{id}/frames`): a bounded
    cache, filled as tasks run (every poll adds two frames), never stored."""

    maxTasks: int = Field(2000, gt=0, description="Tasks whose frames are kept; the least recently active go first.")
    perTask: int = Field(200, gt=0, description="Frames kept per task: its newest.")
    maxFrameBytes: int = Field(32 * 1024, gt=0, description="A longer frame is kept cut to this many characters.")
    budgetBytes: int = Field(
        16 * 1024 * 1024,
        gt=0,
        description="All kept frames together, in characters; past it the least recently active tasks' frames go.",
    )


class StoreConfig(_Strict):
    """Where tasks, questions, legacy sessions, host connections and the event log are kept."""

    url: Annotated[str, AfterValidator(urls.check_postgres_url)] | None = Field(
        None,
        pattern=r"^postgres(ql)?://",
        description="A PostgreSQL URL (`postgresql://user@host:port/db`) to share one task space between"
        " several daemons (docs/scale-out.md); unset: the SQLite file in the state folder.",
    )
    instance: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,40}$",
        description="This daemon's name among those sharing `url`; unset: one made once and kept in the state folder.",
    )
    leaseMs: int = Field(
        10_000,
        ge=300,
        description="With `url`: how long a daemon's lease lasts (renewed every third of it); when it runs out,"
        " a survivor takes over its unfinished tasks.",
    )
    keepClosedS: float = Field(
        7 * 86_400,
        gt=0,
        description="Closed history kept this long, then swept (every minute): a legacy session's stored state"
        " once its connection closed, a closed connection that owns no task any more, a closed question."
        " Tasks go at their TTL and events at `events.maxRows`.",
    )
    secretsKeyFile: str | None = Field(
        None,
        description="The key that encrypts what the store keeps secret (upstream OAuth tokens and client secrets):"
        " a file of 32 random bytes in base64, made (0600) if missing; unset: `secrets.key` in the state folder."
        " Daemons sharing a PostgreSQL `url` must point at one key file to share sign-ins (docs/security.md).",
    )
    durability: Literal["power-loss", "process-crash"] = Field(
        "power-loss",
        description="What an acknowledged write (a task handle, an answer, an outcome) survives: `power-loss`"
        " has each commit on disk (fsync; SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`) before"
        " anyone is answered, one commit for every write queued meanwhile; `process-crash` is faster and survives"
        " a crash of mcpx but may lose the last writes to a crash of the machine (docs/daemon-behavior.md).",
    )


class AuthToken(_Strict):
    principal: str = Field(description="Name of the host principal this token identifies.")
    token: str | None = Field(
        None, min_length=16, description="Bearer token the host sends in `Authorization` (or give `tokenSha256`)."
    )
    tokenSha256: str | None = Field(
        None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="The token's SHA-256 as hex, instead of `token`, so the file holds no secret"
        " (`sha256sum` of the token, no newline).",
    )

    @model_validator(mode="after")
    def _one_form(self) -> AuthToken:
        if (self.token is None) == (self.tokenSha256 is None):
            raise ValueError("each token needs exactly one of `token` or `tokenSha256`")
        return self

    @property
    def digest(self) -> str:
        """The token's SHA-256 (hex, lower case), whichever way the config gave it."""
        if self.tokenSha256 is not None:
            return self.tokenSha256.lower()
        assert self.token is not None  # _one_form
        return sha256_hex(self.token)


class AuthConfig(_Strict):
    tokens: list[AuthToken] = Field(
        default_factory=list, description="Bearer tokens accepted on /mcp; when set, /mcp requires one."
    )


NOTIFY_DEFAULT_EVENTS: list[EventKind] = ["question.opened"]


class NotifyWebhook(_Strict):
    url: Annotated[str, AfterValidator(urls.check_webhook_url)] = Field(
        description="Where each matching event is POSTed as JSON (http or https; docs/notify.md)."
        " Checked at load as the sender (httpx) parses it.",
    )
    secret: str = Field(
        min_length=16,
        description="Key of the HMAC-SHA256 signature sent in `X-Mcpx-Signature` (over `<timestamp>.<body>`).",
    )
    events: list[EventKind] = Field(
        default_factory=lambda: list(NOTIFY_DEFAULT_EVENTS),
        min_length=1,
        description='Event kinds sent to it (as in /v1/events); default: `["question.opened"]`.',
    )


def _runnable(argv: list[str]) -> list[str]:
    if argv and not argv[0]:
        raise ValueError("the program (its first item) is empty")
    for i, arg in enumerate(argv):
        urls.check_process_text(arg, f"item {i}")
    return argv


class NotifyCommand(_Strict):
    run: Annotated[list[str], AfterValidator(_runnable)] = Field(
        min_length=1,
        description="Program and arguments run once per matching event, with the event's JSON on stdin (no"
        " shell); killed after 30 s.",
    )
    events: list[EventKind] = Field(
        default_factory=lambda: list(NOTIFY_DEFAULT_EVENTS),
        min_length=1,
        description='Event kinds it is run for; default: `["question.opened"]`.',
    )


class NotifyConfig(_Strict):
    """Webhooks and command hooks told of events (docs/notify.md); none by default."""

    webhooks: list[NotifyWebhook] = Field(default_factory=list, description="Signed JSON POSTs of events.")
    commands: list[NotifyCommand] = Field(default_factory=list, description="Programs fed each event on stdin.")


class Config(BaseModel):
    # Other hosts' top-level keys pass (host_keys.py lists them; parse_config refuses any other).
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, ServerConfig] = Field(
        default_factory=dict, description="Upstream MCP servers, as other hosts configure them."
    )
    daemon: DaemonConfig = Field(default_factory=DaemonConfig, description="The daemon's listener.")
    tasks: TasksConfig = Field(default_factory=TasksConfig, description="Task defaults and limits.")
    calls: CallsConfig = Field(default_factory=CallsConfig, description="Hosts' plain calls, as operators see them.")
    approve: list[str] = Field(
        default_factory=list,
        description="Tools of every server (globs, as `mcpServers.<name>.mcpx.approve`) whose calls wait for an"
        " operator's approval.",
    )
    approveTimeoutMs: int = Field(
        3_600_000,
        gt=0,
        description="How long a gated call waits for an approval, whether or not an operator is attached; then it is"
        " denied (the host gets an isError result saying so).",
    )
    auth: AuthConfig | None = Field(None, description="Optional bearer-token auth for /mcp.")
    questions: QuestionsConfig = Field(default_factory=QuestionsConfig, description="Questions upstreams ask.")
    connections: ConnectionsConfig = Field(default_factory=ConnectionsConfig, description="The connection registry.")
    events: EventsConfig = Field(default_factory=EventsConfig, description="The event log.")
    frames: FramesConfig = Field(default_factory=FramesConfig, description="The raw frames kept per task, in memory.")
    store: StoreConfig = Field(default_factory=StoreConfig, description="Where the durable state is kept.")
    keepers: KeepersConfig = Field(
        default_factory=KeepersConfig, description="Keeper processes that keep stdio upstreams across restarts."
    )
    notify: NotifyConfig = Field(
        default_factory=NotifyConfig, description="Webhooks and command hooks told of events (docs/notify.md)."
    )
    traces: TracesConfig = Field(
        default_factory=TracesConfig, description="OpenTelemetry traces over OTLP/HTTP (docs/telemetry.md)."
    )
    metrics: MetricsConfig = Field(
        default_factory=MetricsConfig, description="Prometheus `/metrics` (docs/telemetry.md)."
    )

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: dict[str, str] = {}
        for key, server in self.mcpServers.items():
            if server.mcpx.passthrough:
                continue
            ns = server.mcpx.namespace or key
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", ns):
                raise ValueError(f"server key {key!r} cannot be a namespace; set mcpx.namespace")
            if ns in seen:
                raise ValueError(f"servers {seen[ns]!r} and {key!r} share the namespace {ns!r}")
            seen[ns] = key
        return self

    _warnings: list[str] = PrivateAttr(default_factory=list)
    _notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def notes(self) -> list[str]:
        """What was left out as meant (a host's own `mcpx serve` entry), for the daemon to log at INFO."""
        return self._notes

    @property
    def warnings(self) -> list[str]:
        """What was accepted but may not work as the file's author meant (another host's auth key mcpx
        ignores), for the daemon to log."""
        return self._warnings

    @property
    def active_servers(self) -> dict[str, ServerConfig]:
        """The servers to start: all but the `disabled` ones."""
        return {key: server for key, server in self.mcpServers.items() if not server.disabled}

    def namespace_of(self, key: str) -> str | None:
        server = self.mcpServers[key]
        return None if server.mcpx.passthrough else (server.mcpx.namespace or key)


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def parse_config(
    data: object, source: str, environ: Mapping[str, str] | None = None, base_dir: Path | None = None
) -> Config:
    """The config in `data` (read from `source`, named in every message), with `${VAR}`s expanded from
    `environ` (default: this process's) and `envFile`s read relative to `base_dir`; `ConfigError`
    lists every problem found, each with where it is."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object")
    unusable = _unusable_setting(data)
    if unusable is not None:
        raise ConfigError(f"{source}: {_where(unusable[0])}: {unusable[1]}")
    problems = host_keys.unknown_keys(data, Config, _TOLERATED)
    servers_problem = host_keys.servers_object_problem(data)
    if servers_problem is not None:
        key, message = servers_problem
        problems = [(where, msg) for where, msg in problems if where != (key,)] + [((key,), message)]
    servers = data.get("mcpServers")
    own: list[str] = []
    if isinstance(servers, dict):
        expanded, unset = expand.expand_servers(servers, os.environ if environ is None else environ, base_dir)
        problems += unset
        own = [name for name, entry in expanded.items() if _is_mcpx_serve(entry)]
        data = {
            **data,
            "mcpServers": {name: _url_from_alias(entry) for name, entry in expanded.items() if name not in own},
        }
    if problems:
        raise ConfigError("\n".join(f"{source}: {_where(where)}: {message}" for where, message in problems))
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if p not in ("function-after",))
            msg = err["msg"].removeprefix("Value error, ")  # pydantic's wrapper, noise to a reader
            lines.append(f"{source}: {_where(loc)}: {msg}")
        raise ConfigError("\n".join(lines)) from None
    config._warnings = [f"{source}: {note}" for note in host_keys.ignored_auth(data.get("mcpServers"))]
    config._notes = [
        f"{source}: server {name!r} is `mcpx serve` itself (a host's way to reach mcpx): skipped" for name in own
    ]
    return config


def _is_mcpx_serve(entry: object) -> bool:
    """The entry a host uses to reach mcpx, found in a file both read (`install-host` writes one into
    `.mcp.json`): serving it would be mcpx proxying itself, so mcpx leaves it out."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args", [])
    return isinstance(command, str) and isinstance(args, list) and runs_mcpx_serve(command, args)


def _unusable_setting(data: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    """`_unusable` over what mcpx reads: its own keys, not other hosts' (they stay as their hosts wrote them)."""
    for key in Config.model_fields:
        if key == "mcpServers" and isinstance(data.get(key), dict):
            for name, entry in data[key].items():
                if isinstance(name, str) and not _encodes(name):
                    return (key, "(a key)"), _SURROGATE
                if isinstance(entry, dict):
                    for field in ServerConfig.model_fields:
                        found = _unusable(entry.get(field), (key, name, field))
                        if found is not None:
                            return found
        elif key in data:
            found = _unusable(data[key], (key,))
            if found is not None:
                return found
    return None


_NUMBER_MAX = 2**53  # what JSON carries exactly (RFC 8259 6), far below SQLite's and PostgreSQL's bigint


def _unusable(value: object, where: tuple[Any, ...]) -> tuple[tuple[Any, ...], str] | None:
    """Where the first value no part of the runtime could use is, and why: a string (a key or a
    value) with a lone surrogate, which no UTF-8 can carry to a process, a file or a hash; a number
    beyond 2^53 or not finite (`1e400` reads as infinity), which no millisecond count or limit is."""
    if isinstance(value, str):
        return None if value.isascii() or _encodes(value) else (where, _SURROGATE)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not (-_NUMBER_MAX <= value <= _NUMBER_MAX):  # False for NaN too
            return where, "a number beyond 2^53 (or not finite): no setting can use it"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not key.isascii() and not _encodes(key):
                return (*where, "(a key)"), _SURROGATE
            found = _unusable(item, (*where, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _unusable(item, (*where, i))
            if found is not None:
                return found
    return None


_SURROGATE = "not valid Unicode text (a lone surrogate escape)"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# The models' own keys, plus those other hosts write where mcpx may find them (host_keys.py).
_TOLERATED: dict[type[BaseModel], Mapping[str, object]] = {
    Config: {**host_keys.TOP_LEVEL_FROM_OTHER_HOSTS, **host_keys.OTHER_HOSTS_SERVER_OBJECTS},
    ServerConfig: host_keys.SERVER_KEYS_FROM_OTHER_HOSTS,
    OAuthConfig: host_keys.OAUTH_KEYS_FROM_OTHER_HOSTS,
}


def _url_from_alias(entry: object) -> object:
    """Windsurf's `serverUrl` and Gemini CLI's `httpUrl` are their names for `url`."""
    if isinstance(entry, dict) and "url" not in entry:
        for alias in ("serverUrl", "httpUrl"):
            if isinstance(entry.get(alias), str):
                return {**entry, "url": entry[alias]}
    return entry


def load_config(path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and check the config file at `path`; `ConfigError` (one message, every problem) if it cannot be used."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL in the path
        raise ConfigError(f"{path!r}: cannot read: {exc}") from None
    text = utf8_text(raw, str(path))
    try:
        data = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # NaN, Infinity (_not_json), or a number of more digits than Python converts
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not usable JSON: nested too deeply") from None
    return parse_config(data, str(path), environ, path.parent)


def utf8_text(raw: bytes, source: str) -> str:
    """The file's bytes as text; ConfigError naming the first byte that is not UTF-8 (JSON is UTF-8:
    RFC 8259 8.1)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{source}: not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line} (offset {exc.start});"
            " save the file as UTF-8"
        ) from None


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON number")


CONFIG_SEARCH = "--config, MCPX_CONFIG, ./.mcpx.json, ./.mcp.json, $XDG_CONFIG_HOME/mcpx/config.json"


def find_config(explicit: str | None, cwd: Path | None = None) -> Path | None:
    """Search order: --config, MCPX_CONFIG, ./.mcpx.json, ./.mcp.json, $XDG_CONFIG_HOME/mcpx/config.json."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MCPX_CONFIG")
    if env:
        return Path(env)
    here = cwd or Path.cwd()
    for name in (".mcpx.json", ".mcp.json"):
        if (here / name).is_file():
            return here / name
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    candidate = xdg / "mcpx" / "config.json"
    return candidate if candidate.is_file() else None


def state_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("MCPX_STATE_DIR")
    if env:
        return Path(env)
    xdg = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return xdg / "mcpx"
