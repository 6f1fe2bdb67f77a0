"""The bodies `/v1` takes and gives: pydantic models, from which the OpenAPI document is generated.

Names are camelCase everywhere. Fields holding MCP payloads (arguments, results, schemas) are
free-form JSON objects, passed through as the upstream or host sent them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Json = dict[str, Any]
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
# The daemon's lifecycle, in order (docs/daemon-behavior.md); mcpx/daemon.py moves through them.
DaemonPhase = Literal["starting", "serving", "draining", "stopping upstreams", "stopped"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    error: str = Field(description="What went wrong, for a person.")
    fields: dict[str, str] | None = Field(None, description="For 422: what is wrong, by field.")


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    version: str


class UpstreamAuthStatus(BaseModel):
    """An HTTP upstream's OAuth sign-in, as an operator may see it: never a token or a secret."""

    grantType: Literal["authorization_code", "client_credentials"]
    signedIn: bool = Field(description="It holds an access token.")
    needsLogin: str | None = Field(description="Why a person must sign in now (`mcpx login NAME`); null: no need.")
    error: str | None = Field(description="Why mcpx's last attempt on its own failed (a refresh, a step-up, ...).")
    issuer: str | None = Field(description="The authorization server it is signed in with.")
    clientId: str | None = Field(description="The OAuth client mcpx is there (registered, configured or a URL).")
    scopes: list[str] | None = Field(description="The scopes granted.")
    expiresMs: int | None = Field(description="When the access token expires (mcpx refreshes it before).")
    refreshable: bool = Field(description="It has a refresh token.")
    by: str | None = Field(description="Who signed in: operator:<name>, or mcpx (client credentials).")
    signedInMs: int | None = Field(description="When.")
    loginPending: bool = Field(description="A sign-in was started and waits for the browser to come back.")


class LeftOutTool(BaseModel):
    name: str
    reason: str


class UpstreamStatus(BaseModel):
    name: str
    transport: Literal["stdio", "http"]
    state: str = Field(description="starting, ready, restarting, down, stopped, or `needs login`.")
    era: Literal["legacy", "modern"] | None
    revision: str | None
    tools: int
    restarts: int
    lastError: str | None
    exitCode: int | None = Field(None, description="How its last process ended (stdio).")
    stderrTail: list[str] = Field(default_factory=list, description="The last lines it wrote to stderr.")
    logPath: str | None = Field(None, description="Where its stderr is written (stdio).")
    leftOutTools: list[LeftOutTool] = Field(
        default_factory=list,
        description="Tools it lists that mcpx does not offer hosts, and why: an invalid `x-mcp-header`"
        " annotation (SEP-2243) on a 2026-07-28 HTTP server.",
    )
    auth: UpstreamAuthStatus | None = Field(None, description="Its OAuth sign-in (HTTP upstreams mcpx may sign in to).")


class UpstreamList(BaseModel):
    upstreams: list[UpstreamStatus]


class LoginStarted(BaseModel):
    name: str
    authorizationUrl: str | None = Field(
        description="Open it in a browser on the daemon's machine (the redirect back is to loopback);"
        " null when no person is needed (client credentials: `signedIn` says how it went)."
    )
    redirectUri: str | None = Field(description="Where the browser comes back to.")
    expiresMs: int | None = Field(description="Until when the sign-in waits for the browser.")
    signedIn: bool = Field(description="Signed in already (client credentials).")
    error: str | None = None
    by: str


class LoginState(BaseModel):
    name: str
    state: Literal["pending", "signed in", "failed", "none"] = Field(
        description="pending: waiting for the browser; signed in; failed (`error` says why); none: no sign-in started."
    )
    error: str | None = None
    auth: UpstreamAuthStatus | None = None


class UpstreamStderr(BaseModel):
    name: str
    lines: list[str] = Field(
        description="Its stderr log's last lines, oldest first; each start is marked by a `--- mcpx: started` line."
    )
    logPath: str | None = Field(description="Where its stderr is written (null for an HTTP upstream: no stderr).")
    state: str
    exitCode: int | None = Field(description="How its last process ended.")


class UpstreamRestart(BaseModel):
    name: str
    state: str = Field(description="Its state just after the restart was asked (it comes back as `ready`).")
    restarts: int
    by: str = Field(description="Who asked: operator:<name>.")


class Subscriber(BaseModel):
    operator: str | None
    queued: int = Field(description="Live events waiting to be sent to it (bounded).")
    overflowed: bool = Field(description="It fell behind and is being caught up from the store.")


class FrameUsage(BaseModel):
    tasks: int = Field(description="Tasks whose frames are kept.")
    bytes: int = Field(description="Characters of frames kept.")
    budgetBytes: int = Field(description="The most it keeps (`frames.budgetBytes`).")


