"""mcpx.questions.broker: a question is one stored row with its question.* events; it is answered once (host
or operator, first wins, who answered is kept), operators' answers are checked (404/409/422), a
question nobody can answer is closed at once with -32601, one whose call ends closes with it, and
at expiry an elicitation is answered cancel while anything else fails; real SqliteStore files."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from mcpx.events.bus import EventBus, StoredEvent, Subscriber
from mcpx.protocol.errors import InternalError, LimitReached, MethodNotFound, UpstreamError
from mcpx.questions.answers import AnswerError
from mcpx.questions.broker import Broker, NotOpen, NotRecorded, UnknownQuestion
from mcpx.records.question import USER_REJECTED, Question
from mcpx.store import StoreError
from mcpx.store.sqlite import SqliteStore

from .storekit import Watch, check_event, opened

pytestmark = pytest.mark.anyio

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
ROOTS = "roots/list"
FORM = {
    "message": "name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
}
ACCEPT = {"action": "accept", "content": {"name": "Ann"}}


@contextlib.asynccontextmanager
async def brokered(path: Path, *, operator: str | None = "ann", **kw: Any) -> AsyncIterator[tuple[Broker, Watch]]:
    """A broker on a real store whose commits reach its bus, and a watch on the question events
    (itself an attached operator unless `operator` is None)."""
    bus = EventBus()
    async with opened(path, bus=bus) as w:
        watch = Watch(bus, kinds=("question.opened", "question.answered", "question.expired"), operator=operator)
        yield Broker(w.store, bus, **kw), watch


class Outcome:
    """What one `Broker.ask` returned or raised."""

    answer: dict[str, Any] | None = None
    error: BaseException | None = None

    def __init__(self) -> None:
        self.done = anyio.Event()

    async def wait(self) -> Outcome:
        with anyio.fail_after(5):
            await self.done.wait()
        return self


def ask(
    tg: TaskGroup, broker: Broker, method: str = ELICIT, params: dict[str, Any] | None = None, **kw: Any
) -> Outcome:
    out = Outcome()
    kw.setdefault("host_ask", None)
    kw.setdefault("task_id", "t1")
    kw.setdefault("connection", "c-1")

    async def run() -> None:
        try:
            out.answer = await broker.ask(upstream="up", method=method, params=FORM if params is None else params, **kw)
        except Exception as exc:
            out.error = exc
        finally:
            out.done.set()

    tg.start_soon(run)
    return out


async def opened_question(watch: Watch, broker: Broker) -> Question:
    event = await watch.next(lambda e: e.event.kind == "question.opened")
    q = broker.get(event.event.data["id"])
    assert q is not None
    return q


async def stored(broker: Broker, qid: str) -> Question:
    q = await broker.store.get_question(qid)
    assert q is not None
    return q


def events_of(watch: Watch, qid: str) -> list[StoredEvent]:
    return [e for e in watch.drain() if e.event.question_id == qid]


# ---- answers -------------------------------------------------------------------------------


async def test_an_operator_answer_is_returned_and_recorded_with_its_events(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        assert (await stored(broker, q.id)).status == "open"  # the row exists while it is open
        taken = await broker.answer_as_operator(q.id, "accept", content={"name": "Ann"}, by="operator:ann")
        await out.wait()
        row = await stored(broker, q.id)
        await watch.next(lambda e: e.event.kind == "question.answered")
    assert out.answer == ACCEPT and out.error is None and taken is q
    assert (q.status, q.answered_by, q.answer) == ("answered", "operator:ann", ACCEPT)
    assert (row.status, row.answered_by, row.answer, row.kind, row.task_id, row.connection) == (
        "answered",
        "operator:ann",
        ACCEPT,
        "elicitation",
        "t1",
        "c-1",
    )
    opened_ev, answered = events_of(watch, q.id)
    assert opened_ev.event.data["status"] == "open" and opened_ev.event.data["params"] == FORM
    assert (opened_ev.event.task_id, opened_ev.event.connection_id) == ("t1", "c-1")
    assert (answered.event.by, answered.event.data) == (
        "operator:ann",
        {"by": "operator:ann", "action": "accept", "answer": ACCEPT},
    )
    for event in (opened_ev, answered):
        check_event(event)


async def test_the_first_answer_wins_and_later_ones_are_refused(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        assert await broker.answer(q.id, ACCEPT, "operator:ann") is True
        assert await broker.answer(q.id, {"action": "decline"}, "operator:bob") is False
        await out.wait()
        assert await broker.answer(q.id, {"action": "decline"}, "operator:bob") is False  # closed by now
        with pytest.raises(NotOpen, match="answered"):  # 409
            await broker.answer_as_operator(q.id, "decline", by="operator:bob")
        row = await stored(broker, q.id)
    assert out.answer == ACCEPT and q.answer == ACCEPT and q.answered_by == "operator:ann"
    assert row.answer == ACCEPT and row.answered_by == "operator:ann"
    assert [e.event.kind for e in events_of(watch, q.id)] == ["question.opened", "question.answered"]


async def test_a_question_that_never_existed_cannot_be_answered(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, _):
        assert await broker.answer("no-such-question", ACCEPT, "operator:ann") is False
        with pytest.raises(UnknownQuestion):  # 404
            await broker.answer_as_operator("no-such-question", "decline", by="operator:ann")


async def test_the_host_answers_when_it_can_be_asked(tmp_path: Path) -> None:
    asked_host: list[Question] = []

    async def host_ask(q: Question) -> dict[str, Any]:
        asked_host.append(q)
        return ACCEPT

    async with brokered(tmp_path / "mcpx.db", operator=None) as (broker, watch):
        answer = await broker.ask(
            upstream="up", method=ELICIT, params=FORM, task_id=None, connection="c-1", host_ask=host_ask
        )
        row = await stored(broker, asked_host[0].id)
        answered = await watch.next(lambda e: e.event.kind == "question.answered")
    assert answer == ACCEPT and asked_host[0].answered_by == "host:c-1"
    assert (row.status, row.answered_by, row.host_can_answer, row.task_id) == ("answered", "host:c-1", True, None)
    assert answered.event.by == "host:c-1"


async def test_an_operator_answer_beats_a_slow_host_whose_ask_is_then_stopped(tmp_path: Path) -> None:
    host_asked, host_stopped = anyio.Event(), anyio.Event()

    async def slow_host(q: Question) -> dict[str, Any]:
        host_asked.set()
        try:
            await anyio.Event().wait()
        finally:
            host_stopped.set()
        raise AssertionError("unreachable")

    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, host_ask=slow_host)
        q = await opened_question(watch, broker)
        with anyio.fail_after(5):
            await host_asked.wait()
        await broker.answer_as_operator(q.id, "decline", by="operator:ann")
        await out.wait()
        with anyio.fail_after(5):
            await host_stopped.wait()
    assert out.answer == {"action": "decline"} and q.answered_by == "operator:ann"


async def test_a_host_answer_after_the_operators_is_ignored(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        assert await broker.answer(q.id, {"action": "decline"}, "operator:ann") is True
        assert await broker.answer(q.id, ACCEPT, "host:c-1") is False
        await out.wait()
    assert out.answer == {"action": "decline"} and q.answered_by == "operator:ann"


async def test_open_questions_and_get_show_a_question_only_while_it_is_open(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, method=ROOTS, params={})
        q = await opened_question(watch, broker)
        assert broker.open_questions() == [q] and broker.get(q.id) is q
        assert q.wire()["kind"] == "roots" and q.wire()["taskId"] == "t1"
        await broker.answer_as_operator(q.id, "accept", result={"roots": []}, by="operator:ann")
        await out.wait()
    assert out.answer == {"roots": []}
    assert broker.open_questions() == [] and broker.get(q.id) is None


@pytest.mark.parametrize(
    ("method", "params", "kind"),
    [
        (ELICIT, {"message": "?"}, "elicitation"),
        (ELICIT, {"mode": "url", "url": "https://example.com"}, "url-elicitation"),
        (SAMPLE, {}, "sampling"),
        (ROOTS, {}, "roots"),
        ("x/other", {}, "other"),
    ],
)
def test_a_questions_kind_follows_its_method_and_mode(method: str, params: dict[str, Any], kind: str) -> None:
    assert Question("q", "up", method, params, 0, 1).kind == kind


# ---- operators' answers are checked ------------------------------------------------------------


async def test_an_operator_answer_that_does_not_fit_is_refused_and_the_question_stays_open(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        with pytest.raises(AnswerError) as caught:  # 422
            await broker.answer_as_operator(q.id, "accept", content={"name": 7}, by="operator:ann")
        assert caught.value.fields == {"content.name": "must be a string"}
        assert broker.get(q.id) is q and (await stored(broker, q.id)).status == "open"
        await broker.answer_as_operator(q.id, "accept", content={"name": "Ann"}, by="operator:ann")
        await out.wait()
    assert out.answer == ACCEPT


async def test_an_operator_declining_sampling_gives_the_upstream_a_user_rejected_error(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, method=SAMPLE, params={"messages": []})
        q = await opened_question(watch, broker)
        await broker.answer_as_operator(q.id, "decline", by="operator:ann")
        await out.wait()
        row = await stored(broker, q.id)
        answered = await watch.next(lambda e: e.event.kind == "question.answered")
    assert isinstance(out.error, UpstreamError) and out.error.error["code"] == USER_REJECTED
    assert (row.status, row.answered_by, row.answer) == ("answered", "operator:ann", None)
    assert row.error is not None and row.error["code"] == USER_REJECTED
    assert answered.event.data["action"] == "decline" and answered.event.data["error"] == row.error
    check_event(answered)


# ---- nobody to answer ----------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "capability"), [(ELICIT, "elicitation"), (SAMPLE, "sampling"), (ROOTS, "roots")])
async def test_a_question_nobody_can_answer_is_closed_at_once_as_method_not_found(
    tmp_path: Path, method: str, capability: str
) -> None:
    async with brokered(tmp_path / "mcpx.db", operator=None, operator_grace_s=0.05) as (broker, watch):
        with anyio.fail_after(5), pytest.raises(MethodNotFound) as caught:  # long before the 600 s expiry
            await broker.ask(upstream="up", method=method, params={}, task_id=None, connection="c-1", host_ask=None)
        (row,) = await broker.store.questions()
        expired = await watch.next(lambda e: e.event.kind == "question.expired")
    reason = f"the host did not declare {capability} and no operator is attached"
    assert reason in str(caught.value)
    assert (row.status, row.answered_by, row.reason, row.answer) == ("expired", "mcpx", reason, None)
    assert row.error == caught.value.to_error() and row.error["code"] == -32601
    assert expired.event.data == {"reason": reason} and broker.open_questions() == []


async def test_an_operator_who_attaches_within_the_grace_can_answer(tmp_path: Path) -> None:
    told: list[str | None] = []
    waiting = anyio.Event()

    async def on_waiting(message: str | None) -> None:
        told.append(message)
        waiting.set()

    grace = brokered(tmp_path / "mcpx.db", operator=None, operator_grace_s=30)
    async with grace as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, on_waiting=on_waiting)
        q = await opened_question(watch, broker)
        assert broker.bus.operators() == [] and not waiting.is_set()
        broker.bus.subscribe(Subscriber(operator="ann"))  # the console attaches
        with anyio.fail_after(5):
            await waiting.wait()
        await broker.answer_as_operator(q.id, "accept", content={"name": "Ann"}, by="operator:ann")
        await out.wait()
    assert out.answer == ACCEPT
    # Told it waits, then (answered) that it waits no more.
    assert told == ["waiting for an operator to answer up's elicitation question", None]


async def test_waiting_always_for_an_operator_keeps_the_question_open_without_one(tmp_path: Path) -> None:
    waiting = anyio.Event()

    async def on_waiting(message: str | None) -> None:
        waiting.set()

    always = brokered(tmp_path / "mcpx.db", operator=None, operator_grace_s=0.0, wait_for_operator="always")
    async with always as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, method=ROOTS, params={}, on_waiting=on_waiting)
        q = await opened_question(watch, broker)
        with anyio.fail_after(5):
            await waiting.wait()  # past the (zero) grace, and told so
        assert broker.get(q.id) is q and broker.bus.operators() == []
        await broker.answer_as_operator(q.id, "accept", result={"roots": []}, by="operator:ann")
        await out.wait()
    assert out.answer == {"roots": []}


# ---- expiry and failures -------------------------------------------------------------------


async def test_an_unanswered_elicitation_expires_as_cancel(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db", expiry_s=0.05) as (broker, watch):
        with anyio.fail_after(5):
            answer = await broker.ask(
                upstream="up", method=ELICIT, params={}, task_id=None, connection=None, host_ask=None
            )
        (row,) = await broker.store.questions()
        expired = await watch.next(lambda e: e.event.kind == "question.expired")
    assert answer == {"action": "cancel"}
    assert (row.status, row.answered_by, row.answer, row.reason) == (
        "expired",
        "mcpx",
        {"action": "cancel"},
        "expired after 0.05 s",
    )
    assert expired.event.data == {"reason": "expired after 0.05 s"} and broker.open_questions() == []


@pytest.mark.parametrize("method", [SAMPLE, ROOTS])
async def test_an_unanswered_question_of_another_kind_expires_as_an_error(tmp_path: Path, method: str) -> None:
    async with brokered(tmp_path / "mcpx.db", expiry_s=0.05) as (broker, _):
        with anyio.fail_after(5), pytest.raises(InternalError, match="nobody answered"):
            await broker.ask(upstream="up", method=method, params={}, task_id=None, connection=None, host_ask=None)
        (row,) = await broker.store.questions()
    assert (row.status, row.answered_by, row.answer, row.reason) == ("expired", "mcpx", None, "expired after 0.05 s")


@pytest.mark.parametrize("method", [SAMPLE, ROOTS])
async def test_a_host_that_fails_sampling_or_roots_fails_the_question_at_once(tmp_path: Path, method: str) -> None:
    refused = UpstreamError({"code": -32601, "message": "no sampling here"})

    async def host_ask(q: Question) -> dict[str, Any]:
        raise refused

    async with brokered(tmp_path / "mcpx.db") as (broker, watch):
        with anyio.fail_after(5), pytest.raises(UpstreamError) as caught:  # long before the 600 s expiry
            await broker.ask(upstream="up", method=method, params={}, task_id=None, connection="c-1", host_ask=host_ask)
        (row,) = await broker.store.questions()
        answered = await watch.next(lambda e: e.event.kind == "question.answered")
    assert caught.value is refused and broker.open_questions() == []
    assert (row.status, row.answered_by, row.error) == ("answered", "host:c-1", refused.error)
    assert answered.event.data == {"by": "host:c-1", "action": "error", "error": refused.error}


async def test_a_host_that_fails_an_elicitation_leaves_it_to_an_operator(tmp_path: Path) -> None:
    host_failed = anyio.Event()

    async def host_ask(q: Question) -> dict[str, Any]:
        host_failed.set()
        raise UpstreamError({"code": -32603, "message": "host went away"})

    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, host_ask=host_ask)
        q = await opened_question(watch, broker)
        with anyio.fail_after(5):
            await host_failed.wait()
        assert broker.get(q.id) is q  # still open
        assert await broker.answer(q.id, ACCEPT, "operator:ann") is True
        await out.wait()
    assert out.answer == ACCEPT and q.answered_by == "operator:ann"


async def test_a_host_that_fails_an_elicitation_nobody_else_answers_expires_as_cancel(tmp_path: Path) -> None:
    async def host_ask(q: Question) -> dict[str, Any]:
        raise UpstreamError({"code": -32603, "message": "host went away"})

    async with brokered(tmp_path / "mcpx.db", operator=None, expiry_s=0.05) as (broker, _):
        with anyio.fail_after(5):
            answer = await broker.ask(
                upstream="up", method=ELICIT, params={}, task_id=None, connection="c-1", host_ask=host_ask
            )
    assert answer == {"action": "cancel"}


async def test_a_host_that_fails_an_elicitation_with_no_operator_attached_frees_the_upstream_at_once(
    tmp_path: Path,
) -> None:
    """Not after the question's 10 minutes (the test above hides that with a 50 ms expiry): after the
    operator grace, as when nobody could be asked at all; an elicitation's answer is then cancel."""

    async def host_ask(q: Question) -> dict[str, Any]:
        raise UpstreamError({"code": -32603, "message": "host went away"})

    async with brokered(tmp_path / "mcpx.db", operator=None, operator_grace_s=0.05) as (broker, _):
        with anyio.fail_after(5):
            answer = await broker.ask(
                upstream="up", method=ELICIT, params={}, task_id=None, connection="c-1", host_ask=host_ask
            )
        [q] = await broker.store.questions(frozenset({"expired"}))
    assert answer == {"action": "cancel"}
    assert q.reason == "the host could not answer and no operator is attached" and q.answered_by == "mcpx"


