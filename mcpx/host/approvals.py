"""Approval gates: a call to a tool named in `approve` waits for an operator before it reaches
the upstream (docs/approvals.md).

The call becomes an operator-only question (an elicitation form: allow once, allow this tool for
this host for a while, deny with a reason); the host is never asked to approve its own call. A
deny, or no answer within `approveTimeoutMs`, ends the call with an isError result that says who
denied it or that the time ran out, which a model can read and act on. The question's answer, with
the operator's name, is the audit record. Allowances live in memory: a restart forgets them.
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..config.model import Config
from ..protocol import request_state
from ..protocol.ids import opaque_id
from ..questions import routing
from ..store import Store
from ..upstream.pool import UpstreamServer
from .asking import Asker
from .connection import RequestContext

META_KEY = "io.mcpx/approval"  # in the question's params: what is being approved, for UIs
ALLOW, ALLOW_FOR_HOST, DENY = "allow", "allow-for-host", "deny"
MAX_ARGUMENTS_SHOWN = 2000  # characters of the arguments in the question's message


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


def question_params(host: str, exposed: str, upstream: str, arguments: object) -> dict[str, Any]:
    """The operator's form: what is asked, and the three answers."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    if len(shown) > MAX_ARGUMENTS_SHOWN:
        shown = shown[:MAX_ARGUMENTS_SHOWN] + " …"
    return {
        "message": f"{host} wants to call {exposed} (on {upstream}) with {shown}. Allow it?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "oneOf": [
                        {"const": ALLOW, "title": "Allow once"},
                        {"const": ALLOW_FOR_HOST, "title": "Allow this tool for this host for a while"},
                        {"const": DENY, "title": "Deny"},
                    ],
                },
                "minutes": {
                    "type": "integer",
                    "title": "For how many minutes (allow for this host)",
                    "minimum": 1,
                    "maximum": 10080,
                    "default": 60,
                },
                "reason": {"type": "string", "title": "Reason (told to the host when denied)", "maxLength": 500},
            },
            "required": ["decision"],
        },
        "_meta": {META_KEY: {"tool": exposed, "upstream": upstream, "arguments": arguments}},
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
        self.config = config
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
        host = ctx.conn.label or " ".join(str(v) for v in ctx.conn.client_info.values() if isinstance(v, str))
        qid = opaque_id(12)
        answer = await self.asker.ask_operator(
            ctx,
            server.key,
            question_params(host or f"connection {connection}", exposed, server.key, params.get("arguments") or {}),
            timeout_s,
            qid,
            routing.approval_gate(gate),
        )
        asked = await self.store.get_question(qid)
        answered_by = asked.answered_by if asked is not None else None
        denied = denied_text(exposed, answer, answered_by, timeout_s)
        content = _content(answer)
        if denied is None and content.get("decision") == ALLOW_FOR_HOST:
            minutes = content["minutes"] if isinstance(content.get("minutes"), int) else 60
            until = int(self.clock() * 1000) + minutes * 60_000
            self._allowances[f"{connection}\0{server.key}\0{tool}"] = Allowance(
                opaque_id(8), connection, server.key, tool, until, answered_by or "operator"
            )
        return denied