class NotifySink(BaseModel):
    """One webhook or command hook of the config's `notify` (docs/notify.md): how its deliveries go."""

    sink: str = Field(description="Where it is configured, e.g. `notify.webhooks[0]`.")
    kind: Literal["webhook", "command"]
    target: str = Field(description="A webhook's scheme and host (its path may be a secret), a command's program.")
    events: list[str] = Field(description="The event kinds it is sent.")
    queued: int = Field(description="Events waiting for it (bounded; the oldest go first when full).")
    delivered: int
    failed: int = Field(description="Events given up on: after the retries (webhook) or a failed run (command).")
    dropped: int = Field(description="Events pushed out of its full queue before they were tried.")
    retries: int = Field(description="Webhook attempts made again after a connection error, a 5xx or a 429.")
    lastError: str | None
    lastErrorMs: int | None


class ReloadSource(BaseModel):
    trigger: Literal["signal", "file", "api"] = Field(
        description="What asked: SIGHUP, the config file changing, or POST /v1/config/reload (`mcpx reload`)."
    )
    path: str | None = Field(description="The config file read (null: the daemon started without one).")


class ReloadChanges(BaseModel):
    added: list[str] = Field(default_factory=list, description="Servers started.")
    removed: list[str] = Field(
        default_factory=list, description="Servers unlisted at once, stopped once their calls in flight ended."
    )
    changed: list[str] = Field(
        default_factory=list, description="Servers restarted with their new entry (after the same drain)."
    )
    needsRestart: list[str] = Field(
        default_factory=list,
        description="Settings outside `mcpServers` that changed (e.g. `daemon.port`): ignored until the daemon restarts.",
    )


class ConfigReload(ReloadSource, ReloadChanges):
    """A reload of the config file: what it changed, or why it was refused (docs/daemon-behavior.md)."""

    result: Literal["applied", "refused"] = Field(description="refused: the daemon serves the config it had.")
    atMs: int = Field(description="When, in milliseconds since the epoch.")
    error: str | None = Field(description="Why it was refused (the file, the key and what was expected).")


class BackgroundWork(BaseModel):
    """Background work of the daemon that failed since it started (docs/daemon-behavior.md, "Background work")."""

    task: str = Field(description="Which work: `notifier`, `retention`, `config-watch`, `notify.webhooks[0]`, ...")
    failures: int
    lastError: str = Field(description="The last failure, as `<type>: <message>` (the log has its traceback).")
    lastFailedMs: int
    state: Literal["restarting", "running", "dropped"] = Field(
        description="restarting: waiting to start again; running: started again since; dropped: not restarted"
        " (one-shot work, or a sink that dropped one event and went on)."
    )


class Status(BaseModel):
    pid: int
    version: str
    phase: DaemonPhase
    uptimeS: float
    config: str | None
    stateDir: str
    url: str | None
    upstreams: list[UpstreamStatus]
    connections: int = Field(description="Host connections open now.")
    operators: list[str] = Field(description="Operators attached to the event feed (who answers questions).")
    subscribers: list[Subscriber] = Field(description="Feed subscribers: how far behind each is.")
    lastSeq: int = Field(description="The newest event's sequence number.")
    instance: str | None = Field(None, description="This daemon's name among those sharing a PostgreSQL store.")
    frames: FrameUsage = Field(description="The in-memory frame log (`frames` in the config): how full it is.")
    notify: list[NotifySink] = Field(default_factory=list, description="Each configured webhook and command hook.")
    lastReload: ConfigReload | None = Field(
        None, description="The last reload of the config since the daemon started (null: none yet)."
    )
    background: list[BackgroundWork] = Field(
        default_factory=list, description="Background work that failed since the daemon started (empty: none)."
    )


class ConnectionRecord(BaseModel):
    # A host connection as the registry keeps it: also the `connection.opened` event's data.
    id: str
    kind: Literal["session", "shim", "stateless"]
    transport: Literal["http", "stdio"]
    revision: str | None
    clientInfo: Json
    principal: str | None
    peer: str | None
    shimPid: int | None
    openedMs: int
    lastSeenMs: int
    closedMs: int | None
    closeReason: str | None
    label: str | None = Field(
        description="What an operator tells it apart by: an explicit label (MCPX_HOST_LABEL, the"
        " X-Mcpx-Host-Label header), else the host's process (`claude in ~/src/api`) where mcpx"
        " can see it, led by a clientInfo name that says more than an SDK's default"
        " (`research-agent · python in ~/src/api`); null otherwise (then clientInfo and peer say who it is)."
        " Display only: the host controls it."
    )
    capabilities: Json = Field(
        default_factory=dict,
        description="The client capabilities it declared at initialize (2025-11-25 sessions and shims; a 2026"
        " host declares them per request). Its extensions are under `extensions`.",
    )


class Connection(ConnectionRecord):
    tasks: dict[str, int] = Field(description="How many of its tasks are in each status.")
    needsInput: bool = Field(description="One of its calls or tasks waits for an answer.")


class AnswerLink(BaseModel):
    url: str = Field(description="Opens the answer page; good once, until the question expires.")
    expiresMs: int