async def test_a_store_that_cannot_record_a_question_fails_the_ask_and_leaves_nothing_open(tmp_path: Path) -> None:
    broker = Broker(SqliteStore(tmp_path / "never-opened.db"))  # every write raises StoreError
    with anyio.fail_after(5), pytest.raises(InternalError, match="could not record"):
        await broker.ask(upstream="up", method=ELICIT, params={}, task_id=None, connection=None, host_ask=None)
    assert broker.open_questions() == []


async def test_an_answer_the_store_cannot_record_is_refused_and_the_question_stays_open(tmp_path: Path) -> None:
    """Not passed on unrecorded (#26): a later answer could then win in the row, and the event log
    would miss it. Racing answers under store faults: test_broker_store_faults.py."""
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        store = broker.store
        assert isinstance(store, SqliteStore) and store.db is not None
        await store.db.execute("PRAGMA query_only = ON")  # from now on every write fails
        with pytest.raises(StoreError):
            await store.put_session("probe", {})
        with pytest.raises(NotRecorded):
            await broker.answer(q.id, ACCEPT, "operator:ann")
        assert not out.done.is_set() and q.status == "open"
        await store.db.execute("PRAGMA query_only = OFF")
        assert await broker.answer(q.id, ACCEPT, "operator:ann") is True
        await out.wait()
    assert out.answer == ACCEPT


