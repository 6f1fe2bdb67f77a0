"""Questions upstreams ask mid-call, as stored rows that whoever can answer first answers.

A question (form or URL elicitation, sampling, roots) is opened by a 2025 upstream's server
request, a 2026 upstream's `input_required`, or an upstream task's `inputRequests`. It belongs to
a task only when that is certain. It is asked of the host in the host's own era when the host
declared the capability, and open to an operator (`/v1`, the console) in any case; the first
answer wins and later ones are refused. A question nobody can answer (the host lacks the
capability and no operator is attached, `questions.waitForOperator`) is answered at once the way
a client without the capability would: with an error. At expiry an elicitation is answered
`cancel`; anything else fails. A question whose call ends first closes with it.
A question lives with the daemon that asked it (its asker waits in memory): one left open by a
daemon that was killed or crashed has nobody waiting for its answer, and is closed as `abandoned`
when a daemon starts, or takes that daemon's work over (`abandon`); answering it is refused.
Every change is stored with its `question.*` event, and counts only once stored: answers to one
question are written one at a time, so the first one the store records is the one the upstream
gets; one it fails to record is refused (NotRecorded) and the question stays open for the next.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio

from ..events.bus import Event, EventBus
from ..protocol.errors import InternalError, LimitReached, McpError, MethodNotFound, UpstreamError
from ..protocol.ids import opaque_id
from ..records.question import CAPABILITY_FOR, Action, Question
from ..store import Store, StoreError
from . import elicitation, routing
from .answers import operator_answer

log = logging.getLogger("mcpx.broker")

DEFAULT_EXPIRY_S = 600.0
ABANDONED = (
    "the mcpx daemon that asked it ended without closing it (killed or crashed), so nothing waits for"
    " its answer any more"
)
ABANDON_BATCH = 1000  # open rows read at a time when closing orphans
HostAsk = Callable[[Question], Awaitable[dict[str, Any]]]
# Told when a question starts waiting for an operator (what the host should see meanwhile), and
# with None once it no longer waits (answered, expired, or its call ended).
OnWaiting = Callable[[str | None], Awaitable[None]]
WaitPolicy = Literal["attached", "always"]


class NotOpen(Exception):
    """The question exists but is no longer open (HTTP 409)."""


class UnknownQuestion(Exception):
    """No question has this id (HTTP 404)."""


class NotRecorded(InternalError):
    """The store could not write an answer (or a closing): nothing changed, the question is still
    open. A host gets it as -32603, `/v1` as 503."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # the store's own words


@dataclass
class _Waiting:
    question: Question
    done: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None  # what the upstream gets instead of an answer
    told_waiting: bool = False  # the host was told the question waits for an operator
    # The claim: held while one answer (or closing) is written, so two cannot both think they won
    # while the store is slow or failing; the next one waits and sees what the first came to.
    closing: anyio.Lock = field(default_factory=anyio.Lock)


