"""Approval gates: a call to a tool named in `approve` waits for an operator before it reaches
the upstream (docs/approvals.md).

The call becomes an operator-only question (an elicitation form: allow once, allow this tool for
this host for a while, deny with a reason); the host is never asked to approve its own call. A
deny, or no answer within `approveTimeoutMs`, ends the call with an isError result that says who
denied it or that the time ran out, which a model can read and act on. The question's answer, with
the operator's name, is the audit record. Allowances live in memory: a restart forgets them.

An allowance is bound to an identity no other process can claim: a 2025 session (its id is a
secret), a `mcpx serve` connection (one process), or an `auth` principal. A stateless 2026 host
without `auth` is known only by what it says about itself (`clientInfo`, a label) and its address,
which any local process can say too: it is offered "allow once" alone. The prompt names the process
that sent this very request, looked up when the question is asked.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..config.model import Config
from ..connections import naming
from ..protocol import request_state
from ..protocol.ids import opaque_id
from ..questions import routing
from ..store import Store
from ..upstream.pool import UpstreamServer
from .asking import Asker
from .connection import RequestContext

META_KEY = "io.mcpx/approval"  # in the question's params: what is being approved, for UIs
ALLOW, ALLOW_FOR_HOST, DENY = "allow", "allow-for-host", "deny"
MAX_ARGUMENTS_SHOWN = 2000  # characters of the arguments' preview in the question's message
PREVIEW_NAMES = 5  # argument names listed in a shortened preview's note
# How long a prompt waits to name the host's process (a /proc scan, slow on a busy machine): longer
# than a plain request's bound, as a person is about to be asked anyway and names the host by it.
NAMING_WAIT_S = 5.0


@dataclass(frozen=True)
class Resumed:
    """A later round of a call that already passed its gate: mcpx verified the requestState
    envelope it signed for this very call and host (`nonce`), or mcpx retries the call itself
    (`nonce` None). Nothing a host puts in its params stands for one."""

    nonce: str | None


@dataclass(frozen=True)
class Allowance:
    id: str
    connection: str
    upstream: str
    tool: str
    until_ms: int
    by: str  # who granted it ("operator:<name>")

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "connectionId": self.connection,
            "upstream": self.upstream,
            "tool": self.tool,
            "untilMs": self.until_ms,
            "by": self.by,
        }


def gated(patterns: Iterable[str], names: Iterable[str]) -> bool:
    """Whether any of a tool's names (the upstream's own, the one hosts see) matches a glob."""
    names = list(names)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names)


@dataclass(frozen=True)
class Requester:
    """Who asks to run a gated call, as the operator is shown it, and what an allowance for this
    host would be bound to (None: nothing another process could not claim, so none is offered)."""

    name: str
    binding: str | None


async def requester_of(ctx: RequestContext) -> Requester:
    """Who sent this very request. A stateless 2026 host is looked up by the process behind
    this request's socket (another process with the same `clientInfo` is another caller)."""
    conn = ctx.conn
    told = " ".join(str(v) for v in conn.client_info.values() if isinstance(v, str))
    if conn.transport == "stdio":
        pid = f" (pid {conn.shim_pid})" if conn.shim_pid else ""
        return Requester(conn.label or told or f"connection {conn.record_id}", f"this `mcpx serve` connection{pid}")
    if conn.era == "legacy":
        await conn.process_settled(NAMING_WAIT_S)
        return Requester(conn.label or told or f"connection {conn.record_id}", "this 2025 session")
    process = await naming.process_of(ctx.peer, NAMING_WAIT_S)
    name = naming.shown_label(conn.given_label, process, conn.client_info) or (
        f"{told or 'a 2026 host'} from {conn.peer or 'an unknown address'}"
    )
    return Requester(name, f"principal {conn.principal}" if conn.principal else None)


