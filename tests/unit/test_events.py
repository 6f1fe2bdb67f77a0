"""mcpx.events.bus: the bus never blocks a publisher (each subscriber has a bounded queue; one that
overflows is marked and stops queueing), subscribers' filters, operator presence, and the wire
shape of a stored event."""

from __future__ import annotations

import typing

import anyio
import pytest

from mcpx.events.bus import EVENT_KINDS, QUEUE_MAX, Event, EventBus, EventFilter, EventKind, StoredEvent, Subscriber

pytestmark = pytest.mark.anyio


def stored(seq: int, kind: EventKind = "task.status", **kw: str) -> StoredEvent:
    return StoredEvent(seq, 1_000 + seq, Event(kind, {"n": seq}, **kw))


def seqs(sub: Subscriber) -> list[int]:
    return [e.seq for e in sub.queue]


# ---- subscribers -------------------------------------------------------------------------------


def test_a_subscriber_queues_events_up_to_its_bound() -> None:
    sub = Subscriber(max_queue=3)
    for seq in (1, 2, 3):
        sub.offer(stored(seq))
    assert seqs(sub) == [1, 2, 3] and not sub.overflowed and sub.wake.is_set()


def test_an_overflowing_subscriber_is_marked_drops_its_queue_and_stops_queueing() -> None:
    sub = Subscriber(max_queue=3)
    for seq in range(1, 5):
        sub.offer(stored(seq))
    assert sub.overflowed and seqs(sub) == [] and sub.wake.is_set()  # told, to resume from the store
    sub.offer(stored(5))
    assert seqs(sub) == [] and sub.overflowed


def test_the_default_bound_is_the_documented_2048() -> None:
    sub = Subscriber()
    for seq in range(1, QUEUE_MAX + 1):
        sub.offer(stored(seq))
    assert QUEUE_MAX == 2048 and len(sub.queue) == QUEUE_MAX and not sub.overflowed
    sub.offer(stored(QUEUE_MAX + 1))
    assert sub.overflowed


@pytest.mark.parametrize(
    ("flt", "wanted"),
    [
        (EventFilter(), {1, 2, 3, 4}),
        (EventFilter(kinds=frozenset({"task.created"})), {2, 3}),
        (EventFilter(task_ids=frozenset({"t1"})), {1, 2}),
        (EventFilter(connection_ids=frozenset({"c-2"})), {3, 4}),
        (EventFilter(kinds=frozenset({"task.created"}), task_ids=frozenset({"t1"})), {2}),  # every filter applies
        (EventFilter(task_ids=frozenset({"t1", "t9"}), connection_ids=frozenset({"c-1"})), {1, 2}),
    ],
    ids=["empty", "kinds", "tasks", "connections", "kind-and-task", "task-and-connection"],
)
def test_a_subscriber_gets_only_what_its_filter_matches(flt: EventFilter, wanted: set[int]) -> None:
    events = [
        stored(1, "task.status", task_id="t1", connection_id="c-1"),
        stored(2, "task.created", task_id="t1", connection_id="c-1"),
        stored(3, "task.created", task_id="t2", connection_id="c-2"),
        stored(4, "connection.opened", connection_id="c-2"),
    ]
    sub = Subscriber(flt)
    for event in events:
        sub.offer(event)
    assert set(seqs(sub)) == wanted


def test_filtered_out_events_do_not_count_towards_the_bound() -> None:
    sub = Subscriber(EventFilter(kinds=frozenset({"task.created"})), max_queue=1)
    for seq in range(1, 10):
        sub.offer(stored(seq, "task.status"))
    sub.offer(stored(10, "task.created"))
    assert seqs(sub) == [10] and not sub.overflowed


async def test_wait_returns_at_once_with_something_queued_or_an_overflow() -> None:
    queued, overflowed = Subscriber(), Subscriber(max_queue=0)
    queued.offer(stored(1))
    overflowed.offer(stored(1))
    with anyio.fail_after(1):
        await queued.wait()
        await overflowed.wait()
    assert overflowed.overflowed