def _json_size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(
        self,
        store: Store,
        bus: EventBus | None = None,
        *,
        wait_for_operator: WaitPolicy = "attached",
        operator_grace_s: float = 2.0,
        expiry_s: float = DEFAULT_EXPIRY_S,
        max_pending_per_task: int = 16,
        max_bytes: int = 256 * 1024,
        instance: str | None = None,
    ) -> None:
        """`instance`: this daemon's id when daemons share the store, written on each question."""
        self.store = store
        self.instance = instance
        self.max_pending_per_task = max_pending_per_task
        self.max_bytes = max_bytes  # the largest question (its params) and the largest answer, as JSON
        self.bus = bus or EventBus()
        self.wait_for_operator = wait_for_operator
        self.operator_grace_s = operator_grace_s
        self.expiry_s = expiry_s
        self._open: dict[str, _Waiting] = {}
        self._closed: str | None = None  # once the daemon drains, no new question opens

    async def close(self, reason: str = "the mcpx daemon stopped") -> None:
        """At shutdown, while the store is still open: every open question closes with a reason,
        and its asker gets an error (its call is being cut anyway)."""
        self._closed = reason
        for waiting in list(self._open.values()):
            if waiting.question.status == "open":
                try:
                    if await self._expire(waiting.question, reason, waiting=waiting):
                        waiting.error = InternalError(f"question not answered: {reason}")
                except NotRecorded:  # the same error either way: the call is being cut
                    waiting.error = InternalError(f"question not answered: {reason}")
                waiting.done.set()

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
        task_id: str | None,
        connection: str | None,
        host_ask: HostAsk | None,
        on_waiting: OnWaiting | None = None,
        qid: str | None = None,
        candidates: list[dict[str, Any]] | None = None,
        expiry_s: float | None = None,
        wait_always: bool = False,
        why: str | None = None,
    ) -> dict[str, Any]:
        """Open a question and return the first answer: the host's (if it can be asked), an
        operator's, or the expiry default. Raises what the upstream should get as an error.
        `candidates`: the calls that may have asked it, when it could not be tied to one.
        `expiry_s` overrides the configured expiry; `wait_always` waits for an operator whether
        or not one is attached (an approval may wait for hours; it never fails closed at once).
        `why`: the one line saying who it was put to and why (questions/routing.py)."""
        expiry = self.expiry_s if expiry_s is None else expiry_s
        if self._closed is not None:
            raise InternalError(f"question not asked: {self._closed}")
        self._check_room(method, params, task_id)
        now = _now_ms()
        q = Question(
            qid or opaque_id(12),
            upstream,
            method,
            dict(params),
            now,
            now + int(expiry * 1000),
            task_id=task_id,
            connection=connection,
            host_can_answer=host_ask is not None,
            candidates=list(candidates or []),
            why=why,
            instance=self.instance,
        )
        waiting = _Waiting(q)
        self._open[q.id] = waiting
        try:
            await self.store.put_question(replace(q), [Event("question.opened", q.wire(), task_id, connection, q.id)])
        except StoreError as exc:
            self._open.pop(q.id, None)
            raise InternalError(f"mcpx could not record the upstream's {method}: {exc}") from None
        except BaseException:  # cancelled while the row was written: no ghost question stays open
            self._open.pop(q.id, None)
            # Nor in its row, which the writer may still commit (a failed write is logged; the
            # cancellation is what goes on).
            with anyio.CancelScope(shield=True), contextlib.suppress(NotRecorded):
                await self._expire(q, "the call ended")
            raise
        expired = False
        try:
            async with anyio.create_task_group() as tg:
                if host_ask is not None:
                    tg.start_soon(self._from_host, waiting, host_ask)
                else:
                    tg.start_soon(self._need_operator, waiting, on_waiting, wait_always)
                with anyio.move_on_after(expiry) as timer:
                    await waiting.done.wait()
                expired = timer.cancelled_caught  # the monotonic timer, not the wall clock, says so
                tg.cancel_scope.cancel()
        finally:
            self._open.pop(q.id, None)
            with anyio.CancelScope(shield=True):
                if q.status == "open":  # its call ended first (cancelled, timed out), or it expired
                    reason = f"expired after {expiry:g} s" if expired else "the call ended"
                    # Not recorded: logged, and the upstream gets no expiry answer (below: an error).
                    with contextlib.suppress(NotRecorded):
                        await self._expire(q, reason, waiting=waiting)
                if waiting.told_waiting and on_waiting is not None:
                    await self._tell(q, on_waiting, None)  # it waits no more: the host is told so
        if waiting.error is not None:
            raise waiting.error
        if q.answer is None:
            raise InternalError(f"nobody answered the upstream's {method} in time")
        return q.answer

    async def _from_host(self, waiting: _Waiting, host_ask: HostAsk) -> None:
        q = waiting.question
        try:
            answer = await host_ask(q)
        except Exception as exc:  # noqa: BLE001 - whatever the host did, the question is settled here
            log.info("question %s: the host could not answer: %s", q.id, exc)
            if q.method != "elicitation/create":
                # The host's own error is its answer: no operator stand-in for sampling or roots.
                error = exc.error if isinstance(exc, UpstreamError) else {"code": -32603, "message": str(exc)}
                try:
                    if await self._settle(q, None, error, f"host:{q.connection}", waiting=waiting):
                        waiting.error = exc if isinstance(exc, (UpstreamError, McpError)) else UpstreamError(error)
                    waiting.done.set()
                    return
                except NotRecorded:
                    pass  # as if the host had not replied: below
            # An elicitation may still be answered by an operator, if one is (or soon is) attached;
            # otherwise nobody will, and the upstream is not held until the question expires.
            await self._leave_to_operator(waiting, "the host could not answer and no operator is attached")
            return
        try:
            await self.answer(q.id, answer, f"host:{q.connection}")
        except NotRecorded:
            # The host's reply cannot be refused to it any more (it was a response, or an
            # acknowledged tasks/update), so it is dropped: the upstream gets only recorded answers,
            # and the question stays open as if the host had not replied.
            await self._leave_to_operator(
                waiting, "the host's answer could not be recorded and no operator is attached"
            )

    async def _leave_to_operator(self, waiting: _Waiting, reason: str) -> None:
        """The host will not answer: the question waits for an operator if one is (or soon is)
        attached, or `questions.waitForOperator` says always; otherwise it closes unanswered."""
        if self.wait_for_operator == "attached" and not self.bus.operators():
            with anyio.move_on_after(self.operator_grace_s):
                await self.bus.operator_attached()
            if not self.bus.operators():
                try:
                    await self._expire(waiting.question, reason, waiting=waiting, unanswered=True)
                except NotRecorded as exc:
                    waiting.error = _unrecorded_end(waiting.question, exc)
                waiting.done.set()

    async def _need_operator(self, waiting: _Waiting, on_waiting: OnWaiting | None, wait_always: bool = False) -> None:
        """Nobody but an operator can answer: wait for one to attach (briefly), or give the
        upstream the answer of a client without the capability."""
        q = waiting.question
        if self.wait_for_operator == "attached" and not wait_always and not self.bus.operators():
            with anyio.move_on_after(self.operator_grace_s):
                await self.bus.operator_attached()
            if not self.bus.operators():
                capability = CAPABILITY_FOR.get(q.method, q.method)
                if q.candidates:
                    reason = (
                        f"mcpx cannot tell which of the {len(q.candidates)} calls in flight on {q.upstream} asked"
                        " (so no host may answer it) and no operator is attached: attach one (mcpx console),"
                        f" or give each host its own process of the server (mcpServers.{q.upstream}.mcpx.scope: host)"
                    )
                else:
                    not_host = routing.why_not_the_host(q.why) or f"the host did not declare {capability}"
                    reason = f"{not_host} and no operator is attached"
                error = MethodNotFound(f"Method not found: {q.method} ({reason})")
                try:
                    if await self._expire(q, reason, error.to_error(), waiting=waiting):
                        waiting.error = error
                except NotRecorded as exc:
                    waiting.error = _unrecorded_end(q, exc)
                waiting.done.set()
                return
        if on_waiting is not None:
            waiting.told_waiting = True
            await self._tell(q, on_waiting, f"waiting for an operator to answer {q.upstream}'s {q.kind} question")

    @staticmethod
    async def _tell(q: Question, on_waiting: OnWaiting, message: str | None) -> None:
        try:
            await on_waiting(message)
        except Exception:
            log.debug("question %s: could not tell the host it waits (%s)", q.id, message, exc_info=True)

    def _check_room(self, method: str, params: dict[str, Any], task_id: str | None) -> None:
        size = _json_size(params)
        if size > self.max_bytes:
            raise LimitReached("questions.maxBytes", self.max_bytes, f"the upstream's {method} is {size} bytes")
        if task_id is not None:
            pending = sum(1 for w in self._open.values() if w.question.task_id == task_id)
            if pending >= self.max_pending_per_task:
                raise LimitReached(
                    "questions.maxPendingPerTask", self.max_pending_per_task, f"task {task_id} has that many open"
                )

    async def answer(self, qid: str, answer: dict[str, Any], by: str) -> bool:
        """The first answer recorded wins; later ones (and unknown ids) are ignored. True when it
        was taken. An answer larger than `max_bytes` is refused (LimitReached), one the store does
        not record too (NotRecorded); the question stays open either way."""
        waiting = self._open.get(qid)
        if waiting is None or waiting.question.status != "open":
            return False
        self._check_answer_size(answer)
        taken = await self._settle(waiting.question, answer, None, by, waiting=waiting)  # the row first
        waiting.done.set()  # then the asker: this answer, or the one that came first
        return taken

    async def answer_as_operator(
        self, qid: str, action: Action, *, content: object = None, result: object = None, by: str
    ) -> Question:
        """An operator's answer, checked against the question (AnswerError), refused when the
        question is no longer open (NotOpen) or never was (UnknownQuestion)."""
        waiting = self._open.get(qid)
        if waiting is None:
            stored = await self.store.get_question(qid)
            if stored is None:
                raise UnknownQuestion(qid)
            if stored.status != "open" or stored.task_id is None:
                why = f" ({stored.reason})" if stored.status == "abandoned" and stored.reason else ""
                raise NotOpen(f"question {qid} is already {stored.status}{why}: it takes no answer")
            return await self._answer_for_another_daemon(stored, action, content, result, by)
        out = operator_answer(waiting.question, action, content, result)
        if isinstance(out, tuple):
            code, message = out
            error = {"code": code, "message": message}
            taken = await self._settle(waiting.question, None, error, by, action=action, waiting=waiting)
            if taken:
                waiting.error = UpstreamError(error)
            waiting.done.set()
            if not taken:
                raise NotOpen(f"question {qid} was answered meanwhile")
        elif not await self.answer(qid, out, by):
            raise NotOpen(f"question {qid} was answered meanwhile")
        return waiting.question

    async def _answer_for_another_daemon(
        self, q: Question, action: Action, content: object, result: object, by: str
    ) -> Question:
        """A question open on another daemon that shares the store (its task runs there): the answer
        is written to its row here, and the daemon running the task is told its id, reads the row
        and hands the upstream exactly that answer (take_stored_answer)."""
        out = operator_answer(q, action, content, result)
        if isinstance(out, tuple):
            code, message = out
            taken = await self._settle(q, None, {"code": code, "message": message}, by, action=action)
        else:
            taken = await self._settle(q, out, None, by)
        if not taken:
            raise NotOpen(f"question {q.id} was answered meanwhile")
        await self._tell_owner(q)
        return q

    async def abandon(self, orphaned: Callable[[Question], bool], reason: str = ABANDONED) -> list[str]:
        """Close as `abandoned` the stored open questions that no asker here waits for and that
        `orphaned` picks (their daemon ended without closing them); their ids. A row answered
        meanwhile (by the daemon that asked it, on a shared store) is left as it is."""
        closed: list[str] = []
        while True:
            batch = await self.store.questions(frozenset({"open"}), limit=ABANDON_BATCH)
            picked = [q for q in batch if q.id not in self._open and q.id not in closed and orphaned(q)]
            for q in picked:
                gone = replace(q, status="abandoned", closed_ms=_now_ms(), reason=reason)
                event = Event("question.abandoned", {"reason": reason}, q.task_id, q.connection, q.id, by="mcpx")
                if await self._write_closed(q, gone, event):
                    closed.append(q.id)
            if not picked or len(batch) < ABANDON_BATCH:
                break
        if closed:
            log.warning("closed %d question(s) left open by a daemon that ended without closing them", len(closed))
        return closed

    async def answer_elsewhere(self, qid: str, task_id: str, answer: object, by: str) -> bool:
        """A host's `tasks/update` answer to a key of its task that is asked on another daemon (the
        one running the task): written to the question's row if it is still open, then forwarded.
        False when the key is no open question of that task, or another answer came first."""
        if qid in self._open or not isinstance(answer, dict):
            return False
        stored = await self.store.get_question(qid)
        if stored is None or stored.status != "open" or stored.task_id != task_id:
            return False
        self._check_answer_size(answer)
        if not await self._settle(stored, answer, None, by):
            return False
        await self._tell_owner(stored)
        return True

    async def _tell_owner(self, q: Question) -> None:
        """The question's row was closed here; the daemon that asked it hands the upstream exactly
        what the row says (take_stored_answer)."""
        assert q.task_id is not None  # only a task's questions are answered across daemons
        await self.store.forward(q.task_id, f"answer:{q.id}")

    def _check_answer_size(self, answer: dict[str, Any]) -> None:
        size = _json_size(answer)
        if size > self.max_bytes:
            raise LimitReached("questions.maxBytes", self.max_bytes, f"this answer is {size} bytes", http_status=413)

    async def take_stored_answer(self, qid: str) -> None:
        """Another daemon answered a question asked here (its row says how): the asker gets that."""
        waiting = self._open.get(qid)
        if waiting is None:
            return
        async with waiting.closing:  # not while an answer of ours is being written: its outcome first
            if waiting.question.status != "open" or not await self._adopt_stored(waiting):
                return
        waiting.done.set()

    async def _adopt_stored(self, waiting: _Waiting) -> bool:
        """The question's row was closed by another daemon: take its answer (or error) as ours."""
        stored = await self.store.get_question(waiting.question.id)
        if stored is None or stored.status == "open":
            return False
        _take(waiting.question, stored)
        if stored.error is not None:
            waiting.error = UpstreamError(stored.error)
        return True

    async def _settle(
        self,
        q: Question,
        answer: dict[str, Any] | None,
        error: dict[str, Any] | None,
        by: str,
        action: str | None = None,
        *,
        waiting: _Waiting | None = None,
    ) -> bool:
        """Close `q` as answered. The first answer recorded wins, across daemons too: False, and `q`
        left as it was, when it was closed first (by another daemon: `waiting`, if given, then takes
        the row's answer). NotRecorded, and `q` still open, when the store did not write it.
        A form's accepted answer is recorded (and goes upstream) with the defaults of the fields it
        leaves out (SEP-1034), whoever gave it."""
        if answer is not None and q.kind == "elicitation":
            answer = elicitation.fill_defaults(q.params.get("requestedSchema"), answer)
        data: dict[str, Any] = {
            "by": by,
            "action": action or (answer or {}).get("action") or ("error" if error else "accept"),
        }
        if answer is not None:
            data["answer"] = answer
        if error is not None:
            data["error"] = error
        closed = replace(q, status="answered", answered_by=by, answer=answer, error=error, closed_ms=_now_ms())
        event = Event("question.answered", data, q.task_id, q.connection, q.id, by=by)
        return await self._close(q, closed, event, waiting)

    async def _expire(
        self,
        q: Question,
        reason: str,
        error: dict[str, Any] | None = None,
        *,
        waiting: _Waiting | None = None,
        unanswered: bool = False,
    ) -> bool:
        """Close `q` unanswered; False (and `q` unchanged) when an answer came first (another
        daemon's: `waiting`, if given, then takes it), NotRecorded when the store did not write it.
        `unanswered`: nobody will answer it (as at its expiry), so an elicitation gets its polite
        answer."""
        closed = replace(q, status="expired", answered_by="mcpx", closed_ms=_now_ms(), reason=reason, error=error)
        # An elicitation nobody answered in time is declined politely; other kinds have no neutral answer.
        if error is None and q.method == "elicitation/create" and (unanswered or reason.startswith("expired")):
            closed.answer = {"action": "cancel"}
        event = Event("question.expired", {"reason": reason}, q.task_id, q.connection, q.id, by="mcpx")
        return await self._close(q, closed, event, waiting)

    async def _close(self, q: Question, closed: Question, event: Event, waiting: _Waiting | None) -> bool:
        """Write `closed` (`q` closed) with its event, and only then make it `q`'s state."""
        if waiting is None:  # a row of another daemon's question: the row alone says who won
            return await self._write_closed(q, closed, event)
        async with waiting.closing:
            if q.status != "open":
                return False  # another answer was recorded while this one waited
            with anyio.CancelScope(shield=True):  # claimed: the outcome lands in memory as in the row
                taken = await self._write_closed(q, closed, event)
                if not taken:
                    await self._adopt_stored(waiting)  # another daemon's answer is in the row: that one goes upstream
            return taken

    async def _write_closed(self, q: Question, closed: Question, event: Event) -> bool:
        try:
            taken = await self.store.settle_question(closed, [event])
        except StoreError as exc:
            # Nothing was written, so nothing happens: an answer the upstream got unrecorded could
            # lose to a later one here, or be missing from the event log.
            log.warning("question %s: %s not stored, the question stays open: %s", q.id, event.kind, exc)
            what = "answer" if event.kind == "question.answered" else "closing"
            message = f"the store could not record the {what} of question {q.id} ({exc}); it is still open"
            raise NotRecorded(message, str(exc)) from None
        if taken:
            _take(q, closed)
        return taken


def _take(q: Question, closed: Question) -> None:
    """`q` as `closed` says it ended."""
    q.status, q.answered_by, q.answer, q.error, q.closed_ms, q.reason = (
        closed.status,
        closed.answered_by,
        closed.answer,
        closed.error,
        closed.closed_ms,
        closed.reason,
    )


def _unrecorded_end(q: Question, exc: NotRecorded) -> InternalError:
    """What the upstream gets when mcpx gives up on a question it could not record closing: an
    error, never an answer the store does not hold."""
    return InternalError(f"mcpx could not record how the upstream's {q.method} ended: {exc.reason}")
