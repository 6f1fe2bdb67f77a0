"""mcpx.questions.broker while the store fails to write: an answer counts only once it is recorded.
Racing answers are written one at a time, so exactly one can win and the upstream gets that one;
an answer the store refuses is refused to whoever gave it (NotRecorded: 503 on /v1, -32603 to a
host) and the question stays open for the next. Real SqliteStore files; the faults are made in the
store's own writer connection (a read-only connection, or a trigger that fails a question's close)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpx.protocol.errors import InternalError
from mcpx.questions.broker import Broker, NotRecorded
from mcpx.records.question import Question
from mcpx.store.sqlite import SqliteStore

from .storekit import WAIT_S, Watch
from .test_broker import ACCEPT, Outcome, ask, brokered, opened_question

pytestmark = pytest.mark.anyio

HOST_ANSWER = {"action": "accept", "content": {"name": "Host"}}


def writer(broker: Broker) -> Any:
    store = broker.store
    assert isinstance(store, SqliteStore) and store.db is not None
    return store.db


class FailingCloses:
    """A fault in the store: every write that closes a question fails (as a full disk or an I/O
    error would fail it) while `failing`, or only the next one with `once`. Records who tried."""

    def __init__(self, *, once: bool = False) -> None:
        self.failing = True
        self.once = once
        self.tried: list[str] = []

    def __call__(self, by: str) -> int:  # runs in the store's writer thread, inside the UPDATE
        self.tried.append(by)
        fail = self.failing
        if self.once:
            self.failing = False
        if fail:
            raise sqlite3.OperationalError("injected fault")
        return 0

    async def install(self, broker: Broker) -> FailingCloses:
        db = writer(broker)
        await db.create_function("test_fault", 1, self)
        await db.execute(
            "CREATE TEMP TRIGGER fail_close BEFORE UPDATE ON questions"
            " BEGIN SELECT test_fault(json_extract(NEW.body, '$.answered_by')); END"
        )
        return self

    async def until_tried(self, *who: str) -> None:
        with anyio.fail_after(WAIT_S):
            while not set(who) <= set(self.tried):
                await anyio.sleep(0.01)


async def answers(broker: Broker, q: Question, *names: str) -> dict[str, BaseException | Question]:
    """The named operators' answers, given at the same moment: what each got back."""
    got: dict[str, BaseException | Question] = {}

    async def one(name: str) -> None:
        try:
            got[name] = await broker.answer_as_operator(q.id, "accept", content={"name": name}, by=f"operator:{name}")
        except Exception as exc:
            got[name] = exc

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    return got


@contextlib.asynccontextmanager
async def one_question(tmp_path: Path, **kw: Any) -> AsyncIterator[tuple[Broker, Watch, Outcome, Question]]:
    """A broker on a real store, with an operator attached, and one elicitation open: what its
    upstream gets lands in the Outcome."""
    async with brokered(tmp_path / "mcpx.db") as (broker, watch), anyio.create_task_group() as tg:
        out = ask(tg, broker, **kw)
        yield broker, watch, out, await opened_question(watch, broker)


def answered_events(watch: Watch, qid: str) -> list[Any]:
    return [e for e in watch.drain() if e.event.question_id == qid and e.event.kind == "question.answered"]


async def test_two_operator_answers_while_the_database_is_read_only_are_both_refused_and_it_stays_open(
    tmp_path: Path,
) -> None:
    async with one_question(tmp_path) as (broker, watch, out, q):
        await writer(broker).execute("PRAGMA query_only = ON")  # every write fails from now on
        got = await answers(broker, q, "ann", "bob")
        assert all(isinstance(r, NotRecorded) for r in got.values()), got
        assert "it is still open" in str(got["ann"])
        # Nobody's answer went upstream, and the question waits for the next one.
        assert not out.done.is_set() and q.status == "open" and broker.get(q.id) is q
        before = await broker.store.get_question(q.id)
        assert before is not None and before.status == "open"
        await writer(broker).execute("PRAGMA query_only = OFF")  # the store works again
        taken = await broker.answer_as_operator(q.id, "accept", content={"name": "Cy"}, by="operator:cy")
        await out.wait()
        row = await broker.store.get_question(q.id)
        [answered] = answered_events(watch, q.id)
    assert taken is q and out.answer == {"action": "accept", "content": {"name": "Cy"}}
    assert row is not None and (row.status, row.answered_by, row.answer) == ("answered", "operator:cy", out.answer)
    assert answered.event.by == "operator:cy"


