"""mcpx.store.postgres beyond the shared Store contract (that runs in test_task_store and its siblings
on both backends): a bad write failing alone in a batch, migrations applied once even by daemons
opening together, and several stores on one database: one sequence, committed in order, each store's
bus seeing every store's events exactly once, in order."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest
from pgcluster import Cluster

from mcpx.events.bus import Event
from mcpx.records.question import Question
from mcpx.store import StoreError
from mcpx.store.postgres import SCHEMA_VERSION

from .storekit import PostgresSite, Running, opened, task_record

pytestmark = pytest.mark.anyio


@pytest.fixture
def pg_site(pg_cluster: Cluster) -> PostgresSite:
    return PostgresSite(pg_cluster.database())


def status_event(n: int, by: str) -> Event:
    return Event("task.status", {"status": str(n)}, by=by)


async def test_a_bad_write_fails_alone_and_the_rest_of_its_batch_commits(pg_site: PostgresSite) -> None:
    bad = task_record()
    failures: list[BaseException] = []
    async with opened(pg_site, writer=False) as w:
        async with anyio.create_task_group() as tg:

            async def bad_put() -> None:
                try:
                    await w.store.put_task(bad, [Event("task.created", {"tool": "echo"}, task_id=bad.id)])
                except StoreError as exc:
                    failures.append(exc)

            tg.start_soon(w.store.put_session, "s-before", {"n": 1})
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(bad_put)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(w.store.append, [status_event(1, "after")])
            await anyio.wait_all_tasks_blocked()
            pg_site.rows("DROP TABLE tasks")  # another client breaks the batch's task write only
            w.start()
        assert len(failures) == 1 and "does not exist" in str(failures[0])
        assert pg_site.rows("SELECT id FROM sessions") == [("s-before",)]
        assert [e.event.data["status"] for e in w.published.events] == ["1"]
        assert [e.seq for e in await w.store.events_since(0, 10)] == [1]  # no number was spent on the bad one


async def test_migrations_run_once_even_for_stores_opening_together(pg_site: PostgresSite) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(3):

            async def open_one() -> None:
                async with opened(pg_site):
                    pass

            tg.start_soon(open_one)
    async with opened(pg_site):
        pass
    assert pg_site.rows("SELECT version FROM schema_versions ORDER BY version") == [
        (v,) for v in range(1, SCHEMA_VERSION + 1)
    ]


async def test_every_store_on_one_database_publishes_every_stores_events_once_in_sequence_order(
    pg_site: PostgresSite,
) -> None:
    per_store = 60
    async with opened(pg_site) as a, opened(pg_site) as b, opened(pg_site) as c:
        stores = {"a": a, "b": b, "c": c}
        async with anyio.create_task_group() as tg:
            for name, w in stores.items():

                async def write(name: str = name, w: Running = w) -> None:
                    for n in range(per_store):
                        await w.store.append([status_event(n, name)])

                tg.start_soon(write)
        total = per_store * len(stores)
        for w in stores.values():
            with anyio.fail_after(5):  # the others' events arrive through NOTIFY and a read
                while len(w.published.events) < total:
                    await anyio.sleep(0.01)
        for w in stores.values():
            assert [e.seq for e in w.published.events] == list(range(1, total + 1))  # gap-free, in order, once
        stored = await a.store.events_since(0, 1000)
        assert stored == a.published.events == b.published.events == c.published.events
        mine = [int(e.event.data["status"]) for e in stored if e.event.by == "b"]
        assert mine == list(range(per_store))  # one store's own events keep their order


async def test_stores_on_one_database_settling_one_question_together_take_it_once(pg_site: PostgresSite) -> None:
    """Three daemons answer the same question at once (an operator on each): exactly one wins."""
    asked = Question("q", "up", "elicitation/create", {"message": "?"}, 1, 600_000, task_id="t")
    async with opened(pg_site) as a, opened(pg_site) as b, opened(pg_site) as c:
        await a.store.put_question(asked)
        won: dict[str, bool] = {}
        async with anyio.create_task_group() as tg:
            for name, w in {"a": a, "b": b, "c": c}.items():

                async def answer(name: str = name, w: Running = w) -> None:
                    closed = replace(asked, status="answered", answered_by=f"operator:{name}", answer={"action": name})
                    won[name] = await w.store.settle_question(closed, [Event("question.answered", {}, "t", None, "q")])

                tg.start_soon(answer)
        [winner] = [name for name, took in won.items() if took]
        stored = await c.store.get_question("q")
        assert stored is not None and stored.answered_by == f"operator:{winner}"
        answered = [e for e in await a.store.events_since(0, 100) if e.event.kind == "question.answered"]
        assert len(answered) == 1


async def test_a_write_whose_events_fail_leaves_no_hole_in_the_sequence(pg_site: PostgresSite) -> None:
    """The numbers a failed transaction drew are given back: the next event follows the last one
    committed, so a feed reader never sees a hole it would take for lost events."""
    bad = Event(None, {})  # type: ignore[arg-type]  # kind NOT NULL: the events' INSERT itself fails
    async with opened(pg_site) as w:
        [first] = await w.store.append([status_event(1, "a")])
        with pytest.raises(StoreError):
            await w.store.append([status_event(2, "a"), bad])
        [after] = await w.store.append([status_event(3, "a")])
        assert after.seq == first.seq + 1
        assert [e.seq for e in await w.store.events_since(0, 10)] == [first.seq, after.seq]
