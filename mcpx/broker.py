"""Questions upstreams ask mid-call, as stored rows that whoever can answer first answers.

A question (form or URL elicitation, sampling, roots) is opened by a 2025 upstream's server
request, a 2026 upstream's `input_required`, or an upstream task's `inputRequests`. It is attached
to the call or task that caused it only when that is certain. It may be answered by the host (mcpx
asks it in the host's own era) or by an operator (`/v1/questions`); the first answer wins and
later ones are ignored; at expiry an elicitation is answered `cancel`, anything else fails.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from .protocol.errors import InternalError
from .tasks.store import StoreError, TaskStore

log = logging.getLogger("mcpx.broker")

KIND = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
DEFAULT_EXPIRY_S = 600.0
HostAsk = Callable[["Question"], Awaitable[dict[str, Any]]]


@dataclass
class Question:
    id: str
    upstream: str
    method: str
    params: dict[str, Any]
    created_ms: int
    expires_ms: int
    call: str | None = None  # "task:<id>" or "call:<connection>:<request id>", only when certain
    host: str | None = None  # the host connection that can be asked, if any
    status: str = "open"  # open | answered | expired
    answered_by: str | None = None  # "host:<connection>" | "operator:<name>" | "expiry"
    answer: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        if self.method == "elicitation/create" and self.params.get("mode") == "url":
            return "url-elicitation"
        return KIND.get(self.method, self.method)

    def public(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind
        return out


@dataclass
class _Waiting:
    question: Question
    done: anyio.Event = field(default_factory=anyio.Event)


class Broker:
    def __init__(
        self, store: TaskStore | None = None, on_change: Callable[[Question], Awaitable[None]] | None = None
    ) -> None:
        self.store = store
        self.on_change = on_change
        self._open: dict[str, _Waiting] = {}

    def open_questions(self) -> list[Question]:
        return [w.question for w in self._open.values()]

    def get(self, qid: str) -> Question | None:
        waiting = self._open.get(qid)
        return waiting.question if waiting else None

    async def ask(
        self,
        *,
        upstream: str,
        method: str,
        params: dict[str, Any],
        call: str | None,
        host: str | None,
        host_ask: HostAsk | None,
        expiry_s: float = DEFAULT_EXPIRY_S,
    ) -> dict[str, Any]:
        """Open a question and return the first answer: the host's (if it can be asked), an
        operator's, or the expiry default."""
        now = int(time.time() * 1000)
        q = Question(
            secrets.token_urlsafe(12), upstream, method, dict(params), now, now + int(expiry_s * 1000), call, host
        )
        waiting = _Waiting(q)
        self._open[q.id] = waiting
        await self._persist(q)
        failure: list[BaseException] = []
        try:
            async with anyio.create_task_group() as tg:
                if host_ask is not None:

                    async def from_host() -> None:
                        try:
                            answer = await host_ask(q)
                        except Exception as exc:  # noqa: BLE001 - whatever the host did, the question is settled below
                            log.info("question %s: the host could not answer: %s", q.id, exc)
                            if q.method != "elicitation/create":
                                failure.append(exc)  # no operator stand-in for sampling or roots
                                waiting.done.set()
                            return  # an elicitation may still be answered by an operator
                        await self.answer(q.id, answer, f"host:{host}")

                    tg.start_soon(from_host)
                with anyio.move_on_after(expiry_s):
                    await waiting.done.wait()
                tg.cancel_scope.cancel()
            if q.status == "open" and failure:
                raise failure[0]
            if q.status == "open":
                await self._expire(q)
        finally:
            self._open.pop(q.id, None)
        if q.answer is None:
            raise InternalError(f"nobody answered the upstream's {method} in time")
        return q.answer

    async def answer(self, qid: str, answer: dict[str, Any], by: str) -> bool:
        """First answer wins; later ones (and unknown ids) are ignored. True when it was taken."""
        waiting = self._open.get(qid)
        if waiting is None or waiting.question.status != "open":
            return False
        q = waiting.question
        q.status, q.answered_by, q.answer = "answered", by, answer
        with anyio.CancelScope(shield=True):  # the row is written before anyone is woken
            await self._persist(q)
        waiting.done.set()
        return True

    async def _expire(self, q: Question) -> None:
        q.status, q.answered_by = "expired", "expiry"
        # An elicitation nobody answered is declined politely; other kinds have no neutral answer.
        q.answer = {"action": "cancel"} if q.method == "elicitation/create" else None
        await self._persist(q)

    async def _persist(self, q: Question) -> None:
        if self.store is not None:
            try:
                await self.store.put_question(q.id, q.public())
            except StoreError as exc:  # the answer path must not die with the audit row
                log.warning("question %s not stored: %s", q.id, exc)
        if self.on_change is not None:
            try:
                await self.on_change(q)
            except Exception:
                log.debug("question listener failed", exc_info=True)
