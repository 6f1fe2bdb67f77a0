"""The `data` of each event kind, as pydantic models: their JSON Schemas are what docs/api.md lists
(generated: `python -m mcpx.api.event_schemas`) and what the tests check every event against.

Data that /v1 also serves (a connection's record, a question) is /v1's model (mcpx/api/models.py),
taken as it is; so is the envelope (/v1's EventOut)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config.doc_blocks import rewrite_block
from ..events.kinds import EVENT_KINDS, EventKind
from .models import ConnectionRecord, EventOut, Json, Question, ReloadChanges, ReloadSource, TaskStatus


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConnectionOpened(ConnectionRecord, _Data):
    """A host connection started: its registry record."""


class ConnectionUpdated(ConnectionOpened):
    """A connection's details became known later (a shim's revision and client at initialize)."""


class ConnectionClosed(_Data):
    """A connection ended: session deleted, shim gone, stateless host idle, daemon restart (shims)."""

    reason: str


class TaskCreated(_Data):
    """A task's row was committed (before its handle went to the host), or a host's plain call was listed."""

    kind: Literal["task", "call"] = Field(
        "task",
        description="call: a host's plain tools/call that ran long or asked (absent in events an older mcpx wrote: task).",
    )
    upstream: str
    tool: str = Field(description="The upstream's own name of the tool.")
    arguments: Json
    era: Literal["legacy", "modern"]
    owner: str = Field(description="What binds it: conn, modern, principal:<name>, or call (a plain call's).")
    status: TaskStatus
    statusMessage: str | None
    createdMs: int = Field(description="When the task was created, in milliseconds since the epoch.")
    ttlMs: int | None
    pollIntervalMs: int
    why: str | None = Field(
        None, description="Why it is a row and who holds it, in one line (absent from older events)."
    )


class TaskStatusChanged(_Data):
    """Every transition, and every new status message within a status."""

    status: TaskStatus
    previous: TaskStatus
    statusMessage: str | None
    error: Json | None = Field(None, description="The JSON-RPC error of a failed task.")
    isError: bool | None = Field(None, description="For a finished task with a result: the tool reported an error.")


class TaskInputRequired(_Data):
    """What the task waits on changed: every outstanding input request, by key."""

    requests: dict[str, Json]
    added: list[str]


class TaskCancelRequested(_Data):
    """Someone asked for the task to stop (`by`); its status then follows as task.status."""

    status: TaskStatus = Field(description="Its status when the cancel was asked.")


class TaskExpired(_Data):
    """Its TTL passed: the row (and its other events) are gone."""


class QuestionOpened(Question, _Data):
    """An upstream asked something; the question as GET /v1/questions/{id} shows it."""


class QuestionAnswered(_Data):
    """Answered (first answer wins): by the host (`host:<connection>`) or an operator."""

    by: str
    action: str = Field(description="accept, decline, cancel, or error (a sampling or roots answer that failed).")
    answer: Json | None = None
    error: Json | None = None


class QuestionExpired(_Data):
    """Closed unanswered: it expired, its call ended, or nobody could answer it."""

    reason: str


class QuestionAbandoned(_Data):
    """Closed at a daemon's start: the daemon that asked it ended without closing it (killed,
    crashed), so nothing waits for its answer; answering it is refused (409)."""

    reason: str


class ConfigReloaded(ReloadSource, ReloadChanges, _Data):
    """The config file was read again and applied: the servers it started, stopped and restarted."""


class ConfigRefused(ReloadSource, _Data):
    """A reload found the config file unusable: the daemon serves the config it had."""

    error: str = Field(description="Why, naming the file, the key and what was expected.")


class BackgroundFailed(_Data):
    """Background work failed; it starts again after `retryInS`, or what it did is dropped (serving goes on)."""

    task: str = Field(description="Which work: `notifier`, `retention`, `config-watch`, `notify.webhooks[0]`, ...")
    error: str = Field(description="The exception, as `<type>: <message>` (the log has its traceback).")
    failures: int = Field(description="How many times this work failed since the daemon started.")
    action: Literal["restarting", "dropped"] = Field(
        description="restarting: it starts again after `retryInS`; dropped: what it was doing (one event for a"
        " sink, one-shot work) is given up and the rest goes on."
    )
    retryInS: float | None = Field(None, description="With `restarting`: the pause before it starts again.")


class UpstreamNeedsLogin(_Data):
    """An HTTP upstream asks for an OAuth sign-in that only a person can give (its calls fail, naming
    `mcpx login NAME`, until someone runs it). Told once each time it starts needing one."""

    upstream: str
    reason: str = Field(description="Why: the server asks for a sign-in, it needs more scope, it moved, ...")
    scopes: list[str] = Field(description="The scopes the sign-in will ask for, when known.")
    login: str = Field(description="The command that signs in: `mcpx login NAME`.")


class UpstreamSignedIn(_Data):
    """An upstream's OAuth sign-in completed (`by` the operator who ran `mcpx login`, or mcpx itself
    for client credentials). No token is ever in an event."""

    upstream: str
    grantType: Literal["authorization_code", "client_credentials"]
    issuer: str = Field(description="The authorization server that signed it in.")
    scopes: list[str] = Field(description="The scopes granted.")
    expiresMs: int | None = Field(description="When its access token expires (it is refreshed before then).")


class UpstreamSignedOut(_Data):
    """`mcpx logout NAME`: its tokens and registration were forgotten."""

    upstream: str


DATA: dict[EventKind, type[_Data]] = {
    "connection.opened": ConnectionOpened,
    "connection.updated": ConnectionUpdated,
    "connection.closed": ConnectionClosed,
    "task.created": TaskCreated,
    "task.status": TaskStatusChanged,
    "task.input_required": TaskInputRequired,
    "task.cancel_requested": TaskCancelRequested,
    "task.expired": TaskExpired,
    "question.opened": QuestionOpened,
    "question.answered": QuestionAnswered,
    "question.expired": QuestionExpired,
    "question.abandoned": QuestionAbandoned,
    "config.reloaded": ConfigReloaded,
    "config.refused": ConfigRefused,
    "daemon.background_failed": BackgroundFailed,
    "upstream.needs_login": UpstreamNeedsLogin,
    "upstream.signed_in": UpstreamSignedIn,
    "upstream.signed_out": UpstreamSignedOut,
}
assert set(DATA) == set(EVENT_KINDS)


def envelope_schema() -> dict[str, Any]:
    """The feed's `event` message (and a /v1/events entry, without `type`): /v1's EventOut, whose
    absent fields are left out rather than null, with its kinds and first sequence number spelt out."""
    event = EventOut.model_json_schema()
    properties: Json = {"type": {"const": "event"}}
    for name, prop in event["properties"].items():
        (json_type,) = [p["type"] for p in prop.get("anyOf", [prop]) if p["type"] != "null"]
        properties[name] = {"type": json_type}
    properties["seq"]["minimum"] = 1
    properties["kind"] = {"enum": list(EVENT_KINDS)}
    return {"type": "object", "required": event["required"], "properties": properties, "additionalProperties": False}


def data_schema(kind: EventKind) -> Json:
    return _untitled(DATA[kind].model_json_schema())


def _untitled(schema: Json) -> Json:
    """Without pydantic's generated titles, which say nothing the property names do not."""
    return {k: _untitled_value(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}


def _untitled_value(value: object) -> object:
    if isinstance(value, dict):
        return _untitled(value)
    if isinstance(value, list):
        return [_untitled_value(v) for v in value]
    return value


def render() -> str:
    out = ["Every event: `" + json.dumps(envelope_schema(), separators=(",", ":")) + "`", ""]
    for kind, model in DATA.items():
        out.append(f"#### `{kind}`\n")
        out.append((model.__doc__ or "").strip() + "\n")
        out.append("```json\n" + json.dumps(data_schema(kind), separators=(", ", ": ")) + "\n```\n")
    return "\n".join(out)


def update_doc(path: Path) -> bool:
    """Rewrite the generated block of docs/api.md; True when it changed."""
    return rewrite_block(path, "event-schemas", render())


API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"  # the checkout's, beside mcpx/

if __name__ == "__main__":
    update_doc(API_DOC)