class Allowance(BaseModel):
    """An operator let a host call a gated tool unasked until `untilMs` (docs/approvals.md)."""

    id: str
    connectionId: str
    upstream: str
    tool: str = Field(description="The upstream's own name of the tool.")
    untilMs: int
    by: str = Field(description="Who granted it: operator:<name>.")


class AllowanceList(BaseModel):
    allowances: list[Allowance]


class ConnectionList(BaseModel):
    connections: list[Connection]
    nextCursor: str | None = Field(None, description="Pass as `cursor` for the next page.")


class InputRequest(BaseModel):
    key: str = Field(description="Its key in `inputResponses` (also the question's id).")
    questionId: str
    kind: str
    method: str
    upstream: str
    params: Json = Field(description="The request as the upstream asked it (e.g. message, requestedSchema).")


class EventOut(BaseModel):
    seq: int
    ts: int = Field(description="When it was written (ms since the epoch).")
    kind: str
    taskId: str | None = None
    connectionId: str | None = None
    questionId: str | None = None
    by: str | None = None
    data: Json


class TaskSummary(BaseModel):
    id: str
    kind: Literal["task", "call"] = Field(
        description="task: a host holds a task handle for it; call: a host's plain tools/call, listed for"
        " operators because it ran longer than calls.showAfterMs or asked a question."
    )
    status: TaskStatus
    statusMessage: str | None
    tool: str
    upstream: str
    era: Literal["legacy", "modern"]
    connectionId: str | None
    owner: str = Field(description="What binds it: conn, modern, principal:<name>, or call (a plain call's).")
    createdMs: int
    updatedMs: int
    ttlMs: int | None
    expiresMs: int | None
    pollIntervalMs: int
    upstreamTaskId: str | None
    needsInput: bool
    why: str | None = Field(
        None,
        description="Why it is a row and who holds it, in one line: e.g. `listed: ran longer than 500 ms`,"
        " `a task held by mcpx: <upstream> has no taskSupport for <tool>, so it gets a plain call`.",
    )


class TaskDetail(TaskSummary):
    arguments: Json
    result: Json | None
    error: Json | None
    inputRequests: list[InputRequest]
    events: list[EventOut] = Field(description="The task's timeline, oldest first.")


class TaskPage(BaseModel):
    tasks: list[TaskSummary]
    nextCursor: str | None = Field(None, description="Pass as `cursor` for the next (older) page.")


class FrameOut(BaseModel):
    ts: int
    side: Literal["host", "upstream"]
    direction: Literal["in", "out"] = Field(description="As mcpx sees it: in arrived at mcpx, out left it.")
    frame: Json | None = None
    text: str | None = Field(None, description="Instead of `frame` when it was cut to size.")
    truncated: bool = False


class FrameList(BaseModel):
    frames: list[FrameOut]


class Question(BaseModel):
    # Also the `question.opened` event's data.
    id: str
    kind: str
    method: str
    upstream: str
    params: Json
    status: Literal["open", "answered", "expired", "abandoned"]
    createdMs: int
    expiresMs: int
    taskId: str | None
    connectionId: str | None
    inputKey: str | None
    hostCanAnswer: bool
    answeredBy: str | None
    answer: Json | None
    error: Json | None
    closedMs: int | None
    reason: str | None
    candidates: list[Json] = Field(
        description="A question no one call can be tied to (a shared stdio server, calls of several hosts"
        " in flight) is an operator's alone: these are the calls that may have asked it, each"
        " {connectionId, taskId, method, name}. Empty otherwise."
    )
    why: str | None = Field(
        None,
        description="Who it was put to and why, in one line: `asked of the host (it declared elicitation)`,"
        " `waiting for an operator: the host did not declare elicitation`, `waiting for an operator: 2 calls"
        " were in flight on this stdio server (hosts A, B)`, `waiting for an operator: approval gate `deploy``.",
    )


class QuestionList(BaseModel):
    questions: list[Question]


class EventPage(BaseModel):
    events: list[EventOut]
    lastSeq: int


class CancelBody(_Body):
    by: str | None = Field(None, description="The operator's name, for the audit log.")


class ReloadBody(CancelBody):
    """Who asks for a reload of the config (`mcpx reload`), for the event log."""


class AnswerBody(_Body):
    action: Literal["accept", "decline", "cancel"]
    content: Json | None = Field(
        None, description="An accepted form elicitation's answer (checked against its schema)."
    )
    result: Json | None = Field(None, description="An accepted sampling or roots answer: the result object itself.")
    by: str | None = Field(None, description="The operator's name, for the audit log.")


class InputBody(_Body):
    inputResponses: dict[str, Json] = Field(
        description="By input-request key, what a 2026 host's tasks/update carries."
    )
    by: str | None = None


class InputOutcome(BaseModel):
    answered: list[str]
    ignored: list[str] = Field(description="Keys that were not outstanding.")