async def test_wait_blocks_until_the_next_offer() -> None:
    sub = Subscriber()
    woke = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def waiter() -> None:
            await sub.wait()
            woke.set()

        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert not woke.is_set()
        sub.offer(stored(1))
        with anyio.fail_after(5):
            await woke.wait()


# ---- the bus -----------------------------------------------------------------------------------


def test_publish_reaches_every_subscriber_in_order_and_tracks_the_last_seq() -> None:
    bus = EventBus()
    a, b = bus.subscribe(Subscriber()), bus.subscribe(Subscriber())
    bus.publish([stored(1), stored(2)])
    bus.publish([stored(3)])
    assert seqs(a) == seqs(b) == [1, 2, 3] and bus.last_seq == 3
    bus.unsubscribe(b)
    bus.publish([stored(4)])
    assert seqs(a) == [1, 2, 3, 4] and seqs(b) == [1, 2, 3]


def test_a_slow_subscriber_never_holds_back_the_others() -> None:
    bus = EventBus()
    slow, fast = bus.subscribe(Subscriber(max_queue=2)), bus.subscribe(Subscriber())
    bus.publish([stored(seq) for seq in range(1, 11)])  # returns at once: nobody is waited for
    assert slow.overflowed and seqs(fast) == list(range(1, 11)) and not fast.overflowed


def test_operators_are_the_names_of_attached_operator_subscribers() -> None:
    bus = EventBus()
    bus.subscribe(Subscriber())  # a plain feed subscriber is no operator
    ann = bus.subscribe(Subscriber(operator="ann"))
    bus.subscribe(Subscriber(operator="bob"))
    ann_again = bus.subscribe(Subscriber(operator="ann"))
    assert bus.operators() == ["ann", "bob"]
    bus.unsubscribe(ann)
    assert bus.operators() == ["ann", "bob"]  # one of ann's consoles is still attached
    bus.unsubscribe(ann_again)
    assert bus.operators() == ["bob"]
    bus.unsubscribe(Subscriber(operator="nobody"))  # unknown: harmless


async def test_operator_attached_returns_once_an_operator_subscribes() -> None:
    bus = EventBus()
    attached = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            await bus.operator_attached()
            attached.set()

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        bus.subscribe(Subscriber())  # not an operator: still waiting
        await anyio.wait_all_tasks_blocked()
        assert not attached.is_set()
        bus.subscribe(Subscriber(operator="ann"))
        with anyio.fail_after(5):
            await attached.wait()
    with anyio.fail_after(1):
        await bus.operator_attached()  # one is attached: at once


async def test_an_operator_who_left_again_before_the_waiter_woke_does_not_count() -> None:
    bus = EventBus()
    attached = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            await bus.operator_attached()
            attached.set()

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        flicker = bus.subscribe(Subscriber(operator="ann"))
        bus.unsubscribe(flicker)
        await anyio.wait_all_tasks_blocked()
        assert not attached.is_set()
        bus.subscribe(Subscriber(operator="bob"))
        with anyio.fail_after(5):
            await attached.wait()


# ---- wire shape --------------------------------------------------------------------------------


def test_a_stored_event_on_the_wire_is_camel_case_without_nulls() -> None:
    full = StoredEvent(7, 123, Event("question.answered", {"by": "x"}, "t1", "c-1", "q-1", "operator:ann"))
    bare = StoredEvent(8, 124, Event("connection.opened", {}))
    assert full.wire() == {
        "seq": 7,
        "ts": 123,
        "kind": "question.answered",
        "taskId": "t1",
        "connectionId": "c-1",
        "questionId": "q-1",
        "by": "operator:ann",
        "data": {"by": "x"},
    }
    assert bare.wire() == {"seq": 8, "ts": 124, "kind": "connection.opened", "data": {}}


def test_the_kind_list_is_the_kind_type() -> None:
    assert typing.get_args(EventKind) == EVENT_KINDS and len(set(EVENT_KINDS)) == 18