async def test_of_two_racing_answers_one_not_recorded_the_other_wins_and_is_what_the_upstream_gets(
    tmp_path: Path,
) -> None:
    async with one_question(tmp_path) as (broker, watch, out, q):
        fault = await FailingCloses(once=True).install(broker)  # the first close fails, the next works
        got = await answers(broker, q, "ann", "bob")
        await out.wait()
        row = await broker.store.get_question(q.id)
        events = answered_events(watch, q.id)
    [loser] = [name for name, r in got.items() if isinstance(r, NotRecorded)]
    [winner] = [name for name, r in got.items() if r is q]  # exactly one success
    assert fault.tried == [f"operator:{loser}", f"operator:{winner}"]  # one at a time: the loser's failed first
    assert out.answer == {"action": "accept", "content": {"name": winner}}  # the recorded one
    assert row is not None and (row.answered_by, row.answer) == (f"operator:{winner}", out.answer)
    assert [e.event.by for e in events] == [f"operator:{winner}"]


async def test_a_host_reply_racing_an_operator_answer_while_the_store_fails_is_not_passed_on(
    tmp_path: Path,
) -> None:
    """The host's reply cannot be refused to it (it was a response), so it is dropped: the
    question stays open for the attached operator, whose answer goes upstream once recorded."""
    reply = anyio.Event()

    async def host_ask(q: Question) -> dict[str, Any]:
        await reply.wait()
        return HOST_ANSWER

    async with one_question(tmp_path, host_ask=host_ask) as (broker, watch, out, q):
        fault = await FailingCloses().install(broker)
        reply.set()  # the host replies while the operator answers
        got = await answers(broker, q, "ann")
        await fault.until_tried("host:c-1", "operator:ann")
        await anyio.sleep(0.1)  # what the broker does with the host's refused reply
        assert isinstance(got["ann"], NotRecorded)
        assert not out.done.is_set() and q.status == "open"  # neither went upstream
        fault.failing = False
        taken = await broker.answer_as_operator(q.id, "accept", content={"name": "Ann"}, by="operator:ann")
        await out.wait()
        [answered] = answered_events(watch, q.id)
    assert taken is q and out.answer == ACCEPT and answered.event.by == "operator:ann"


async def test_a_host_reply_the_store_cannot_record_with_no_operator_fails_the_upstream_instead(
    tmp_path: Path,
) -> None:
    async def host_ask(q: Question) -> dict[str, Any]:
        await writer(broker).execute("PRAGMA query_only = ON")  # the store fails as the host replies
        return HOST_ANSWER

    async with brokered(tmp_path / "mcpx.db", operator=None, operator_grace_s=0.05) as (broker, _):
        with anyio.fail_after(WAIT_S), pytest.raises(InternalError) as caught:
            await broker.ask(
                upstream="up", method="elicitation/create", params={}, task_id=None, connection="c-1", host_ask=host_ask
            )
        await writer(broker).execute("PRAGMA query_only = OFF")
        [row] = await broker.store.questions()
    # An error naming the store, never the host's answer nor the polite cancel: neither was recorded.
    assert "could not record" in caught.value.message and "readonly" in caught.value.message
    assert (row.status, row.answer) == ("open", None)  # and the record claims no answer either
    assert broker.open_questions() == []