@pytest.mark.parametrize("how", ["host-failed", "asker-cancelled"])
async def test_a_question_that_ended_unanswered_is_not_left_open_in_the_history(tmp_path: Path, how: str) -> None:
    async def host_fails(q: Question) -> dict[str, Any]:
        raise UpstreamError({"code": -32601, "message": "no sampling here"})

    async with brokered(tmp_path / "mcpx.db") as (broker, watch):
        async with anyio.create_task_group() as tg:
            out = ask(tg, broker, method=SAMPLE, params={}, host_ask=host_fails if how == "host-failed" else None)
            q = await opened_question(watch, broker)
            if how == "asker-cancelled":
                tg.cancel_scope.cancel()  # the upstream call that asked was cancelled
            else:
                await out.wait()
        assert broker.get(q.id) is None  # gone from the open questions...
        row = await stored(broker, q.id)
        snapshot = await broker.store.snapshot(10)
        closed = await watch.next(lambda e: e.event.kind in ("question.answered", "question.expired"))
    assert row.status != "open" and snapshot.questions == []  # ...and from /v1/questions and the feed
    if how == "asker-cancelled":
        assert (row.status, row.reason, closed.event.data) == (
            "expired",
            "the call ended",
            {"reason": "the call ended"},
        )


async def test_an_ask_cancelled_while_its_row_is_written_leaves_no_open_question(tmp_path: Path) -> None:
    bus = EventBus()
    async with opened(tmp_path / "mcpx.db", writer=False, bus=bus) as w:  # the question's first write waits
        broker = Broker(w.store, bus, wait_for_operator="always")
        async with anyio.create_task_group() as tg:
            ask(tg, broker)
            await anyio.wait_all_tasks_blocked()  # the ask waits on its row's commit
            assert len(broker.open_questions()) == 1
            tg.cancel_scope.cancel()  # the upstream call that asked is cancelled meanwhile
            w.start()  # and the writer gets to the queued row
        assert broker.open_questions() == []  # an operator would see, and could "answer", a dead question
        await w.store.put_session("drain", {})  # FIFO: every write queued before has landed too
        (row,) = await w.store.questions()
        snapshot = await w.store.snapshot(10)
        with pytest.raises(NotOpen):  # the row says it is closed, and so does the answer route
            await broker.answer_as_operator(row.id, "decline", by="operator:ann")
    assert row.status == "expired" and row.reason == "the call ended"
    assert snapshot.questions == []  # the feed's snapshot shows no ghost either