def preview(arguments: object, limit: int = MAX_ARGUMENTS_SHOWN) -> str:
    """The arguments as one line of JSON for the question's message: whole when short; otherwise
    every argument with its value cut to a fair share (so one long value cannot push the others
    out of view) and a note saying it is shortened, where, and that the full arguments are in
    the approval's `_meta` (the console and the answer page show them whole). Pure."""
    full = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    if len(full) <= limit:
        return full
    whole = "the console and the answer page show every argument in full"
    if not isinstance(arguments, dict):
        return f"{full[:limit]}… [shortened to the first {limit:,} of {len(full):,} characters; {whole}]"
    share = max(limit // (2 * len(arguments)), 40)  # half the room for values, the rest for names
    pieces: list[str] = []
    cut: list[str] = []
    left_out: list[str] = []
    used = 0
    for key in sorted(arguments):
        value = json.dumps(arguments[key], ensure_ascii=False, sort_keys=True)
        if len(value) > share:
            cut.append(key)
            value = f"{value[:share]}…"
        piece = f"{json.dumps(key, ensure_ascii=False)[: share + 2]}: {value}"
        if used + len(piece) > limit:
            left_out.append(key)
            continue
        pieces.append(piece)
        used += len(piece) + 2
    note = [f"shortened to {used:,} of {len(full):,} characters"]
    if cut:
        note.append(f"cut: {_names(cut)}")
    if left_out:
        note.append(f"left out: {_names(left_out)}")
    note.append(whole)
    return "{" + ", ".join(pieces) + (", …" if left_out else "") + "} [" + "; ".join(note) + "]"


def _names(keys: list[str]) -> str:
    shown = ", ".join(json.dumps(k[:40], ensure_ascii=False) for k in keys[:PREVIEW_NAMES])
    more = len(keys) - PREVIEW_NAMES
    return shown + (f" and {more:,} more" if more > 0 else "")


def question_params(requester: Requester, exposed: str, upstream: str, arguments: object) -> dict[str, Any]:
    """The operator's form: what is asked, and the answers this requester may be given."""
    choices = [{"const": ALLOW, "title": "Allow once"}]
    if requester.binding is not None:
        choices.append({"const": ALLOW_FOR_HOST, "title": f"Allow this tool for {requester.binding} for a while"})
    choices.append({"const": DENY, "title": "Deny"})
    decision: dict[str, Any] = {"type": "string", "title": "Decision", "oneOf": choices}
    properties: dict[str, Any] = {"decision": decision}
    if requester.binding is None:
        decision["description"] = (
            "Allow once or deny: a stateless 2026 host without auth is known only by what any local"
            " process could say, so no allowance can be bound to it"
        )
    else:
        properties["minutes"] = {
            "type": "integer",
            "title": f"For how many minutes (allow for {requester.binding})",
            "minimum": 1,
            "maximum": 10080,
            "default": 60,
        }
    properties["reason"] = {"type": "string", "title": "Reason (told to the host when denied)", "maxLength": 500}
    return {
        "message": f"mcpx asks: may {requester.name} run {exposed} (on {upstream})? Arguments: {preview(arguments)}",
        "requestedSchema": {"type": "object", "properties": properties, "required": ["decision"]},
        "_meta": {
            META_KEY: {
                "tool": exposed,
                "upstream": upstream,
                "arguments": arguments,
                "host": requester.name,
                "allowanceFor": requester.binding,
            }
        },
    }


def denied_text(exposed: str, answer: dict[str, Any], answered_by: str | None, timeout_s: float) -> str | None:
    """What the host is told when the call may not run, or None when it may. Pure."""
    content = _content(answer)
    if answer.get("action") == "accept" and content.get("decision") in (ALLOW, ALLOW_FOR_HOST):
        return None
    who = (answered_by or "").removeprefix("operator:")
    if answered_by is None or answered_by == "mcpx":
        return f"mcpx: the call to {exposed} was not run: nobody approved it within {timeout_s:g} s."
    reason = content.get("reason") if isinstance(content.get("reason"), str) and content.get("reason") else None
    how = "denied" if answer.get("action") == "accept" else f"declined ({answer.get('action')})"
    return f"mcpx: the call to {exposed} was {how} by operator {who}" + (f": {reason}" if reason else ".")


def _content(answer: dict[str, Any]) -> dict[str, Any]:
    content = answer.get("content")
    return content if isinstance(content, dict) else {}


class Approvals:
    def __init__(self, config: Config, asker: Asker, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config  # the config in force: a reload replaces it (top-level `approve` is live)
        self.asker = asker
        self.store = store
        self.clock = clock
        self._allowances: dict[str, Allowance] = {}
        # Nonces of envelopes that already took a gated call past its gate, until they expire: an
        # approval lets each round reach the upstream once, not once per replay of its envelope.
        self._spent: dict[str, int] = {}

    def gate(self, server: UpstreamServer, tool: str) -> str | None:
        """The first approval glob that holds this tool (its own name or the one hosts see), or None."""
        exposed = server.naming.name_out(tool)
        for pattern in [*self.config.approve, *server.cfg.mcpx.approve]:
            if gated([pattern], (tool, exposed)):
                return pattern
        return None

    def allowances(self) -> list[Allowance]:
        now = int(self.clock() * 1000)
        for key in [k for k, a in self._allowances.items() if a.until_ms <= now]:
            del self._allowances[key]
        return sorted(self._allowances.values(), key=lambda a: a.until_ms)

    def revoke(self, allowance_id: str) -> Allowance | None:
        for key, allowance in list(self._allowances.items()):
            if allowance.id == allowance_id:
                return self._allowances.pop(key)
        return None

    def _allowed(self, connection: str, upstream: str, tool: str) -> bool:
        allowance = self._allowances.get(f"{connection}\0{upstream}\0{tool}")
        return allowance is not None and allowance.until_ms > int(self.clock() * 1000)

    def _continues(self, resumed: Resumed | None) -> bool:
        """Whether a gated call is a later round of one already let through: mcpx's own retry, or
        an envelope of mcpx's (verified by the caller) presented for the first time."""
        if resumed is None:
            return False
        if resumed.nonce is None:
            return True
        now = int(self.clock() * 1000)
        for nonce in [n for n, until in self._spent.items() if until <= now]:
            del self._spent[nonce]
        if resumed.nonce in self._spent:
            return False
        self._spent[resumed.nonce] = now + request_state.LIFETIME_MS
        return True

    async def check(
        self, ctx: RequestContext, server: UpstreamServer, params: dict[str, Any], resumed: Resumed | None = None
    ) -> str | None:
        """None when the call may go on; else what its host is told (the call is not run).
        Whatever the host put in `requestState` plays no part: only `resumed` skips the gate."""
        tool = str(params.get("name"))
        gate = self.gate(server, tool)
        if gate is None or self._continues(resumed):
            return None
        connection = ctx.conn.record_id
        if self._allowed(connection, server.key, tool):
            return None
        exposed = server.naming.name_out(tool)
        timeout_s = (server.cfg.mcpx.approveTimeoutMs or self.config.approveTimeoutMs) / 1000
        requester = await requester_of(ctx)
        qid = opaque_id(12)
        answer = await self.asker.ask_operator(
            ctx,
            server.key,
            question_params(requester, exposed, server.key, params.get("arguments") or {}),
            timeout_s,
            qid,
            routing.approval_gate(gate),
        )
        asked = await self.store.get_question(qid)
        answered_by = asked.answered_by if asked is not None else None
        denied = denied_text(exposed, answer, answered_by, timeout_s)
        content = _content(answer)
        # Only where the form offered it: a form cannot be answered outside its own choices, and a
        # caller with nothing to bind to is allowed this once, whatever the answer says.
        if denied is None and content.get("decision") == ALLOW_FOR_HOST and requester.binding is not None:
            minutes = content["minutes"] if isinstance(content.get("minutes"), int) else 60
            until = int(self.clock() * 1000) + minutes * 60_000
            self._allowances[f"{connection}\0{server.key}\0{tool}"] = Allowance(
                opaque_id(8), connection, server.key, tool, until, answered_by or "operator"
            )
        return denied