# ---- limits --------------------------------------------------------------------------------


async def test_a_question_over_max_bytes_is_refused_to_the_upstream_naming_the_limit(tmp_path: Path) -> None:
    big = {**FORM, "message": "x" * 2000}
    async with brokered(tmp_path / "mcpx.db", max_bytes=1000) as (broker, watch), anyio.create_task_group() as tg:
        out = await ask(tg, broker, params=big).wait()
    assert isinstance(out.error, LimitReached) and "questions.maxBytes (1000)" in out.error.message
    assert out.error.to_error()["data"] == {"limit": "questions.maxBytes", "value": 1000}
    assert broker.open_questions() == [] and watch.drain() == []  # nothing was opened


async def test_a_task_has_at_most_max_pending_questions_open(tmp_path: Path) -> None:
    async with (
        brokered(tmp_path / "mcpx.db", max_pending_per_task=2) as (broker, watch),
        anyio.create_task_group() as tg,
    ):
        first, second = ask(tg, broker), ask(tg, broker)
        await opened_question(watch, broker)
        await opened_question(watch, broker)
        third = await ask(tg, broker).wait()
        assert isinstance(third.error, LimitReached) and "questions.maxPendingPerTask (2)" in third.error.message
        other = ask(tg, broker, task_id="t2")  # another task is not held back
        q_other = await opened_question(watch, broker)
        assert q_other.task_id == "t2"
        for q in broker.open_questions():
            await broker.answer(q.id, ACCEPT, "operator:ann")
        for out in (first, second, other):
            assert (await out.wait()).answer == ACCEPT


async def test_an_answer_over_max_bytes_is_refused_and_the_question_stays_open(tmp_path: Path) -> None:
    async with brokered(tmp_path / "mcpx.db", max_bytes=500) as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker)
        q = await opened_question(watch, broker)
        with pytest.raises(LimitReached) as refused:
            await broker.answer_as_operator(q.id, "accept", content={"name": "A" * 600}, by="operator:ann")
        assert refused.value.http_status == 413 and "this answer is" in refused.value.message
        assert q.status == "open" and (await stored(broker, q.id)).status == "open"
        await broker.answer_as_operator(q.id, "accept", content={"name": "Ann"}, by="operator:ann")
        assert (await out.wait()).answer == ACCEPT
